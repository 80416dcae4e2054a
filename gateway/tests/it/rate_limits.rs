//! Rate limits end to end, through real MCP clients: exact across two replicas sharing
//! the test Redis (N calls pass in a window, the N+1th is refused with the delay on
//! either replica, the window ends and calls pass again), the most specific limit
//! applies (tool > group > global) with the in-process counter, and a Redis that cannot
//! answer opens or closes the gate as configured.

use crate::mcp_support;

use std::time::Duration;

use mcc_gateway::config::Settings;
use mcc_gateway::ratelimit::OnStoreError;
use mcp_support::*;
use serde_json::json;

/// The standard tools plus `public.limited` with a limit of its own.
const LIMITED: &str =
    "  - name: limited\n    groups: [public]\n    rate_limit: 1/1hr\n    exec: echo limited\n";

fn with_tools(dir: &std::path::Path, auth: &str, redis: Option<&str>) -> Settings {
    std::fs::create_dir_all(dir.join("tools")).unwrap();
    std::fs::write(
        dir.join("tools").join("tools.yaml"),
        format!("{TOOLS}{LIMITED}"),
    )
    .unwrap();
    settings(dir, auth, redis)
}

fn unique_prefix(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("mcc-test-{name}-{}-{nanos}", std::process::id())
}

async fn echo(client: &Client) -> rmcp::model::CallToolResult {
    call(
        client,
        "execute",
        json!({"key": "public.echo", "params": {"message": "hi"}}),
    )
    .await
}

fn refused(result: &rmcp::model::CallToolResult) -> bool {
    text(result).starts_with("Rate limit exceeded for ")
}

#[tokio::test]
async fn limits_are_exact_across_two_replicas_and_the_window_resets() {
    let prefix = unique_prefix("replicas");
    let window = Duration::from_secs(3);
    let mut servers = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let mut s = settings(dir.path(), "dev-admin", Some(&redis_url()));
        s.session.key_prefix = prefix.clone();
        s.rate_limit.default = Some("3/3s".parse().unwrap());
        servers.push(start_with(s, dir).await);
    }
    let a = stateless(&servers[0].url, TestClient::plain()).await;
    let b = stateless(&servers[1].url, TestClient::plain()).await;

    // Three calls pass, alternating replicas; the fourth is refused on either one.
    let started = std::time::Instant::now();
    for (i, client) in [&a, &b, &a].into_iter().enumerate() {
        let r = echo(client).await;
        assert_eq!(text(&r), "hi", "call {i}");
    }
    let r = echo(&b).await;
    // (On a machine so slow that four calls outlast the window, the refusal cannot be
    // seen: the window has reset, which the end of this test checks anyway.)
    if started.elapsed() < window {
        assert_eq!(r.is_error, Some(true));
        let t = text(&r);
        assert!(
            t.starts_with("Rate limit exceeded for public.echo — retry in ")
                && t.contains("s. (limit 3/3s per caller for this tool)"),
            "{t}"
        );
        assert!(
            refused(&echo(&a).await),
            "the other replica counts the same calls"
        );
    }

    // Past the window, calls pass again.
    tokio::time::sleep(window + Duration::from_millis(200)).await;
    assert_eq!(text(&echo(&a).await), "hi");
    assert_eq!(text(&echo(&b).await), "hi");

    for s in servers {
        s.stop().await;
    }
}

#[tokio::test]
async fn the_tool_then_the_group_then_the_global_limit_applies_in_process() {
    let dir = tempfile::tempdir().unwrap();
    // No Redis: the in-process counter. bob (dev-public) is in groups public and ops.
    let mut s = with_tools(dir.path(), "dev-public", None);
    s.rate_limit = serde_json::from_value(json!({
        "default": "5/1h",
        "groups": {"ops": "2/1h", "public": "4/1h"},
    }))
    .unwrap();
    let server = start_with(s, dir).await;
    let bob = stateless(&server.url, TestClient::plain()).await;

    // public.echo: the strictest of bob's groups (ops, 2/1h) over the global 5/1h.
    assert_eq!(text(&echo(&bob).await), "hi");
    assert_eq!(text(&echo(&bob).await), "hi");
    let r = echo(&bob).await;
    assert!(text(&r).contains("limit 2/1h per caller"), "{}", text(&r));

    // public.limited: its own 1/1hr over the group's limit.
    let limited = json!({"key": "public.limited"});
    assert_eq!(
        call_text(&bob, "execute", limited.clone()).await,
        "limited\n"
    );
    let r = call(&bob, "execute", limited).await;
    assert!(
        refused(&r) && text(&r).contains("limit 1/1h"),
        "{}",
        text(&r)
    );
    assert_eq!(r.is_error, Some(true));
    server.stop().await;

    // alice (dev-admin: admin, osint) is in no limited group: the global limit.
    let dir = tempfile::tempdir().unwrap();
    let mut s = with_tools(dir.path(), "dev-admin", None);
    s.rate_limit.default = Some("3/1h".parse().unwrap());
    s.rate_limit.groups = serde_json::from_value(json!({"ops": "1/1h"})).unwrap();
    let server = start_with(s, dir).await;
    let alice = stateless(&server.url, TestClient::plain()).await;
    for _ in 0..3 {
        assert_eq!(text(&echo(&alice).await), "hi");
    }
    let r = echo(&alice).await;
    assert!(text(&r).contains("limit 3/1h per caller"), "{}", text(&r));
    // Refusals are counted under their own outcome.
    let metrics = server.gateway_shared.metrics.render();
    assert!(
        metrics.contains(r#"mcc_tool_calls_total{tool="public.echo",outcome="rate_limited"} 1"#),
        "{metrics}"
    );
    server.stop().await;
}

/// A Redis URL nothing answers on.
fn dead_redis() -> String {
    format!("redis://127.0.0.1:{}", replica::free_port())
}

#[tokio::test]
async fn redis_down_opens_the_gate_by_default_counted() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path(), "dev-admin", None);
    s.rate_limit.default = Some("1/1h".parse().unwrap());
    s.rate_limit.redis_url = Some(dead_redis());
    let server = start_with(s, dir).await;
    let client = stateless(&server.url, TestClient::plain()).await;
    for _ in 0..3 {
        assert_eq!(text(&echo(&client).await), "hi");
    }
    let metrics = server.gateway_shared.metrics.render();
    assert!(
        metrics.contains(r#"mcc_rate_limit_store_errors_total{on_error="open"} 3"#),
        "{metrics}"
    );
    server.stop().await;
}

#[tokio::test]
async fn redis_down_closes_the_gate_when_configured() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path(), "dev-admin", None);
    s.rate_limit.default = Some("100/1h".parse().unwrap());
    s.rate_limit.redis_url = Some(dead_redis());
    s.rate_limit.on_redis_error = OnStoreError::Closed;
    let server = start_with(s, dir).await;
    let client = stateless(&server.url, TestClient::plain()).await;
    let r = echo(&client).await;
    assert_eq!(r.is_error, Some(true));
    assert!(
        text(&r).contains("Rate limits cannot be checked right now")
            && text(&r).contains("retry in 5s"),
        "{}",
        text(&r)
    );
    // A tool with no limit at all is not refused: nothing to check.
    let whoami = call_text(&client, "whoami", json!({})).await;
    assert!(whoami.contains("alice"), "{whoami}");
    let metrics = server.gateway_shared.metrics.render();
    assert!(
        metrics.contains(r#"mcc_rate_limit_store_errors_total{on_error="closed"} 1"#),
        "{metrics}"
    );
    server.stop().await;
}
