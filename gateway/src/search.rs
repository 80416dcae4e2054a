//! Tool search: ranks the tools a caller may run against a query.
//!
//! The ranking here is a plain keyword score, a stand-in until the hybrid (keyword +
//! semantic) search lands; the interface is what the MCP `search` tool relies on: results
//! are already RBAC-filtered, sorted best first and cut at `min_score`.
//!
//! Score: for each distinct query term (lowercased alphanumeric words), 3 points when it is
//! a segment of the tool key, 2 when it is a word of the signature's parameter names,
//! 1 when it appears anywhere in the signature text; the sum is the score.

use mcc_catalog::{Tool, User};

use crate::catalog::Catalog;

/// The tools `user` may run that match `query`, best first, with their scores. Tools that
/// match no term are left out; so are tools below `min_score`.
pub fn search<'a>(
    catalog: &'a Catalog,
    query: &str,
    user: Option<&User>,
    min_score: Option<f64>,
) -> Vec<(f64, &'a Tool)> {
    let terms = words(query);
    let mut hits: Vec<(f64, &Tool)> = catalog
        .tools()
        .iter()
        .filter(|t| t.allows(user))
        .map(|t| (score(t, &terms), t))
        .filter(|(s, _)| *s > 0.0 && min_score.is_none_or(|m| *s >= m))
        .collect();
    hits.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.key.cmp(&b.1.key)));
    hits
}

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

fn score(tool: &Tool, terms: &[String]) -> f64 {
    if terms.is_empty() {
        return 0.0;
    }
    let key = tool.key.to_lowercase();
    let key_words: Vec<&str> = key.split(|c: char| !c.is_alphanumeric()).collect();
    let param_words: Vec<String> = tool.visible_params().flat_map(|p| words(&p.name)).collect();
    let text = mcc_catalog::signature(tool).to_lowercase();
    let text_words = words(&text);
    terms
        .iter()
        .map(|term| {
            let mut s = 0.0;
            if key_words.contains(&term.as_str()) {
                s += 3.0;
            }
            if param_words.contains(term) {
                s += 2.0;
            }
            if text_words.binary_search(term).is_ok() {
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
            .map(|(_, t)| t.key.as_str())
            .collect();
        assert_eq!(anon, vec!["public.echo"]);
        assert!(search(&c, "restart service", None, None).is_empty());
        let ops = User {
            username: "o".into(),
            groups: vec!["ops".into()],
            ..User::default()
        };
        let hits = search(&c, "restart service", Some(&ops), None);
        assert_eq!(hits[0].1.key, "ops.restart");
        assert_eq!(hits[0].0, 3.0 + 1.0 + 1.0);
    }

    #[test]
    fn min_score_cuts_and_no_terms_match_nothing() {
        let c = catalog();
        assert_eq!(search(&c, "a", None, None).len(), 2);
        assert!(search(&c, "a", None, Some(1.5)).is_empty());
        assert!(search(&c, "  ", None, None).is_empty());
    }
}
