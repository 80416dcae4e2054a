//! A gateway on a Sentinel deployment through a failover, seen by a real MCP client:
//! `redis-server` master, two replicas and three sentinels started here; the gateway
//! with `session.redis_url: redis+sentinel://…`, `session.redis_wait_replicas: 1` and
//! rate limits that fail closed. The master is killed with SIGKILL while the client
//! calls a rate-limited tool and `/readyz` is polled: the outage shows in `/readyz`
//! (`session_store.ok: false`) and in the rate limit's refusal, both recover without a
//! restart, and a session variable written (and acknowledged) before the kill is still
//! there. Skipped (loudly) only when `redis-server` is not installed.

use crate::mcp_support;
use crate::redis_support;

use std::time::{Duration, Instant};

use mcc_gateway::ratelimit::OnStoreError;
use mcp_support::*;
use redis_support::{SentinelSet, redis_server_or_skip};
use serde_json::json;

async fn session_store_ok(base: &str) -> bool {
    let body = get_json(&format!("{base}/readyz")).await;
    body["session_store"]["ok"] == json!(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_and_rate_limits_report_a_sentinel_failover_and_the_recovery() {
    if !redis_server_or_skip("readyz_and_rate_limits_report_a_sentinel_failover_and_the_recovery") {
        return;
    }
    let mut set = SentinelSet::start();
    let server = start_configured("dev-admin", Some(&set.url()), &[], |s| {
        // The response timeout bounds a write and its WAIT (1 s by default) together.
        s.session.timeout_ms = 1500;
        s.session.redis_wait_replicas = 1;
        s.rate_limit.default = Some("1000/1h".parse().unwrap());
        s.rate_limit.on_redis_error = OnStoreError::Closed;
    })
    .await;
    let client = stateless(&server.url, TestClient::plain()).await;
    let echo = json!({"key": "public.echo", "params": {"message": "hi"}});

    let set_text = call_text(
        &client,
        "set_session",
        json!({"name": "before", "value": "kept"}),
    )
    .await;
    assert!(!set_text.contains("unavailable"), "{set_text}");
    assert_eq!(text(&call(&client, "execute", echo.clone()).await), "hi");
    assert!(session_store_ok(&server.base).await);

    set.master.as_mut().unwrap().kill();
    let killed = Instant::now();
    let (mut saw_outage, mut saw_closed) = (false, false);
    loop {
        let ok = session_store_ok(&server.base).await;
        saw_outage |= !ok;
        let r = call(&client, "execute", echo.clone()).await;
        if text(&r).contains("Rate limits cannot be checked right now") {
            saw_closed = true;
        } else {
            assert_eq!(text(&r), "hi");
        }
        if saw_outage && ok && text(&r) == "hi" {
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "no recovery within 30 s (outage seen: {saw_outage})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "gateway on Sentinel: ready again {:?} after SIGKILL of the master",
        killed.elapsed()
    );
    assert!(saw_outage, "/readyz never reported the outage");
    assert!(
        saw_closed,
        "no call was refused while the limits could not be checked"
    );

    // The write acknowledged (with WAIT 1) before the kill survived the failover.
    let got = call_text(&client, "get_session", json!({"name": "before"})).await;
    assert!(got.contains("kept"), "{got}");
    let after = call_text(&client, "set_session", json!({"name": "after", "value": 1})).await;
    assert!(!after.contains("unavailable"), "{after}");
    server.stop().await;
}
