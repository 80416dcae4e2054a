//! The `execution` section: where tool processes run and how long they may take.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use mcc_executor::{Address, ExecutorClient, InProcess, Runtime};

use super::CatalogSource;

/// Where tool processes run.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum RuntimeKind {
    /// In-process for file mode, the executor for Kubernetes mode.
    #[default]
    Auto,
    /// Spawned by the gateway itself, with its environment as the floor's source.
    InProcess,
    /// Sent to the executor (`mcc-executor serve`) over `executor_socket`.
    Executor,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ExecutionSettings {
    pub runtime: RuntimeKind,
    /// The executor's socket (runtime `executor`): `@name` in the abstract namespace (the
    /// default; no file a tool could replace) or a path.
    pub executor_socket: String,
    /// Timeout of a tool that declares no `limits.timeout`, in seconds (`null`: none).
    pub default_timeout_secs: Option<f64>,
    /// No tool runs longer than this many seconds, whatever it declares (`null`: no cap).
    pub max_timeout_secs: Option<f64>,
}

impl Default for ExecutionSettings {
    fn default() -> Self {
        Self {
            runtime: RuntimeKind::Auto,
            executor_socket: mcc_executor::address::DEFAULT.into(),
            default_timeout_secs: Some(300.0),
            max_timeout_secs: Some(3600.0),
        }
    }
}

impl ExecutionSettings {
    /// The runtime `auto` stands for under `source`.
    pub fn runtime_for(&self, source: CatalogSource) -> RuntimeKind {
        match (self.runtime, source) {
            (RuntimeKind::Auto, CatalogSource::Kubernetes) => RuntimeKind::Executor,
            (RuntimeKind::Auto, CatalogSource::Files) => RuntimeKind::InProcess,
            (kind, _) => kind,
        }
    }

    /// Builds the runtime. In-process, the gateway's environment (read here, once) is
    /// where tools' floor and passthrough come from.
    pub fn build(&self, source: CatalogSource) -> Arc<dyn Runtime> {
        match self.runtime_for(source) {
            RuntimeKind::Executor => Arc::new(ExecutorClient::new(self.executor_address())),
            _ => Arc::new(InProcess::from_environment()),
        }
    }

    /// The checked address (see [`Self::validate`]).
    fn executor_address(&self) -> Address {
        self.executor_socket
            .parse()
            .unwrap_or_else(|_| Address::Path(self.executor_socket.clone().into()))
    }

    pub fn default_timeout(&self) -> Option<Duration> {
        self.default_timeout_secs.map(Duration::from_secs_f64)
    }

    pub fn max_timeout(&self) -> Option<Duration> {
        self.max_timeout_secs.map(Duration::from_secs_f64)
    }

    /// Checks that need more than a type.
    pub(super) fn validate(&self, source: CatalogSource) -> Result<(), (&'static str, String)> {
        if source == CatalogSource::Kubernetes && self.runtime == RuntimeKind::InProcess {
            return Err((
                "execution.runtime",
                "Kubernetes mode runs tools in the executor container (`executor`): \
                 `in-process` would run them beside the gateway's ServiceAccount token and settings"
                    .into(),
            ));
        }
        for (key, value) in [
            ("execution.default_timeout_secs", self.default_timeout_secs),
            ("execution.max_timeout_secs", self.max_timeout_secs),
        ] {
            if let Some(v) = value
                && !(v.is_finite() && v > 0.0 && v < 1e9)
            {
                return Err((
                    key,
                    format!("must be a positive number of seconds, got {v}"),
                ));
            }
        }
        if let Err(e) = self.executor_socket.parse::<Address>() {
            return Err(("execution.executor_socket", e));
        }
        Ok(())
    }
}
