//! Tests of [`super`]: connection settings refused by name (CA files, URLs) with passwords hidden.

use super::*;

const T: Duration = Duration::from_millis(100);

#[tokio::test]
async fn a_ca_file_without_a_certificate_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ca.pem");
    std::fs::write(&path, "not a certificate").unwrap();
    let options = RedisOptions {
        tls_ca_file: Some(path),
    };
    let err = Redis::connect("session.redis_url", "rediss://127.0.0.1:1", &options, T).unwrap_err();
    assert_eq!(err.setting, "session.redis_tls_ca_file");
    assert!(err.reason.contains("no PEM certificate"), "{err}");
    let missing = RedisOptions {
        tls_ca_file: Some(dir.path().join("absent.pem")),
    };
    let err = Redis::connect("session.redis_url", "rediss://127.0.0.1:1", &missing, T).unwrap_err();
    assert!(
        err.to_string().starts_with("session.redis_tls_ca_file: "),
        "{err}"
    );
}

#[tokio::test]
async fn bad_urls_name_their_setting_and_hide_the_password() {
    let options = RedisOptions::default();
    let err = Redis::connect("audit.redis_url", "http://u:secret@h:1", &options, T).unwrap_err();
    assert_eq!(err.setting, "audit.redis_url");
    assert!(!err.to_string().contains("secret"), "{err}");
    let err = Redis::connect("audit.redis_url", "rediss://h:1/#insecure", &options, T).unwrap_err();
    assert!(err.reason.contains("#insecure"), "{err}");
    // Plain and TLS URLs build clients without contacting anything.
    Redis::connect("audit.redis_url", "redis://127.0.0.1:1", &options, T).unwrap();
    Redis::connect("audit.redis_url", "rediss://127.0.0.1:1", &options, T).unwrap();
    Redis::connect(
        "audit.redis_url",
        "redis+sentinel://127.0.0.1:1/m",
        &options,
        T,
    )
    .unwrap();
    Redis::connect(
        "audit.redis_url",
        "redis+cluster://127.0.0.1:1",
        &options,
        T,
    )
    .unwrap();
}
