//! Resuming a broken SSE stream on another replica (issue 34): two real
//! `mcc-gateway serve` processes sharing one Redis, and a real rmcp legacy client behind a
//! TCP proxy. The client's call runs on replica A; the proxy then cuts every connection
//! and sends new ones to replica B, so the client's automatic reconnect
//! (`GET /mcp` with `Last-Event-ID`) lands on B, which must deliver the result of the call
//! still running on A. Raw HTTP checks that another session's event id replays nothing.

use crate::mcp_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_support::replica::*;
use mcp_support::*;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A TCP proxy whose backend can be switched, cutting the connections it carries.
struct Proxy {
    port: u16,
    backend: Arc<Mutex<u16>>,
    carried: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(backend: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let backend = Arc::new(Mutex::new(backend));
        let carried: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (to, held) = (backend.clone(), carried.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let target = *to.lock().unwrap();
                let task = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(("127.0.0.1", target)).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                held.lock().unwrap().push(task);
            }
        });
        Self {
            port,
            backend,
            carried,
        }
    }

    /// New connections go to `backend`; every connection carried so far is cut.
    fn switch_to(&self, backend: u16) {
        *self.backend.lock().unwrap() = backend;
        for task in self.carried.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_stream_breaks_is_resumed_on_another_replica() {
    let dir = tempfile::tempdir().unwrap();
    let a = spawn_replica(dir.path()).await;
    let b = spawn_replica(dir.path()).await;
    let proxy = Proxy::start(a.port).await;
    let client = legacy(
        &format!("http://127.0.0.1:{}/mcp", proxy.port),
        TestClient::plain(),
    )
    .await;

    let call = tokio::spawn(async move {
        let text = call_text(
            &client,
            "execute",
            json!({"key": "admin.shell", "params": {"command": "sleep 2; echo resumed-on-b"}}),
        )
        .await;
        (client, text)
    });
    // The call is running on A (its stream is open) when every connection to A breaks.
    tokio::time::sleep(Duration::from_millis(700)).await;
    proxy.switch_to(b.port);

    let (client, text) = tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .expect("the call's result reaches the client through replica B")
        .unwrap();
    assert!(text.contains("resumed-on-b"), "{text}");
    client.cancel().await.unwrap();
    drop(a);
}

/// The first event (`id:` line) of a legacy call's SSE stream, read from a raw POST whose
/// connection is then dropped.
async fn first_event_id(http: &reqwest::Client, url: &str, sid: &str, call: &Value) -> String {
    let mut resp = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", sid)
        .header("mcp-protocol-version", "2025-06-18")
        .body(call.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut text = String::new();
    loop {
        if let Some(line) = text.lines().find_map(|l| l.strip_prefix("id:")) {
            return line.trim().to_string();
        }
        let chunk = resp
            .chunk()
            .await
            .unwrap()
            .expect("the stream has an event");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
}

/// `GET /mcp` with `Last-Event-ID`: the whole resumed stream's text.
async fn resume(http: &reqwest::Client, url: &str, sid: &str, last: &str) -> String {
    let resp = http
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", sid)
        .header("mcp-protocol-version", "2025-06-18")
        .header("last-event-id", last)
        .timeout(Duration::from_secs(15))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    resp.text().await.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_resumes_only_in_its_own_session() {
    let dir = tempfile::tempdir().unwrap();
    let a = spawn_replica(dir.path()).await;
    let b = spawn_replica(dir.path()).await;
    let http = http_client();
    let sid = raw_initialize(&http, &a.url).await;
    let other = raw_initialize(&http, &b.url).await;
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "execute",
        "arguments": {"key": "admin.shell", "params": {"command": "sleep 1; echo kept"}}}});
    let last = first_event_id(&http, &a.url, &sid, &call).await;

    // The same user's other session gets nothing of this stream, on either replica.
    for url in [&a.url, &b.url] {
        let stolen = resume(&http, url, &other, &last).await;
        assert!(!stolen.contains("kept"), "{stolen}");
    }
    // Its own session gets the result on B, while and after the call runs on A.
    for _ in 0..2 {
        let replayed = resume(&http, &b.url, &sid, &last).await;
        assert!(replayed.contains("kept"), "{replayed}");
        assert!(replayed.contains("\"id\":7"), "{replayed}");
    }
    // Resuming after the answer itself: the stream is over, and says so at once.
    let replayed = resume(&http, &b.url, &sid, &last).await;
    let answer_id = replayed
        .split("\n\n")
        .find(|event| event.contains("\"id\":7"))
        .and_then(|event| event.lines().find_map(|l| l.strip_prefix("id:")))
        .expect("the answer has an event id")
        .trim()
        .to_string();
    let after = tokio::time::timeout(
        Duration::from_secs(5),
        resume(&http, &b.url, &sid, &answer_id),
    )
    .await
    .expect("a resume after the answer ends at once");
    assert!(!after.contains("data:"), "{after}");
    // An id that is not one of ours replays nothing (and is not an error).
    assert!(!resume(&http, &b.url, &sid, "3/17").await.contains("data:"));
}
