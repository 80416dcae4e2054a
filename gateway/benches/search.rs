//! Search benchmarks for catalogs of 100, 1,000 and 10,000 tools: index build time
//! (keyword only; hybrid with every embedding computed; hybrid with embeddings from the
//! Redis cache, as a new replica), query latency p50/p99 (keyword; hybrid with an
//! uncached query embedding; hybrid with a cached one) and resident memory. Prints a
//! markdown table (committed in benches/RESULTS-search.md).
//!
//! `cargo bench -p mcc-gateway --bench search` — needs the model (scripts/fetch-model.sh
//! or MCC_TEST_MODEL_DIR) for the hybrid columns and Redis (REDIS_URL) for the cached
//! build. `SEARCH_BENCH_SIZES=100,1000` limits the sizes; `SEARCH_BENCH_COLD=0` skips the
//! cold build (its column reads —; the Redis-cached build then computes only what Redis
//! does not hold yet). `SEARCH_BENCH_TOOL_VECTORS=stand-in` gives every tool a
//! pseudo-random unit vector of the model's size instead of its embedding (no build
//! columns; queries are still embedded by the model): the latency and memory of ranking
//! at a size whose embedding would take minutes, not relevance. Also prints the resident
//! memory of the loaded model.

#[path = "../tests/relevance/eval.rs"]
#[allow(dead_code)]
mod eval;

use std::time::{Duration, Instant};

use mcc_catalog::Tool;
use mcc_search::embed::{EmbeddingCache, content_hash, redis_key};
use mcc_search::{Embedder, Fusion, Mode, SearchIndex, embedding_texts};

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

/// `n` distinct tools: the relevance catalog's tools, each variant scoped to a team and
/// region (as large catalogs are: the same tool per team/environment).
fn catalog(base: &[Tool], n: usize) -> Vec<Tool> {
    (0..n)
        .map(|i| {
            let mut t = base[i % base.len()].clone();
            let v = i / base.len();
            if v > 0 {
                let (team, region) = (
                    TEAMS[v % TEAMS.len()],
                    REGIONS[(v / TEAMS.len()) % REGIONS.len()],
                );
                t.name = format!("{}_{team}_{v}", t.name);
                t.key = format!("{}_{team}_{v}", t.key);
                t.description = format!("{} For the {team} team in {region}.", t.description);
            }
            t
        })
        .collect()
}

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn percentiles(mut d: Vec<Duration>) -> (f64, f64) {
    d.sort();
    let at = |p: f64| d[((d.len() as f64 * p) as usize).min(d.len() - 1)].as_secs_f64() * 1000.0;
    (at(0.5), at(0.99))
}

struct Row {
    tools: usize,
    build_keyword_ms: f64,
    build_cold_s: Option<f64>,
    build_cached_s: Option<f64>,
    keyword: (f64, f64),
    hybrid_uncached: Option<(f64, f64)>,
    hybrid_cached: Option<(f64, f64)>,
    rss_keyword_mb: f64,
    rss_hybrid_mb: Option<f64>,
}

fn main() {
    // As the gateway's main does: the bare loop and queries run with its thread settings.
    // SAFETY: no other thread exists yet.
    #[cfg(feature = "embed-local")]
    unsafe {
        mcc_search::local::settle_threads()
    };
    let base = eval::catalog();
    let queries: Vec<String> = eval::cases(&base).into_iter().map(|c| c.query).collect();
    let before_model = rss_mb();
    let embedder = match eval::model_dir() {
        Ok(dir) => Some(Embedder::local(&dir).expect("loading the model")),
        Err(why) => {
            eprintln!("hybrid columns SKIPPED: {why}");
            None
        }
    };
    let model_mb = rss_mb() - before_model;
    let stand_in = std::env::var("SEARCH_BENCH_TOOL_VECTORS").is_ok_and(|v| v == "stand-in");
    let cold = !stand_in && std::env::var("SEARCH_BENCH_COLD").map_or(true, |v| v != "0");
    let redis_url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let sizes: Vec<usize> = std::env::var("SEARCH_BENCH_SIZES")
        .unwrap_or_else(|_| "100,1000,10000".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("SEARCH_BENCH_SIZES: comma-separated numbers")
        })
        .collect();
    let mut rows = Vec::new();
    for n in sizes {
        rows.push(bench_size(
            &base,
            &queries,
            n,
            embedder.as_ref(),
            &redis_url,
            cold,
            stand_in,
        ));
        eprintln!("{} tools done", n);
    }
    println!("{}", render(&rows));
    if embedder.is_some() {
        println!("Resident memory of the loaded model (weights, tokenizer): {model_mb:.1} MB.");
    }
}

fn bench_size(
    base: &[Tool],
    queries: &[String],
    n: usize,
    embedder: Option<&Embedder>,
    redis: &str,
    cold: bool,
    stand_in: bool,
) -> Row {
    let tools = catalog(base, n);
    let fusion = Fusion::default();
    let rss0 = rss_mb();
    let t = Instant::now();
    let kw_index = SearchIndex::build(&tools, None, fusion).unwrap();
    let build_keyword_ms = t.elapsed().as_secs_f64() * 1000.0;
    let rss_keyword_mb = rss_mb() - rss0;
    let admin = eval::admin();
    let allowed = kw_index.allowed_for(Some(&admin));
    let keyword = percentiles(
        (0..queries.len().max(500))
            .map(|i| {
                let q = &queries[i % queries.len()];
                let t = Instant::now();
                let _ = kw_index
                    .search(q, None, Mode::Keyword, allowed.clone(), None, 10)
                    .unwrap();
                t.elapsed()
            })
            .collect(),
    );
    drop(kw_index);
    let mut row = Row {
        tools: n,
        build_keyword_ms,
        build_cold_s: None,
        build_cached_s: None,
        keyword,
        hybrid_uncached: None,
        hybrid_cached: None,
        rss_keyword_mb,
        rss_hybrid_mb: None,
    };
    let Some(embedder) = embedder else { return row };

    // Cold: nothing cached anywhere (this catalog's keys are removed from Redis first);
    // every tool text is embedded, and stored in Redis on the way.
    if cold {
        forget_in_redis(redis, embedder, &tools);
        let t = Instant::now();
        let cold_cache = EmbeddingCache::new(Some(redis)).unwrap();
        let cold = SearchIndex::build(&tools, Some((embedder, &cold_cache)), fusion).unwrap();
        row.build_cold_s = Some(t.elapsed().as_secs_f64());
        drop((cold, cold_cache));
    }
    // A new replica: empty memory, every embedding in Redis.
    let rss1 = rss_mb();
    let t = Instant::now();
    let index = if stand_in {
        let dims = embedder.embed(&["dims"]).unwrap()[0].len();
        let tool_vectors = Embedder::from_fn("bench-stand-in", move |texts| {
            Ok(texts.iter().map(|t| stand_in_vector(t, dims)).collect())
        });
        let cache = EmbeddingCache::new(None).unwrap();
        SearchIndex::build(&tools, Some((&tool_vectors, &cache)), fusion).unwrap()
    } else {
        let replica_cache = EmbeddingCache::new(Some(redis)).unwrap();
        let index = SearchIndex::build(&tools, Some((embedder, &replica_cache)), fusion).unwrap();
        row.build_cached_s = Some(t.elapsed().as_secs_f64());
        index
    };
    row.rss_hybrid_mb = Some(rss_mb() - rss1 + rss_keyword_mb);
    let allowed = index.allowed_for(Some(&admin));

    let mut uncached = Vec::new();
    let mut vectors = Vec::new();
    for q in queries {
        let t = Instant::now();
        let v = embedder.embed(&[q]).unwrap().remove(0);
        let _ = index
            .search(q, Some(&v), Mode::Hybrid, allowed.clone(), None, 10)
            .unwrap();
        uncached.push(t.elapsed());
        vectors.push(v);
    }
    row.hybrid_uncached = Some(percentiles(uncached));
    let query_cache = mcc_search::QueryCache::new(
        std::num::NonZeroUsize::new(1024).unwrap(),
        Duration::from_secs(300),
    );
    for (q, v) in queries.iter().zip(&vectors) {
        query_cache.put(q, v.clone());
    }
    row.hybrid_cached = Some(percentiles(
        (0..queries.len().max(500))
            .map(|i| {
                let q = &queries[i % queries.len()];
                let t = Instant::now();
                let v = query_cache.get(q).unwrap();
                let _ = index
                    .search(q, Some(&v), Mode::Hybrid, allowed.clone(), None, 10)
                    .unwrap();
                t.elapsed()
            })
            .collect(),
    ));
    row
}

/// A unit vector of `dims` pseudo-random components seeded by `text`.
fn stand_in_vector(text: &str, dims: usize) -> Vec<f32> {
    let mut state = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    }) | 1;
    let v: Vec<f32> = (0..dims)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.into_iter().map(|x| x / norm).collect()
}

/// Deletes the cached embeddings of `tools` from Redis, so the next build is cold.
fn forget_in_redis(redis: &str, embedder: &Embedder, tools: &[Tool]) {
    let mut conn = redis::Client::open(redis)
        .and_then(|c| c.get_connection())
        .expect("Redis (REDIS_URL) for the cached-build column");
    let keys: Vec<String> = tools
        .iter()
        .flat_map(|t| {
            let signature = mcc_catalog::signature(t);
            embedding_texts(t, &signature)
                .into_iter()
                .map(|text| redis_key(&content_hash(embedder.id(), &text)))
                .collect::<Vec<_>>()
        })
        .collect();
    for chunk in keys.chunks(1000) {
        let _: () = redis::cmd("DEL").arg(chunk).query(&mut conn).expect("DEL");
    }
}

fn render(rows: &[Row]) -> String {
    let opt = |v: Option<f64>, unit: &str| v.map_or("—".into(), |v| format!("{v:.2} {unit}"));
    let pair = |v: Option<(f64, f64)>| v.map_or("—".into(), |(a, b)| format!("{a:.2} / {b:.2}"));
    let mut out = String::from(
        "| tools | build keyword | build hybrid, cold | build hybrid, Redis-cached | keyword p50/p99 ms | hybrid uncached p50/p99 ms | hybrid cached p50/p99 ms | RSS keyword | RSS hybrid |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {:.1} ms | {} | {} | {} | {} | {} | {:.1} MB | {} |\n",
            r.tools,
            r.build_keyword_ms,
            opt(r.build_cold_s, "s"),
            opt(r.build_cached_s, "s"),
            pair(Some(r.keyword)),
            pair(r.hybrid_uncached),
            pair(r.hybrid_cached),
            r.rss_keyword_mb,
            opt(r.rss_hybrid_mb, "MB"),
        ));
    }
    out
}
