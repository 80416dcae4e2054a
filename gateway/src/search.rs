//! Tool search: ranks the tools a caller may run against a query.
//!
//! The ranking here is a plain keyword score, a stand-in until the hybrid (keyword +
//! semantic) search lands; the interface is what the MCP `search` tool relies on: results
//! are already RBAC-filtered, sorted best first and cut at `min_score`.
//!
//! Score: for each distinct query term (lowercased alphanumeric words), 3 points when it is
//! a segment of the tool key, 2 when it is a word of the signature's parameter names,
//! 1 when it appears anywhere in the signature text; the sum is the score.

use std::sync::OnceLock;

use mcc_catalog::{Tool, User};

use crate::catalog::Catalog;

/// One search result.
#[derive(Debug, Clone, Copy)]
pub struct Hit<'a> {
    pub score: f64,
    pub tool: &'a Tool,
    /// The tool's signature block (what `search` shows).
    pub signature: &'a str,
}

/// What the ranking needs of each tool, computed once per catalog snapshot.
#[derive(Debug, Default)]
pub struct Index {
    docs: Vec<Doc>,
}

#[derive(Debug)]
struct Doc {
    key_words: Vec<String>,
    param_words: Vec<String>,
    /// Sorted and deduplicated, for binary search.
    text_words: Vec<String>,
    signature: String,
}

impl Index {
    /// Indexes `tools` (in catalog order).
    pub fn build(tools: &[Tool]) -> Self {
        let docs = tools
            .iter()
            .map(|tool| {
                let signature = mcc_catalog::signature(tool);
                Doc {
                    key_words: words(&tool.key),
                    param_words: tool.visible_params().flat_map(|p| words(&p.name)).collect(),
                    text_words: words(&signature),
                    signature,
                }
            })
            .collect();
        Self { docs }
    }
}

/// A lazily built [`Index`], kept beside a catalog snapshot.
#[derive(Debug, Default)]
pub struct LazyIndex(OnceLock<Index>);

impl LazyIndex {
    pub fn get(&self, tools: &[Tool]) -> &Index {
        self.0.get_or_init(|| Index::build(tools))
    }
}

/// The tools `user` may run that match `query`, best first (ties by key), with their
/// scores. Tools that match no term are left out; so are tools below `min_score`.
pub fn search<'a>(
    catalog: &'a Catalog,
    query: &str,
    user: Option<&User>,
    min_score: Option<f64>,
) -> Vec<Hit<'a>> {
    let terms = words(query);
    let index = catalog.search_index();
    let mut hits: Vec<Hit<'a>> = catalog
        .tools()
        .iter()
        .zip(&index.docs)
        .filter(|(t, _)| t.allows(user))
        .map(|(tool, doc)| Hit {
            score: score(doc, &terms),
            tool,
            signature: &doc.signature,
        })
        .filter(|h| h.score > 0.0 && min_score.is_none_or(|m| h.score >= m))
        .collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.tool.key.cmp(&b.tool.key))
    });
    hits
}

/// Lowercased alphanumeric words, sorted and deduplicated.
fn words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    out.sort();
    out.dedup();
    out
}

fn score(doc: &Doc, terms: &[String]) -> f64 {
    terms
        .iter()
        .map(|term| {
            let mut s = 0.0;
            if doc.key_words.binary_search(term).is_ok() {
                s += 3.0;
            }
            if doc.param_words.contains(term) {
                s += 2.0;
            }
            if doc.text_words.binary_search(term).is_ok() {
                s += 1.0;
            }
            s
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(key: &str, groups: &[&str], description: &str) -> Tool {
        serde_json::from_value(json!({
            "key": key, "name": key.rsplit('.').next().unwrap(), "groups": groups,
            "description": description, "kind": "exec", "command": "true"
        }))
        .unwrap()
    }

    fn catalog() -> Catalog {
        Catalog::new(
            vec![
                tool("public.echo", &["public"], "Echo a message back."),
                tool("ops.restart", &["ops"], "Restart a service by name."),
                tool("public.weather", &["public"], "Weather for a city."),
            ],
            vec![],
        )
    }

    #[test]
    fn ranks_key_matches_first_and_filters_by_rbac() {
        let c = catalog();
        let anon: Vec<&str> = search(&c, "echo message", None, None)
            .iter()
            .map(|h| h.tool.key.as_str())
            .collect();
        assert_eq!(anon, vec!["public.echo"]);
        assert!(search(&c, "restart service", None, None).is_empty());
        let ops = User {
            username: "o".into(),
            groups: vec!["ops".into()],
            ..User::default()
        };
        let hits = search(&c, "restart service", Some(&ops), None);
        assert_eq!(hits[0].tool.key, "ops.restart");
        assert_eq!(hits[0].score, 3.0 + 1.0 + 1.0);
        assert!(hits[0].signature.starts_with("## ops.restart ()"));
    }

    #[test]
    fn min_score_cuts_and_no_terms_match_nothing() {
        let c = catalog();
        assert_eq!(search(&c, "a", None, None).len(), 2);
        assert!(search(&c, "a", None, Some(1.5)).is_empty());
        assert!(search(&c, "  ", None, None).is_empty());
    }
}
