//! `rediss://` against a real TLS Redis: a `redis-server --tls-port` started by this test
//! with a certificate from a private CA made at test time. The gateway's connection
//! definition (`mcc_gateway::redis_conn`, reached through the session store) verifies the
//! server against `session.redis_tls_ca_file`, logs in as an ACL user, and carries
//! commands and pub/sub over TLS; without the CA, or with another CA, it refuses the
//! server. Skipped (loudly) only when `redis-server` is not installed.

use crate::redis_support;

use std::time::Duration;

use futures::StreamExt;
use mcc_gateway::session::{Scope, SessionBackend, SessionSettings, SessionStore};
use redis_support::{RedisProcess, TestCa, free_port, redis_server_or_skip};
use serde_json::json;

/// A TLS-only Redis (no plain port) whose `default` user is off and whose one user is
/// `alice` with password `s3cret-pw`, limited as docs/redis.md advises: keys and
/// channels under the prefix, no admin or dangerous commands.
fn tls_redis(ca: &TestCa) -> RedisProcess {
    let port = free_port();
    let mut args: Vec<String> = vec!["--port".into(), "0".into(), "--tls-port".into()];
    args.push(port.to_string());
    args.extend(ca.server_args());
    // One token per argument: redis-server joins a directive's words itself.
    for word in "--user default off --user alice on >s3cret-pw ~tls-test:* &tls-test:* +@all -@admin -@dangerous".split(' ') {
        args.push(word.into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    RedisProcess::start(port, &args)
}

fn store(url: String, ca_file: Option<std::path::PathBuf>) -> SessionStore {
    SessionStore::from_settings(&SessionSettings {
        backend: SessionBackend::Redis,
        redis_url: Some(url),
        redis_tls_ca_file: ca_file,
        key_prefix: "tls-test".into(),
        timeout_ms: 2000,
        ..SessionSettings::default()
    })
    .expect("settings are valid")
}

#[tokio::test]
async fn rediss_with_a_private_ca_and_an_acl_user() {
    if !redis_server_or_skip("rediss_with_a_private_ca_and_an_acl_user") {
        return;
    }
    let ca = TestCa::new();
    let server = tls_redis(&ca);
    let url = format!("rediss://alice:s3cret-pw@127.0.0.1:{}", server.port);

    // Trusting the private CA: session writes and reads go over TLS as alice.
    let trusted = store(url.clone(), Some(ca.ca_file()));
    let scope = Scope::default_for("bob");
    trusted.set(&scope, "city", json!("Lyon")).await.unwrap();
    assert_eq!(
        trusted.get(&scope, "city").await.unwrap(),
        Some(json!("Lyon"))
    );
    trusted.ping().await.unwrap();

    // Pub/sub (the relay's channel) on the same deployment, over TLS too.
    let (redis, _, _) = trusted.redis_client().unwrap();
    let mut messages = redis.subscribe("tls-test:relay").await.unwrap();
    redis.publish("tls-test:relay", "hello").await.unwrap();
    let message = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("the message arrives")
        .unwrap();
    assert_eq!(message, b"hello");

    // The system's roots do not know the private CA: refused, and said so.
    let untrusted = store(url.clone(), None);
    let err = untrusted
        .set(&scope, "city", json!("Paris"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().starts_with("session store unavailable: "),
        "{err}"
    );
    assert!(
        err.to_string().to_lowercase().contains("certificate"),
        "{err}"
    );

    // Another CA: refused too.
    let other_ca = TestCa::new();
    let err = store(url.clone(), Some(other_ca.ca_file()))
        .get(&scope, "city")
        .await
        .unwrap_err();
    assert!(
        err.to_string().to_lowercase().contains("certificate"),
        "{err}"
    );

    // A wrong password: refused, and the password is not in the message.
    let wrong = format!("rediss://alice:not-the-pw@127.0.0.1:{}", server.port);
    let err = store(wrong, Some(ca.ca_file()))
        .get(&scope, "city")
        .await
        .unwrap_err();
    assert!(!err.to_string().contains("not-the-pw"), "{err}");

    // Plain redis:// to the TLS port gets no session store either.
    let plain = format!("redis://alice:s3cret-pw@127.0.0.1:{}", server.port);
    assert!(store(plain, None).get(&scope, "city").await.is_err());

    // Nothing the refused stores tried was written.
    assert_eq!(
        trusted.get(&scope, "city").await.unwrap(),
        Some(json!("Lyon"))
    );
}
