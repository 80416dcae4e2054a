//! The engine's settings: the `execution` section (where tool processes run and how
//! long they may take), `execution.pod` (the pod runtime of `runtime: pod` Tools,
//! Kubernetes mode), and [`EngineSettings`], what the engine is built with (the mapping
//! from the whole settings is `config::Settings::engine_settings`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use mcc_catalog::limits::is_dns_label;
use mcc_executor::{Address, ExecutorClient, InProcess, Runtime};

use super::render::RenderSettings;
use crate::catalog::settings::CatalogSource;

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
    /// The pod runtime (`runtime: pod` Tools, each call in its own Pod).
    pub pod: PodRuntimeSettings,
    /// Where command templates render: worker processes held to a memory limit.
    pub render: RenderSettings,
    /// Which calls need a person's approval before they run, and how long an asked
    /// approval stays answerable (docs/approval.md).
    pub approval: ApprovalSettings,
}

/// `execution.approval`: the platform team's approval requirement (a tool may also ask
/// for approval itself; none can opt out of this).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalSettings {
    /// Every tool in any of these groups needs approval.
    pub groups: Vec<String>,
    /// Seconds an approval question stays answerable (the 2026-07-28 ticket, the REST
    /// ticket, the legacy elicitation's wait).
    pub ttl_seconds: u64,
}

/// Longest `execution.approval.ttl_seconds`: a day.
pub const MAX_APPROVAL_TTL_SECS: u64 = 86_400;

impl Default for ApprovalSettings {
    fn default() -> Self {
        Self {
            groups: Vec::new(),
            ttl_seconds: 300,
        }
    }
}

impl ApprovalSettings {
    /// The rule's input ([`mcc_catalog::approval::required`]).
    pub fn policy(&self) -> mcc_catalog::approval::Policy {
        mcc_catalog::approval::Policy {
            groups: self.groups.clone(),
        }
    }

    pub fn ttl(&self) -> Duration {
        Duration::from_secs(self.ttl_seconds)
    }

    fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(1..=MAX_APPROVAL_TTL_SECS).contains(&self.ttl_seconds) {
            return Err((
                "execution.approval.ttl_seconds",
                format!(
                    "must be between 1 and {MAX_APPROVAL_TTL_SECS}, got {}",
                    self.ttl_seconds
                ),
            ));
        }
        if let Some(bad) = self
            .groups
            .iter()
            .find(|g| g.is_empty() || g.len() > 253 || g.contains(char::is_whitespace))
        {
            return Err((
                "execution.approval.groups",
                format!("'{bad}' is not a group name"),
            ));
        }
        Ok(())
    }
}

/// `execution.pod`: each call of a `runtime: pod` Tool in its own Pod, in the Tool's
/// namespace (see `docs/execution.md`, "Pod runtime").
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PodRuntimeSettings {
    /// Run pod Tools (Kubernetes mode; the gateway needs the Pod verbs of its RBAC).
    pub enabled: bool,
    /// The image of pod Tools that name none (`sh`, `curl`, `python3`).
    pub default_image: String,
    /// The image an init container copies the runner (`mcc-executor`) from.
    pub runner_image: String,
    /// Executions of one pod Tool at once on this replica; more wait (`concurrency.wait_ms`).
    pub max_per_tool: usize,
    /// Where `env_passthrough` of pod Tools reads from (name → value): the values travel in
    /// the per-call Secret. The gateway's own environment is never passed through.
    pub passthrough_env: BTreeMap<String, String>,
    /// Namespaces the sweeper lists Pods in; empty: one cluster-wide list.
    pub namespaces: Vec<String>,
    /// How often the sweeper looks for Pods a crashed replica left behind, in seconds.
    pub sweep_interval_secs: u64,
    /// A Pod of this install older than `execution.max_timeout_secs` plus this many
    /// seconds is deleted by the sweeper.
    pub sweep_grace_secs: u64,
    /// This install (the Helm release): names its Pods in a label; one install's sweeper
    /// touches only its own Pods.
    pub instance: String,
}

impl Default for PodRuntimeSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            default_image: String::new(),
            runner_image: String::new(),
            max_per_tool: 4,
            passthrough_env: BTreeMap::new(),
            namespaces: vec![],
            sweep_interval_secs: 60,
            sweep_grace_secs: 60,
            instance: "mcc".into(),
        }
    }
}

impl PodRuntimeSettings {
    /// How often the sweeper runs.
    pub fn sweep_interval(&self) -> Duration {
        Duration::from_secs(self.sweep_interval_secs)
    }

    /// This replica's name: `POD_NAME` (the downward API), else `HOSTNAME`, else the
    /// kernel's host name (a Pod's name is its host name).
    pub fn replica_name(&self, env: &dyn Fn(&str) -> Option<String>) -> String {
        env("POD_NAME")
            .or_else(|| env("HOSTNAME"))
            .filter(|s| !s.trim().is_empty())
            .or_else(|| {
                std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .ok()
                    .map(|s| s.trim().to_string())
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "mcc-gateway".into())
    }

    fn validate(
        &self,
        source: CatalogSource,
        max_timeout_secs: Option<f64>,
    ) -> Result<(), (&'static str, String)> {
        if !self.enabled {
            return Ok(());
        }
        if source != CatalogSource::Kubernetes {
            return Err((
                "execution.pod.enabled",
                "the pod runtime runs the operator's `runtime: pod` Tools: it needs \
                 catalog.source: kubernetes"
                    .into(),
            ));
        }
        for (key, image) in [
            ("execution.pod.default_image", &self.default_image),
            ("execution.pod.runner_image", &self.runner_image),
        ] {
            if image.trim().is_empty() || image.chars().any(char::is_whitespace) {
                return Err((key, format!("must name an image, got '{image}'")));
            }
        }
        let max = tokio::sync::Semaphore::MAX_PERMITS;
        if self.max_per_tool == 0 || self.max_per_tool > max {
            return Err((
                "execution.pod.max_per_tool",
                format!("must be between 1 and {max}"),
            ));
        }
        if let Some(bad) = self.passthrough_env.keys().find(|n| !is_env_name(n)) {
            return Err((
                "execution.pod.passthrough_env",
                format!("'{bad}' is not an environment variable name"),
            ));
        }
        if let Some(bad) = self.namespaces.iter().find(|n| !is_dns_label(n)) {
            return Err((
                "execution.pod.namespaces",
                format!("'{bad}' is not a namespace name"),
            ));
        }
        if self.sweep_interval_secs == 0 {
            return Err((
                "execution.pod.sweep_interval_secs",
                "must be greater than 0".into(),
            ));
        }
        if !is_label_value(&self.instance) {
            return Err((
                "execution.pod.instance",
                format!(
                    "'{}' is not a label value (1-63 of a-z, A-Z, 0-9, '-', '_', '.')",
                    self.instance
                ),
            ));
        }
        if max_timeout_secs.is_none() {
            return Err((
                "execution.max_timeout_secs",
                "the pod runtime's sweeper needs a maximum timeout to tell a leftover Pod \
                 from a running one"
                    .into(),
            ));
        }
        Ok(())
    }
}

fn is_label_value(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

impl Default for ExecutionSettings {
    fn default() -> Self {
        Self {
            runtime: RuntimeKind::Auto,
            executor_socket: mcc_executor::address::DEFAULT.into(),
            default_timeout_secs: Some(300.0),
            max_timeout_secs: Some(3600.0),
            pod: PodRuntimeSettings::default(),
            render: RenderSettings::default(),
            approval: ApprovalSettings::default(),
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
    pub fn validate(&self, source: CatalogSource) -> Result<(), (&'static str, String)> {
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
        self.render.validate()?;
        self.approval.validate()?;
        self.pod.validate(source, self.max_timeout_secs)
    }
}

/// Deployment-wide settings of the engine.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// Where tool processes run (and whose environment the floor and passthrough draw
    /// from): [`mcc_executor::InProcess`] or [`mcc_executor::ExecutorClient`].
    pub runtime: Arc<dyn Runtime>,
    /// Names of the env floor (`env_floor` / `MCC_ENV_FLOOR`).
    pub env_floor: Vec<String>,
    /// Results longer than this are cut, ending with `[Response truncated due to size limit]`.
    pub max_output_bytes: usize,
    /// Keep full Python tracebacks in fn tool errors.
    pub debug: bool,
    /// The timeout of a tool that declares none.
    pub default_timeout: Option<Duration>,
    /// No tool runs longer than this, whatever it declares.
    pub max_timeout: Option<Duration>,
}

/// Whether `name` can be an environment variable's name (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
