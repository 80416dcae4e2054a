//! Abuse suite, metrics (issue 12, item 5): a real `mcc-gateway serve` process.
//!
//! - `execute` with keys that are not in the catalog (random ones, one carrying a quote and
//!   newlines meant to inject lines) counts them all as one `unknown` series: `/metrics`
//!   neither grows with them nor lists them, and stays valid text;
//! - with `metrics.port`, `/metrics` is served there only (404 on the MCP port); with
//!   `metrics.token`, only to `Authorization: Bearer <token>`.

use crate::abuse_support;
use crate::mcp_support;

use abuse_support::*;
use mcp_support::replica::free_port;
use mcp_support::*;
use serde_json::json;

const TOKEN: &str = "scrape-token-for-the-abuse-suite";

async fn get(url: String, token: Option<&str>) -> (u16, String) {
    let mut req = mcp_support::http_client().get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_cannot_be_inflated_injected_or_read_without_the_credential() {
    let dir = tempfile::tempdir().unwrap();
    settings(dir.path(), "dev-admin", None);
    let metrics_port = free_port();
    let gw = spawn(
        dir.path(),
        &[
            ("MCC_METRICS__PORT", metrics_port.to_string()),
            ("MCC_METRICS__TOKEN", TOKEN.to_string()),
        ],
    )
    .await;
    let metrics_url = format!("http://127.0.0.1:{metrics_port}/metrics");

    let http = mcp_support::http_client();
    let sid = raw_initialize(&http, &gw.url).await;
    let hostile = "x\"} 1\nmcc_injected_total 9\n# EOF\n";
    let mut keys: Vec<String> = (0..200).map(|i| format!("random.key{i}")).collect();
    keys.push(hostile.to_string());
    for (i, key) in keys.iter().enumerate() {
        let t = raw_call(
            &http,
            &gw.url,
            &sid,
            10 + i as u64,
            "execute",
            json!({"key": key}),
        )
        .await;
        assert!(t.starts_with("Unknown tool"), "{t}");
    }
    let ok = raw_call(
        &http,
        &gw.url,
        &sid,
        5,
        "execute",
        json!({"key": "public.echo", "params": {"message": "hi"}}),
    )
    .await;
    assert_eq!(ok, "hi");

    // Not on the MCP port; on the metrics port only with the token.
    assert_eq!(
        get(format!("{}/metrics", gw.base), Some(TOKEN)).await.0,
        404
    );
    assert_eq!(get(metrics_url.clone(), None).await.0, 401);
    assert_eq!(get(metrics_url.clone(), Some("wrong")).await.0, 401);
    let (status, text) = get(metrics_url, Some(TOKEN)).await;
    assert_eq!(status, 200);

    assert!(
        text.contains("mcc_tool_calls_total{tool=\"unknown\",outcome=\"unknown\"} 201"),
        "{text}"
    );
    assert!(
        text.contains("mcc_tool_calls_total{tool=\"public.echo\",outcome=\"success\"} 1"),
        "{text}"
    );
    assert!(
        !text.contains("random.key"),
        "attempted keys are listed:\n{text}"
    );
    assert!(
        !text.contains("mcc_injected"),
        "a line was injected:\n{text}"
    );
    let series = text
        .lines()
        .filter(|l| l.starts_with("mcc_tool_calls_total{"))
        .count();
    assert_eq!(series, 2, "{text}");
    // Every sample line is `name{labels} value` or `name value`; one `# EOF`, at the end.
    assert_eq!(text.matches("# EOF").count(), 1);
    assert!(text.trim_end().ends_with("# EOF"));
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        assert!(line.starts_with("mcc_"), "foreign line {line:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_guards_metrics_on_the_mcp_port() {
    let dir = tempfile::tempdir().unwrap();
    settings(dir.path(), "dev-admin", None);
    let gw = spawn(dir.path(), &[("MCC_METRICS__TOKEN", TOKEN.to_string())]).await;
    let url = format!("{}/metrics", gw.base);
    assert_eq!(get(url.clone(), None).await.0, 401);
    let (status, text) = get(url, Some(TOKEN)).await;
    assert_eq!(status, 200);
    assert!(text.contains("mcc_http_requests_total"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_port_must_differ_from_the_server_port() {
    let port = free_port();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcc-gateway"))
        .arg("serve")
        .env("MCC_SERVER__PORT", port.to_string())
        .env("MCC_METRICS__PORT", port.to_string())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("metrics.port"), "{err}");
}
