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
//! Other knobs: `MCC_BFCL_FIELDS` (keyword field weights), `MCC_BFCL_COVPOW` (keyword-only
//! BM25 × coverage^p), `MCC_BFCL_PASSAGES` (embedded texts per tool, see [`passage`]),
//! `MCC_BFCL_KEYWORD_ONLY`, `MCC_BFCL_DUMP` (the tuning split's ranks, to read failures).
//! `bfcl_index_build` measures the semantic index's build alone.

use std::collections::HashMap;
use std::path::PathBuf;

use mcc_catalog::Tool;
use mcc_catalog::introspect::Introspector;
use mcc_search::embed::EmbeddingCache;
use mcc_search::{Embedder, Fusion, KeywordIndex, Mode, SearchIndex, Vector};
use serde::Deserialize;

use crate::eval;

#[derive(Deserialize)]
pub struct Question {
    pub set: String,
    pub query: String,
    pub tune: bool,
    pub expected: Vec<String>,
}

#[derive(Deserialize)]
pub struct Export {
    pub questions: Vec<Question>,
    pub key_to_name: HashMap<String, String>,
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

/// The rank (1-based) of the first of `results` with a name `q` expects.
fn rank_of<'a>(
    ex: &Export,
    q: &Question,
    mut results: impl Iterator<Item = &'a Tool>,
) -> Option<usize> {
    results
        .position(|t| {
            ex.key_to_name
                .get(&t.key)
                .is_some_and(|n| q.expected.contains(n))
        })
        .map(|r| r + 1)
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

/// The export directory (`MCC_BFCL_DIR`, default ~/.cache/mcc/bfcl/export) and its tools,
/// loaded by the catalog loader.
pub fn load_tools() -> (PathBuf, Vec<Tool>) {
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
    (dir, tools)
}

/// The questions and key → function name map of the export in `dir`.
pub fn load_export(dir: &std::path::Path) -> Export {
    serde_json::from_str(&std::fs::read_to_string(dir.join("questions.json")).unwrap()).unwrap()
}

/// The hybrid index of `tools` with the shipped passages (`None`) or those of a
/// `letters`, best-passage weight pair (see [`passage`]).
fn build(
    tools: &[Tool],
    embeddings: (&Embedder, &EmbeddingCache),
    fusion: Fusion,
    passages: Option<(&str, f32)>,
) -> SearchIndex {
    match passages {
        None => SearchIndex::build(tools, Some(embeddings), fusion),
        Some((letters, w)) => {
            let texts = |t: &Tool, s: &str| -> Vec<String> {
                letters.chars().flat_map(|c| passage(c, t, s)).collect()
            };
            SearchIndex::build_with(tools, Some(embeddings), fusion, (&texts, w), &|| false)
        }
    }
    .unwrap()
}

#[test]
#[ignore = "tuning aid, needs the exported BFCL data and the model"]
fn bfcl_grid() {
    let (dir, tools) = load_tools();
    let ex = load_export(&dir);
    let keyword = SearchIndex::build(&tools, None, Fusion::default()).unwrap();
    let r = ranks(&keyword, &ex, None, Mode::Keyword);
    dump(&ex, &keyword, None, Mode::Keyword, "keyword");
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
                rank_of(&ex, q, hits.iter().map(|h| &tools[h.1]))
            })
            .collect();
        println!("keyword {w:?} tune:{}", line(&ex, &r, true));
        println!("keyword {w:?} held:{}", line(&ex, &r, false));
    }
    // MCC_BFCL_COVPOW: keyword-only ranked by BM25 × coverage^p, `p,p,…`.
    let kw = KeywordIndex::build(&tools).unwrap();
    let coverage = mcc_search::Coverage::build(&tools);
    let allowed = keyword.allowed_for(Some(&eval::admin()));
    for p in std::env::var("MCC_BFCL_COVPOW")
        .unwrap_or_default()
        .split(',')
        .filter_map(|x| x.parse::<f32>().ok())
    {
        let r: Vec<Option<usize>> = ex
            .questions
            .iter()
            .map(|q| {
                let hits = kw.search(&q.query, 100, allowed.clone()).unwrap();
                let idx: Vec<usize> = hits.iter().map(|h| h.1).collect();
                let cov = coverage.of(&kw, &q.query, &idx);
                let mut scored: Vec<(f32, usize)> = hits
                    .iter()
                    .zip(&cov)
                    .map(|(&(s, i), &c)| (s * c.powf(p), i))
                    .collect();
                scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                rank_of(&ex, q, scored.iter().take(10).map(|h| &tools[h.1]))
            })
            .collect();
        println!("keyword cov^{p} tune:{}", line(&ex, &r, true));
        println!("keyword cov^{p} held:{}", line(&ex, &r, false));
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
    // MCC_BFCL_PASSAGES: other tool passages, `letters:max_weight,…` (see `passage`);
    // default the shipped ones.
    let specs = std::env::var("MCC_BFCL_PASSAGES").unwrap_or_default();
    let mut passages: Vec<Option<(String, f32)>> = vec![None];
    passages.extend(specs.split(',').filter(|c| !c.is_empty()).map(|c| {
        let (letters, w) = c.split_once(':').expect("letters:max_weight");
        Some((letters.to_string(), w.parse().unwrap()))
    }));
    for (p, fusion) in passages
        .iter()
        .flat_map(|p| fusions.iter().map(move |f| (p, *f)))
    {
        let t0 = std::time::Instant::now();
        let spec = p.as_ref().map(|(l, w)| (l.as_str(), *w));
        let index = build(&tools, (&embedder, &cache), fusion, spec);
        let built = t0.elapsed();
        let r = ranks(&index, &ex, Some(&qvs), Mode::Hybrid);
        let f = format!(
            "{p:?} kw={} sat={}",
            fusion.keyword_weight, fusion.saturation
        );
        dump(&ex, &index, Some(&qvs), Mode::Hybrid, &f);
        println!(
            "hybrid {f} (index {built:.1?}) tune:{}",
            line(&ex, &r, true)
        );
        println!("hybrid {f} held:{}", line(&ex, &r, false));
        if fusion == Fusion::default() {
            let s = ranks(&index, &ex, Some(&qvs), Mode::Semantic);
            println!("semantic {p:?} tune:{}", line(&ex, &s, true));
            println!("semantic {p:?} held:{}", line(&ex, &s, false));
        }
    }
}

/// Words of an identifier or key, lowercased: `math.getFactorial_v2` → `math get factorial v2`.
pub use mcc_search::keyword::identifier_words as words;

/// A tuning passage of tool `t` (signature block `s`) by letter: `d` description, `s`
/// signature, `n` name words with parameter names, `m` name words and description, `h`
/// name words alone, `p` name words with parameters and their descriptions, `c` the
/// shipped card (name words, description, parameters with descriptions), `e` each sentence
/// of the description.
pub fn passage(letter: char, t: &Tool, s: &str) -> Vec<String> {
    let name = words(&t.key);
    let params: Vec<String> = t.visible_params().map(|p| words(&p.name)).collect();
    let desc = t.description.trim();
    match letter {
        'd' if !desc.is_empty() => vec![desc.to_string()],
        's' => vec![s.to_string()],
        'n' => vec![format!("{name} ({})", params.join(", "))],
        'm' => vec![format!("{name}: {desc}")],
        'h' => vec![name],
        'p' => vec![format!(
            "{name}: {}",
            t.visible_params()
                .map(|p| format!("{} {}", words(&p.name), p.description))
                .collect::<Vec<_>>()
                .join("; ")
        )],
        'c' => vec![mcc_search::tool_card(t)],
        'e' => desc
            .split_inclusive(". ")
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// With `MCC_BFCL_DUMP` (a directory): the tuning split's ranks and top three keys per
/// question, one JSON line each, in `<label>.jsonl` (to read failures; held-out
/// questions are never written).
fn dump(ex: &Export, index: &SearchIndex, qvs: Option<&[Vector]>, mode: Mode, label: &str) {
    let Some(dir) = std::env::var_os("MCC_BFCL_DUMP") else {
        return;
    };
    let allowed = index.allowed_for(Some(&eval::admin()));
    let mut out = String::new();
    for (i, q) in ex.questions.iter().enumerate().filter(|(_, q)| q.tune) {
        let hits = index
            .search(
                &q.query,
                qvs.map(|v| &v[i][..]),
                mode,
                allowed.clone(),
                None,
                10,
            )
            .expect("search");
        let keys: Vec<(&str, f32)> = hits
            .iter()
            .map(|h| (index.tools()[h.index].key.as_str(), h.score))
            .collect();
        let rank = hits
            .iter()
            .position(|h| {
                ex.key_to_name
                    .get(&index.tools()[h.index].key)
                    .is_some_and(|n| q.expected.contains(n))
            })
            .map(|r| r + 1);
        let row = serde_json::json!({"set": q.set, "query": q.query, "expected": q.expected,
            "rank": rank, "top": keys.iter().take(3).collect::<Vec<_>>()});
        out.push_str(&row.to_string());
        out.push('\n');
    }
    let name: String = label
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    std::fs::write(PathBuf::from(dir).join(format!("{name}.jsonl")), out).unwrap();
}

/// (CPU seconds, user + system, and peak RSS in MB) of this process so far.
fn usage() -> (f64, f64) {
    // SAFETY: getrusage writes only into the struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        secs(ru.ru_utime) + secs(ru.ru_stime),
        ru.ru_maxrss as f64 / 1024.0,
    )
}

/// The semantic index of the BFCL tools built from nothing (no cache): wall time, CPU
/// time and this process's peak RSS before and after, for the issue's build budget. Run
/// it alone (its own process): `cargo test -p mcc-gateway --test relevance -- --ignored
/// --nocapture --exact bfcl::bfcl_index_build`. `MCC_BFCL_PASSAGES` (one `letters:weight`)
/// builds other passages instead of the shipped ones.
#[test]
#[ignore = "measurement, needs the exported BFCL data and the model"]
fn bfcl_index_build() {
    let (_, tools) = load_tools();
    let Ok(model) = eval::model_dir() else { return };
    let keyword = SearchIndex::build(&tools, None, Fusion::default()).unwrap();
    drop(keyword);
    let embedder = Embedder::local(&model).unwrap();
    let cache = EmbeddingCache::new(None).unwrap();
    let (cpu0, rss0) = usage();
    let t0 = std::time::Instant::now();
    let spec = std::env::var("MCC_BFCL_PASSAGES").unwrap_or_default();
    let passages = spec
        .split_once(':')
        .map(|(l, w)| (l, w.parse().expect("letters:weight")));
    let index = build(&tools, (&embedder, &cache), Fusion::default(), passages);
    let wall = t0.elapsed().as_secs_f64();
    let (cpu1, rss1) = usage();
    assert!(index.has_embeddings());
    println!(
        "index of {} tools ({spec:?}): {wall:.1} s wall, {:.1} s CPU; peak RSS {rss0:.0} MB before, {rss1:.0} MB after",
        tools.len(),
        cpu1 - cpu0
    );
}
