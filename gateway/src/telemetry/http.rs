//! The `request` span: one OpenTelemetry server span per HTTP request (not the probes'
//! and scrapes' `/healthz`, `/readyz`, `/metrics`), with `http.request.method`,
//! `url.path` (never the query), `http.route` and `http.response.status_code`; a 5xx
//! answer marks it an error. A W3C `traceparent` (and `tracestate`) from the caller
//! makes it a child of the caller's span, so the caller's trace continues here.
//!
//! The span is never entered while the request is served: handlers that run in other
//! tasks (rmcp's) would otherwise keep it for the life of a legacy MCP session. Its
//! OpenTelemetry context is what the inner work runs in instead, and it travels in the
//! request's extensions ([`RequestTrace`]) to those tasks ([`super::within`]). The span
//! ends when the response starts.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use tracing::field::Empty;

#[cfg(feature = "otel")]
use super::spans::RequestTrace;

/// Requests without a span: probes and scrapes come every few seconds and say nothing.
fn untraced(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/metrics")
}

/// The middleware that opens the `request` span, for `Router::layer` (applied to each
/// route, so the route that matched is known).
pub async fn trace_request(request: Request, next: Next) -> Response {
    let path = request.uri().path();
    // Off (no exporter, or no `otel` feature): nothing is computed for the span.
    if untraced(path) || !tracing::enabled!(target: "mcc_trace", tracing::Level::INFO) {
        return next.run(request).await;
    }
    let method = request.method().as_str();
    let route = match request.extensions().get::<MatchedPath>() {
        // `/mcp` is a nested service: its matched path may carry axum's tail parameter.
        _ if path == "/mcp" => Some("/mcp"),
        Some(matched) => Some(matched.as_str()),
        None => None,
    };
    let name = match route {
        Some(route) => format!("{method} {route}"),
        None => method.to_string(),
    };
    let span = tracing::info_span!(
        target: "mcc_trace",
        "request",
        otel.name = %name,
        otel.kind = "server",
        "http.request.method" = %method,
        "url.path" = super::spans::bounded(path),
        "http.route" = route,
        "http.response.status_code" = Empty,
        otel.status_code = Empty,
    );
    if span.is_disabled() {
        return next.run(request).await;
    }
    let response = serve(&span, request, next).await;
    let status = response.status();
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() {
        span.record("otel.status_code", "error");
    }
    response
}

#[cfg(feature = "otel")]
async fn serve(span: &tracing::Span, mut request: Request, next: Next) -> Response {
    use opentelemetry::context::FutureExt as _;
    use opentelemetry::propagation::TextMapPropagator as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let caller = opentelemetry_sdk::propagation::TraceContextPropagator::new()
        .extract(&opentelemetry_http::HeaderExtractor(request.headers()));
    let _ = span.set_parent(caller);
    let cx = span.context();
    request
        .extensions_mut()
        .insert(RequestTrace { cx: cx.clone() });
    next.run(request).with_context(cx).await
}

#[cfg(not(feature = "otel"))]
async fn serve(_span: &tracing::Span, request: Request, next: Next) -> Response {
    next.run(request).await
}
