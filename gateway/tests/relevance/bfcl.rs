//! The BFCL benchmark in-process, as a tuning aid run by hand (the benchmark of record is
//! gateway/benches/bfcl_search.py against a release gateway):
//!
//! ```sh
//! python3 gateway/benches/bfcl_search.py --export ~/.cache/mcc/bfcl/export
//! cargo test -p mcc-gateway --test relevance -- --ignored --nocapture bfcl_
//! ```
//!
//! Prints recall@1 / recall@5 / MRR@10 on the tuning split and the held-out split
//! (bfcl_search.py's rule) for keyword-only and for each fusion setting of
//! `MCC_BFCL_GRID` (`kw:sat,kw:sat,…`, default the shipped fusion). Tool and query
//! embeddings are cached in Redis when `MCC_BFCL_REDIS` is set (a URL; use a database of
//! your own), so a rerun after a ranking change embeds nothing it embedded before.

use std::collections::HashMap;
use std::path::PathBuf;

use mcc_catalog::introspect::Introspector;
use mcc_search::embed::EmbeddingCache;
use mcc_search::{Embedder, Fusion, KeywordIndex, Mode, SearchIndex, Vector};
use serde::Deserialize;

use crate::eval;

#[derive(Deserialize)]
struct Question {
    set: String,
    query: String,
    tune: bool,
    expected: Vec<String>,
}

#[derive(Deserialize)]
struct Export {
    questions: Vec<Question>,
    key_to_name: HashMap<String, String>,
}

const SETS: [&str; 4] = ["simple_python", "multiple", "live_simple", "live_multiple"];

/// Ranks of the expected function (1-based) per question, `None` past 10.
fn ranks(
    index: &SearchIndex,
    ex: &Export,
    qvs: Option<&[Vector]>,
    mode: Mode,
) -> Vec<Option<usize>> {
    let allowed = index.allowed_for(Some(&eval::admin()));
    ex.questions
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let qv = qvs.map(|v| &v[i][..]);
            let hits = index
                .search(&q.query, qv, mode, allowed.clone(), None, 10)
                .expect("search");
            hits.iter()
                .position(|h| {
                    ex.key_to_name
                        .get(&index.tools()[h.index].key)
                        .is_some_and(|n| q.expected.contains(n))
                })
                .map(|r| r + 1)
        })
        .collect()
}

fn line(ex: &Export, ranks: &[Option<usize>], tune: bool) -> String {
    let mut out = String::new();
    for set in SETS.iter().copied().chain(["overall"]) {
        let rs: Vec<Option<usize>> = ex
            .questions
            .iter()
            .zip(ranks)
            .filter(|(q, _)| q.tune == tune && (set == "overall" || q.set == set))
            .map(|(_, r)| *r)
            .collect();
        let n = rs.len().max(1) as f64;
        let r1 = rs.iter().filter(|r| **r == Some(1)).count() as f64 / n;
        let r5 = rs.iter().filter(|r| r.is_some_and(|r| r <= 5)).count() as f64 / n;
        let mrr = rs.iter().flatten().map(|&r| 1.0 / r as f64).sum::<f64>() / n;
        out.push_str(&format!(" {set} {r1:.3}/{r5:.3}/{mrr:.3}"));
    }
    out
}

#[test]
#[ignore = "tuning aid, needs the exported BFCL data and the model"]
fn bfcl_grid() {
    let dir = std::env::var_os("MCC_BFCL_DIR").map_or_else(
        || PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/mcc/bfcl/export"),
        PathBuf::from,
    );
    let tools = mcc_catalog::load(
        &[dir.join("bfcl-tools.yaml").display().to_string()],
        &Introspector::default(),
    )
    .expect("loading the exported BFCL tools")
    .tools;
    let ex: Export =
        serde_json::from_str(&std::fs::read_to_string(dir.join("questions.json")).unwrap())
            .unwrap();
    let keyword = SearchIndex::build(&tools, None, Fusion::default()).unwrap();
    let r = ranks(&keyword, &ex, None, Mode::Keyword);
    println!("keyword tune:{}", line(&ex, &r, true));
    println!("keyword held:{}", line(&ex, &r, false));
    // MCC_BFCL_FIELDS: other keyword field weights, `n,k,g,d,p,e;…` (FIELD_WEIGHTS order).
    for cell in std::env::var("MCC_BFCL_FIELDS")
        .unwrap_or_default()
        .split(';')
    {
        let w: Vec<f32> = cell.split(',').filter_map(|x| x.parse().ok()).collect();
        let Ok(w) = <[f32; 6]>::try_from(w) else {
            continue;
        };
        let kw = KeywordIndex::build_weighted(&tools, w).unwrap();
        let allowed = keyword.allowed_for(Some(&eval::admin()));
        let r: Vec<Option<usize>> = ex
            .questions
            .iter()
            .map(|q| {
                let hits = kw.search(&q.query, 10, allowed.clone()).unwrap();
                hits.iter()
                    .position(|&(_, i)| {
                        ex.key_to_name
                            .get(&tools[i].key)
                            .is_some_and(|n| q.expected.contains(n))
                    })
                    .map(|r| r + 1)
            })
            .collect();
        println!("keyword {w:?} tune:{}", line(&ex, &r, true));
        println!("keyword {w:?} held:{}", line(&ex, &r, false));
    }
    if std::env::var_os("MCC_BFCL_KEYWORD_ONLY").is_some() {
        return;
    }
    let Ok(model) = eval::model_dir() else { return };
    let embedder = Embedder::local(&model).unwrap();
    let cache = EmbeddingCache::new(std::env::var("MCC_BFCL_REDIS").ok().as_deref()).unwrap();
    let t0 = std::time::Instant::now();
    let queries: Vec<&str> = ex.questions.iter().map(|q| q.query.as_str()).collect();
    let (qvs, _) = cache.embed_all(&embedder, &queries).unwrap();
    println!("queries embedded in {:.1?}", t0.elapsed());
    let grid = std::env::var("MCC_BFCL_GRID").unwrap_or_default();
    let mut fusions = vec![Fusion::default()];
    for cell in grid.split(',').filter(|c| !c.is_empty()) {
        let (kw, sat) = cell.split_once(':').expect("kw:sat");
        let kw: f32 = kw.parse().unwrap();
        fusions.push(Fusion {
            keyword_weight: kw,
            semantic_weight: 1.0 - kw,
            saturation: sat.parse().unwrap(),
            ..Fusion::default()
        });
    }
    for (n, fusion) in fusions.into_iter().enumerate() {
        let t0 = std::time::Instant::now();
        let index = SearchIndex::build(&tools, Some((&embedder, &cache)), fusion).unwrap();
        let built = t0.elapsed();
        let r = ranks(&index, &ex, Some(&qvs), Mode::Hybrid);
        let f = format!("kw={} sat={}", fusion.keyword_weight, fusion.saturation);
        println!(
            "hybrid {f} (index {built:.1?}) tune:{}",
            line(&ex, &r, true)
        );
        println!("hybrid {f} held:{}", line(&ex, &r, false));
        if n == 0 {
            let s = ranks(&index, &ex, Some(&qvs), Mode::Semantic);
            println!("semantic tune:{}", line(&ex, &s, true));
            println!("semantic held:{}", line(&ex, &s, false));
        }
    }
}
