//! The BFCL tuning split's ranking signals, written out to try scoring formulas without
//! rebuilding (a tuning aid run by hand, like [`super::bfcl`]):
//!
//! ```sh
//! MCC_BFCL_FEATURES=/tmp/bfcl-features.jsonl MCC_BFCL_REDIS=redis://127.0.0.1/9 \
//!   cargo test -p mcc-gateway --test relevance -- --ignored --nocapture bfcl_features
//! ```
//!
//! One JSON line per question of the tuning split (held-out questions are never
//! written): its set, its number of ranked words, and per candidate (the keyword top 100
//! and the top 100 of each cosine column) the signals of [`COLUMNS`]; `null` where a
//! signal does not exist (a tool without a description has no description passage).
//! `<file>.keys.json` holds the tools' keys by position. Cosine columns: one per letter of
//! `MCC_BFCL_FEATURE_PASSAGES` (default `dsnh`, see [`passage`]; a tool's best passage of
//! that letter) for the whole question, then the same for its last sentence.

use std::collections::{BTreeMap, HashSet};

use mcc_catalog::Tool;
use mcc_search::keyword::{FIELD_WEIGHTS, analyze, analyzer};
use mcc_search::{Coverage, Embedder, EmbeddingCache, KeywordIndex, Vector, dot};

use super::bfcl::{Question, load_export, load_tools, passage, words};
use super::eval;

/// The columns per candidate.
const COLUMNS: &str = "position expected bm25 cov bm25_name bm25_key bm25_groups bm25_desc bm25_params \
bm25_example name_cov cos_<letter>… cos_<letter>_last…";

/// The last sentence of `query` with three words or more (the request of a long
/// conversational question usually closes it), or the query itself.
fn last_sentence(query: &str) -> &str {
    query
        .split(['.', '?', '!', '\n'])
        .map(str::trim)
        .rfind(|s| s.split_whitespace().count() >= 3)
        .unwrap_or(query)
}

/// Per tool, the best cosine of its passages for each query vector (`None` without any).
fn cosines(
    tools: &[Tool],
    signatures: &[String],
    letter: char,
    embeddings: (&Embedder, &EmbeddingCache),
    qvs: &[Vector],
) -> Vec<Vec<Option<f32>>> {
    let per_tool: Vec<Vec<String>> = tools
        .iter()
        .zip(signatures)
        .map(|(t, s)| passage(letter, t, s))
        .collect();
    let texts: Vec<&str> = per_tool.iter().flatten().map(String::as_str).collect();
    let (rows, _) = embeddings.1.embed_all(embeddings.0, &texts).unwrap();
    let mut rows = rows.into_iter();
    let per_tool: Vec<Vec<Vector>> = per_tool
        .iter()
        .map(|p| rows.by_ref().take(p.len()).collect())
        .collect();
    qvs.iter()
        .map(|q| {
            per_tool
                .iter()
                .map(|vs| vs.iter().map(|v| dot(v, q)).reduce(f32::max))
                .collect()
        })
        .collect()
}

#[test]
#[ignore = "tuning aid, needs the exported BFCL data and the model"]
fn bfcl_features() {
    let Some(out_path) = std::env::var_os("MCC_BFCL_FEATURES") else {
        return;
    };
    let (dir, tools) = load_tools();
    let ex = load_export(&dir);
    let Ok(model) = eval::model_dir() else { return };
    let embedder = Embedder::local(&model).unwrap();
    let cache = EmbeddingCache::new(std::env::var("MCC_BFCL_REDIS").ok().as_deref()).unwrap();
    let tune: Vec<&Question> = ex.questions.iter().filter(|q| q.tune).collect();
    let mut queries: Vec<&str> = tune.iter().map(|q| q.query.as_str()).collect();
    queries.extend(tune.iter().map(|q| last_sentence(&q.query)));
    let (qvs, _) = cache.embed_all(&embedder, &queries).unwrap();
    let signatures: Vec<String> = tools.iter().map(mcc_catalog::signature).collect();
    let letters = std::env::var("MCC_BFCL_FEATURE_PASSAGES").unwrap_or_else(|_| "dsnh".into());
    let cos: Vec<Vec<Vec<Option<f32>>>> = letters
        .chars()
        .map(|l| cosines(&tools, &signatures, l, (&embedder, &cache), &qvs))
        .collect();

    let keyword = KeywordIndex::build(&tools).unwrap();
    let coverage = Coverage::build(&tools);
    let fields: Vec<KeywordIndex> = (0..FIELD_WEIGHTS.len())
        .map(|f| {
            let mut w = [0.0f32; 6];
            w[f] = 1.0;
            KeywordIndex::build_weighted(&tools, w).unwrap()
        })
        .collect();
    let allowed: std::sync::Arc<[bool]> = tools.iter().map(|_| true).collect();
    let mut a = analyzer();
    let name_words: Vec<HashSet<String>> = tools
        .iter()
        .map(|t| analyze(&mut a, &words(&t.key)).into_iter().collect())
        .collect();
    let n = tune.len();
    let mut out = String::new();
    for (qi, q) in tune.iter().enumerate() {
        let kw = keyword.search(&q.query, 100, allowed.clone()).unwrap();
        let mut cands: BTreeMap<usize, f32> = kw.iter().map(|&(s, i)| (i, s)).collect();
        for col in &cos {
            for qv in [qi, n + qi] {
                let mut top: Vec<(f32, usize)> = col[qv]
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| c.map(|c| (c, i)))
                    .collect();
                top.sort_by(|a, b| b.0.total_cmp(&a.0));
                for &(_, i) in top.iter().take(100) {
                    cands.entry(i).or_insert(0.0);
                }
            }
        }
        let positions: Vec<usize> = cands.keys().copied().collect();
        let cov = coverage.of(&keyword, &q.query, &positions);
        let per_field: Vec<BTreeMap<usize, f32>> = fields
            .iter()
            .map(|f| {
                f.search(&q.query, tools.len(), allowed.clone())
                    .unwrap()
                    .into_iter()
                    .map(|(s, i)| (i, s))
                    .collect()
            })
            .collect();
        let query_words = keyword.query_words(&q.query);
        let rows: Vec<serde_json::Value> = positions
            .iter()
            .zip(&cov)
            .map(|(&i, &c)| {
                let expected = ex
                    .key_to_name
                    .get(&tools[i].key)
                    .is_some_and(|n| q.expected.contains(n));
                let names = &name_words[i];
                let name_cov = names.iter().filter(|w| query_words.contains(*w)).count() as f32
                    / names.len().max(1) as f32;
                let mut row = vec![
                    serde_json::json!(i),
                    serde_json::json!(expected),
                    serde_json::json!(cands[&i]),
                    serde_json::json!(c),
                ];
                row.extend(
                    per_field
                        .iter()
                        .map(|f| serde_json::json!(f.get(&i).copied().unwrap_or(0.0))),
                );
                row.push(serde_json::json!(name_cov));
                for qv in [qi, n + qi] {
                    row.extend(cos.iter().map(|col| serde_json::json!(col[qv][i])));
                }
                serde_json::Value::Array(row)
            })
            .collect();
        let line = serde_json::json!({"set": q.set, "words": query_words.len(),
            "chars": q.query.len(), "letters": letters, "c": rows});
        out.push_str(&line.to_string());
        out.push('\n');
    }
    std::fs::write(&out_path, out).unwrap();
    let keys: Vec<&str> = tools.iter().map(|t| t.key.as_str()).collect();
    let mut keys_path = out_path.clone();
    keys_path.push(".keys.json");
    std::fs::write(&keys_path, serde_json::to_string(&keys).unwrap()).unwrap();
    println!(
        "wrote {n} questions' features ({COLUMNS}) to {}",
        std::path::Path::new(&out_path).display()
    );
}
