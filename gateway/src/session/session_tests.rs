//! Tests of [`super`]: session keys, session settings and their errors, and Redis URL redaction.

use super::*;

#[test]
fn keys_are_unambiguous() {
    let scope = Scope::new("abc-1_2", "system:serviceaccount:ns:bot").unwrap();
    assert_eq!(
        scope.key("mcc"),
        "mcc:session:abc-1_2:system:serviceaccount:ns:bot"
    );
    assert_eq!(
        Scope::default_for("alice").key("p"),
        "p:session:default:alice"
    );
    for bad in ["", "a:b", "a b", &"x".repeat(129), "é"] {
        assert!(
            matches!(Scope::new(bad, "u"), Err(SessionError::BadHandle(_))),
            "{bad}"
        );
    }
}

#[test]
fn settings_errors_name_the_field() {
    let zero = SessionSettings {
        ttl_secs: 0,
        ..SessionSettings::default()
    };
    let err = SessionStore::from_settings(&zero).unwrap_err();
    assert_eq!(err.to_string(), "session.ttl_secs: must be at least 1");
    let bad_url = SessionSettings {
        backend: SessionBackend::Redis,
        redis_url: Some("http://nope".into()),
        ..SessionSettings::default()
    };
    let err = SessionStore::from_settings(&bad_url).unwrap_err();
    assert!(err.to_string().starts_with("session.redis_url: "), "{err}");
}

#[test]
fn a_wait_longer_than_the_response_timeout_is_refused() {
    let waiting = SessionSettings {
        backend: SessionBackend::Redis,
        redis_url: Some("redis://127.0.0.1:1".into()),
        timeout_ms: 500,
        redis_wait_replicas: 1,
        redis_wait_timeout_ms: 1000,
        ..SessionSettings::default()
    };
    let err = SessionStore::from_settings(&waiting).unwrap_err();
    assert_eq!(
        err.to_string(),
        "session.redis_wait_timeout_ms: 1000 ms must be below session.timeout_ms (500 ms), \
         which bounds the write and its WAIT together"
    );
    // Without WAIT the wait timeout is unused; below the response timeout it is fine.
    let no_wait = SessionSettings {
        redis_wait_replicas: 0,
        ..waiting.clone()
    };
    assert!(SessionStore::from_settings(&no_wait).is_ok());
    let shorter = SessionSettings {
        redis_wait_timeout_ms: 400,
        ..waiting
    };
    assert!(SessionStore::from_settings(&shorter).is_ok());
}

#[test]
fn the_redis_url_is_the_settings_one_only() {
    let memory = SessionSettings {
        redis_url: Some("redis://h".into()),
        ..SessionSettings::default()
    };
    assert_eq!(memory.redis_url(), None);
    let redis = SessionSettings {
        backend: SessionBackend::Redis,
        ..memory.clone()
    };
    assert_eq!(redis.redis_url(), Some("redis://h"));
    // The settings loader turns REDIS_URL into session.redis_url; nothing else
    // reads the environment, so a Redis backend without a URL is an error.
    let unset = SessionSettings {
        redis_url: None,
        ..redis
    };
    let err = SessionStore::from_settings(&unset).unwrap_err();
    assert_eq!(err.field, "redis_url");
}

#[test]
fn urls_are_redacted() {
    assert_eq!(
        redact_url("redis://u:secret@h:6379/0"),
        "redis://<redacted>@h:6379/0"
    );
    assert_eq!(redact_url("redis://h:6379"), "redis://h:6379");
    let settings = SessionSettings {
        redis_url: Some("redis://:pw@h".into()),
        ..SessionSettings::default()
    };
    assert!(!format!("{settings:?}").contains("pw"));
}
