//! `MCC_*` environment overrides of settings keys: one table of variable → key path →
//! how the text is typed, applied over the settings file's tree before it is parsed.

use serde_json::Value;

/// How an environment variable overrides a key.
#[derive(Clone, Copy)]
enum EnvKind {
    /// A YAML scalar (`8000`, `true`, `redis`).
    Scalar,
    /// A `;`-separated list.
    List,
    /// A string taken as is (names, URLs, secrets: `0123` stays text).
    Text,
    /// A decimal number (`0.5`).
    Number,
    /// A JSON value (a map: `{"LANG": "C.UTF-8"}`); text that is no JSON stays text (the
    /// settings' type check then names the variable).
    Json,
}

/// Environment overrides: variable, key path, kind. Applied in this order.
const ENV_OVERRIDES: &[(&str, &[&str], EnvKind)] = &[
    ("MCC_SERVER__HOST", &["server", "host"], EnvKind::Text),
    ("MCC_SERVER__PORT", &["server", "port"], EnvKind::Scalar),
    (
        "MCC_SERVER__RESPONSE_MAX_SIZE",
        &["server", "response_max_size"],
        EnvKind::Scalar,
    ),
    (
        "MCC_SERVER__MAX_REQUEST_BODY",
        &["server", "max_request_body"],
        EnvKind::Scalar,
    ),
    (
        "MCC_SERVER__ALLOWED_HOSTS",
        &["server", "allowed_hosts"],
        EnvKind::List,
    ),
    (
        "MCC_SERVER__ALLOWED_ORIGINS",
        &["server", "allowed_origins"],
        EnvKind::List,
    ),
    (
        "MCC_SERVER__LEGACY_SESSIONS",
        &["server", "legacy_sessions"],
        EnvKind::Scalar,
    ),
    (
        "MCC_SERVER__JSON_RESPONSE",
        &["server", "json_response"],
        EnvKind::Scalar,
    ),
    ("MCC_AUTH", &["auth", "backend"], EnvKind::Text),
    (
        "MCC_AUTH__ALLOW_ANONYMOUS",
        &["auth", "allow_anonymous"],
        EnvKind::Scalar,
    ),
    (
        "MCC_AUTH__RESOURCE_METADATA_URL",
        &["auth", "resource_metadata_url"],
        EnvKind::Text,
    ),
    (
        "MCC_AUTH__OAUTH__RESOURCE",
        &["auth", "oauth", "resource"],
        EnvKind::Text,
    ),
    (
        "MCC_AUTH__OAUTH__AUTHORIZATION_SERVERS",
        &["auth", "oauth", "authorization_servers"],
        EnvKind::List,
    ),
    (
        "MCC_AUTH__OAUTH__SCOPES_SUPPORTED",
        &["auth", "oauth", "scopes_supported"],
        EnvKind::List,
    ),
    (
        "MCC_AUTH__OAUTH__RESOURCE_NAME",
        &["auth", "oauth", "resource_name"],
        EnvKind::Text,
    ),
    (
        "MCC_AUTH__JWT__JWKS_URL",
        &["auth", "jwt", "jwks_url"],
        EnvKind::Text,
    ),
    (
        "MCC_AUTH__JWT__ISSUER",
        &["auth", "jwt", "issuer"],
        EnvKind::Text,
    ),
    (
        "MCC_AUTH__JWT__AUDIENCE",
        &["auth", "jwt", "audience"],
        EnvKind::Text,
    ),
    (
        "MCC_AUTH__JWT__REQUIRED_SCOPES",
        &["auth", "jwt", "required_scopes"],
        EnvKind::List,
    ),
    (
        "MCC_AUTH__JWT__HS256_SECRET",
        &["auth", "jwt", "hs256_secret"],
        EnvKind::Text,
    ),
    (
        "MCC_AUTH__JWT__REQUIRE_EMAIL_VERIFIED",
        &["auth", "jwt", "require_email_verified"],
        EnvKind::Scalar,
    ),
    (
        "MCC_AUTH__JWT__USERNAME_CLAIMS",
        &["auth", "jwt", "username_claims"],
        EnvKind::List,
    ),
    // The names the Helm chart sets, then the `MCC_<SECTION>__<KEY>` forms (which win).
    (
        "MCC_CATALOG_CONFIGMAP",
        &["catalog", "configmap"],
        EnvKind::Text,
    ),
    (
        "MCC_CATALOG_NAMESPACE",
        &["catalog", "namespace"],
        EnvKind::Text,
    ),
    (
        "MCC_TOKEN_AUDIENCE",
        &["auth", "token_audience"],
        EnvKind::Text,
    ),
    ("MCC_CATALOG__SOURCE", &["catalog", "source"], EnvKind::Text),
    (
        "MCC_CATALOG__CONFIGMAP",
        &["catalog", "configmap"],
        EnvKind::Text,
    ),
    (
        "MCC_CATALOG__NAMESPACE",
        &["catalog", "namespace"],
        EnvKind::Text,
    ),
    (
        "MCC_AUTH__TOKEN_AUDIENCE",
        &["auth", "token_audience"],
        EnvKind::Text,
    ),
    ("MCC_TOOL_FILES", &["tools"], EnvKind::List),
    ("MCC_USERS_FILE", &["users_file"], EnvKind::Text),
    (
        "MCC_SESSION__BACKEND",
        &["session", "backend"],
        EnvKind::Text,
    ),
    (
        "MCC_SESSION__REDIS_URL",
        &["session", "redis_url"],
        EnvKind::Text,
    ),
    (
        "MCC_SESSION__REDIS_TLS_CA_FILE",
        &["session", "redis_tls_ca_file"],
        EnvKind::Text,
    ),
    (
        "MCC_SESSION__TTL_SECS",
        &["session", "ttl_secs"],
        EnvKind::Scalar,
    ),
    (
        "MCC_SESSION__KEY_PREFIX",
        &["session", "key_prefix"],
        EnvKind::Text,
    ),
    (
        "MCC_SESSION__TIMEOUT_MS",
        &["session", "timeout_ms"],
        EnvKind::Scalar,
    ),
    (
        "MCC_SESSION__REDIS_WAIT_REPLICAS",
        &["session", "redis_wait_replicas"],
        EnvKind::Scalar,
    ),
    (
        "MCC_SESSION__REDIS_WAIT_TIMEOUT_MS",
        &["session", "redis_wait_timeout_ms"],
        EnvKind::Scalar,
    ),
    (
        "MCC_SESSION__MAX_VALUE_BYTES",
        &["session", "max_value_bytes"],
        EnvKind::Scalar,
    ),
    (
        "MCC_SESSION__MAX_VARS",
        &["session", "max_vars"],
        EnvKind::Scalar,
    ),
    (
        "MCC_SESSION__MAX_BUCKET_BYTES",
        &["session", "max_bucket_bytes"],
        EnvKind::Scalar,
    ),
    (
        "MCC_SESSION__MAX_HANDLES_PER_USER",
        &["session", "max_handles_per_user"],
        EnvKind::Scalar,
    ),
    (
        "MCC_SEARCH__MODEL_DIR",
        &["search", "model_dir"],
        EnvKind::Text,
    ),
    (
        "MCC_SEARCH__EMBEDDINGS_URL",
        &["search", "embeddings_url"],
        EnvKind::Text,
    ),
    (
        "MCC_SEARCH__EMBEDDINGS_MODEL",
        &["search", "embeddings_model"],
        EnvKind::Text,
    ),
    (
        "MCC_SEARCH__EMBEDDINGS_API_KEY",
        &["search", "embeddings_api_key"],
        EnvKind::Text,
    ),
    (
        "MCC_SEARCH__REDIS_URL",
        &["search", "redis_url"],
        EnvKind::Text,
    ),
    (
        "MCC_SEARCH__MAX_RESULTS",
        &["search", "max_results"],
        EnvKind::Scalar,
    ),
    (
        "MCC_SEARCH__KEYWORD_WEIGHT",
        &["search", "keyword_weight"],
        EnvKind::Number,
    ),
    (
        "MCC_SEARCH__SEMANTIC_WEIGHT",
        &["search", "semantic_weight"],
        EnvKind::Number,
    ),
    (
        "MCC_SEARCH__KEYWORD_SATURATION",
        &["search", "keyword_saturation"],
        EnvKind::Number,
    ),
    (
        "MCC_SEARCH__QUERY_CACHE_SIZE",
        &["search", "query_cache_size"],
        EnvKind::Scalar,
    ),
    (
        "MCC_SEARCH__QUERY_CACHE_TTL_SECS",
        &["search", "query_cache_ttl_secs"],
        EnvKind::Scalar,
    ),
    ("MCC_ENV_FLOOR", &["env_floor"], EnvKind::List),
    (
        "MCC_EXECUTION__RUNTIME",
        &["execution", "runtime"],
        EnvKind::Text,
    ),
    (
        "MCC_EXECUTION__EXECUTOR_SOCKET",
        &["execution", "executor_socket"],
        EnvKind::Text,
    ),
    (
        "MCC_EXECUTION__DEFAULT_TIMEOUT_SECS",
        &["execution", "default_timeout_secs"],
        EnvKind::Number,
    ),
    (
        "MCC_EXECUTION__MAX_TIMEOUT_SECS",
        &["execution", "max_timeout_secs"],
        EnvKind::Number,
    ),
    (
        "MCC_EXECUTION__POD__ENABLED",
        &["execution", "pod", "enabled"],
        EnvKind::Scalar,
    ),
    (
        "MCC_EXECUTION__POD__DEFAULT_IMAGE",
        &["execution", "pod", "default_image"],
        EnvKind::Text,
    ),
    (
        "MCC_EXECUTION__POD__RUNNER_IMAGE",
        &["execution", "pod", "runner_image"],
        EnvKind::Text,
    ),
    (
        "MCC_EXECUTION__POD__MAX_PER_TOOL",
        &["execution", "pod", "max_per_tool"],
        EnvKind::Scalar,
    ),
    (
        "MCC_EXECUTION__POD__PASSTHROUGH_ENV",
        &["execution", "pod", "passthrough_env"],
        EnvKind::Json,
    ),
    (
        "MCC_EXECUTION__POD__NAMESPACES",
        &["execution", "pod", "namespaces"],
        EnvKind::List,
    ),
    (
        "MCC_EXECUTION__POD__SWEEP_INTERVAL_SECS",
        &["execution", "pod", "sweep_interval_secs"],
        EnvKind::Scalar,
    ),
    (
        "MCC_EXECUTION__POD__SWEEP_GRACE_SECS",
        &["execution", "pod", "sweep_grace_secs"],
        EnvKind::Scalar,
    ),
    (
        "MCC_EXECUTION__POD__INSTANCE",
        &["execution", "pod", "instance"],
        EnvKind::Text,
    ),
    (
        "MCC_EXECUTION__RENDER__WORKERS",
        &["execution", "render", "workers"],
        EnvKind::Scalar,
    ),
    (
        "MCC_EXECUTION__RENDER__MEMORY_MIB",
        &["execution", "render", "memory_mib"],
        EnvKind::Scalar,
    ),
    (
        "MCC_EXECUTION__APPROVAL__GROUPS",
        &["execution", "approval", "groups"],
        EnvKind::List,
    ),
    (
        "MCC_EXECUTION__APPROVAL__TTL_SECONDS",
        &["execution", "approval", "ttl_seconds"],
        EnvKind::Scalar,
    ),
    (
        "MCC_CONCURRENCY__MAX_EXECUTIONS",
        &["concurrency", "max_executions"],
        EnvKind::Scalar,
    ),
    (
        "MCC_CONCURRENCY__MAX_PER_CALLER",
        &["concurrency", "max_per_caller"],
        EnvKind::Scalar,
    ),
    (
        "MCC_CONCURRENCY__MAX_PER_TOOL",
        &["concurrency", "max_per_tool"],
        EnvKind::Scalar,
    ),
    (
        "MCC_CONCURRENCY__WAIT_MS",
        &["concurrency", "wait_ms"],
        EnvKind::Scalar,
    ),
    (
        "MCC_CONNECTIONS__HEADER_READ_TIMEOUT_SECS",
        &["connections", "header_read_timeout_secs"],
        EnvKind::Number,
    ),
    (
        "MCC_CONNECTIONS__BODY_READ_TIMEOUT_SECS",
        &["connections", "body_read_timeout_secs"],
        EnvKind::Number,
    ),
    (
        "MCC_CONNECTIONS__REQUEST_TIMEOUT_SECS",
        &["connections", "request_timeout_secs"],
        EnvKind::Number,
    ),
    (
        "MCC_CONNECTIONS__MAX_LEGACY_SESSIONS_PER_CALLER",
        &["connections", "max_legacy_sessions_per_caller"],
        EnvKind::Scalar,
    ),
    (
        "MCC_CONNECTIONS__MAX_SSE_STREAMS_PER_CALLER",
        &["connections", "max_sse_streams_per_caller"],
        EnvKind::Scalar,
    ),
    ("MCC_METRICS__PORT", &["metrics", "port"], EnvKind::Scalar),
    ("MCC_METRICS__TOKEN", &["metrics", "token"], EnvKind::Text),
    (
        "MCC_SEARCH__MAX_QUERY_BYTES",
        &["search", "max_query_bytes"],
        EnvKind::Scalar,
    ),
    (
        "MCC_RATE_LIMIT__ENABLED",
        &["rate_limit", "enabled"],
        EnvKind::Scalar,
    ),
    (
        "MCC_RATE_LIMIT__DEFAULT",
        &["rate_limit", "default"],
        EnvKind::Text,
    ),
    (
        "MCC_RATE_LIMIT__PER_USER",
        &["rate_limit", "per_user"],
        EnvKind::Text,
    ),
    (
        "MCC_RATE_LIMIT__GROUPS",
        &["rate_limit", "groups"],
        EnvKind::Json,
    ),
    (
        "MCC_RATE_LIMIT__TOOLS",
        &["rate_limit", "tools"],
        EnvKind::Json,
    ),
    (
        "MCC_RATE_LIMIT__ON_REDIS_ERROR",
        &["rate_limit", "on_redis_error"],
        EnvKind::Text,
    ),
    (
        "MCC_RATE_LIMIT__REDIS_URL",
        &["rate_limit", "redis_url"],
        EnvKind::Text,
    ),
    ("MCC_AUDIT__ENABLED", &["audit", "enabled"], EnvKind::Scalar),
    ("MCC_AUDIT__PARAMS", &["audit", "params"], EnvKind::Scalar),
    ("MCC_AUDIT__STDOUT", &["audit", "stdout"], EnvKind::Scalar),
    ("MCC_AUDIT__STREAM", &["audit", "stream"], EnvKind::Text),
    (
        "MCC_AUDIT__REDIS_URL",
        &["audit", "redis_url"],
        EnvKind::Text,
    ),
    (
        "MCC_AUDIT__STREAM_MAX_LEN",
        &["audit", "stream_max_len"],
        EnvKind::Scalar,
    ),
    (
        "MCC_AUDIT__STREAM_MAX_AGE_SECS",
        &["audit", "stream_max_age_secs"],
        EnvKind::Scalar,
    ),
    (
        "MCC_AUDIT__QUEUE_SIZE",
        &["audit", "queue_size"],
        EnvKind::Scalar,
    ),
    ("MCC_LOG__FORMAT", &["log", "format"], EnvKind::Text),
    (
        "MCC_TRACING__ENABLED",
        &["tracing", "enabled"],
        EnvKind::Scalar,
    ),
    ("MCC_DEBUG", &["debug"], EnvKind::Scalar),
    (
        "MCC_RELOAD_INTERVAL_MS",
        &["reload_interval_ms"],
        EnvKind::Scalar,
    ),
];

/// Applies every override `env` holds (and `REDIS_URL`) to `tree`; returns the names of
/// the variables used, for error messages.
pub(super) fn apply(tree: &mut Value, env: &dyn Fn(&str) -> Option<String>) -> Vec<&'static str> {
    let mut used = Vec::new();
    for (var, path, kind) in ENV_OVERRIDES {
        if let Some(raw) = env(var) {
            set_path(tree, path, env_value(&raw, *kind));
            used.push(*var);
        }
    }
    apply_redis_url(tree, env("REDIS_URL"), &mut used);
    used
}

fn env_value(raw: &str, kind: EnvKind) -> Value {
    match kind {
        EnvKind::List => Value::Array(
            raw.split(';')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(Value::from)
                .collect(),
        ),
        EnvKind::Scalar => scalar(raw),
        EnvKind::Text => Value::from(raw.trim()),
        EnvKind::Number => raw
            .trim()
            .parse::<f64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::from(raw.trim())),
        EnvKind::Json => {
            serde_json::from_str(raw.trim()).unwrap_or_else(|_| Value::from(raw.trim()))
        }
    }
}

/// An environment value as YAML would type it: numbers and booleans, else the string.
fn scalar(raw: &str) -> Value {
    let trimmed = raw.trim();
    if let Ok(n) = trimmed.parse::<u64>() {
        return Value::from(n);
    }
    match trimmed {
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        _ => Value::from(trimmed),
    }
}

pub(super) fn set_path(tree: &mut Value, path: &[&str], value: Value) {
    let mut node = tree;
    for (i, key) in path.iter().enumerate() {
        if !node.is_object() {
            *node = Value::Object(Default::default());
        }
        let map = node.as_object_mut().expect("made an object above");
        if i + 1 == path.len() {
            map.insert(key.to_string(), value);
            return;
        }
        node = map
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Default::default()));
    }
}

/// `REDIS_URL` sets `session.redis_url` (unless given) and selects the Redis backend
/// (unless a backend is given).
fn apply_redis_url(tree: &mut Value, redis_url: Option<String>, used: &mut Vec<&'static str>) {
    let Some(url) = redis_url.filter(|u| !u.is_empty()) else {
        return;
    };
    let session = tree.get("session");
    let has_url = session.and_then(|s| s.get("redis_url")).is_some();
    let has_backend = session.and_then(|s| s.get("backend")).is_some();
    if !has_url {
        set_path(tree, &["session", "redis_url"], Value::from(url));
    }
    if !has_backend {
        set_path(tree, &["session", "backend"], Value::from("redis"));
    }
    used.push("REDIS_URL");
}

#[cfg(test)]
mod tests {
    /// Every variable the gateway reads as a setting is one the env rule keeps from tools
    /// (`mcc_catalog::env::is_gateway_setting`): a new non-`MCC_` name must be added there.
    #[test]
    fn every_setting_variable_is_kept_from_tools() {
        for (name, _, _) in super::ENV_OVERRIDES {
            assert!(mcc_catalog::env::is_gateway_setting(name), "{name}");
        }
        assert!(mcc_catalog::env::is_gateway_setting("REDIS_URL"));
        assert!(mcc_catalog::env::is_gateway_setting("MCC_SETTINGS_FILE"));
        for name in crate::telemetry::settings::OTEL_VARIABLES {
            assert!(mcc_catalog::env::is_gateway_setting(name), "{name}");
        }
    }
}
