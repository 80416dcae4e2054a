//! The gateway's settings: one YAML file (`--config` / `MCC_SETTINGS_FILE`) plus `MCC_*`
//! environment overrides, validated up front so a bad setting stops startup with a message
//! naming it. Every key is documented in `docs/configuration.md`.
//!
//! This module only reads, assembles and checks settings (each section's type belongs to
//! the module it configures); building runtime state from them is the job of `app`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcc_executor::Runtime;
use serde::Deserialize;
use serde_json::Value;

mod overrides;

use crate::exec::settings::{EngineSettings, is_env_name};

// Each section's type belongs to the module it configures; this module assembles them.
pub use crate::auth::AuthSettings;
pub use crate::catalog::settings::{CatalogSettings, CatalogSource};
pub use crate::exec::concurrency::ConcurrencySettings;
pub use crate::exec::settings::{ExecutionSettings, PodRuntimeSettings, RuntimeKind};
pub use crate::http::connections::ConnectionSettings;
pub use crate::metrics::MetricsSettings;
pub use crate::session::{SessionBackend, SessionSettings};
pub use crate::telemetry::settings::{
    LogFormat, LogSettings, OTEL_VARIABLES, OtlpExport, RootSampler, Sampler, TraceExport,
    TracingSettings,
};

/// The default env floor (defined with the rest of the env rules in the catalog crate).
pub use mcc_catalog::env::DEFAULT_FLOOR as DEFAULT_ENV_FLOOR;

/// All settings. Field names are the YAML keys.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    pub server: ServerSettings,
    /// Authentication: a backend name (`dev-admin`, `dev-public`, `jwt`, `api_key`) or
    /// the full section (see `docs/auth.md`).
    #[serde(deserialize_with = "crate::auth::deserialize_auth_settings")]
    pub auth: AuthSettings,
    /// Where the catalog comes from: tool files (default) or the operator's ConfigMap.
    pub catalog: CatalogSettings,
    /// Tool files, directories or globs (file mode).
    pub tools: Vec<String>,
    /// The users YAML file (`users:` list) of file mode; `null` means no catalog users.
    pub users_file: Option<PathBuf>,
    pub session: SessionSettings,
    /// Names of the spawning environment every tool inherits (the gateway's in file
    /// mode, the executor container's in Kubernetes mode).
    pub env_floor: Vec<String>,
    /// Where tool processes run, and their default and maximum timeout.
    pub execution: ExecutionSettings,
    /// Concurrent executions: global, per caller, per tool, and the wait for a slot.
    pub concurrency: ConcurrencySettings,
    /// HTTP timeouts and per-caller caps on legacy sessions and SSE streams.
    pub connections: ConnectionSettings,
    /// Where `/metrics` is served and the credential it needs.
    pub metrics: MetricsSettings,
    /// Tool search (see `docs/search.md`).
    pub search: mcc_search::SearchConfig,
    /// Calls per caller and window: global, per group, per tool (see [`crate::ratelimit`]).
    pub rate_limit: crate::ratelimit::RateLimitSettings,
    /// The audit trail's sinks (see [`crate::audit`]).
    pub audit: crate::audit::AuditSettings,
    /// The log's format.
    pub log: LogSettings,
    /// OpenTelemetry traces: off unless an OTLP endpoint or `enabled: true` asks for them.
    pub tracing: TracingSettings,
    /// Keep full Python tracebacks in fn tool errors.
    pub debug: bool,
    /// How often tool and users files are checked for edits, in milliseconds.
    pub reload_interval_ms: u64,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSettings {
    pub host: String,
    pub port: u16,
    /// Results longer than this many bytes are cut.
    pub response_max_size: usize,
    /// Largest accepted POST body on `/mcp`, in bytes.
    pub max_request_body: usize,
    /// `Host` header values `/mcp` accepts (`name` or `name:port`); empty accepts any.
    pub allowed_hosts: Vec<String>,
    /// Browser `Origin` values `/mcp` accepts (`scheme://host[:port]`, `:*` any port);
    /// empty: requests are not checked for an Origin.
    pub allowed_origins: Vec<String>,
    /// Issue `Mcp-Session-Id` sessions to clients of protocol versions before 2026-07-28.
    pub legacy_sessions: bool,
    /// Answer a request that needs no server-to-client message as one JSON body instead
    /// of an SSE stream (rmcp falls back to SSE when a call elicits or notifies).
    pub json_response: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            server: ServerSettings::default(),
            auth: AuthSettings::default(),
            catalog: CatalogSettings::default(),
            tools: vec!["examples/".into()],
            users_file: Some(PathBuf::from("examples/users/users.yaml")),
            session: SessionSettings::default(),
            search: mcc_search::SearchConfig::default(),
            rate_limit: Default::default(),
            audit: Default::default(),
            log: LogSettings::default(),
            tracing: TracingSettings::default(),
            env_floor: DEFAULT_ENV_FLOOR.iter().map(|s| s.to_string()).collect(),
            execution: ExecutionSettings::default(),
            concurrency: ConcurrencySettings::default(),
            connections: ConnectionSettings::default(),
            metrics: MetricsSettings::default(),
            debug: false,
            reload_interval_ms: 1000,
        }
    }
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 8000,
            response_max_size: 5_000_000,
            max_request_body: 4 * 1024 * 1024,
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            allowed_origins: vec![],
            legacy_sessions: true,
            json_response: true,
        }
    }
}

impl Settings {
    /// The search service's settings; the embedding cache's Redis (`search.redis_url`,
    /// else the session Redis) is reached through the gateway's connection definition.
    pub fn search_settings(&self) -> Result<mcc_search::SearchSettings, mcc_search::SearchError> {
        let mut out = self.search.settings()?;
        // Only a build that can run a local model looks for one.
        if cfg!(feature = "embed-local") && out.model_dir.is_none() && out.embeddings_url.is_none()
        {
            out.model_dir = cached_model_dir(&|k| std::env::var(k).ok());
            if let Some(dir) = &out.model_dir {
                tracing::info!(model_dir = %dir.display(), "search: using the model fetched by scripts/fetch-model.sh (set search.model_dir to choose another)");
            }
        }
        if let Some(url) = self.feature_redis(self.search.redis_url.as_deref()).url() {
            let redis = crate::redis_conn::Redis::connect(
                "search.redis_url",
                url,
                &self.session.redis_options(),
                mcc_search::embed::REDIS_TIMEOUT,
            )
            .map_err(|e| mcc_search::SearchError::Config(e.to_string()))?;
            out.redis = Some(std::sync::Arc::new(redis));
        }
        Ok(out)
    }
}

/// Which Redis a feature with a `redis_url` setting of its own uses (rate limits, the
/// audit stream, the embedding cache): [`Settings::feature_redis`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeatureRedis<'a> {
    /// Its own setting.
    Own(&'a str),
    /// None of its own: the session store's (sessions are kept in Redis).
    Session(&'a str),
    /// Neither: the feature keeps its state in this replica's memory, or has none.
    None,
}

impl<'a> FeatureRedis<'a> {
    pub fn url(self) -> Option<&'a str> {
        match self {
            FeatureRedis::Own(url) | FeatureRedis::Session(url) => Some(url),
            FeatureRedis::None => None,
        }
    }
}

impl Settings {
    /// The one rule for a feature's Redis: its own URL (`own`) when set, else the
    /// session store's when sessions are in Redis, else none. The gateway connects by
    /// it and `mcc audit` reads the stream by it, so the two cannot disagree.
    pub fn feature_redis<'a>(&'a self, own: Option<&'a str>) -> FeatureRedis<'a> {
        match (own, self.session.redis_url()) {
            (Some(url), _) => FeatureRedis::Own(url),
            (None, Some(url)) => FeatureRedis::Session(url),
            (None, None) => FeatureRedis::None,
        }
    }
}

impl Settings {
    /// The engine's settings: the one mapping the gateway and `mcc` (the CLI runs tools
    /// locally with the same engine) both use. `runtime` is where processes run.
    pub fn engine_settings(&self, runtime: Arc<dyn Runtime>) -> EngineSettings {
        EngineSettings {
            runtime,
            env_floor: self.env_floor.clone(),
            max_output_bytes: self.server.response_max_size,
            debug: self.debug,
            default_timeout: self.execution.default_timeout(),
            max_timeout: self.execution.max_timeout(),
        }
    }
}

/// Where `scripts/fetch-model.sh` puts all-MiniLM-L6-v2 (`$MCC_MODEL_CACHE`, else
/// `$XDG_CACHE_HOME/mcc/models`, else `~/.cache/mcc/models`), if a model is there.
fn cached_model_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let cache = env("MCC_MODEL_CACHE")
        .map(PathBuf::from)
        .or_else(|| env("XDG_CACHE_HOME").map(|c| PathBuf::from(c).join("mcc/models")))
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".cache/mcc/models")))?;
    let dir = cache.join("all-MiniLM-L6-v2");
    ["model.safetensors", "tokenizer.json", "config.json"]
        .iter()
        .all(|f| dir.join(f).is_file())
        .then_some(dir)
}

/// A setting that cannot be used; the message names the file or variable and the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{origin}: {key}: {message}")]
    Invalid {
        origin: String,
        key: String,
        message: String,
    },
}

/// The settings file named by `--config` or else `MCC_SETTINGS_FILE`, if any.
pub fn settings_path(
    flag: Option<PathBuf>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<PathBuf> {
    flag.or_else(|| {
        env("MCC_SETTINGS_FILE")
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
    })
}

/// Loads settings: defaults, then the file (if any), then environment overrides, then
/// `REDIS_URL` (which selects the Redis session backend unless one is set explicitly).
pub fn load(
    file: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, ConfigError> {
    let mut tree = Value::Object(Default::default());
    let mut origin = "defaults".to_string();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.into(),
            source,
        })?;
        tree = parse_yaml(&text).map_err(|message| ConfigError::Invalid {
            origin: path.display().to_string(),
            key: "(file)".into(),
            message,
        })?;
        origin = path.display().to_string();
    }
    // `auth: <backend>` is shorthand for `auth: {backend: <backend>}`; expand it so
    // environment overrides of auth keys apply to either form.
    if let Some(Value::String(backend)) = tree.get("auth").cloned() {
        overrides::set_path(
            &mut tree,
            &["auth"],
            serde_json::json!({ "backend": backend }),
        );
    }
    let env_origin = overrides::apply(&mut tree, env);
    if !env_origin.is_empty() {
        origin = format!("{origin} + environment ({})", env_origin.join(", "));
    }
    let mut settings: Settings =
        serde_path_to_error::deserialize(tree).map_err(|e| ConfigError::Invalid {
            origin: origin.clone(),
            key: key_name(&e.path().to_string()),
            message: e.inner().to_string(),
        })?;
    // The standard OTEL_* variables are read here, once, like the MCC_* ones.
    settings
        .tracing
        .resolve(env)
        .map_err(|(variable, message)| ConfigError::Invalid {
            origin: "environment".into(),
            key: variable.into(),
            message,
        })?;
    validate(&settings).map_err(|(key, message)| ConfigError::Invalid {
        origin,
        key: key.into(),
        message,
    })?;
    Ok(settings)
}

fn parse_yaml(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    let value: Value = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    match value {
        Value::Object(_) => Ok(value),
        Value::Null => Ok(Value::Object(Default::default())),
        other => Err(format!("expected a mapping of settings, got {other}")),
    }
}

fn key_name(path: &str) -> String {
    if path.is_empty() || path == "." {
        "(top level)".into()
    } else {
        path.to_string()
    }
}

/// Checks that need more than a type: ranges, required companions, URL schemes.
fn validate(s: &Settings) -> Result<(), (&'static str, String)> {
    const BACKENDS: [&str; 5] = ["dev-admin", "dev-public", "jwt", "api_key", "kubernetes"];
    if !BACKENDS.contains(&s.auth.backend.as_str()) {
        return Err((
            "auth.backend",
            format!(
                "Unknown auth backend: '{}' (expected one of: {})",
                s.auth.backend,
                BACKENDS.join(", ")
            ),
        ));
    }
    // One definition of the OAuth discovery rules: the one the gateway builds from.
    crate::auth::OAuthDiscovery::from_settings(&s.auth).map_err(|e| (e.setting, e.reason))?;
    if s.server.response_max_size == 0 {
        return Err(("server.response_max_size", "must be greater than 0".into()));
    }
    if s.server.max_request_body == 0 {
        return Err(("server.max_request_body", "must be greater than 0".into()));
    }
    if s.session.ttl_secs == 0 {
        return Err(("session.ttl_secs", "must be greater than 0".into()));
    }
    if let Err(e) = s.search.settings() {
        return Err(("search", e.to_string()));
    }
    if s.reload_interval_ms == 0 {
        return Err(("reload_interval_ms", "must be greater than 0".into()));
    }
    validate_catalog(s)?;
    s.execution.validate(s.catalog.source)?;
    s.concurrency.validate()?;
    s.connections.validate()?;
    s.metrics.validate(s.server.port)?;
    s.audit.validate()?;
    if s.audit.stream.is_some()
        && s.audit.redis_url.is_none()
        && s.session.backend != SessionBackend::Redis
    {
        return Err((
            "audit.stream",
            "needs a Redis: set audit.redis_url, or keep sessions in Redis (session.backend: redis / REDIS_URL)".into(),
        ));
    }
    if let Some(url) = &s.rate_limit.redis_url
        && !crate::redis_conn::is_redis_url(url)
    {
        return Err((
            "rate_limit.redis_url",
            "must start with redis:// or rediss://".into(),
        ));
    }
    if s.catalog.source == CatalogSource::Files && s.tools.is_empty() {
        return Err((
            "tools",
            "no tool files, directories or globs given (set `tools` or MCC_TOOL_FILES)".into(),
        ));
    }
    if s.server.host.parse::<std::net::IpAddr>().is_err() {
        return Err((
            "server.host",
            format!("'{}' is not an IP address to bind to", s.server.host),
        ));
    }
    if let Some(bad) = s
        .server
        .allowed_origins
        .iter()
        .find(|o| *o != "null" && !o.contains("://"))
    {
        return Err((
            "server.allowed_origins",
            format!("'{bad}' must include a scheme, e.g. https://{bad}"),
        ));
    }
    if let Some(bad) = s.env_floor.iter().find(|n| !is_env_name(n)) {
        return Err((
            "env_floor",
            format!("'{bad}' is not an environment variable name"),
        ));
    }
    match (s.session.backend, s.session.redis_url.as_deref()) {
        (SessionBackend::Redis, None) => Err((
            "session.redis_url",
            "required when session.backend is redis (or set REDIS_URL)".into(),
        )),
        (_, Some(url)) if !crate::redis_conn::is_redis_url(url) => Err((
            "session.redis_url",
            "must start with redis:// or rediss://".into(),
        )),
        _ => Ok(()),
    }
}

/// The catalog source and what depends on it.
fn validate_catalog(s: &Settings) -> Result<(), (&'static str, String)> {
    let kubernetes = s.catalog.source == CatalogSource::Kubernetes;
    if kubernetes && s.catalog.configmap.trim().is_empty() {
        return Err((
            "catalog.configmap",
            "must name the catalog ConfigMap (MCC_CATALOG__CONFIGMAP)".into(),
        ));
    }
    if s.auth.backend == "kubernetes" && !kubernetes {
        return Err((
            "auth.backend",
            "the kubernetes backend maps ServiceAccounts to users with the operator's catalog: set catalog.source: kubernetes".into(),
        ));
    }
    Ok(())
}

impl Settings {
    /// The address to bind.
    pub fn bind_addr(&self) -> SocketAddr {
        let ip = self
            .server
            .host
            .parse()
            .expect("server.host is checked at load time");
        SocketAddr::new(ip, self.server.port)
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
