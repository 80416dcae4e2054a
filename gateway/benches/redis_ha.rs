//! Failover of the session store, measured: real `redis-server` processes on loopback
//! ports (a master, two replicas and three sentinels; a three-master/three-replica
//! Cluster), one client writing session variables in a loop through the gateway's
//! session store and reading each back, and the master holding the bucket killed with
//! SIGKILL mid-run. Per run: acknowledged writes, lost acknowledged writes (a variable
//! whose final value is older than a write that was acknowledged), failed calls, and the
//! time from the kill to the next acknowledged write. With and without
//! `session.redis_wait_replicas: 1` (`WAIT 1` before a write is acknowledged).
//!
//! `cargo bench -p mcc-gateway --bench redis_ha` (`MCC_BENCH_RUNS`, default 3 per
//! case; `MCC_BENCH_ONLY=sentinel` or `cluster` for one deployment). The figures are failover times, not CPU work: a debug build
//! (`cargo test -p mcc-gateway --bench redis_ha`) gives the same. Prints Markdown.

#[path = "../tests/it/redis_support/mod.rs"]
mod redis_support;

use std::time::{Duration, Instant};

use mcc_gateway::session::{Scope, SessionBackend, SessionSettings, SessionStore};
use redis_support::{ClusterSet, SentinelSet};
use serde_json::json;

/// Variables the writer cycles through (one bucket: one key, one slot).
const FIELDS: u64 = 50;
/// Writes before the kill, and how long to keep writing after recovery.
const BEFORE_KILL: Duration = Duration::from_millis(1500);
const AFTER_RECOVERY: Duration = Duration::from_millis(1500);

#[derive(Default)]
struct Run {
    acknowledged: u64,
    lost: u64,
    failed: u64,
    /// None: no write was acknowledged within [`GIVE_UP`] of the kill.
    recovery: Option<Duration>,
}

/// How long a run waits for an acknowledged write after the kill. A Cluster master has
/// one replica here: once it is promoted, `WAIT 1` finds no replica and refuses every
/// write to its slots (fail closed) until one is added.
const GIVE_UP: Duration = Duration::from_secs(15);

async fn run(url: &str, wait_replicas: u32, kill: impl FnOnce(&str)) -> Run {
    let store = SessionStore::from_settings(&SessionSettings {
        backend: SessionBackend::Redis,
        redis_url: Some(url.to_string()),
        key_prefix: "bench".into(),
        timeout_ms: 1000,
        redis_wait_replicas: wait_replicas,
        redis_wait_timeout_ms: 900,
        ..SessionSettings::default()
    })
    .expect("settings are valid");
    let scope = Scope::default_for("bench-writer");
    let mut last_acked = vec![0u64; FIELDS as usize];
    let mut out = Run::default();
    let start = Instant::now();
    let mut killed: Option<(Instant, Option<Duration>)> = None;
    let mut kill = Some(kill);
    let mut i = 0u64;
    loop {
        i += 1;
        let field = (i % FIELDS) as usize;
        match store.set(&scope, &format!("v{field}"), json!(i)).await {
            Ok(()) => {
                out.acknowledged += 1;
                last_acked[field] = i;
                // Read it back (the loop's read), as a client would.
                if store.get(&scope, &format!("v{field}")).await.is_err() {
                    out.failed += 1;
                }
                if let Some((at, recovered @ None)) = &mut killed {
                    *recovered = Some(at.elapsed());
                }
            }
            Err(e) => {
                out.failed += 1;
                if out.failed <= 2 {
                    eprintln!("  write {i} failed: {e}");
                }
            }
        }
        if kill.is_some() && start.elapsed() >= BEFORE_KILL {
            (kill.take().unwrap())(&scope.key("bench"));
            killed = Some((Instant::now(), None));
        }
        match killed {
            Some((at, Some(r))) if at.elapsed() >= r + AFTER_RECOVERY => {
                out.recovery = Some(r);
                break;
            }
            Some((at, None)) if at.elapsed() > GIVE_UP => break,
            _ => {}
        }
    }
    let vars = store.vars(&scope).await.expect("readable after recovery");
    for (field, acked) in last_acked.iter().enumerate() {
        let stored = vars
            .get(&format!("v{field}"))
            .and_then(|v| v.as_u64())
            .unwrap_or(0);
        if stored < *acked {
            // Every acknowledged write of this variable after the stored one is lost.
            out.lost += (stored + 1..=*acked)
                .filter(|n| n % FIELDS == field as u64)
                .count() as u64;
        }
    }
    out
}

fn row(deployment: &str, wait: u32, runs: &[Run]) -> String {
    let sum = |f: fn(&Run) -> u64| runs.iter().map(f).sum::<u64>();
    let recoveries: Vec<String> = runs
        .iter()
        .map(|r| match r.recovery {
            Some(d) => format!("{:.1}", d.as_secs_f64()),
            None => format!("none in {} s", GIVE_UP.as_secs()),
        })
        .collect();
    format!(
        "| {deployment} | {} | {} × {} | {} | {} | {} |",
        if wait > 0 { "`WAIT 1`" } else { "none" },
        runs.len(),
        sum(|r| r.acknowledged) / runs.len().max(1) as u64,
        sum(|r| r.lost),
        sum(|r| r.failed),
        recoveries.join(", "),
    )
}

/// One run of one case in this process: `sentinel:0`, `cluster:1`, … Prints `RESULT
/// acknowledged lost failed recovery_ms` (-1: none).
async fn one_case(case: &str) {
    let (deployment, wait) = case.split_once(':').expect("deployment:wait");
    let wait: u32 = wait.parse().expect("a number of replicas");
    let r = if deployment == "sentinel" {
        let mut set = SentinelSet::start();
        let url = set.url();
        let master = set.master.take();
        run(&url, wait, move |_| drop(master)).await
    } else {
        let mut set = ClusterSet::start();
        let url = set.url();
        let nodes = &mut set.nodes;
        run(&url, wait, |key| {
            let victim = redis_support::master_of_key(nodes, key);
            nodes[victim].kill();
        })
        .await
    };
    println!(
        "RESULT {} {} {} {}",
        r.acknowledged,
        r.lost,
        r.failed,
        r.recovery.map_or(-1, |d| d.as_millis() as i64)
    );
}

/// Each run in a process of its own (a new gateway process meeting its first failover).
fn run_in_child(case: &str) -> Run {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .env("MCC_BENCH_CASE", case)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("the bench runs itself");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("case {case} gave no result: {text}"));
    let n: Vec<i64> = line.split(' ').map(|v| v.parse().unwrap()).collect();
    Run {
        acknowledged: n[0] as u64,
        lost: n[1] as u64,
        failed: n[2] as u64,
        recovery: (n[3] >= 0).then(|| Duration::from_millis(n[3] as u64)),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !redis_support::redis_server_or_skip("bench redis_ha") {
        return;
    }
    if let Ok(case) = std::env::var("MCC_BENCH_CASE") {
        return one_case(&case).await;
    }
    let runs: usize = std::env::var("MCC_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let only = std::env::var("MCC_BENCH_ONLY").unwrap_or_default();
    let mut rows = Vec::new();
    for wait in [0, 1] {
        for (deployment, title) in [
            ("sentinel", "Sentinel (1 + 2 replicas, 3 sentinels)"),
            ("cluster", "Cluster (3 masters + 3 replicas)"),
        ] {
            if !only.is_empty() && only != deployment {
                continue;
            }
            let case = format!("{deployment}:{wait}");
            let results: Vec<Run> = (0..runs).map(|_| run_in_child(&case)).collect();
            rows.push(row(title, wait, &results));
        }
    }
    println!(
        "| deployment | before ack | runs × acknowledged writes (mean) | lost acknowledged writes (all runs) | failed calls (all runs) | seconds from SIGKILL to the next acknowledged write, per run |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for r in rows {
        println!("{r}");
    }
}
