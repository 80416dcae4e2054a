//! Abuse suite, hostile search (issue 12, item 4): a real `mcc-gateway serve` process.
//!
//! - a query over `search.max_query_bytes` is refused at once with a message naming the
//!   setting, and costs no memory;
//! - queries at the limit built to be expensive (distinct long words: two-edit fuzzy
//!   expansions per word and field) finish quickly, run off the async workers (a probe
//!   answers meanwhile) and leave the process's RSS near its baseline.
//!
//! Run with `--nocapture` to see the measured times and RSS.

use crate::abuse_support;
use crate::mcp_support;

use std::time::{Duration, Instant};

use abuse_support::*;
use mcp_support::*;
use serde_json::json;

/// `n` bytes of distinct pseudo-random lowercase words of 6–9 letters.
fn hostile_query(n: usize) -> String {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = String::with_capacity(n);
    while out.len() < n {
        let len = 6 + (next() % 4) as usize;
        for _ in 0..len {
            out.push((b'a' + (next() % 26) as u8) as char);
        }
        out.push(' ');
    }
    out.truncate(n);
    out
}

async fn search(http: &reqwest::Client, url: &str, sid: &str, id: u64, query: &str) -> String {
    raw_call(http, url, sid, id, "search", json!({ "query": query })).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_queries_are_bounded_in_time_and_memory() {
    hostile_queries(&[], "keyword-only").await;
}

/// The same with the local embedding model (`scripts/fetch-model.sh`), when present:
/// query embeddings run off the async workers too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_queries_with_embeddings_are_bounded_too() {
    let Some(home) = std::env::var_os("HOME") else {
        return;
    };
    let cache = std::path::Path::new(&home).join(".cache/mcc/models");
    if !cache.join("all-MiniLM-L6-v2/model.safetensors").is_file() {
        eprintln!(
            "SKIP: no model in {} (scripts/fetch-model.sh)",
            cache.display()
        );
        return;
    }
    let cache = cache.display().to_string();
    hostile_queries(&[("MCC_MODEL_CACHE", cache)], "hybrid").await;
}

async fn hostile_queries(env: &[(&str, String)], mode: &str) {
    let dir = tempfile::tempdir().unwrap();
    settings(dir.path(), "dev-admin", None);
    let gw = spawn(dir.path(), env).await;
    if mode == "hybrid" {
        // Compare hybrid with hybrid: the first answers are keyword-only until then.
        gw.wait_for_semantic().await;
    }
    let http = mcp_support::http_client();
    let sid = raw_initialize(&http, &gw.url).await;
    let warm = search(&http, &gw.url, &sid, 1, "echo a message").await;
    assert!(warm.contains("public.echo"), "{warm}");
    let baseline = gw.rss_kib();

    // Over the limit: refused before any work, naming the setting.
    let huge = hostile_query(3_000_000);
    let started = Instant::now();
    let refused = search(&http, &gw.url, &sid, 2, &huge).await;
    let refused_in = started.elapsed();
    assert!(refused.contains("search.max_query_bytes"), "{refused}");
    assert!(refused.contains("3000000 bytes"), "{refused}");
    assert!(refused_in < Duration::from_secs(3), "{refused_in:?}");
    drop(huge);

    // At the limit (2048 bytes, the default), eight at once; a probe answers meanwhile.
    let query = hostile_query(2048);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..8u64 {
        let (http, url, sid, q) = (http.clone(), gw.url.clone(), sid.clone(), query.clone());
        tasks.push(tokio::spawn(async move {
            let t = Instant::now();
            let out = search(&http, &url, &sid, 10 + i, &q).await;
            (out, t.elapsed())
        }));
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let probe = Instant::now();
    let healthz = http
        .get(format!("{}/healthz", gw.base))
        .send()
        .await
        .unwrap();
    let probe_in = probe.elapsed();
    assert!(healthz.status().is_success());
    let mut slowest = Duration::ZERO;
    for t in tasks {
        let (out, took) = t.await.unwrap();
        assert!(!out.contains("Search failed"), "{out}");
        slowest = slowest.max(took);
    }
    let all_in = started.elapsed();
    let after = gw.rss_kib();
    println!(
        "{mode}: refused 3 MB query in {refused_in:?}; 8 concurrent 2 KiB hostile queries: slowest \
         {slowest:?}, all {all_in:?}; /healthz meanwhile {probe_in:?}; RSS baseline {baseline} \
         KiB, after {after} KiB"
    );
    assert!(probe_in < Duration::from_secs(1), "{probe_in:?}");
    assert!(slowest < Duration::from_secs(30), "{slowest:?}");
    // Near the baseline: well under what one oversized query used to leave (GBs).
    assert!(
        after < baseline + 64 * 1024,
        "RSS grew from {baseline} KiB to {after} KiB"
    );

    // A normal query still works, with the same result as before.
    assert_eq!(
        search(&http, &gw.url, &sid, 99, "echo a message").await,
        warm
    );
}
