//! The HTTP surface end to end: protocol-correct errors for bad requests, allowed hosts,
//! probes, metrics, hot reload, and a Redis outage with recovery.

use crate::mcp_support;

use std::time::Duration;

use mcp_support::*;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_protocol_errors() {
    let server = start("dev-admin").await;
    let http = mcp_support::http_client();

    // Malformed JSON: 400 with a JSON-RPC parse error.
    let (status, _, msgs) = post(&http, &server.url, None, "{not json".into()).await;
    assert_eq!(status, 400, "{msgs:?}");
    assert_eq!(msgs[0]["error"]["code"], -32700, "{msgs:?}");
    assert_eq!(msgs[0]["id"], Value::Null);

    // JSON that is not a JSON-RPC message: 400 with Invalid Request.
    let (status, _, msgs) = post(&http, &server.url, None, "{\"hello\": 1}".into()).await;
    assert_eq!(status, 400, "{msgs:?}");
    assert_eq!(msgs[0]["error"]["code"], -32600, "{msgs:?}");

    // Unknown method inside a session: JSON-RPC "method not found".
    let sid = raw_initialize(&http, &server.url).await;
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/frobnicate", "params": {}});
    let (_, _, msgs) = post(&http, &server.url, Some(&sid), body.to_string()).await;
    let err = msgs
        .iter()
        .find(|m| m["id"] == 7)
        .unwrap_or_else(|| panic!("no reply: {msgs:?}"));
    assert_eq!(err["error"]["code"], -32601, "{err}");

    // Unknown MCP tool: invalid params, naming it.
    let body = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "nope", "arguments": {}}});
    let (_, _, msgs) = post(&http, &server.url, Some(&sid), body.to_string()).await;
    let err = msgs.iter().find(|m| m["id"] == 8).unwrap();
    assert_eq!(err["error"]["code"], -32602, "{err}");
    assert_eq!(err["error"]["message"], "Unknown tool: nope");

    // A session id nobody issued: 404 (the client must start a new session).
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"});
    let (status, _, _) = post(&http, &server.url, Some("not-a-session"), body.to_string()).await;
    assert_eq!(status, 404);

    // The server is still fine.
    assert_eq!(
        raw_call(
            &http,
            &server.url,
            &sid,
            11,
            "get_session",
            json!({"name": "user"})
        )
        .await,
        "\"alice\""
    );

    // Closing the session: 200, and the id is gone afterwards.
    let closed = http
        .delete(&server.url)
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status().as_u16(), 200);
    let body = json!({"jsonrpc": "2.0", "id": 12, "method": "tools/list"});
    let (status, _, _) = post(&http, &server.url, Some(&sid), body.to_string()).await;
    assert_eq!(status, 404);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_body_limit_and_allowed_hosts_come_from_settings() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path(), "dev-admin", None);
    s.server.max_request_body = 2048;
    s.server.allowed_hosts = vec!["mcc-gateway.mcc.svc".into()];
    s.server.allowed_origins = vec!["https://app.example.com:443".into()];
    let server = start_with(s, dir).await;
    let http = mcp_support::http_client();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    // Loopback is not in the list any more.
    let (status, _, _) = post(&http, &server.url, None, init.to_string()).await;
    assert_eq!(status, 403);
    let resp = http
        .post(&server.url)
        .header("host", "mcc-gateway.mcc.svc")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let foreign = http
        .post(&server.url)
        .header("host", "mcc-gateway.mcc.svc")
        .header("origin", "https://evil.example")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status().as_u16(), 403);
    let resp = http
        .post(&server.url)
        .header("host", "mcc-gateway.mcc.svc")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(format!("{{\"pad\": \"{}\"}}", "x".repeat(4096)))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 413);
    let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert_eq!(body["error"]["code"], -32600, "{body}");
    assert_eq!(body["error"]["message"], "Request body exceeds 2048 bytes");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_and_metrics() {
    let server = start("dev-admin").await;
    let http = mcp_support::http_client();
    let health = http
        .get(format!("{}/healthz", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
    let ready = http
        .get(format!("{}/readyz", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    let detail: Value = serde_json::from_str(&ready.text().await.unwrap()).unwrap();
    assert_eq!(detail["ready"], true);
    assert_eq!(detail["catalog"]["tools"], 5);
    assert_eq!(detail["catalog"]["users"], 3);
    assert_eq!(detail["session_store"]["backend"], "redis");

    let client = legacy(&server.url, TestClient::plain()).await;
    call_text(&client, "search", json!({"query": "echo"})).await;
    call_text(&client, "execute", json!({"key": "admin.shell"})).await;
    client.cancel().await.unwrap();
    let text = http
        .get(format!("{}/metrics", server.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for needle in [
        "mcc_http_requests_total{path=\"/mcp\",status=\"200\"}",
        "mcc_mcp_calls_total{tool=\"search\"} 1",
        "mcc_search_duration_seconds_count 1",
        "mcc_tool_calls_total{tool=\"admin.shell\",outcome=\"invalid\"} 1",
        "mcc_tool_call_duration_seconds_bucket{le=",
    ] {
        assert!(text.contains(needle), "missing {needle}:\n{text}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_file_edits_are_picked_up_and_broken_edits_keep_the_last_good_catalog() {
    let server = start("dev-admin").await;
    let http = mcp_support::http_client();
    let client = stateless(&server.url, TestClient::plain()).await;
    let file = server.tools_file();

    let added = format!(
        "{TOOLS}  - name: fresh\n    groups: [public]\n    description: A tool added while serving.\n    exec: echo fresh\n"
    );
    write_atomically(&file, &added);
    let mut seen = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let d = call_text(&client, "describe_tools", json!({"groups": ["public"]})).await;
        if d.contains("## public.fresh\nA tool added while serving.") {
            seen = true;
            break;
        }
    }
    assert!(seen, "the new tool never appeared");

    // A plain (non-atomic) write: the watcher waits for it to settle.
    std::fs::write(&file, "tools:\n  - name: broken\n    exec: [unclosed\n").unwrap();
    let mut detail = Value::Null;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let r = http
            .get(format!("{}/readyz", server.base))
            .send()
            .await
            .unwrap();
        detail = serde_json::from_str(&r.text().await.unwrap()).unwrap();
        if !detail["catalog"]["last_error"].is_null() {
            break;
        }
    }
    let error = detail["catalog"]["last_error"]
        .as_str()
        .expect("reload error reported");
    assert!(error.contains("tools.yaml"), "{error}");
    assert_eq!(
        detail["ready"], true,
        "the last good catalog is still served"
    );
    let d = call_text(&client, "describe_tools", json!({"groups": ["public"]})).await;
    assert!(d.contains("## public.fresh"), "{d}");
    client.cancel().await.unwrap();
    server.stop().await;
}

/// Writes like an editor: a temporary file renamed over the original.
fn write_atomically(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("yaml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A port nothing listens on yet.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_outage_keeps_catalog_tools_working_and_recovers() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let s = settings(
        dir.path(),
        "dev-admin",
        Some(&format!("redis://127.0.0.1:{port}")),
    );
    let server = start_with(s, dir).await;
    let http = mcp_support::http_client();
    let client = legacy(&server.url, TestClient::plain()).await;

    // Redis is down: catalog tools work, session tools say why they cannot.
    assert!(
        call_text(&client, "whoami", json!({}))
            .await
            .starts_with("username: alice")
    );
    assert!(
        call_text(&client, "search", json!({"query": "echo"}))
            .await
            .starts_with("[")
    );
    assert!(
        call_text(&client, "describe_tools", json!({}))
            .await
            .starts_with("## admin.shell")
    );
    let r = call(&client, "set_session", json!({"name": "x", "value": 1})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(
        text(&r).starts_with("session store unavailable"),
        "{}",
        text(&r)
    );
    // A shared store's outage is reported but does not take this replica out of the
    // Service: every replica would go at once, and calls without sessions still work.
    let ready = http
        .get(format!("{}/readyz", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    let detail: Value = ready.json().await.unwrap();
    assert_eq!(detail["session_store"]["ok"], false);
    assert!(detail["session_store"]["error"].is_string(), "{detail}");

    // Redis comes up: the same gateway recovers without a restart.
    let mut redis = std::process::Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server runs");
    let mut ok = String::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        ok = text(&call(&client, "set_session", json!({"name": "x", "value": 1})).await);
        if ok == "Set 'x'." {
            break;
        }
    }
    assert_eq!(ok, "Set 'x'.");
    assert_eq!(
        call_text(&client, "get_session", json!({"name": "x"})).await,
        "1"
    );
    let ready = http
        .get(format!("{}/readyz", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    client.cancel().await.unwrap();
    server.stop().await;
    let _ = redis.kill();
    let _ = redis.wait();
}
