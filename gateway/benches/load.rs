//! Load benchmark of the gateway: N concurrent MCP clients (rmcp, over real HTTP) calling
//! `execute` on an echo tool and `search` over a 1,000-tool catalog, next to the floor
//! measured in the same run: a bare `sh -c` spawn at the same concurrency, and the search
//! ranking called in process (keyword ranking: no embedding model is configured here).
//!
//! Run: `cargo bench -p mcc-gateway --bench load` (release build). Knobs:
//! `MCC_BENCH_CLIENTS` (default 8), `MCC_BENCH_CALLS` per client (default 200),
//! `MCC_BENCH_PROTOCOL` = `legacy` | `2026` (default 2026). Prints a Markdown report.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mcc_catalog::Tool;
use mcc_gateway::catalog::{Catalog, LiveCatalog};
use mcc_gateway::config::Settings;
use mcc_search::{Mode, SearchService};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

#[derive(Clone)]
struct BenchClient;

impl ClientHandler for BenchClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mcc-bench", "0"),
        )
    }
}

type Client = RunningService<RoleClient, BenchClient>;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn tool(key: &str, description: &str, command: &str, params: Value) -> Tool {
    serde_json::from_value(json!({
        "key": key, "name": key.rsplit('.').next().unwrap(), "groups": ["public"],
        "description": description, "kind": "exec", "command": command, "params": params
    }))
    .expect("a valid tool")
}

/// An echo tool plus 999 generated tools with varied words, for search.
fn catalog() -> Catalog {
    const WORDS: [&str; 24] = [
        "dns", "lookup", "http", "request", "shell", "command", "file", "read", "write", "archive",
        "compress", "user", "group", "ticket", "search", "index", "metrics", "deploy", "restart",
        "service", "log", "query", "database", "backup",
    ];
    let mut tools = vec![tool(
        "public.echo",
        "Echo a message back.",
        "echo {{ message | quote }}",
        json!([{"name": "message", "type": "str", "required": true, "description": "The text."}]),
    )];
    for i in 1..1000 {
        let a = WORDS[i % WORDS.len()];
        let b = WORDS[(i * 7 + 3) % WORDS.len()];
        let c = WORDS[(i * 13 + 5) % WORDS.len()];
        tools.push(tool(
            &format!("public.{a}_{b}_{i}"),
            &format!("{a} {b} helper number {i}: works with {c} and {b}."),
            "true",
            json!([{"name": c, "type": "str", "description": format!("the {c}")}]),
        ));
    }
    Catalog::new(tools, vec![])
}

#[derive(Default)]
struct Stats {
    latencies: Vec<Duration>,
    wall: Duration,
    errors: usize,
}

impl Stats {
    fn pct(&self, p: f64) -> Duration {
        let mut v = self.latencies.clone();
        v.sort();
        if v.is_empty() {
            return Duration::ZERO;
        }
        v[((v.len() as f64 - 1.0) * p).round() as usize]
    }

    fn row(&self, name: &str) -> String {
        let n = self.latencies.len();
        format!(
            "| {name} | {n} | {:.0} | {:.3} | {:.3} | {} |",
            n as f64 / self.wall.as_secs_f64(),
            self.pct(0.5).as_secs_f64() * 1e3,
            self.pct(0.99).as_secs_f64() * 1e3,
            self.errors
        )
    }
}

/// Runs `calls` operations on each of `clients` concurrent workers.
async fn measure<F, Fut>(clients: usize, calls: usize, op: F) -> Stats
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(calls);
            let mut errors = 0;
            for _ in 0..calls {
                let t = Instant::now();
                if !op(c).await {
                    errors += 1;
                }
                lat.push(t.elapsed());
            }
            (lat, errors)
        }));
    }
    let mut stats = Stats::default();
    for t in tasks {
        let (lat, errors) = t.await.expect("worker");
        stats.latencies.extend(lat);
        stats.errors += errors;
    }
    stats.wall = started.elapsed();
    stats
}

async fn connect(url: &str, legacy: bool) -> Client {
    let transport = StreamableHttpClientTransport::from_uri(url.to_string());
    let lifecycle = if legacy {
        ClientLifecycleMode::Initialize
    } else {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        }
    };
    BenchClient
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .expect("client connects")
}

async fn call(client: &Client, tool: &str, args: Value) -> Option<String> {
    let r = client
        .call_tool(
            CallToolRequestParams::new(tool.to_string())
                .with_arguments(args.as_object().cloned().unwrap()),
        )
        .await
        .ok()?;
    r.content.first()?.as_text().map(|t| t.text.clone())
}

#[tokio::main]
async fn main() {
    let clients = env_usize("MCC_BENCH_CLIENTS", 8);
    let calls = env_usize("MCC_BENCH_CALLS", 200);
    let legacy = std::env::var("MCC_BENCH_PROTOCOL").is_ok_and(|p| p == "legacy");

    let catalog = catalog();
    // The ranking alone, in process (the search target is about this number).
    let mut settings = Settings::default();
    settings.server.port = 0;
    let search = SearchService::new(settings.search_settings().expect("search settings"))
        .expect("search service");
    search
        .rebuild_blocking(catalog.tools())
        .expect("search index");
    let index = search.current();
    let mut direct = Stats::default();
    let t0 = Instant::now();
    for i in 0..500 {
        let q = [
            "dns lookup",
            "restart a service",
            "compress archive files",
            "echo",
        ][i % 4];
        let t = Instant::now();
        let hits = index.search(q, None, Mode::Hybrid, index.allowed_for(None), None, 10);
        std::hint::black_box(hits.expect("search"));
        direct.latencies.push(t.elapsed());
    }
    direct.wall = t0.elapsed();

    let live = Arc::new(LiveCatalog::with_catalog(catalog, vec![], None));
    let shutdown = CancellationToken::new();
    let gateway = mcc_gateway::app::build_with_catalog(&settings, live, search, shutdown.clone())
        .expect("gateway builds");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(gateway.serve(listener, shutdown.clone()));

    let mut pool = Vec::new();
    for _ in 0..clients {
        pool.push(Arc::new(connect(&url, legacy).await));
    }
    let pool = Arc::new(pool);

    // Warm up both paths.
    for c in pool.iter() {
        call(
            c,
            "execute",
            json!({"key": "public.echo", "params": {"message": "hi"}}),
        )
        .await;
        call(c, "search", json!({"query": "dns lookup"})).await;
    }

    let spawn = measure(clients, calls, |_| async {
        tokio::process::Command::new("sh")
            .args(["-c", "echo hello"])
            .output()
            .await
            .is_ok_and(|o| o.status.success() && o.stdout == b"hello\n")
    })
    .await;

    let p = pool.clone();
    let execute = measure(clients, calls, move |c| {
        let p = p.clone();
        async move {
            call(
                &p[c],
                "execute",
                json!({"key": "public.echo", "params": {"message": "hello"}}),
            )
            .await
            .is_some_and(|t| t == "hello\n" || t == "hello")
        }
    })
    .await;

    let p = pool.clone();
    let search = measure(clients, calls, move |c| {
        let p = p.clone();
        async move {
            call(&p[c], "search", json!({"query": "restart a service"}))
                .await
                .is_some_and(|t| t.starts_with('['))
        }
    })
    .await;

    shutdown.cancel();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("## Gateway load benchmark\n");
    println!(
        "{clients} concurrent clients × {calls} calls, protocol {}, {cores} CPU cores, catalog of 1,000 tools, {} build.\n",
        if legacy {
            "legacy (Mcp-Session-Id)"
        } else {
            "2026-07-28 (stateless)"
        },
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    println!("| operation | calls | throughput (/s) | p50 (ms) | p99 (ms) | errors |");
    println!("| --- | --- | --- | --- | --- | --- |");
    println!("{}", spawn.row("bare `sh -c 'echo hello'` spawn (floor)"));
    println!("{}", execute.row("MCP `execute` public.echo"));
    println!("{}", search.row("MCP `search`"));
    println!("{}", direct.row("search ranking in process (1 caller)"));
    let ratio = execute.pct(0.5).as_secs_f64() / spawn.pct(0.5).as_secs_f64();
    println!("\nexecute p50 / spawn p50 = {ratio:.2} (target ≤ 1.3)");
    println!(
        "search ranking p50 = {:.3} ms (target < 1 ms for 1,000 tools)",
        direct.pct(0.5).as_secs_f64() * 1e3
    );
}
