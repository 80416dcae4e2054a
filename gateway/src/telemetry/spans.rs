//! Span helpers for code that does not own its span's parent: the `auth` span around an
//! authentication, and [`within`], which puts work another task runs (rmcp's handler
//! tasks) into the trace of the HTTP request it serves.
//!
//! Span attributes name the caller (`mcc.user`, `mcc.credential`: its kind, never the
//! credential), the tool key (`mcc.tool`) and the outcome (`mcc.outcome`); never params,
//! session values, queries, tokens or headers.

use std::future::Future;

use tracing::Instrument;
use tracing::field::Empty;

use crate::auth::{AuthError, Identity};

/// Runs `authenticate` in an `auth` span recording who was identified, or why not.
pub async fn auth<F>(authenticate: F) -> Result<Identity, AuthError>
where
    F: Future<Output = Result<Identity, AuthError>>,
{
    let span = tracing::info_span!(
        target: "mcc_trace",
        "auth",
        mcc.user = Empty,
        mcc.credential = Empty,
        mcc.outcome = Empty,
        "error.type" = Empty,
        otel.status_code = Empty,
    );
    let result = authenticate.instrument(span.clone()).await;
    match &result {
        Ok(identity) => {
            span.record("mcc.user", identity.username());
            span.record("mcc.credential", identity.credential.kind());
            span.record("mcc.outcome", "success");
        }
        Err(e) => {
            let kind = match e {
                AuthError::Missing(_) => "missing",
                AuthError::InvalidToken(_) => "invalid_token",
                AuthError::InsufficientScope(_) => "insufficient_scope",
                AuthError::KeysUnavailable(_) => "keys_unavailable",
                AuthError::Forbidden(_) => "forbidden",
            };
            span.record("mcc.outcome", "refused");
            span.record("error.type", kind);
            if matches!(e, AuthError::KeysUnavailable(_)) {
                // The gateway could not check the credential: its failure, not the caller's.
                span.record("otel.status_code", "error");
            }
        }
    }
    result
}

/// The request span's OpenTelemetry context, in the request's extensions: the
/// `request` span (`super::http`) puts it there, [`within`] reads it.
#[derive(Clone)]
pub struct RequestTrace {
    #[cfg(feature = "otel")]
    pub(super) cx: opentelemetry::Context,
}

/// Runs `work` in the trace of the HTTP request `parts` belongs to: spans it opens are
/// children of that request's span, whichever task polls it. Without a traced request
/// (or without the `otel` feature), `work` runs as it is.
pub fn within<F: Future>(
    parts: Option<&http::request::Parts>,
    work: F,
) -> impl Future<Output = F::Output> {
    #[cfg(feature = "otel")]
    let work = {
        use opentelemetry::context::FutureExt as _;
        let cx = parts
            .and_then(|p| p.extensions.get::<RequestTrace>())
            .map(|t| t.cx.clone())
            .unwrap_or_else(opentelemetry::Context::current);
        work.with_context(cx)
    };
    #[cfg(not(feature = "otel"))]
    let _ = parts;
    work
}

/// At most 256 bytes of a caller-chosen text (an unknown tool key) for a span attribute
/// or a log field: a caller must not be able to write a body-sized line into the logs.
pub fn bounded(text: &str) -> &str {
    cut(text, 256)
}

/// The longest start of `text` that fits in `max` bytes and ends on a character boundary.
pub fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Records how a tool process ended on the current (`run`) span: `mcc.exit_code` and
/// `mcc.outcome` (`success`, `failure`: a non-zero exit, `signaled`, `timeout`, `error`:
/// it could not run, which also marks the span an error).
pub fn record_run(ran: &Result<mcc_executor::process::Finished, mcc_executor::RunError>) {
    use mcc_executor::process::Ending;
    let span = tracing::Span::current();
    match ran.as_ref().map(|f| &f.ending) {
        Ok(Ending::Exited(code)) => {
            span.record("mcc.exit_code", code);
            span.record(
                "mcc.outcome",
                if *code == 0 { "success" } else { "failure" },
            );
        }
        Ok(Ending::Signaled(_)) => {
            span.record("mcc.outcome", "signaled");
        }
        Ok(Ending::TimedOut) => {
            span.record("mcc.outcome", "timeout");
        }
        Err(_) => {
            span.record("mcc.outcome", "error");
            span.record("otel.status_code", "error");
        }
    }
}
