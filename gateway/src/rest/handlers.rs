//! The REST handlers: each reads its request, calls the one shared call
//! ([`crate::calls`]) and renders the outcome as a status code and JSON. Their
//! `#[utoipa::path]` attributes are the OpenAPI document's operations; their paths are
//! MCC's spellings, served under [`super::PREFIX`] too.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use super::approval::RestAsk;
use super::error::{ApiError, ErrorBody};
use super::format::{self, Format};
use super::types::{
    ExecuteParams, ExecuteQuery, ExecuteResult, ListQuery, SearchQuery, SearchResults, ToolInfo,
    ToolList, WhoAmIBody,
};
use crate::auth::Identity;
use crate::calls::execute as pipeline;
use crate::calls::executed::{ExecRequest, Executed};
use crate::calls::search::{self, Searched};
use crate::calls::view;
use crate::calls::{CallCtx, Shared};
use crate::exec::ExecError;

/// What every handler shares.
pub type RestState = Arc<Shared>;

/// The caller, as [`crate::auth`]'s middleware resolved it (anonymous when no
/// authentication layer ran, as on MCP). REST has no MCP session.
pub struct Caller(pub CallCtx);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let caller = parts
            .extensions
            .get::<Identity>()
            .cloned()
            .unwrap_or_default();
        Ok(Caller(CallCtx {
            caller,
            mcp_session: None,
        }))
    }
}

fn query<T>(q: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    q.map(|Query(t)| t)
        .map_err(|e| ApiError::InvalidQuery(e.body_text()))
}

/// The tools the caller may run.
#[utoipa::path(
    get,
    path = "/tools",
    tag = "tools",
    params(ListQuery),
    responses(
        (status = 200, description = "The caller's tools, sorted by key: JSON by default, Markdown on `Accept: text/markdown` or `?format=md`, HTML on `Accept: text/html` or `?format=html`",
         content(
             (ToolList = "application/json"),
             (String = "text/markdown"),
             (String = "text/html"),
         )),
        (status = 401, description = "No or a bad credential", body = ErrorBody),
        (status = 406, description = "`format` names no representation", body = ErrorBody),
    ),
)]
pub async fn list_tools(
    State(shared): State<RestState>,
    Caller(call): Caller,
    headers: HeaderMap,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let q = query(q)?;
    let format = Format::negotiate(q.format.as_deref(), &headers)?;
    let catalog = shared.catalog.snapshot();
    let tools = view::visible_tools(&catalog, call.caller.user.as_ref(), &q.groups());
    let body = match format {
        Format::Json => {
            let list = ToolList {
                tools: tools
                    .into_iter()
                    .map(|t| ToolInfo::new(t, &shared.approvals.policy))
                    .collect(),
            };
            return Ok(Json(list).into_response());
        }
        Format::Markdown => format::markdown(&tools, &shared.approvals.policy),
        Format::Html => format::html(&tools, &shared.approvals.policy),
    };
    Ok(([(header::CONTENT_TYPE, format.content_type())], body).into_response())
}

/// One tool; a key the caller may not run answers as an unknown key.
#[utoipa::path(
    get,
    path = "/tools/{key}",
    tag = "tools",
    params(("key" = String, Path, description = "The tool's key, e.g. `public.echo`")),
    responses(
        (status = 200, description = "The tool", body = ToolInfo),
        (status = 401, description = "No or a bad credential", body = ErrorBody),
        (status = 404, description = "No such tool for this caller (unknown, or not theirs to run: the same answer)", body = ErrorBody),
    ),
)]
pub async fn get_tool(
    State(shared): State<RestState>,
    Caller(call): Caller,
    Path(key): Path<String>,
) -> Result<Json<ToolInfo>, ApiError> {
    let catalog = shared.catalog.snapshot();
    view::visible_tool(&catalog, call.caller.user.as_ref(), &key)
        .map(|t| Json(ToolInfo::new(t, &shared.approvals.policy)))
        .ok_or(ApiError::NotFound(key))
}

/// Runs a tool: the body is a JSON object of its params.
#[utoipa::path(
    post,
    path = "/tools/{key}",
    tag = "tools",
    params(
        ("key" = String, Path, description = "The tool's key, e.g. `public.echo`"),
        ExecuteQuery,
    ),
    request_body(content = ExecuteParams, content_type = "application/json",
        description = "The tool's params by name; an empty body is `{}`"),
    responses(
        (status = 200, description = "The tool ran (`outcome` says whether it succeeded)", body = ExecuteResult),
        (status = 400, description = "Bad params (each named; missing required ones included), a body that is not a JSON object, or a bad session handle", body = ErrorBody),
        (status = 401, description = "No or a bad credential", body = ErrorBody),
        (status = 403, description = "The Host or the browser's Origin is not allowed (every route); or `approval_declined`: the call needs approval and the person declined it", body = ErrorBody),
        (status = 404, description = "No such tool for this caller (unknown, or not theirs to run: the same answer)", body = ErrorBody),
        (status = 409, description = "`approval_refused`: the approval ticket is unknown, expired, already used, or was issued for another call (arguments, key, user or session)", body = ErrorBody),
        (status = 413, description = "The body is over server.max_request_body"),
        (status = 415, description = "Not `Content-Type: application/json`", body = ErrorBody),
        (status = 428, description = "`approval_required`: the call needs a person's approval; `approval` holds the ticket and the question (docs/approval.md)", body = ErrorBody),
        (status = 429, description = "Over a rate limit", body = ErrorBody,
         headers(("Retry-After" = u64, description = "Seconds until the window ends"))),
        (status = 500, description = "The tool could not be run", body = ErrorBody),
        (status = 502, description = "The tool's result does not match its output schema (the message names the path)", body = ErrorBody),
        (status = 503, description = "No execution slot, the rate limits could not be checked (`on_redis_error: closed`) or the session store is down", body = ErrorBody,
         headers(("Retry-After" = u64, description = "Seconds to wait (busy and rate-limit refusals)"))),
    ),
)]
pub async fn execute_tool(
    State(shared): State<RestState>,
    Caller(call): Caller,
    Path(key): Path<String>,
    q: Result<Query<ExecuteQuery>, QueryRejection>,
    body: Bytes,
) -> Result<Json<ExecuteResult>, ApiError> {
    let parsed = query(q).and_then(|q| Ok((q, params_of(&body)?)));
    let (q, params) = match parsed {
        Ok(x) => x,
        Err(e) => {
            pipeline::record_unparsed(&shared, &call, "execute", Some(&key));
            return Err(e);
        }
    };
    let request = ExecRequest {
        key: &key,
        params,
        session: q.session.as_deref(),
        // A client that hangs up drops this handler, and the run with it.
        cancel: None,
    };
    if q.approval_ticket.is_some() && q.approval.is_none() {
        pipeline::record_unparsed(&shared, &call, "execute", Some(&key));
        return Err(ApiError::InvalidQuery(
            "approval_ticket needs approval=approve or approval=decline".into(),
        ));
    }
    let ask = RestAsk {
        ticket: q.approval_ticket.clone(),
        decision: q.approval,
    };
    match pipeline::execute(&shared, &call, request, &ask).await {
        Executed::Ran(ran) => Ok(Json(ExecuteResult::from(ran))),
        Executed::Unknown | Executed::Unauthorized => Err(ApiError::NotFound(key)),
        Executed::Invalid(error) => Err(ApiError::InvalidParams { key, error }),
        Executed::RateLimited(refused) => Err(ApiError::RateLimited(refused)),
        Executed::Session(failure) => Err(ApiError::Session(failure)),
        Executed::NotRun(e @ ExecError::Busy { .. }) => Err(ApiError::Busy(e.to_string())),
        Executed::BadOutput(e) => Err(ApiError::BadOutput(e.to_string())),
        Executed::NotRun(e) => Err(ApiError::Internal(format!(
            "the tool could not be run: {e}"
        ))),
        Executed::Pending(ticket) => Err(ApiError::ApprovalRequired(ticket)),
        Executed::NotApproved(refusal) => Err(ApiError::NotApproved(refusal)),
        Executed::Cancelled | Executed::Aborted => {
            Err(ApiError::Internal("the call was cancelled".into()))
        }
    }
}

/// The params in a request body: empty is none; otherwise a JSON object.
fn params_of(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(params)) => Ok(params),
        Ok(other) => Err(ApiError::InvalidBody(format!(
            "got {}",
            match other {
                Value::Array(_) => "an array",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                Value::Bool(_) => "a boolean",
                _ => "null",
            }
        ))),
        Err(e) => Err(ApiError::InvalidBody(e.to_string())),
    }
}

/// Ranks the tools the caller may run for `q`.
#[utoipa::path(
    get,
    path = "/search",
    tag = "search",
    params(SearchQuery),
    responses(
        (status = 200, description = "Hits, best first (none: an empty list)", body = SearchResults),
        (status = 400, description = "`q` missing, too long, or `min_score` not a number", body = ErrorBody),
        (status = 401, description = "No or a bad credential", body = ErrorBody),
        (status = 500, description = "Search failed", body = ErrorBody),
    ),
)]
pub async fn search_tools(
    State(shared): State<RestState>,
    Caller(call): Caller,
    q: Result<Query<SearchQuery>, QueryRejection>,
) -> Result<Json<SearchResults>, ApiError> {
    let q = match query(q) {
        Ok(q) => q,
        Err(e) => {
            pipeline::record_unparsed(&shared, &call, "search", None);
            return Err(e);
        }
    };
    match search::search(&shared, &call, &q.q, q.min_score).await {
        Searched::Found(found) => Ok(Json(SearchResults {
            results: found.into_iter().map(Into::into).collect(),
        })),
        Searched::Invalid(e) => Err(ApiError::InvalidQuery(format!("q: {e}"))),
        Searched::Error(e) => Err(ApiError::Internal(format!("Search failed: {e}"))),
    }
}

/// Who the caller is and which tools they may run.
#[utoipa::path(
    get,
    path = "/whoami",
    tag = "identity",
    responses(
        (status = 200, description = "The caller", body = WhoAmIBody),
        (status = 401, description = "No or a bad credential, or an anonymous caller", body = ErrorBody),
    ),
)]
pub async fn whoami(
    State(shared): State<RestState>,
    Caller(call): Caller,
) -> Result<Json<WhoAmIBody>, ApiError> {
    let catalog = shared.catalog.snapshot();
    view::whoami(&catalog, call.caller.user.as_ref())
        .map(|me| Json(me.into()))
        .ok_or(ApiError::NotAuthenticated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_objects_or_empty() {
        assert!(params_of(b"").unwrap().is_empty());
        assert!(params_of(b" \n").unwrap().is_empty());
        assert_eq!(params_of(br#"{"a": 1}"#).unwrap()["a"], 1);
        let err = params_of(b"[1]").unwrap_err();
        assert_eq!(
            err.to_string(),
            "the request body must be a JSON object of the tool's params: got an array"
        );
        assert!(matches!(params_of(b"{"), Err(ApiError::InvalidBody(_))));
    }
}
