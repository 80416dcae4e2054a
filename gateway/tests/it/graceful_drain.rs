//! A gateway stopped as the binary stops it on SIGTERM ([`Gateway::serve_draining`], a
//! rolling update): an MCP call running at that moment gets its result (rmcp's sessions
//! end only after the drain), a request arriving on a kept-alive connection during the
//! drain window is answered with `Connection: close`, new connections are refused, and
//! the gateway then returns by itself.

use crate::mcp_support;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use mcp_support::{TestClient, call_text, legacy, settings};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_running_mcp_calls_and_open_connections() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path(), "dev-admin", None);
    let shutdown = CancellationToken::new();
    let gateway = mcc_gateway::app::build(&s, shutdown.clone())
        .await
        .expect("gateway builds");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let served = tokio::spawn(gateway.serve_draining(listener, stop.clone(), shutdown.clone()));

    let client = legacy(&format!("http://{addr}/mcp"), TestClient::plain()).await;
    // A kept-alive connection, used once before the stop.
    let mut kept = std::net::TcpStream::connect(addr).unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let healthz = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    kept.write_all(healthz.as_bytes()).unwrap();
    let mut buf = [0u8; 512];
    let n = kept.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));

    let running = tokio::spawn(async move {
        let text = call_text(
            &client,
            "execute",
            json!({"key": "admin.shell", "params": {"command": "sleep 1.5; echo finished"}}),
        )
        .await;
        (text, client)
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    let stopped = Instant::now();
    stop.cancel();
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Within the window: the open connection is answered, and told to close.
    kept.write_all(healthz.as_bytes()).unwrap();
    let n = kept.read(&mut buf).unwrap();
    let answer = String::from_utf8_lossy(&buf[..n]).to_lowercase();
    assert!(answer.starts_with("http/1.1 200"), "{answer}");
    assert!(answer.contains("connection: close"), "{answer}");
    // No new connection is accepted.
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "a new connection was accepted while draining"
    );

    let (text, _client) = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the running call ends")
        .unwrap();
    assert_eq!(
        text.trim(),
        "finished",
        "the call running at the stop lost its result"
    );
    assert!(!shutdown.is_cancelled() || stopped.elapsed() >= Duration::from_millis(1300));

    tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("the gateway returns after draining")
        .unwrap()
        .unwrap();
    assert!(
        shutdown.is_cancelled(),
        "the sessions' token is cancelled at the end"
    );
    assert!(stopped.elapsed() >= mcc_gateway::drain::WINDOW);
}
