//! Search for a caller: rank with [`mcc_search`] over the request's catalog snapshot
//! (RBAC applied before ranking), time it, and record one audit event. Returns the hits
//! as data ([`Found`]); MCP renders them as MCC's text ([`text`]), REST as JSON.

use std::time::Instant;

use super::{CallCtx, Shared};
use crate::audit::AuditEvent;
use mcc_search::SearchError;

/// One hit: the tool's key, its fused score and its signature block (ends with `\n`),
/// as the request's catalog snapshot has it.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub key: String,
    pub score: f32,
    pub signature: String,
}

/// How a search ended.
#[derive(Debug)]
pub enum Searched {
    /// Ranked hits, best first (possibly none).
    Found(Vec<Found>),
    /// The caller's mistake (a query over `search.max_query_bytes`).
    Invalid(SearchError),
    /// The gateway's failure.
    Error(SearchError),
}

impl Searched {
    /// The outcome label of the audit event.
    pub fn label(&self) -> &'static str {
        match self {
            Searched::Found(_) => "success",
            Searched::Invalid(_) => "invalid",
            Searched::Error(_) => "error",
        }
    }
}

/// Ranks the tools `call`'s caller may run for `query` and records the search, in a
/// `search` span (never the query), whichever surface asked.
#[tracing::instrument(
    name = "search",
    target = "mcc_trace",
    skip_all,
    fields(mcc.user = call.caller.username(), mcc.outcome = tracing::field::Empty)
)]
pub async fn search(
    shared: &Shared,
    call: &CallCtx,
    query: &str,
    min_score: Option<f64>,
) -> Searched {
    let started = Instant::now();
    let mut event = AuditEvent::new("search", &call.caller);
    event.min_score = min_score;
    let catalog = shared.catalog.snapshot();
    let user = call.caller.user.as_ref();
    let result = shared
        .search
        .search(Some(catalog.clone()), query, user, min_score)
        .await;
    shared.metrics.search(started.elapsed());
    let searched = match result {
        Ok((index, hits)) => Searched::Found(
            hits.iter()
                .filter_map(|h| {
                    // The snapshot decides what a hit shows: an index built from an
                    // earlier catalog may hold a tool as it was (the service already
                    // dropped removed tools and applied the snapshot's RBAC).
                    let tool = catalog.tool(&index.tools()[h.index].key)?;
                    Some(Found {
                        key: tool.key.clone(),
                        score: h.score,
                        signature: super::text::signature(tool, &shared.approvals.policy),
                    })
                })
                .collect(),
        ),
        // A caller's oversized query is its own mistake, not the gateway's: answered,
        // not logged as an error (callers could otherwise fill the error log). Its
        // text is not recorded either.
        Err(e @ SearchError::QueryTooLong { .. }) => Searched::Invalid(e),
        Err(e) => {
            tracing::error!(error = %e, "search failed");
            Searched::Error(e)
        }
    };
    match &searched {
        Searched::Found(found) => {
            event.query = Some(query.to_string());
            event.bytes_out = text(found).len() as u64;
        }
        Searched::Invalid(e) => event.reason = Some(e.to_string()),
        Searched::Error(_) => event.query = Some(query.to_string()),
    }
    event.finish(searched.label(), started.elapsed());
    tracing::Span::current().record("mcc.outcome", searched.label());
    shared.audit.record(&event);
    searched
}

/// MCC's search output: each hit as `[<score:.2f>]\n<signature>`, joined by a blank line,
/// or its no-match text.
pub fn text(found: &[Found]) -> String {
    mcc_search::render(found.iter().map(|f| (f.score, f.signature.as_str())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_mccs_format() {
        assert_eq!(text(&[]), mcc_search::NO_MATCH);
        let found = |key: &str, score| Found {
            key: key.into(),
            score,
            signature: format!("{key}() -> str\n"),
        };
        assert_eq!(
            text(&[found("a.x", 1.5), found("a.y", 0.125)]),
            "[1.50]\na.x() -> str\n\n\n[0.12]\na.y() -> str\n"
        );
    }
}
