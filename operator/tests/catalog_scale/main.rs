//! The catalog at scale (issue 14, target 3): Tools in many namespaces assembled and
//! published by the operator's own code, read by several gateway replicas running the
//! gateway's own watcher, over a simulated API server with latency
//! ([`fake_api`]). Measures apply → servable on every replica (a first publication and a
//! one-tool edit), the operator's assemble and publish, when the first replica's search
//! index catches up (its own `SearchService`, with a stand-in embedder that costs a fixed
//! time per text: the catalog swap must not wait for it), and, in a child process each, a
//! gateway's catalog load time and memory with and without the keyword search index.
//!
//! Ignored by default (a benchmark, no assertion on time):
//!
//! ```sh
//! cargo test -p mcc-operator --release --test catalog_scale -- --ignored --nocapture catalog_scale
//! ```
//!
//! Knobs: `MCC_SCALE_TOOLS` (comma-separated sizes, default `10000,20000`),
//! `MCC_SCALE_NAMESPACES` (200), `MCC_SCALE_REPLICAS` (3), `MCC_SCALE_DEBOUNCE_MS` (1000,
//! the operator's default), `MCC_SCALE_WATCH_MS` (100: write → watch event),
//! `MCC_SCALE_REQUEST_MS` (5 per request), `MCC_SCALE_MBPS` (50 MB/s per transfer),
//! `MCC_SCALE_EMBED_US` (500: the stand-in embedder's time per tool text).

mod fake_api;
mod workload;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcc_catalog::document::{self, Payload};
use mcc_catalog::introspect::Introspector;
use mcc_gateway::catalog::LiveCatalog;
use mcc_gateway::kube::watch::{CatalogConfigMap, run};
use mcc_operator::assemble::assemble;
use mcc_operator::metrics::Metrics;
use mcc_operator::publish::CatalogPublisher;
use mcc_search::{Embedder, SearchService, SearchSettings, SearchStatus};
use tokio_util::sync::CancellationToken;

use fake_api::{FakeApi, Latency};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1000.0)
}

/// One apply → servable run: when each part ended, from the apply.
struct Timeline {
    assemble: Duration,
    publish: Duration,
    /// Each replica: from the apply to serving the new hash.
    replicas: Vec<Duration>,
}

/// The first replica's search index: its `SearchService` as a gateway wires it (rebuilt
/// after each catalog swap), with every swap of its index recorded.
struct ReplicaSearch {
    service: SearchService,
    /// Catalogs handed to the search index (its generation numbers them).
    updates: Arc<AtomicU64>,
    /// (when, status) of every index swap.
    swaps: Arc<Mutex<Vec<(Instant, SearchStatus)>>>,
}

impl ReplicaSearch {
    /// A stand-in embedder that costs `per_text` per text (sleeping: it stands for a
    /// model's time without taking the CPU the replicas share here).
    fn new(per_text: Duration) -> Self {
        let embedder = Embedder::from_fn("stand-in", move |texts| {
            std::thread::sleep(per_text * texts.len() as u32);
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0.0f32; 8];
                    v[t.len() % 8] = 1.0;
                    v
                })
                .collect())
        });
        let service = SearchService::with_embedder(SearchSettings::default(), Some(embedder))
            .expect("search service");
        let swaps = Arc::new(Mutex::new(Vec::new()));
        let mut watch = service.watch();
        let recorded = swaps.clone();
        tokio::spawn(async move {
            while watch.changed().await.is_ok() {
                let status = watch.borrow_and_update().clone();
                recorded.lock().unwrap().push((Instant::now(), status));
            }
        });
        Self {
            service,
            updates: Arc::new(AtomicU64::new(0)),
            swaps,
        }
    }

    /// What the watcher calls after each swap (as the gateway's `serve` does).
    fn on_reload(&self) -> mcc_gateway::catalog::OnReload {
        let (service, updates) = (self.service.clone(), self.updates.clone());
        Arc::new(move |catalog| {
            updates.fetch_add(1, Ordering::SeqCst);
            service.update(catalog.clone()).expect("search update");
        })
    }

    /// From `apply`: when an index of the newest catalog was first served (keyword-only
    /// or hybrid), and when its hybrid index was. Waits for the hybrid one.
    async fn caught_up(&self, apply: Instant) -> (Option<Duration>, Duration) {
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let target = self.updates.load(Ordering::SeqCst);
            {
                let swaps = self.swaps.lock().unwrap();
                let of_target = |semantic: bool| {
                    swaps
                        .iter()
                        .find(|(at, s)| {
                            *at >= apply && s.generation == target && (s.semantic || !semantic)
                        })
                        .map(|(at, _)| *at - apply)
                };
                if let Some(hybrid) = of_target(true) {
                    let first = of_target(false).filter(|&t| t < hybrid);
                    return (first, hybrid);
                }
            }
            assert!(Instant::now() < deadline, "no hybrid index after 600 s");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run with --ignored --nocapture (see the module doc)"]
async fn catalog_scale() {
    let sizes: Vec<usize> = std::env::var("MCC_SCALE_TOOLS")
        .unwrap_or_else(|_| "10000,20000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("MCC_SCALE_TOOLS: numbers"))
        .collect();
    let namespaces: usize = env_or("MCC_SCALE_NAMESPACES", 200);
    let replicas: usize = env_or("MCC_SCALE_REPLICAS", 3);
    let debounce = Duration::from_millis(env_or("MCC_SCALE_DEBOUNCE_MS", 1000));
    let latency = Latency {
        request: Duration::from_millis(env_or("MCC_SCALE_REQUEST_MS", 5)),
        bytes_per_sec: env_or("MCC_SCALE_MBPS", 50.0) * 1e6,
        watch: Duration::from_millis(env_or("MCC_SCALE_WATCH_MS", 100)),
    };
    let embed_per_text = Duration::from_micros(env_or("MCC_SCALE_EMBED_US", 500));
    println!(
        "\n## {replicas} replicas, {namespaces} namespaces, debounce {} ms, API: {} ms per request, {} MB/s, watch event {} ms after the write\n",
        debounce.as_millis(),
        latency.request.as_millis(),
        latency.bytes_per_sec / 1e6,
        latency.watch.as_millis()
    );
    println!(
        "| tools | run | JSON (MB) | stored (MB) | shards | assemble (ms) | encode (ms) | publish (ms) | servable on every replica (ms) | slowest replica after publish (ms) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut memory = Vec::new();
    let mut search_rows = Vec::new();
    for &tools in &sizes {
        let (objects, grants) = workload::objects(tools, namespaces);
        let policy = workload::policy(namespaces);
        let api = FakeApi::new(workload::TRUSTED, latency);
        let stop = CancellationToken::new();
        let search = ReplicaSearch::new(embed_per_text);
        let lives: Vec<Arc<LiveCatalog>> = (0..replicas)
            .map(|r| {
                let live = Arc::new(LiveCatalog::waiting("waiting".into()));
                tokio::spawn(run(
                    live.clone(),
                    api.client(),
                    CatalogConfigMap {
                        namespace: workload::TRUSTED.into(),
                        name: "mcc-catalog".into(),
                    },
                    Introspector::default(),
                    stop.clone(),
                    if r == 0 {
                        search.on_reload()
                    } else {
                        Arc::new(|_| {})
                    },
                ));
                live
            })
            .collect();
        let mut publisher = CatalogPublisher::new(api.client(), workload::TRUSTED, "mcc-catalog");
        publisher.load_last().await.unwrap();
        let metrics = Metrics::default();
        for (run_name, objects) in [
            ("first publication", objects.clone()),
            ("one Tool edited", workload::edited(&objects, tools / 2)),
        ] {
            let apply = Instant::now();
            // The Tool's watch event reaches the operator, which debounces.
            tokio::time::sleep(latency.watch + debounce).await;
            let t = Instant::now();
            let assembly = assemble(&objects, &grants, &policy);
            let assemble_time = t.elapsed();
            let t = Instant::now();
            assert!(
                publisher
                    .publish(&assembly.document, &metrics)
                    .await
                    .unwrap()
            );
            let publish_time = t.elapsed();
            let published = Instant::now();
            let hash = api
                .annotation("mcc-catalog", document::HASH_ANNOTATION)
                .expect("the index's hash");
            let timeline = Timeline {
                assemble: assemble_time,
                publish: publish_time,
                replicas: servable(&lives, &hash, apply).await,
            };
            let (first_index, hybrid) = search.caught_up(apply).await;
            search_rows.push((tools, run_name, timeline.replicas[0], first_index, hybrid));
            // Off the timeline: the encoding alone (part of the publish above).
            let t = Instant::now();
            let encoded = document::encode(&assembly.document).unwrap();
            let encode_time = t.elapsed();
            assert_eq!(encoded.hash, hash);
            let json = serde_json::to_string(&assembly.document).unwrap().len();
            let (stored, objects_count) = api.stored("mcc-catalog");
            let slowest = timeline.replicas.iter().max().copied().unwrap_or_default();
            println!(
                "| {tools} | {run_name} | {:.1} | {:.2} | {} | {} | {} | {} | {} | {} |",
                json as f64 / 1e6,
                stored as f64 / 1e6,
                objects_count - 1,
                ms(timeline.assemble),
                ms(encode_time),
                ms(timeline.publish),
                ms(slowest),
                ms(slowest.saturating_sub(published - apply)),
            );
            if run_name == "first publication"
                && let Payload::Gzip(bytes) = &encoded.payload
            {
                memory.push((tools, bytes.clone()));
            }
        }
        stop.cancel();
    }
    println!(
        "\n## The first replica's search index (stand-in embedder, {} µs per text)\n\n| tools | run | catalog served (ms) | first index of the new catalog (ms) | its hybrid index (ms) |\n| --- | --- | --- | --- | --- |",
        embed_per_text.as_micros()
    );
    for (tools, run_name, served, first, hybrid) in search_rows {
        let first = first.map_or("— (the previous hybrid index serves)".into(), ms);
        println!(
            "| {tools} | {run_name} | {} | {first} | {} |",
            ms(served),
            ms(hybrid)
        );
    }
    println!(
        "\n## One gateway's catalog load and memory (a child process each)\n\n| tools | load (ms) | RSS before (MB) | RSS with the catalog (MB) | peak (MB) | keyword index build (ms) | RSS with the keyword index (MB) |\n| --- | --- | --- | --- | --- | --- | --- |"
    );
    for (tools, gzip) in memory {
        let path = std::env::temp_dir().join(format!("mcc-scale-{tools}.json.gz"));
        std::fs::write(&path, &gzip).unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "memory_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("MCC_SCALE_MEMORY_FILE", &path)
            .output()
            .expect("the child runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout
            .lines()
            .find_map(|l| l.split_once("MCC_SCALE_MEMORY ").map(|(_, row)| row))
            .unwrap_or_else(|| {
                panic!(
                    "no result from the child: {stdout} {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            });
        println!("| {tools} | {line} |");
        let _ = std::fs::remove_file(path);
    }
}

/// Waits until every replica serves `hash`; each one's time from `apply`.
async fn servable(lives: &[Arc<LiveCatalog>], hash: &str, apply: Instant) -> Vec<Duration> {
    let mut done: Vec<Option<Duration>> = vec![None; lives.len()];
    let deadline = Instant::now() + Duration::from_secs(120);
    while done.iter().any(Option::is_none) {
        for (live, slot) in lives.iter().zip(done.iter_mut()) {
            if slot.is_none() && live.status().hash.as_deref() == Some(hash) {
                *slot = Some(apply.elapsed());
            }
        }
        assert!(
            Instant::now() < deadline,
            "not servable after 120 s: {:?}",
            lives[0].status()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    done.into_iter().map(Option::unwrap).collect()
}

fn rss() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// In its own process: decode and install the catalog as a gateway does, then build
/// the keyword search index (no embedding model). Prints one table row.
#[test]
#[ignore = "run by catalog_scale in a child process"]
fn memory_child() {
    let Ok(path) = std::env::var("MCC_SCALE_MEMORY_FILE") else {
        return;
    };
    let gzip = std::fs::read(path).unwrap();
    let (before, _) = rss();
    let t = Instant::now();
    let live = LiveCatalog::waiting("waiting".into());
    {
        let label = "mcc-system/mcc-catalog";
        let decoded = mcc_gateway::catalog::published::decode(label, None, Some(&gzip)).unwrap();
        live.install_users(mcc_gateway::catalog::published::users(
            label,
            &decoded.doc.users,
        ));
        let (catalog, excluded) = mcc_gateway::catalog::published::tools(
            label,
            decoded.doc.tools,
            &Introspector::default(),
        );
        live.install_tools(catalog, excluded.len(), None);
    }
    let load = t.elapsed();
    let (with_catalog, peak) = rss();
    let settings = mcc_gateway::config::Settings::default();
    let search = mcc_search::SearchService::new(settings.search_settings().unwrap()).unwrap();
    let t = Instant::now();
    search.rebuild_blocking(live.snapshot().tools()).unwrap();
    let build = t.elapsed();
    let (with_search, _) = rss();
    println!(
        "MCC_SCALE_MEMORY {} | {before:.0} | {with_catalog:.0} | {peak:.0} | {} | {with_search:.0}",
        ms(load),
        ms(build)
    );
}
