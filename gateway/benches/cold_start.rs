//! Cold start of a real gateway at 10,000 tools: the release `mcc-gateway` binary is
//! started on a generated catalog (200 tool files, one group each, like 200 namespaces;
//! tools varied from the relevance suite's catalog) with the local embedding model and
//! nothing cached, and `/readyz` is polled: the time until it answers 200 (catalog and
//! keyword index ready, serving) and until `search.semantic` is true (every tool embedded,
//! the hybrid index swapped in). Before and after it, in this process and the same run, a
//! bare batched embedding loop of the same texts with the same model (`Embedder::embed`:
//! tokenize, forward, pool; no cache, no index) — the floor the gateway's semantic build
//! is compared with; the two loops bracket the gateway's build, so a change of the
//! machine's load during the run shows as a difference between them. Prints a Markdown
//! report.
//!
//! `cargo bench -p mcc-gateway --bench cold_start` (needs the model:
//! scripts/fetch-model.sh or MCC_TEST_MODEL_DIR). `MCC_BENCH_TOOLS` sets the catalog size
//! (default 10000).

#[path = "../tests/relevance/eval.rs"]
#[allow(dead_code)]
mod eval;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcc_catalog::introspect::Introspector;
use mcc_search::{Embedder, embedding_texts};
use serde_json::Value;

const GROUPS: usize = 200;
const TEAMS: &[&str] = &[
    "payments",
    "search",
    "identity",
    "billing",
    "growth",
    "platform",
    "mobile",
    "data",
    "risk",
    "support",
    "media",
    "ads",
    "logistics",
    "infra",
    "security",
    "ml",
];
const REGIONS: &[&str] = &["eu-west", "us-east", "ap-south", "us-west", "eu-central"];

/// The relevance suite's tool entries (YAML mappings, file-level groups dropped).
fn base_tools() -> Vec<Value> {
    let dir = eval::suite_dir().join("catalog");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|p| {
            let doc: Value = serde_saphyr::from_str(&std::fs::read_to_string(p).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            doc["tools"].as_array().cloned().unwrap_or_default()
        })
        .collect()
}

/// Writes `n` tools as `GROUPS` tool files (JSON, which YAML reads) under `dir`.
fn write_catalog(dir: &Path, n: usize) {
    let base = base_tools();
    std::fs::create_dir_all(dir).unwrap();
    let mut files: Vec<Vec<Value>> = vec![Vec::new(); GROUPS];
    for i in 0..n {
        let mut tool = base[i % base.len()].clone();
        let v = i / base.len();
        let (team, region) = (
            TEAMS[v % TEAMS.len()],
            REGIONS[(v / TEAMS.len()) % REGIONS.len()],
        );
        let name = format!("{}_{v}", tool["name"].as_str().unwrap());
        let description = format!(
            "{} For the {team} team in {region}.",
            tool["description"].as_str().unwrap_or_default()
        );
        tool["name"] = Value::from(name);
        tool["description"] = Value::from(description);
        files[i % GROUPS].push(tool);
    }
    for (g, tools) in files.into_iter().enumerate() {
        let doc = serde_json::json!({"groups": [format!("ns{g:03}")], "tools": tools});
        std::fs::write(dir.join(format!("ns{g:03}.yaml")), doc.to_string()).unwrap();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET /readyz`: status code and JSON body (`None` while not listening).
fn readyz(port: u16) -> Option<(u16, Value)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let status = raw.get(9..12)?.parse().ok()?;
    let body = raw.split("\r\n\r\n").nth(1)?;
    Some((status, serde_json::from_str(body).ok()?))
}

/// A memory field of the child's `/proc/<pid>/status` (`VmRSS:` now, `VmHWM:` its peak),
/// in MB.
fn memory_mb(child: &Child, field: &str) -> f64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

struct Gateway {
    ready_s: f64,
    semantic_s: f64,
    build_s: Option<f64>,
    /// RSS when `/readyz` first answered 200 (model loaded, catalog, keyword index).
    rss_ready_mb: f64,
    /// RSS once the hybrid index is served, and the peak until then.
    rss_mb: f64,
    peak_mb: f64,
}

fn run_gateway(work: &Path, model: &Path, n: usize) -> Gateway {
    let port = free_port();
    let users = work.join("users.yaml");
    std::fs::write(&users, "users:\n  - username: bench\n    groups: [admin]\n").unwrap();
    let settings = work.join("settings.yaml");
    std::fs::write(
        &settings,
        format!(
            "server:\n  port: {port}\nauth: dev-admin\ntools: [{}]\nusers_file: {}\n\
             search:\n  model_dir: {}\n",
            work.join("tools").display(),
            users.display(),
            model.display()
        ),
    )
    .unwrap();
    let log = work.join("gateway.log");
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcc-gateway"))
        .args(["serve", "--config"])
        .arg(&settings)
        .env("MCC_LOG", "info")
        .env_remove("REDIS_URL")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("starting mcc-gateway");
    let mut ready_s = None;
    let mut rss_ready_mb = 0.0;
    let semantic_s = loop {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the gateway exited; see {}",
            log.display()
        );
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "no semantic index after 30 min"
        );
        if let Some((status, body)) = readyz(port) {
            if status == 200 && ready_s.is_none() {
                ready_s = Some(started.elapsed().as_secs_f64());
                rss_ready_mb = memory_mb(&child, "VmRSS:");
                assert_eq!(body["catalog"]["tools"], n, "{body}");
                eprintln!("ready after {:.2} s: {body}", ready_s.unwrap());
            }
            if body["search"]["semantic"] == true {
                break started.elapsed().as_secs_f64();
            }
        }
        std::thread::sleep(Duration::from_millis(if ready_s.is_some() {
            50
        } else {
            5
        }));
    };
    // The semantic build's own clean-up (freed memory handed back) follows the swap.
    std::thread::sleep(Duration::from_millis(500));
    let rss_mb = memory_mb(&child, "VmRSS:");
    let peak_mb = memory_mb(&child, "VmHWM:");
    let _ = child.kill();
    let _ = child.wait();
    // The gateway logs each swap: `search: index swapped in tools=… semantic=true … elapsed_ms=…`.
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let build_s = text
        .lines()
        .filter(|l| l.contains("index swapped in") && l.contains("semantic=true"))
        .find_map(|l| {
            l.split("elapsed_ms=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
        })
        .map(|ms| ms / 1000.0);
    Gateway {
        ready_s: ready_s.unwrap(),
        semantic_s,
        build_s,
        rss_ready_mb,
        rss_mb,
        peak_mb,
    }
}

fn main() {
    // As the gateway's main does: the bare loop and queries run with its thread settings.
    // SAFETY: no other thread exists yet.
    #[cfg(feature = "embed-local")]
    unsafe {
        mcc_search::local::settle_threads()
    };
    let n: usize = std::env::var("MCC_BENCH_TOOLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let model = match eval::model_dir() {
        Ok(d) => d,
        Err(why) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    let work = tempfile::tempdir().unwrap();
    write_catalog(&work.path().join("tools"), n);

    // The same texts the gateway embeds, by the same loader and model, no cache.
    let tools = mcc_catalog::load(
        &[work.path().join("tools").display().to_string()],
        &Introspector::default(),
    )
    .unwrap()
    .tools;
    assert_eq!(tools.len(), n);
    let signatures: Vec<String> = tools.iter().map(mcc_catalog::signature).collect();
    let owned: Vec<String> = tools
        .iter()
        .zip(&signatures)
        .flat_map(|(t, s)| embedding_texts(t, s))
        .collect();
    let texts: Vec<&str> = owned.iter().map(String::as_str).collect();
    let embedder = Embedder::local(&model).unwrap();
    let bare = || {
        let t = Instant::now();
        let vectors = embedder.embed(&texts).unwrap();
        assert_eq!(vectors.len(), texts.len());
        t.elapsed().as_secs_f64()
    };
    let bare_before = bare();
    eprintln!("bare loop before: {bare_before:.2} s");
    let gateway = run_gateway(work.path(), &model, n);
    let bare_after = bare();
    let bare_s = (bare_before + bare_after) / 2.0;
    let chars: usize = texts.iter().map(|t| t.len()).sum();

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "## {n} tools, {} (load average at the end: {})\n",
        chrono::Utc::now().format("%Y-%m-%d %H:%M UTC"),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "Embedded texts: {} (each tool's description and signature), {} characters on average.\n",
        texts.len(),
        chars / texts.len().max(1)
    );
    println!("| measure | seconds |\n| --- | ---: |");
    println!(
        "| gateway start → `/readyz` 200 (catalog + keyword index) | {:.2} |",
        gateway.ready_s
    );
    println!(
        "| gateway start → `search.semantic` true | {:.2} |",
        gateway.semantic_s
    );
    match gateway.build_s {
        Some(b) => println!("| semantic build in the gateway (its log's `elapsed_ms`) | {b:.2} |"),
        None => println!("| semantic build in the gateway | (not in the log) |"),
    }
    println!(
        "| bare batched embedding loop, same texts and model: before / after the gateway | {bare_before:.2} / {bare_after:.2} |"
    );
    let build = gateway
        .build_s
        .unwrap_or(gateway.semantic_s - gateway.ready_s);
    println!(
        "\nsemantic build / mean of the bare loops = {:.3} (target ≤ 1.2)",
        build / bare_s,
    );
    println!(
        "\n| gateway RSS | MB |\n| --- | ---: |\n| at `/readyz` 200 (model loaded, catalog, keyword index) | {:.0} |\n| hybrid index served | {:.0} |\n| peak until then (VmHWM) | {:.0} |",
        gateway.rss_ready_mb, gateway.rss_mb, gateway.peak_mb
    );
}
