//! The overhead of serving an upstream MCP server's tool through the gateway: the same
//! `echo` tool of `@modelcontextprotocol/server-everything` (npm, streamable HTTP, in a
//! child process) called directly by an rmcp client, and through the gateway
//! (`execute` of `public.ev_echo` over MCP, the gateway proxying `tools/call`), one call
//! at a time, interleaved so both see the same machine. Prints a Markdown table.
//!
//! `cargo bench -p mcc-gateway --bench upstream` (release). `MCC_BENCH_ITERS` sets the
//! calls per series (default 2000). Needs node and npm (the package is installed under
//! `~/.cache/mcc-upstream` as the tests do). The gateway runs in this process (file
//! mode, memory sessions, dev-admin auth); the clients speak the upstream's generation
//! directly (legacy) and 2026-07-28 to the gateway.

#[path = "../tests/it/mcp_support/mod.rs"]
mod mcp_support;
#[path = "../tests/it/upstream_support/mod.rs"]
mod upstream_support;

use std::time::{Duration, Instant};

use mcp_support::*;
use rmcp::model::CallToolRequestParams;
use serde_json::json;
use upstream_support::Everything;

const WARMUP: usize = 200;

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

async fn timed(client: &Client, tool: &str, arguments: serde_json::Value) -> Duration {
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args(arguments));
    let started = Instant::now();
    let r = client.call_tool(params).await.expect("call");
    let elapsed = started.elapsed();
    assert!(text(&r).contains("Echo: bench"), "{}", text(&r));
    elapsed
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let iters: usize = std::env::var("MCC_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let Some(everything) = Everything::start().await else {
        eprintln!("server-everything is not available; nothing measured");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::write(
        tools.join("upstreams.yaml"),
        format!(
            "mcp_servers:\n  - name: everything\n    url: {}\n    groups: [public]\n    prefix: ev_\n    include: [echo]\n",
            everything.url()
        ),
    )
    .unwrap();
    let mut settings = settings(dir.path(), "dev-admin", None);
    settings.audit.stdout = false;
    let server = start_with(settings, dir).await;
    let direct = legacy(&everything.url(), TestClient::plain()).await;
    let gateway = stateless(&server.url, TestClient::plain()).await;
    let via_gateway = json!({"key": "public.ev_echo", "params": {"message": "bench"}});
    let plain = json!({"message": "bench"});
    for _ in 0..WARMUP {
        timed(&direct, "echo", plain.clone()).await;
        timed(&gateway, "execute", via_gateway.clone()).await;
    }
    let mut a = Vec::with_capacity(iters);
    let mut b = Vec::with_capacity(iters);
    for i in 0..iters {
        // Alternate which goes first, so neither always follows the other.
        if i % 2 == 0 {
            a.push(timed(&direct, "echo", plain.clone()).await);
            b.push(timed(&gateway, "execute", via_gateway.clone()).await);
        } else {
            b.push(timed(&gateway, "execute", via_gateway.clone()).await);
            a.push(timed(&direct, "echo", plain.clone()).await);
        }
    }
    a.sort();
    b.sort();
    println!("| series | calls | p50 ms | p90 ms | p99 ms |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (name, s) in [("upstream directly", &a), ("through the gateway", &b)] {
        println!(
            "| {name} | {} | {:.3} | {:.3} | {:.3} |",
            s.len(),
            percentile(s, 0.5),
            percentile(s, 0.9),
            percentile(s, 0.99)
        );
    }
    let overhead = percentile(&b, 0.5) - percentile(&a, 0.5);
    println!(
        "\np50 overhead: {overhead:.3} ms (target: within 0.5 ms) — {}",
        if overhead <= 0.5 { "met" } else { "missed" }
    );
    direct.cancel().await.ok();
    gateway.cancel().await.ok();
    server.stop().await;
    everything.stop().await;
}
