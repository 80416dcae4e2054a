//! The REST surface's refusals and failures: one [`ApiError`] per way a request goes
//! wrong, its status code and its JSON body ([`ErrorBody`]). A key the caller may not
//! run is [`ApiError::NotFound`], exactly as an unknown key (same status, same body).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcc_catalog::params::ValidationError;
use serde::Serialize;
use utoipa::ToSchema;

use crate::calls::approval::Decision;
use crate::calls::executed::SessionFailure;
use crate::ratelimit::RateLimited;

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ErrorBody {
    /// `not_found`, `invalid_params`, `invalid_body`, `invalid_query`, `not_acceptable`,
    /// `unsupported_media_type`, `forbidden`, `rate_limited`, `unavailable`, `busy`,
    /// `session`, `not_authenticated`, `bad_output`, `not_configured`,
    /// `approval_required`, `approval_declined`, `approval_refused` or `error`.
    pub error: String,
    /// What is wrong, in words.
    pub message: String,
    /// `invalid_params`: each problem with the param it concerns.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<ParamProblem>,
    /// `rate_limited`, `unavailable`, `busy`: seconds to wait (also in `Retry-After`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
    /// `approval_required`: the ticket and the question (docs/approval.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<super::approval::ApprovalTicket>,
}

/// One invalid param.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ParamProblem {
    pub param: String,
    pub message: String,
}

/// Why a REST request was not answered with its data.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No tool by this key for this caller: unknown, or one they may not run.
    #[error("Unknown tool: {0}")]
    NotFound(String),
    /// The params are wrong (missing required ones included): 400 naming each.
    #[error("Validation error for tool '{key}': {error}")]
    InvalidParams { key: String, error: ValidationError },
    /// The body is not a JSON object.
    #[error("the request body must be a JSON object of the tool's params: {0}")]
    InvalidBody(String),
    /// A query parameter is missing or malformed (the text names it).
    #[error("{0}")]
    InvalidQuery(String),
    /// `format` (or `Accept`) names a representation this route does not have.
    #[error("{0}")]
    NotAcceptable(String),
    #[error(transparent)]
    RateLimited(RateLimited),
    /// No execution slot within the wait (`concurrency.*`).
    #[error("{0}")]
    Busy(String),
    /// The session handle or the session store.
    #[error("{}", .0.message)]
    Session(SessionFailure),
    /// Refused before authentication: a `Host` or `Origin` the settings do not allow.
    #[error("{0}")]
    Forbidden(String),
    /// A `POST` whose body is not declared `application/json`.
    #[error("send the params with 'Content-Type: application/json'")]
    UnsupportedMediaType,
    /// `/v1/whoami` without a user (an anonymous caller).
    #[error("{}", crate::calls::text::NOT_AUTHENTICATED)]
    NotAuthenticated,
    /// The tool ran and succeeded, but its result does not match its output schema (the
    /// text names the path): 502, the tool (the gateway's upstream) answered wrongly.
    #[error("{0}")]
    BadOutput(String),
    /// The gateway's own failure (the text says which part).
    #[error("{0}")]
    Internal(String),
    /// What the route serves is not set up on this gateway (the text names the setting).
    #[error("{0}")]
    NotConfigured(String),
    /// A store the route reads (Redis) did not answer.
    #[error("{0}")]
    StoreUnavailable(String),
    /// The call needs approval: 428 with a ticket to answer with.
    #[error("{}", .0.question)]
    ApprovalRequired(super::approval::ApprovalTicket),
    /// The call needs approval and did not get it (the text says why).
    #[error("{}", .0.message)]
    NotApproved(crate::calls::approval::Refusal),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::InvalidParams { .. }
            | ApiError::InvalidBody(_)
            | ApiError::InvalidQuery(_) => StatusCode::BAD_REQUEST,
            ApiError::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            ApiError::RateLimited(r) => {
                StatusCode::from_u16(r.http_status()).unwrap_or(StatusCode::TOO_MANY_REQUESTS)
            }
            ApiError::Busy(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Session(f) if f.caller_error => StatusCode::BAD_REQUEST,
            ApiError::Session(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::NotAuthenticated => StatusCode::UNAUTHORIZED,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::BadOutput(_) => StatusCode::BAD_GATEWAY,
            ApiError::NotConfigured(_) => StatusCode::NOT_FOUND,
            ApiError::StoreUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::ApprovalRequired(_) => StatusCode::PRECONDITION_REQUIRED,
            ApiError::NotApproved(r) if r.decision == Decision::Declined => StatusCode::FORBIDDEN,
            ApiError::NotApproved(_) => StatusCode::CONFLICT,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            ApiError::NotFound(_) => "not_found",
            ApiError::InvalidParams { .. } => "invalid_params",
            ApiError::InvalidBody(_) => "invalid_body",
            ApiError::InvalidQuery(_) => "invalid_query",
            ApiError::NotAcceptable(_) => "not_acceptable",
            ApiError::RateLimited(RateLimited::Exceeded { .. }) => "rate_limited",
            ApiError::RateLimited(RateLimited::Unavailable { .. }) => "unavailable",
            ApiError::Busy(_) => "busy",
            ApiError::Session(_) => "session",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::UnsupportedMediaType => "unsupported_media_type",
            ApiError::NotAuthenticated => "not_authenticated",
            ApiError::Internal(_) => "error",
            ApiError::BadOutput(_) => "bad_output",
            ApiError::NotConfigured(_) => "not_configured",
            ApiError::StoreUnavailable(_) => "unavailable",
            ApiError::ApprovalRequired(_) => "approval_required",
            ApiError::NotApproved(r) if r.decision == Decision::Declined => "approval_declined",
            ApiError::NotApproved(_) => "approval_refused",
        }
    }

    fn retry_after(&self) -> Option<u64> {
        match self {
            ApiError::RateLimited(r) => Some(r.retry_after_secs()),
            // A slot frees as soon as a running call ends.
            ApiError::Busy(_) => Some(1),
            _ => None,
        }
    }

    pub fn body(&self) -> ErrorBody {
        let params = match self {
            ApiError::InvalidParams { error, .. } => error
                .problems
                .iter()
                .map(|p| ParamProblem {
                    param: p.param.clone(),
                    message: p.message.clone(),
                })
                .collect(),
            _ => Vec::new(),
        };
        ErrorBody {
            error: self.code().to_string(),
            message: self.to_string(),
            params,
            retry_after: self.retry_after(),
            approval: match self {
                ApiError::ApprovalRequired(ticket) => Some(ticket.clone()),
                _ => None,
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status(), Json(self.body())).into_response();
        if let Some(secs) = self.retry_after() {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rate_limits_answer_429_or_503_with_retry_after() {
        let exceeded = ApiError::RateLimited(RateLimited::Exceeded {
            tool: "public.echo".into(),
            scope: crate::ratelimit::Scope::Tool,
            limit: "1/1min".parse().unwrap(),
            retry_after: Duration::from_millis(2500),
        });
        let response = exceeded.into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "3");
        let closed = ApiError::RateLimited(RateLimited::Unavailable {
            retry_after: Duration::from_secs(1),
        });
        assert_eq!(closed.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(closed.body().error, "unavailable");
    }

    #[test]
    fn forbidden_and_unknown_are_one_error() {
        let body = ApiError::NotFound("admin.shell".into()).body();
        assert_eq!(body.error, "not_found");
        assert_eq!(body.message, "Unknown tool: admin.shell");
    }
}
