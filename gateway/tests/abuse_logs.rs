//! Abuse suite, logs: what a caller names (an `execute` key, an MCP tool name) reaches the
//! log cut to a bound (`telemetry::spans::bounded`), so no call can write a line the size
//! of its request body into the gateway's log.

mod mcp_support;

use std::sync::{Arc, Mutex};

use mcp_support::*;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

/// The log, as written (clones share it).
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Log {
    type Writer = Log;
    fn make_writer(&'a self) -> Log {
        self.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caller_chosen_names_reach_the_log_bounded() {
    let log = Log::default();
    tracing_subscriber::fmt()
        .with_writer(log.clone())
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .init();
    let dir = tempfile::tempdir().unwrap();
    let server = start_with(settings(dir.path(), "dev-admin", None), dir).await;
    let client = stateless(&server.url, TestClient::plain()).await;

    let long = format!("{}é", "k".repeat(100_000));
    let answer = call_text(&client, "execute", json!({"key": long})).await;
    assert!(answer.starts_with("Unknown tool"), "{}", &answer[..80]);
    // An MCP tool that does not exist: refused, and its name logged.
    let refused = client
        .call_tool(CallToolRequestParams::new(long.clone()))
        .await;
    assert!(
        refused.is_err() || refused.as_ref().is_ok_and(|r| r.is_error == Some(true)),
        "{refused:?}"
    );
    server.stop().await;

    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let named = |what: &str| lines.iter().any(|l| l.contains(what) && l.contains("kkkk"));
    assert!(named("execute: unknown tool"), "{lines:?}");
    assert!(named("execute completed"), "{lines:?}");
    assert!(named("tool call"), "{lines:?}");
    let longest = lines.iter().map(|l| l.len()).max().unwrap_or(0);
    let long_lines: Vec<&str> = lines
        .iter()
        .filter(|l| l.len() >= 2048)
        .map(|l| &l[..300])
        .collect();
    assert!(
        longest < 2048,
        "a log line of {longest} bytes: {long_lines:?}"
    );
}
