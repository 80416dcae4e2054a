//! Query coverage: how much of a query's wording a tool's text contains, the IDF-weighted
//! share of the query's distinct analyzed words found among the tool's terms (an exact
//! term counts 1, a typo-tolerant one [`FUZZY_WEIGHT`]). Words no tool contains count in
//! the whole, so a query the catalog's words explain only in part covers no tool fully.
//!
//! Fusion multiplies the keyword signal by it ([`super::Fusion::score`]): a tool that
//! matches one incidental word of a paraphrase ("how fast is my *connection*" and
//! `postgres_active_connections`) gets little from it, one that matches most of the query
//! keeps its keyword signal. This module knows nothing about BM25, embeddings or RBAC.

use std::collections::HashMap;

use mcc_catalog::Tool;

use super::keyword::{FUZZY_WEIGHT, KeywordIndex, analyze, analyzer, document_texts};

/// Every tool's analyzed terms, as sorted ids, with the postings to count document
/// frequencies.
pub struct Coverage {
    vocab: HashMap<String, u32>,
    /// Per tool: its distinct term ids, sorted.
    terms: Vec<Box<[u32]>>,
    /// Per term id: the tools containing it, ascending.
    postings: Vec<Vec<u32>>,
}

impl Coverage {
    /// Indexes the terms of every keyword field of `tools`.
    pub fn build(tools: &[Tool]) -> Self {
        let mut a = analyzer();
        let mut vocab: HashMap<String, u32> = HashMap::new();
        let mut postings: Vec<Vec<u32>> = Vec::new();
        let mut terms = Vec::with_capacity(tools.len());
        for (doc, tool) in tools.iter().enumerate() {
            let mut ids: Vec<u32> = Vec::new();
            for text in document_texts(tool) {
                for term in analyze(&mut a, &text) {
                    let next = vocab.len() as u32;
                    let id = *vocab.entry(term).or_insert(next);
                    if id == next {
                        postings.push(Vec::new());
                    }
                    ids.push(id);
                }
            }
            ids.sort_unstable();
            ids.dedup();
            for &id in &ids {
                postings[id as usize].push(doc as u32);
            }
            terms.push(ids.into_boxed_slice());
        }
        Coverage {
            vocab,
            terms,
            postings,
        }
    }

    /// The coverage of `query` for each of `candidates` (positions in the catalog), in
    /// order; `keyword` supplies the typo-tolerant expansions of each word.
    pub fn of(&self, keyword: &KeywordIndex, query: &str, candidates: &[usize]) -> Vec<f32> {
        let n = self.terms.len() as f32;
        let mut total = 0.0f32;
        let mut cov = vec![0.0f32; candidates.len()];
        for word in keyword.query_words(query) {
            let exact = self.vocab.get(&word).copied();
            let fuzzy: Vec<u32> = keyword
                .fuzzy_terms(&word)
                .iter()
                .filter_map(|t| self.vocab.get(t).copied())
                .filter(|&id| Some(id) != exact)
                .collect();
            let mut docs: Vec<u32> = exact
                .into_iter()
                .chain(fuzzy.iter().copied())
                .flat_map(|id| self.postings[id as usize].iter().copied())
                .collect();
            docs.sort_unstable();
            docs.dedup();
            let df = docs.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            total += idf;
            for (c, &doc) in cov.iter_mut().zip(candidates) {
                let has = |id: u32| self.terms[doc].binary_search(&id).is_ok();
                if exact.is_some_and(has) {
                    *c += idf;
                } else if fuzzy.iter().any(|&id| has(id)) {
                    *c += FUZZY_WEIGHT * idf;
                }
            }
        }
        if total > 0.0 {
            cov.iter_mut().for_each(|c| *c /= total);
        }
        cov
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str) -> Tool {
        super::super::tests::tool(&["g"], name, description)
    }

    #[test]
    fn a_tool_matching_every_word_covers_all_and_one_word_part() {
        let tools = vec![
            tool("speed_test", "Measure internet bandwidth."),
            tool("active_connections", "Show database connections."),
        ];
        let keyword = KeywordIndex::build(&tools).unwrap();
        let cov = Coverage::build(&tools);
        let all = cov.of(&keyword, "database connections", &[0, 1]);
        assert_eq!(all[0], 0.0);
        assert!((all[1] - 1.0).abs() < 1e-6, "{all:?}");
        let part = cov.of(&keyword, "how fast is my connection", &[1]);
        assert!(part[0] > 0.0 && part[0] < 0.6, "{part:?}");
        let typo = cov.of(&keyword, "databse", &[1]);
        assert!((typo[0] - FUZZY_WEIGHT).abs() < 1e-6, "{typo:?}");
    }
}
