//! Any replica, elicitation included (issue 12, item 8): two real `mcc-gateway serve`
//! processes sharing one Redis. A legacy client calls `execute` without a required
//! parameter on replica A, which asks over the call's SSE stream (`elicitation/create`);
//! the client's answer is POSTed to replica B; the call waiting on A resumes with it.

use crate::mcp_support;

use std::time::Duration;

use mcp_support::replica::*;
use mcp_support::*;
use serde_json::{Value, json};

/// The legacy handshake, declaring elicitation; returns the session id. (Also used by
/// `approval`'s cross-replica test.)
pub(crate) async fn initialize_eliciting(http: &reqwest::Client, url: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let (status, sid, msgs) = post(http, url, None, init.to_string()).await;
    assert_eq!(status, 200, "{msgs:?}");
    let sid = sid.expect("initialize returns Mcp-Session-Id");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = post(http, url, Some(&sid), note.to_string()).await;
    assert_eq!(status, 202);
    sid
}

/// POSTs the legacy `tools/call` `call` in session `sid` to `url`, accepting SSE: the
/// response is the call's stream (questions, then the reply). Asserts it opened.
pub(crate) async fn legacy_call(
    http: &reqwest::Client,
    url: &str,
    sid: &str,
    call: &Value,
) -> reqwest::Response {
    let stream = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", sid)
        .header("mcp-protocol-version", "2025-06-18")
        .body(call.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    stream
}

/// Reads SSE `data:` messages from `resp` until one satisfies `want`.
pub(crate) async fn next_message(
    resp: &mut reqwest::Response,
    buffer: &mut String,
    want: impl Fn(&Value) -> bool,
) -> Value {
    loop {
        while let Some(end) = buffer.find('\n') {
            let line: String = buffer.drain(..=end).collect();
            if let Some(data) = line.trim_end().strip_prefix("data:")
                && let Ok(message) = serde_json::from_str::<Value>(data.trim())
                && want(&message)
            {
                return message;
            }
        }
        let chunk = resp
            .chunk()
            .await
            .expect("the call's stream stays readable")
            .expect("the call's stream ended before the expected message");
        buffer.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elicitation_answer_sent_to_another_replica_resumes_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let a = spawn_replica(dir.path()).await;
    let b = spawn_replica(dir.path()).await;
    let http = mcp_support::http_client();
    let sid = initialize_eliciting(&http, &a.url).await;

    let flow = async {
        // The call on A: `message` is missing, so A asks on this call's stream.
        let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "execute", "arguments": {"key": "public.echo"}}});
        let mut stream = legacy_call(&http, &a.url, &sid, &call).await;
        let mut buffer = String::new();
        let question = next_message(&mut stream, &mut buffer, |m| {
            m["method"] == "elicitation/create"
        })
        .await;
        assert_eq!(
            question["params"]["message"],
            "Tool 'public.echo' requires: message (str)"
        );

        // The answer goes to B.
        let answer = json!({"jsonrpc": "2.0", "id": question["id"], "result": {
            "action": "accept", "content": {"message": "answered via B"}}});
        let (status, _, msgs) = post(&http, &b.url, Some(&sid), answer.to_string()).await;
        assert_eq!(status, 202, "{msgs:?}");

        // The call on A resumes with it.
        let reply = next_message(&mut stream, &mut buffer, |m| m["id"] == json!(7)).await;
        reply["result"]["content"][0]["text"].clone()
    };
    let text = tokio::time::timeout(Duration::from_secs(30), flow)
        .await
        .expect("the call on A resumed within 30 s (the question's own timeout is 300 s)");
    assert_eq!(text, json!("answered via B"));
}
