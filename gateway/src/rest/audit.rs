//! `GET /v1/audit`: the audit trail for administrators, where its Redis is out of reach
//! (a cluster's Redis sits behind a password): the filters of [`crate::audit::read`],
//! one bounded page per request, the next behind `next`. Only members of the `admin`
//! group get an answer; anyone else gets the same 403 whatever they ask, before their
//! query is read, so it tells them nothing about the trail or the settings.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::handlers::{Caller, RestState};
use crate::audit::AuditEvent;
use crate::audit::read::{self, DEFAULT_PAGE, Filter, FilterText, MAX_PAGE};

/// The query of `GET /v1/audit`; every parameter is optional, an unknown one is refused.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// `execute` (or MCC's `tool`) or `search`.
    pub event: Option<String>,
    /// The caller's username, exactly.
    pub user: Option<String>,
    /// The tool key, exactly.
    pub tool: Option<String>,
    /// `success`, `failure`, `error`, `unknown`, `unauthorized`, `invalid`,
    /// `rate_limited`, `cancelled` or `input_required`.
    pub outcome: Option<String>,
    /// A case-insensitive part of a search's query.
    pub query: Option<String>,
    /// Events that began at or after: RFC 3339, a UTC date (`2026-12-01`) or an age
    /// (`30m`, `12h`, `7d`).
    pub since: Option<String>,
    /// Events that began at or before (same forms as `since`).
    pub until: Option<String>,
    /// Events per page: 1 to 1000, default 100.
    pub limit: Option<String>,
    /// The `next` of the previous page.
    pub cursor: Option<String>,
}

/// One page of the audit trail, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AuditPage {
    pub events: Vec<AuditEvent>,
    /// Pass as `cursor` for the next page; absent at the end of the trail. A page can
    /// hold fewer than `limit` events (or none) and still have a `next`: each page reads
    /// a bounded part of the trail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// The audit trail (administrators only).
#[utoipa::path(
    get,
    path = "/audit",
    tag = "audit",
    params(AuditQuery),
    responses(
        (status = 200, description = "A page of audit events, newest first", body = AuditPage),
        (status = 400, description = "A query parameter is malformed (the message names it)", body = ErrorBody),
        (status = 401, description = "No or a bad credential", body = ErrorBody),
        (status = 403, description = "The caller is not in the `admin` group", body = ErrorBody),
        (status = 404, description = "This gateway keeps no audit stream (`audit.stream` is unset)", body = ErrorBody),
        (status = 503, description = "The audit stream's Redis did not answer", body = ErrorBody),
    ),
)]
pub async fn read_audit(
    State(shared): State<RestState>,
    Caller(call): Caller,
    q: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Json<AuditPage>, ApiError> {
    let Some(user) = call.caller.user.as_ref() else {
        return Err(ApiError::NotAuthenticated);
    };
    if !mcc_catalog::rbac::is_admin(user) {
        return Err(ApiError::Forbidden(
            "the audit trail is for members of the admin group".into(),
        ));
    }
    let q = q
        .map(|Query(q)| q)
        .map_err(|e| ApiError::InvalidQuery(e.body_text()))?;
    let text = FilterText {
        event: q.event,
        user: q.user,
        tool: q.tool,
        outcome: q.outcome,
        query: q.query,
        since: q.since,
        until: q.until,
    };
    let invalid = |e: read::FilterError| ApiError::InvalidQuery(e.to_string());
    let filter = Filter::parse(&text, chrono::Utc::now()).map_err(invalid)?;
    let limit = match q.limit.as_deref() {
        None => DEFAULT_PAGE,
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_PAGE).contains(n))
            .ok_or_else(|| {
                ApiError::InvalidQuery(format!(
                    "limit: '{}' is not a number from 1 to {MAX_PAGE}",
                    l.chars().take(32).collect::<String>().escape_debug()
                ))
            })?,
    };
    let cursor = q
        .cursor
        .as_deref()
        .map(read::cursor)
        .transpose()
        .map_err(invalid)?;
    let Some(stream) = shared.audit.stream() else {
        return Err(ApiError::NotConfigured(
            "this gateway keeps no audit stream (audit.stream is unset, or has no Redis)".into(),
        ));
    };
    let page = stream
        .page(&filter, limit, cursor.as_deref())
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "GET /v1/audit: the audit stream cannot be read");
            ApiError::StoreUnavailable("the audit stream cannot be read now".into())
        })?;
    if page.unreadable > 0 {
        tracing::warn!(
            stream = stream.key(),
            entries = page.unreadable,
            "audit stream entries that are not audit events were skipped"
        );
    }
    Ok(Json(AuditPage {
        events: page.events,
        next: page.next,
    }))
}
