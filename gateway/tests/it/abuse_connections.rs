//! Abuse suite, slow and half-open clients (issue 12, item 4): a real `mcc-gateway serve`
//! process with short timeouts (1 s header read, 1 s body read, 2 s request).
//!
//! - a connection that sends nothing, trickles its headers, or idles after a response is
//!   closed by the header read timeout, and many of them do not stop others being served;
//! - a stalled request body and a request that runs past the request timeout are answered
//!   408;
//! - an open SSE stream outlives both timeouts.

use crate::abuse_support;
use crate::mcp_support;

use std::time::{Duration, Instant};

use abuse_support::*;
use mcp_support::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TOOLS_SLOW: &str = r#"
tools:
  - name: slow
    groups: [public]
    description: Sleep past the request timeout.
    exec: sleep 4; echo slept
  - name: echo
    groups: [public]
    description: Echo a message back.
    params:
      - name: message
        type: str
        required: true
    exec: printf '%s' {{ message | quote }}
"#;

async fn start() -> (tempfile::TempDir, Gateway) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("tools")).unwrap();
    std::fs::write(dir.path().join("tools/tools.yaml"), TOOLS_SLOW).unwrap();
    settings(dir.path(), "dev-admin", None);
    let gw = spawn(
        dir.path(),
        &[
            ("MCC_CONNECTIONS__HEADER_READ_TIMEOUT_SECS", "1".into()),
            ("MCC_CONNECTIONS__BODY_READ_TIMEOUT_SECS", "1".into()),
            ("MCC_CONNECTIONS__REQUEST_TIMEOUT_SECS", "2".into()),
        ],
    )
    .await;
    (dir, gw)
}

/// Reads until the server closes the connection; returns what it sent and when it closed.
async fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (String, Duration) {
    let started = Instant::now();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(limit, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the connection was still open after {limit:?}"),
        }
    }
    (
        String::from_utf8_lossy(&out).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_half_open_clients_are_disconnected() {
    let (_dir, gw) = start().await;
    let addr = format!("127.0.0.1:{}", gw.port);

    // 200 connections that send nothing; others are served meanwhile.
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(&addr).await.unwrap());
    }
    let t = Instant::now();
    let ok = mcp_support::http_client()
        .get(format!("{}/healthz", gw.base))
        .send()
        .await
        .unwrap();
    assert!(ok.status().is_success());
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    for s in idle.iter_mut() {
        let (_, closed_in) = read_until_closed(s, Duration::from_secs(5)).await;
        assert!(closed_in < Duration::from_secs(3), "{closed_in:?}");
    }

    // Headers trickled a byte every 200 ms: closed although bytes keep coming.
    let mut slow = TcpStream::connect(&addr).await.unwrap();
    let started = Instant::now();
    let request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let mut closed = false;
    for b in request.iter() {
        if slow.write_all(&[*b]).await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        if started.elapsed() > Duration::from_secs(4) {
            break;
        }
    }
    if !closed {
        let (answer, _) = read_until_closed(&mut slow, Duration::from_secs(3)).await;
        assert!(!answer.contains("200 OK"), "{answer}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // Idle after a response (keep-alive): closed by the same timer.
    let mut keep = TcpStream::connect(&addr).await.unwrap();
    keep.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let (answer, closed_in) = read_until_closed(&mut keep, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(closed_in < Duration::from_secs(3), "{closed_in:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_bodies_and_long_requests_time_out_but_sse_streams_stay() {
    let (_dir, gw) = start().await;
    let addr = format!("127.0.0.1:{}", gw.port);
    let http = mcp_support::http_client();
    let sid = raw_initialize(&http, &gw.url).await;

    // A body that stops half-way.
    let mut stalled = TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Session-Id: {sid}\r\n\
         Mcp-Protocol-Version: 2025-06-18\r\nContent-Length: 1000\r\n\r\n{{\"jsonrpc\""
    );
    stalled.write_all(head.as_bytes()).await.unwrap();
    let (answer, closed_in) = read_until_closed(&mut stalled, Duration::from_secs(6)).await;
    assert!(closed_in < Duration::from_secs(4), "{closed_in:?}");
    assert!(!answer.contains(" 200 "), "{answer}");

    // A call that runs past the request timeout (2 s) is answered 408 (a 2026-07-28
    // request without a progressToken: its answer is one JSON body, not a stream; rmcp's
    // client always sends a token, which makes the answer a stream: docs/mcp.md#progress).
    let started = Instant::now();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "execute", "arguments": {"key": "public.slow"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let answer = modern_execute(&http, &gw.url, &body).send().await.unwrap();
    assert_eq!(answer.status().as_u16(), 408);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );

    // An SSE stream outlives the header read, body read and request timeouts.
    let mut sse = http
        .get(&gw.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(sse.status().as_u16(), 200);
    let open_until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < open_until {
        match tokio::time::timeout_at(open_until.into(), sse.chunk()).await {
            Err(_) => break, // still open, nothing to say
            Ok(Ok(Some(_))) => continue,
            Ok(other) => panic!("the SSE stream ended: {other:?}"),
        }
    }
    // And the session still works.
    let echoed = raw_call(
        &http,
        &gw.url,
        &sid,
        8,
        "execute",
        json!({"key": "public.echo", "params": {"message": "still here"}}),
    )
    .await;
    assert_eq!(echoed, "still here");
}

async fn initialize(http: &reqwest::Client, url: &str) -> (u16, Option<String>, String) {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let (status, sid, msgs) = post(http, url, None, init.to_string()).await;
    (status, sid, format!("{msgs:?}"))
}

async fn open_stream(http: &reqwest::Client, url: &str, sid: &str) -> reqwest::Response {
    http.get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", sid)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sessions_and_sse_streams_are_capped_per_caller() {
    let dir = tempfile::tempdir().unwrap();
    settings(dir.path(), "dev-admin", None);
    let gw = spawn(
        dir.path(),
        &[
            (
                "MCC_CONNECTIONS__MAX_LEGACY_SESSIONS_PER_CALLER",
                "3".into(),
            ),
            ("MCC_CONNECTIONS__MAX_SSE_STREAMS_PER_CALLER", "2".into()),
        ],
    )
    .await;
    let http = mcp_support::http_client();
    let mut sids = Vec::new();
    for _ in 0..3 {
        sids.push(raw_initialize(&http, &gw.url).await);
    }
    let (status, sid, body) = initialize(&http, &gw.url).await;
    assert_eq!(status, 429, "{body}");
    assert!(sid.is_none());
    assert!(
        body.contains("connections.max_legacy_sessions_per_caller"),
        "{body}"
    );
    // Closing one makes room.
    let closed = http
        .delete(&gw.url)
        .header("mcp-session-id", &sids[0])
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert!(closed.status().is_success(), "{}", closed.status());
    let fresh = raw_initialize(&http, &gw.url).await;

    // Two streams open, the third is refused; closing one makes room.
    let first = open_stream(&http, &gw.url, &sids[1]).await;
    let second = open_stream(&http, &gw.url, &sids[2]).await;
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    let third = open_stream(&http, &gw.url, &fresh).await;
    assert_eq!(third.status().as_u16(), 429);
    let text = third.text().await.unwrap();
    assert!(
        text.contains("connections.max_sse_streams_per_caller"),
        "{text}"
    );
    drop(first);
    let mut reopened = None;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let r = open_stream(&http, &gw.url, &fresh).await;
        if r.status().as_u16() == 200 {
            reopened = Some(r);
            break;
        }
    }
    assert!(reopened.is_some(), "a closed stream's slot was never freed");
    // Calls are not streams that count against GETs: still served.
    let echoed = raw_call(
        &http,
        &gw.url,
        &fresh,
        3,
        "execute",
        json!({"key": "public.echo", "params": {"message": "ok"}}),
    )
    .await;
    assert_eq!(echoed, "ok");
    drop(second);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_legacy_sessions_expire_with_the_session_ttl() {
    let dir = tempfile::tempdir().unwrap();
    settings(dir.path(), "dev-admin", None);
    let gw = spawn(dir.path(), &[("MCC_SESSION__TTL_SECS", "2".into())]).await;
    let http = mcp_support::http_client();
    let sid = raw_initialize(&http, &gw.url).await;
    // Used within the TTL: kept.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let t = raw_call(&http, &gw.url, &sid, 2, "whoami", json!({})).await;
    assert!(t.starts_with("username: alice"), "{t}");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let t = raw_call(&http, &gw.url, &sid, 3, "whoami", json!({})).await;
    assert!(t.starts_with("username: alice"), "{t}");
    // Idle longer than the TTL: gone.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "whoami", "arguments": {}}});
    let (status, _, msgs) = post(&http, &gw.url, Some(&sid), body.to_string()).await;
    assert_eq!(status, 404, "{msgs:?}");
}
