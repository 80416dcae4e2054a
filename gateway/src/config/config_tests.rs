//! Tests of [`super`]: loading settings from the file, the environment and the defaults, and errors naming the bad key.

use super::*;
use std::collections::HashMap;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

fn write(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), text).unwrap();
    f
}

#[test]
fn the_fetched_model_is_found_in_the_cache() {
    let cache = tempfile::tempdir().unwrap();
    let cache_str = cache.path().to_str().unwrap().to_string();
    let pairs = [("MCC_MODEL_CACHE", cache_str.as_str())];
    let lookup = env(&pairs);
    assert_eq!(cached_model_dir(&lookup), None, "empty cache");
    let dir = cache.path().join("all-MiniLM-L6-v2");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["model.safetensors", "tokenizer.json"] {
        std::fs::write(dir.join(f), "x").unwrap();
    }
    assert_eq!(cached_model_dir(&lookup), None, "config.json missing");
    std::fs::write(dir.join("config.json"), "{}").unwrap();
    assert_eq!(cached_model_dir(&lookup), Some(dir));
}

#[test]
fn defaults_are_the_embedded_default() {
    let s = load(None, &env(&[])).unwrap();
    assert_eq!(s.bind_addr().to_string(), "127.0.0.1:8000");
    assert_eq!(s.server.response_max_size, 5_000_000);
    assert_eq!(s.session.ttl_secs, 86_400);
    assert_eq!(s.session.backend, SessionBackend::Memory);
    assert_eq!(s.tools, vec!["examples/"]);
    assert_eq!(
        s.users_file,
        Some(PathBuf::from("examples/users/users.yaml"))
    );
    assert_eq!(s.auth.backend, "dev-admin");
    assert_eq!(s.env_floor.len(), 10);
}

#[test]
fn file_then_environment() {
    let f = write("server:\n  port: 9000\n  host: 0.0.0.0\nauth: dev-public\ntools: [a.yaml]\n");
    let s = load(
        Some(f.path()),
        &env(&[
            ("MCC_SERVER__PORT", "9100"),
            ("MCC_TOOL_FILES", "x.yaml; dir/ ;"),
            ("MCC_ENV_FLOOR", "PATH;HOME"),
        ]),
    )
    .unwrap();
    assert_eq!(s.server.port, 9100);
    assert_eq!(s.server.host, "0.0.0.0");
    assert_eq!(s.auth.backend, "dev-public");
    assert_eq!(s.tools, vec!["x.yaml", "dir/"]);
    assert_eq!(s.env_floor, vec!["PATH", "HOME"]);
}

#[test]
fn kubernetes_catalog_settings() {
    let s = load(
        None,
        &env(&[
            ("MCC_CATALOG__SOURCE", "kubernetes"),
            ("MCC_CATALOG_CONFIGMAP", "from-chart"),
            ("MCC_CATALOG_NAMESPACE", "mcc-system"),
            ("MCC_TOKEN_AUDIENCE", "mcc-gateway"),
            ("MCC_AUTH", "kubernetes"),
        ]),
    )
    .unwrap();
    assert_eq!(s.catalog.source, CatalogSource::Kubernetes);
    assert_eq!(s.catalog.configmap, "from-chart");
    assert_eq!(s.catalog.namespace.as_deref(), Some("mcc-system"));
    assert_eq!(s.auth.token_audience.as_deref(), Some("mcc-gateway"));
    let s = load(
        None,
        &env(&[
            ("MCC_CATALOG_CONFIGMAP", "from-chart"),
            ("MCC_CATALOG__CONFIGMAP", "explicit"),
        ]),
    )
    .unwrap();
    assert_eq!(s.catalog.configmap, "explicit", "the section form wins");
    assert_eq!(s.catalog.source, CatalogSource::Files);

    let e = load(None, &env(&[("MCC_AUTH", "kubernetes")]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("auth.backend") && e.contains("catalog.source: kubernetes"),
        "{e}"
    );
    let e = load(None, &env(&[("MCC_CATALOG__SOURCE", "etcd")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("catalog.source") && e.contains("etcd"), "{e}");
}

#[test]
fn redis_url_selects_redis_sessions() {
    let s = load(None, &env(&[("REDIS_URL", "redis://127.0.0.1:6379")])).unwrap();
    assert_eq!(s.session.backend, SessionBackend::Redis);
    assert_eq!(
        s.session.redis_url.as_deref(),
        Some("redis://127.0.0.1:6379")
    );
    let f = write("session:\n  backend: memory\n");
    let s = load(Some(f.path()), &env(&[("REDIS_URL", "redis://h")])).unwrap();
    assert_eq!(s.session.backend, SessionBackend::Memory);
}

#[test]
fn bad_settings_name_the_key() {
    let f = write("server:\n  prot: 1\n");
    let e = load(Some(f.path()), &env(&[])).unwrap_err().to_string();
    assert!(e.contains("server") && e.contains("prot"), "{e}");

    let e = load(None, &env(&[("MCC_SERVER__PORT", "http")]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("server.port") && e.contains("MCC_SERVER__PORT"),
        "{e}"
    );

    let e = load(None, &env(&[("MCC_AUTH", "oauth")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("auth") && e.contains("oauth"), "{e}");

    let e = load(None, &env(&[("MCC_SESSION__BACKEND", "redis")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("session.redis_url"), "{e}");

    let e = load(None, &env(&[("MCC_ENV_FLOOR", "PATH;BAD-NAME")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("env_floor") && e.contains("BAD-NAME"), "{e}");

    let e = load(Some(Path::new("/nonexistent/mcc.yaml")), &env(&[]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/mcc.yaml"), "{e}");
}

#[test]
fn rate_limit_audit_and_log_settings_from_the_environment() {
    let s = load(
        None,
        &env(&[
            ("MCC_RATE_LIMIT__DEFAULT", "60/1hr"),
            ("MCC_RATE_LIMIT__PER_USER", "-1"),
            ("MCC_RATE_LIMIT__GROUPS", r#"{"ops": "5/1min"}"#),
            ("MCC_RATE_LIMIT__TOOLS", r#"{"public.echo": "1/1s"}"#),
            ("MCC_RATE_LIMIT__ON_REDIS_ERROR", "closed"),
            ("MCC_AUDIT__PARAMS", "true"),
            ("MCC_AUDIT__STREAM", "mcc:audit"),
            ("MCC_AUDIT__STREAM_MAX_AGE_SECS", "86400"),
            ("REDIS_URL", "redis://127.0.0.1:6379"),
            ("MCC_LOG__FORMAT", "json"),
        ]),
    )
    .unwrap();
    let r = &s.rate_limit;
    assert_eq!(r.default.unwrap().to_string(), "60/1h");
    assert_eq!(r.per_user, Some(mcc_catalog::rate::RateLimit::Unlimited));
    assert_eq!(r.groups["ops"].per_tool.unwrap().to_string(), "5/1min");
    assert_eq!(r.tools["public.echo"].to_string(), "1/1s");
    assert_eq!(r.on_redis_error, crate::ratelimit::OnStoreError::Closed);
    assert!(s.audit.params && s.audit.stdout);
    assert_eq!(s.audit.stream.as_deref(), Some("mcc:audit"));
    assert_eq!(s.audit.stream_max_age_secs, Some(86_400));
    assert_eq!(s.log.format, LogFormat::Json);

    let e = load(None, &env(&[("MCC_RATE_LIMIT__DEFAULT", "lots")]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("rate_limit.default") && e.contains("MCC_RATE_LIMIT__DEFAULT"),
        "{e}"
    );
    let e = load(None, &env(&[("MCC_LOG__FORMAT", "xml")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("log.format"), "{e}");
    let e = load(None, &env(&[("MCC_AUDIT__REDIS_URL", "localhost:6379")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("audit.redis_url"), "{e}");
    let e = load(None, &env(&[("MCC_AUDIT__STREAM", "mcc:audit")]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("audit.stream") && e.contains("audit.redis_url"),
        "{e}"
    );
}

#[test]
fn settings_file_from_flag_or_env() {
    assert_eq!(
        settings_path(None, &env(&[("MCC_SETTINGS_FILE", "s.yaml")])),
        Some(PathBuf::from("s.yaml"))
    );
    assert_eq!(
        settings_path(
            Some("f.yaml".into()),
            &env(&[("MCC_SETTINGS_FILE", "s.yaml")])
        ),
        Some(PathBuf::from("f.yaml"))
    );
}

#[test]
fn a_feature_uses_its_own_redis_else_the_sessions() {
    let memory = load(None, &env(&[])).unwrap();
    assert_eq!(memory.feature_redis(None), FeatureRedis::None);
    assert_eq!(
        memory.feature_redis(Some("redis://own")),
        FeatureRedis::Own("redis://own")
    );
    let redis = load(None, &env(&[("REDIS_URL", "redis://sessions")])).unwrap();
    assert_eq!(
        redis.feature_redis(None),
        FeatureRedis::Session("redis://sessions")
    );
    assert_eq!(
        redis.feature_redis(Some("redis://own")).url(),
        Some("redis://own")
    );
}

// The `execution` section (its type is `exec::settings`'s), as loading reads it.

fn load_env(pairs: &[(&str, &str)]) -> Result<Settings, String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    load(None, &move |k| map.get(k).cloned()).map_err(|e| e.to_string())
}

const ON: [(&str, &str); 4] = [
    ("MCC_CATALOG__SOURCE", "kubernetes"),
    ("MCC_EXECUTION__POD__ENABLED", "true"),
    (
        "MCC_EXECUTION__POD__DEFAULT_IMAGE",
        "ghcr.io/mcc-k8s/mcc-executor:1",
    ),
    (
        "MCC_EXECUTION__POD__RUNNER_IMAGE",
        "ghcr.io/mcc-k8s/mcc-executor:1",
    ),
];

#[test]
fn pod_settings_from_the_environment() {
    let off = load_env(&[]).unwrap().execution.pod;
    assert!(!off.enabled);
    assert_eq!(off.max_per_tool, 4);
    let mut env = ON.to_vec();
    env.extend([
        ("MCC_EXECUTION__POD__MAX_PER_TOOL", "2"),
        (
            "MCC_EXECUTION__POD__PASSTHROUGH_ENV",
            r#"{"LANG": "C.UTF-8"}"#,
        ),
        ("MCC_EXECUTION__POD__NAMESPACES", "team-a; team-b"),
        ("MCC_EXECUTION__POD__SWEEP_GRACE_SECS", "30"),
        ("MCC_EXECUTION__POD__INSTANCE", "prod"),
    ]);
    let pod = load_env(&env).unwrap().execution.pod;
    assert!(pod.enabled);
    assert_eq!(pod.max_per_tool, 2);
    assert_eq!(pod.passthrough_env["LANG"], "C.UTF-8");
    assert_eq!(pod.namespaces, ["team-a", "team-b"]);
    assert_eq!((pod.sweep_grace_secs, pod.instance.as_str()), (30, "prod"));
    let replica = pod.replica_name(&|k| (k == "POD_NAME").then(|| "gw-0".to_string()));
    assert_eq!(replica, "gw-0");
}

#[test]
fn bad_pod_settings_name_the_key() {
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut env = ON.to_vec();
        env.extend_from_slice(extra);
        load_env(&env).unwrap_err()
    };
    let e = with(&[("MCC_EXECUTION__POD__DEFAULT_IMAGE", "")]);
    assert!(e.contains("execution.pod.default_image"), "{e}");
    let e = with(&[("MCC_EXECUTION__POD__MAX_PER_TOOL", "0")]);
    assert!(e.contains("execution.pod.max_per_tool"), "{e}");
    let e = with(&[("MCC_EXECUTION__POD__PASSTHROUGH_ENV", "LANG=C")]);
    assert!(
        e.contains("execution.pod.passthrough_env")
            && e.contains("MCC_EXECUTION__POD__PASSTHROUGH_ENV"),
        "{e}"
    );
    let e = with(&[("MCC_EXECUTION__POD__NAMESPACES", "Team_A")]);
    assert!(
        e.contains("execution.pod.namespaces") && e.contains("Team_A"),
        "{e}"
    );
    let e = with(&[("MCC_EXECUTION__POD__INSTANCE", "a b")]);
    assert!(e.contains("execution.pod.instance"), "{e}");
    let e = load_env(&[("MCC_EXECUTION__RENDER__WORKERS", "0")]).unwrap_err();
    assert!(e.contains("execution.render.workers"), "{e}");
    let e = load_env(&[("MCC_EXECUTION__RENDER__MEMORY_MIB", "1")]).unwrap_err();
    assert!(e.contains("execution.render.memory_mib"), "{e}");
    let render = load_env(&[("MCC_EXECUTION__RENDER__WORKERS", "4")]).unwrap();
    assert_eq!(render.execution.render.workers, 4);
    let e = load_env(&[("MCC_EXECUTION__POD__ENABLED", "true")]).unwrap_err();
    assert!(
        e.contains("execution.pod.enabled") && e.contains("catalog.source: kubernetes"),
        "{e}"
    );
}
