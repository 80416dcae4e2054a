//! The Redis backend through an outage: a `redis-server` started by this test on a free
//! port, killed and restarted. Calls fail fast with "session store unavailable: …" while
//! it is down and work again once it is back, with the same store (no restart).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcc_gateway::session::{Scope, SessionBackend, SessionError, SessionSettings, SessionStore};
use serde_json::json;

/// A redis-server child, killed when dropped (also when the test fails).
struct RedisServer(Child);

impl RedisServer {
    fn start(port: u16) -> Self {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed to run this test");
        Self(child)
    }

    fn stop(mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Retry `set` until it succeeds or `limit` passes; the time it took.
async fn set_until_ok(store: &SessionStore, scope: &Scope, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        match store.set(scope, "phase", json!("up")).await {
            Ok(()) => return start.elapsed(),
            Err(err) if start.elapsed() < limit => {
                assert!(matches!(err, SessionError::Unavailable(_)), "{err}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(err) => panic!("store did not recover within {limit:?}: {err}"),
        }
    }
}

async fn assert_unavailable_fast(store: &SessionStore, scope: &Scope) {
    let start = Instant::now();
    let err = store.set(scope, "phase", json!("down")).await.unwrap_err();
    assert!(
        err.to_string().starts_with("session store unavailable: "),
        "{err}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
    assert!(store.ping().await.is_err());
    assert!(store.get(scope, "phase").await.is_err());
}

#[tokio::test]
async fn outage_fails_clearly_and_recovers_without_restart() {
    let port = free_port();
    let store = SessionStore::from_settings(&SessionSettings {
        backend: SessionBackend::Redis,
        redis_url: Some(format!("redis://127.0.0.1:{port}")),
        timeout_ms: 500,
        ..SessionSettings::default()
    })
    .expect("the store is built while Redis is not there yet");
    let scope = Scope::default_for("alice");

    // Redis not started yet: clear error, then it comes up and the store works.
    assert_unavailable_fast(&store, &scope).await;
    let server = RedisServer::start(port);
    set_until_ok(&store, &scope, Duration::from_secs(10)).await;
    assert_eq!(store.get(&scope, "phase").await.unwrap(), Some(json!("up")));

    // Killed mid-life.
    server.stop();
    assert_unavailable_fast(&store, &scope).await;

    // Back (empty: started with --save ''): the same store reconnects by itself.
    let _server = RedisServer::start(port);
    set_until_ok(&store, &scope, Duration::from_secs(10)).await;
    store.ping().await.unwrap();
    assert_eq!(store.get(&scope, "phase").await.unwrap(), Some(json!("up")));
}
