//! Engine overhead against a bare spawn: the exec tool `echo {{ msg | quote }}` run
//! through [`Engine::execute`] and the same command line run by a bare `/bin/sh -c`
//! (tokio `Command`, which std starts with posix_spawn, given the same env floor),
//! sequentially and with 8 calls in flight, interleaved so both see the same machine.
//! Then the executor hop: the same engine with the executor runtime (a real
//! `mcc-executor serve` process on a Unix socket) against the in-process runtime,
//! interleaved. Prints a Markdown report.
//!
//! `cargo build --release -p mcc-executor && cargo bench -p mcc-gateway --bench exec`
//! (release). `MCC_BENCH_ITERS` sets the number of calls per series (default 2000);
//! `MCC_EXECUTOR_BIN` the executor binary (default: beside this bench's target dir).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use mcc_catalog::Tool;
use mcc_gateway::exec::{Call, Engine, EngineSettings, Outcome};

const IN_FLIGHT: usize = 8;
const MSG: &str = "hello world";

fn tool(limits: Value) -> Tool {
    serde_json::from_value(json!({
        "key": "bench.echo", "name": "echo", "kind": "exec",
        "command": "echo {{ msg | quote }}",
        "params": [{"name": "msg", "type": "str", "required": true}],
        "limits": limits,
    }))
    .expect("a valid tool")
}

fn engine() -> Engine {
    engine_with(Arc::new(mcc_executor::InProcess::from_environment()))
}

fn engine_with(runtime: Arc<dyn mcc_executor::Runtime>) -> Engine {
    Engine::new(EngineSettings {
        env_floor: mcc_catalog::env::DEFAULT_FLOOR
            .iter()
            .map(|s| s.to_string())
            .collect(),
        runtime,
        max_output_bytes: 5_000_000,
        debug: false,
        default_timeout: None,
        max_timeout: None,
    })
}

fn context() -> Map<String, Value> {
    json!({"user": "bench", "groups": [], "tools": []})
        .as_object()
        .unwrap()
        .clone()
}

async fn via_engine(engine: &Engine, tool: &Tool) -> Duration {
    let started = Instant::now();
    let out = engine
        .execute(Call {
            refs: None,
            tool,
            params: json!({ "msg": MSG }).as_object().unwrap().clone(),
            context: context(),
            caller: "bench",
        })
        .await
        .expect("runs");
    let elapsed = started.elapsed();
    assert_eq!(out.outcome, Outcome::Success(json!("hello world\n")));
    elapsed
}

/// The env floor of this process: what the engine gives the tool (apart from the
/// `MCC_CTX_*` variables), so both sides spawn with an environment of the same size.
fn floor_env() -> Vec<(String, String)> {
    std::env::vars()
        .filter(|(k, _)| mcc_catalog::env::DEFAULT_FLOOR.contains(&k.as_str()))
        .collect()
}

async fn bare_spawn(env: &[(String, String)]) -> Duration {
    let started = Instant::now();
    let out = tokio::process::Command::new("/bin/sh")
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .arg("-c")
        .arg("echo 'hello world'")
        .output()
        .await
        .expect("runs");
    let elapsed = started.elapsed();
    assert_eq!(out.stdout, b"hello world\n");
    elapsed
}

#[derive(Default)]
struct Series(Vec<Duration>);

impl Series {
    fn percentile(&self, p: f64) -> Duration {
        let mut v = self.0.clone();
        v.sort();
        let i = ((v.len() as f64 - 1.0) * p).round() as usize;
        v[i]
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

/// Alternates engine and bare calls so drift affects both alike.
async fn sequential(engine: &Engine, tool: &Tool, iters: usize) -> (Series, Series) {
    let env = floor_env();
    let (mut e, mut b) = (Series::default(), Series::default());
    for _ in 0..iters {
        e.0.push(via_engine(engine, tool).await);
        b.0.push(bare_spawn(&env).await);
    }
    (e, b)
}

/// `IN_FLIGHT` tasks each alternating engine and bare calls; returns latencies and the
/// wall time of the whole series.
async fn concurrent(engine: &Engine, tool: Arc<Tool>, iters: usize) -> (Series, Series, Duration) {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..IN_FLIGHT {
        let engine = engine.clone();
        let tool = tool.clone();
        tasks.push(tokio::spawn(async move {
            let env = floor_env();
            let (mut e, mut b) = (Vec::new(), Vec::new());
            for _ in 0..iters / IN_FLIGHT {
                e.push(via_engine(&engine, &tool).await);
                b.push(bare_spawn(&env).await);
            }
            (e, b)
        }));
    }
    let (mut e, mut b) = (Series::default(), Series::default());
    for t in tasks {
        let (te, tb) = t.await.expect("task");
        e.0.extend(te);
        b.0.extend(tb);
    }
    (e, b, started.elapsed())
}

fn row(label: &str, engine: &Series, bare: &Series) -> String {
    let (e50, e99) = (engine.percentile(0.5), engine.percentile(0.99));
    let (b50, b99) = (bare.percentile(0.5), bare.percentile(0.99));
    format!(
        "| {label} | {} | {} | {} | {} | {:.3} | {:.3} |",
        ms(e50),
        ms(e99),
        ms(b50),
        ms(b99),
        e50.as_secs_f64() / b50.as_secs_f64(),
        e99.as_secs_f64() / b99.as_secs_f64(),
    )
}

fn main() {
    // `cargo bench` passes `--bench`; anything else (e.g. a filter) is ignored.
    let iters: usize = std::env::var("MCC_BENCH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let engine = engine();
        let plain = Arc::new(tool(json!({})));
        let limited = tool(json!({"timeout": 10, "mem_mb": 512, "nofile": 256}));
        sequential(&engine, &plain, 100).await; // warm-up
        let (seq_e, seq_b) = sequential(&engine, &plain, iters).await;
        let (con_e, con_b, wall) = concurrent(&engine, plain.clone(), iters).await;
        let (lim_e, lim_b) = sequential(&engine, &limited, iters / 4).await;
        println!("| series | engine p50 ms | engine p99 ms | bare p50 ms | bare p99 ms | ratio p50 | ratio p99 |");
        println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
        println!("{}", row(&format!("sequential, {iters} calls each"), &seq_e, &seq_b));
        println!("{}", row(&format!("{IN_FLIGHT} in flight, {iters} calls each"), &con_e, &con_b));
        println!(
            "{}",
            row(&format!("sequential, with rlimits (fork path), {} calls each", iters / 4), &lim_e, &lim_b)
        );
        println!();
        println!(
            "{IN_FLIGHT}-in-flight series wall time (engine and bare calls interleaved): {:.2} s",
            wall.as_secs_f64()
        );
        executor_hop(&engine, &plain, iters).await;
    });
}

/// The executor binary: `MCC_EXECUTOR_BIN`, else `mcc-executor` in the directory above
/// this bench's (`target/release/deps/exec-…` → `target/release/mcc-executor`).
fn executor_bin() -> Option<std::path::PathBuf> {
    if let Ok(bin) = std::env::var("MCC_EXECUTOR_BIN") {
        return Some(bin.into());
    }
    let me = std::env::current_exe().ok()?;
    let bin = me.parent()?.parent()?.join("mcc-executor");
    bin.is_file().then_some(bin)
}

/// In-process engine against the executor engine, alternating calls.
async fn executor_hop(in_process: &Engine, tool: &Tool, iters: usize) {
    let Some(bin) = executor_bin() else {
        println!(
            "\nexecutor hop: SKIPPED (build mcc-executor in release, or set MCC_EXECUTOR_BIN)"
        );
        return;
    };
    // The deployed form: an abstract socket name.
    let address: mcc_executor::Address = format!("@mcc-bench-{}", std::process::id())
        .parse()
        .expect("an abstract name");
    // This process is the gateway here: the executor serves its uid.
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() }.to_string();
    let mut child = std::process::Command::new(&bin)
        .args([
            "serve",
            "--socket",
            &address.to_string(),
            "--allow-uid",
            &uid,
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("mcc-executor starts");
    let probe = mcc_executor::ExecutorClient::new(address.clone());
    while mcc_executor::Runtime::check(&probe).await.is_err() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let via_executor = engine_with(Arc::new(mcc_executor::ExecutorClient::new(address)));
    let (mut x, mut l) = (Series::default(), Series::default());
    for i in 0..iters + 100 {
        let (tx, tl) = (
            via_engine(&via_executor, tool).await,
            via_engine(in_process, tool).await,
        );
        if i >= 100 {
            x.0.push(tx);
            l.0.push(tl);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    println!();
    println!("| runtime | p50 ms | p99 ms |");
    println!("| --- | ---: | ---: |");
    println!(
        "| in-process, {iters} calls | {} | {} |",
        ms(l.percentile(0.5)),
        ms(l.percentile(0.99))
    );
    println!(
        "| executor socket, {iters} calls | {} | {} |",
        ms(x.percentile(0.5)),
        ms(x.percentile(0.99))
    );
    println!();
    println!(
        "executor hop: +{:.3} ms p50 (target: at most +0.15 ms)",
        (x.percentile(0.5).as_secs_f64() - l.percentile(0.5).as_secs_f64()) * 1000.0
    );
}
