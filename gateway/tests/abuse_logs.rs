//! Abuse suite, logs: what a caller names (an `execute` key, an MCP tool name) reaches the
//! log cut to a bound (`telemetry::spans::bounded`), and what rmcp logs whole (a malformed
//! or disallowed `Host`, a mismatched `MCP-Protocol-Version`) is cut by the log's writer
//! (`telemetry::bounded_lines`), so no call can write a line the size of its request into
//! the gateway's log. The log is the gateway's own (`telemetry::init_writing_to`).

#[path = "it/mcp_support/mod.rs"]
mod mcp_support;

use mcc_gateway::test_writer::Captured;
use mcp_support::*;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caller_chosen_names_reach_the_log_bounded() {
    if std::env::var_os("MCC_LOG").is_some() {
        eprintln!("SKIPPED: MCC_LOG is set; this test reads the default log filter's lines");
        return;
    }
    let log = Captured::default();
    let writer = log.clone();
    let _telemetry = mcc_gateway::telemetry::init_writing_to(
        mcc_gateway::config::LogFormat::Text,
        &mcc_gateway::config::TracingSettings::default(),
        &tokio::runtime::Handle::current(),
        move || writer.clone(),
    )
    .unwrap();
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

    // What rmcp logs whole when it refuses it: a disallowed or malformed Host, and an
    // initialize whose protocol version is not its MCP-Protocol-Version header's.
    let http = http_client();
    let initialize = |version: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}})
        .to_string()
    };
    let refused = [
        ("host", "h".repeat(60_000), initialize("2025-06-18")),
        (
            "host",
            format!("{}/x", "m".repeat(60_000)),
            initialize("2025-06-18"),
        ),
        (
            "mcp-protocol-version",
            "2025-06-18".into(),
            initialize(&"9".repeat(60_000)),
        ),
    ];
    for (header, value, body) in refused {
        let status = http
            .post(&server.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header(header, &value)
            .body(body)
            .send()
            .await
            .expect("HTTP request")
            .status();
        assert!(status.is_client_error(), "{header}: {status}");
    }
    server.stop().await;

    let lines = log.lines();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let named = |what: &str| lines.iter().any(|l| l.contains(what) && l.contains("kkkk"));
    assert!(named("execute: unknown tool"), "{lines:?}");
    assert!(named("execute completed"), "{lines:?}");
    assert!(named("tool call"), "{lines:?}");
    // Our own lines carry the name cut to 256 bytes.
    let ours: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains("kkkk") && l.len() >= 2048)
        .map(|l| &l[..300])
        .collect();
    assert!(ours.is_empty(), "{ours:?}");
    // rmcp's are cut by the writer, and say so.
    let bound = mcc_gateway::telemetry::bounded_lines::MAX_LINE_BYTES + 64;
    let cut = |what: &str, value: &str| {
        lines.iter().any(|l| {
            l.contains(what) && l.contains(value) && l.ends_with("bytes cut]") && l.len() <= bound
        })
    };
    let starts: Vec<&str> = lines
        .iter()
        .map(|l| mcc_gateway::telemetry::spans::cut(l, 200))
        .collect();
    assert!(cut("rmcp", "hhhhhhhh"), "{starts:?}");
    assert!(cut("rmcp", "mmmmmmmm"), "{starts:?}");
    assert!(cut("rmcp", "99999999"), "{starts:?}");
    let longest = lines.iter().map(|l| l.len()).max().unwrap_or(0);
    assert!(longest <= bound, "a log line of {longest} bytes");
}
