//! The relevance suite's evaluation, shared by the test (tests/relevance/main.rs) and the
//! benchmark (benches/search.rs): load the suite's catalog and queries, rank every query
//! in one mode, and compute recall@1, recall@5 and MRR.

use std::path::{Path, PathBuf};

use mcc_catalog::Tool;
use mcc_catalog::introspect::Introspector;
use mcc_search::{Mode, SearchIndex, SearchService};
use serde::Deserialize;

/// One query and the keys that answer it (any counts).
#[derive(Debug, Clone, Deserialize)]
pub struct Case {
    pub query: String,
    pub expected: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct QueryFile {
    queries: Vec<Case>,
}

/// The suite's directory (gateway/tests/relevance).
pub fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/relevance")
}

/// The suite's catalog, loaded by the real MCC YAML loader.
pub fn catalog() -> Vec<Tool> {
    let dir = suite_dir().join("catalog");
    let entries = vec![dir.display().to_string()];
    mcc_catalog::load(&entries, &Introspector::default())
        .unwrap_or_else(|e| panic!("loading the relevance catalog: {e}"))
        .tools
}

/// The suite's queries; every expected key must exist in `tools`.
pub fn cases(tools: &[Tool]) -> Vec<Case> {
    cases_in(tools, "queries.yaml")
}

/// The held-out paraphrase queries (paraphrases_heldout.yaml): written before tuning,
/// never tuned on, reported apart.
pub fn heldout_paraphrases(tools: &[Tool]) -> Vec<Case> {
    cases_in(tools, "paraphrases_heldout.yaml")
}

/// The paraphrase queries to tune on (paraphrases_tune.yaml), written after the held-out
/// ones and apart from them.
pub fn tune_paraphrases(tools: &[Tool]) -> Vec<Case> {
    cases_in(tools, "paraphrases_tune.yaml")
}

/// The analyzed words (keyword analyzer: stop words out, stemmed) that `query` shares
/// with the name or description of the tool keyed `key`; empty for a paraphrase.
pub fn shared_words(tools: &[Tool], key: &str, query: &str) -> Vec<String> {
    use mcc_search::keyword::{analyze, analyzer};
    let Some(tool) = tools.iter().find(|t| t.key == key) else {
        return Vec::new();
    };
    let mut a = analyzer();
    let tool_words = analyze(&mut a, &format!("{} {}", tool.name, tool.description));
    let mut shared: Vec<String> = analyze(&mut a, query)
        .into_iter()
        .filter(|w| tool_words.contains(w))
        .collect();
    shared.dedup();
    shared
}

/// The cases of `cases` whose query shares no word with any expected tool's name and
/// description (see [`shared_words`]).
pub fn paraphrases_of(tools: &[Tool], cases: &[Case]) -> Vec<Case> {
    cases
        .iter()
        .filter(|c| {
            c.expected
                .iter()
                .all(|k| shared_words(tools, k, &c.query).is_empty())
        })
        .cloned()
        .collect()
}

fn cases_in(tools: &[Tool], name: &str) -> Vec<Case> {
    let path = suite_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file: QueryFile =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for case in &file.queries {
        for key in &case.expected {
            assert!(
                tools.iter().any(|t| &t.key == key),
                "{name}: {:?} expects unknown key {key}",
                case.query
            );
        }
    }
    file.queries
}

/// The scores of one mode over all cases.
#[derive(Debug, Clone, Copy, Default)]
pub struct Metrics {
    pub recall_at_1: f64,
    pub recall_at_5: f64,
    pub mrr: f64,
}

/// The default model directory for tests and benchmarks: `MCC_TEST_MODEL_DIR`, else where
/// scripts/fetch-model.sh puts it. `None` (with the reason) when it is not there.
pub fn model_dir() -> Result<PathBuf, String> {
    let dir = match std::env::var_os("MCC_TEST_MODEL_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let cache = std::env::var_os("MCC_MODEL_CACHE")
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("XDG_CACHE_HOME").map(|c| PathBuf::from(c).join("mcc/models"))
                })
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/mcc/models"))
                })
                .unwrap_or_default();
            cache.join("all-MiniLM-L6-v2")
        }
    };
    if dir.join("model.safetensors").is_file() {
        Ok(dir)
    } else {
        Err(format!(
            "no model at {} (run scripts/fetch-model.sh or set MCC_TEST_MODEL_DIR)",
            dir.display()
        ))
    }
}

/// Ranks every case in `mode` and scores the rankings. `service` supplies query
/// embeddings (ignored in keyword mode).
pub fn evaluate(
    index: &SearchIndex,
    service: &SearchService,
    cases: &[Case],
    mode: Mode,
) -> Metrics {
    let allowed = index.allowed_for(Some(&admin()));
    let mut m = Metrics::default();
    for case in cases {
        let qv = match mode {
            Mode::Keyword => None,
            _ => service.embed_query_blocking(&case.query),
        };
        let hits = index
            .search(&case.query, qv.as_deref(), mode, allowed.clone(), None, 10)
            .expect("search");
        let rank = hits
            .iter()
            .position(|h| case.expected.contains(&index.tools()[h.index].key));
        if let Some(r) = rank {
            m.recall_at_1 += f64::from(r == 0);
            m.recall_at_5 += f64::from(r < 5);
            m.mrr += 1.0 / (r as f64 + 1.0);
        }
    }
    let n = cases.len() as f64;
    Metrics {
        recall_at_1: m.recall_at_1 / n,
        recall_at_5: m.recall_at_5 / n,
        mrr: m.mrr / n,
    }
}

/// A user who may execute every tool, so relevance is measured on the whole catalog.
pub fn admin() -> mcc_catalog::User {
    mcc_catalog::User {
        username: "eval".into(),
        groups: vec!["admin".into()],
        ..Default::default()
    }
}

/// The markdown table of the results.
pub fn table(rows: &[(&str, Metrics)]) -> String {
    let mut out = String::from("| mode | recall@1 | recall@5 | MRR |\n|---|---|---|---|\n");
    for (name, m) in rows {
        out.push_str(&format!(
            "| {name} | {:.3} | {:.3} | {:.3} |\n",
            m.recall_at_1, m.recall_at_5, m.mrr
        ));
    }
    out
}
