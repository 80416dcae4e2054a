//! A tower layer in front of `/mcp` that answers bad POST bodies the way JSON-RPC and the
//! MCP streamable HTTP transport specify, before rmcp sees them: a body over the limit →
//! 413 with an Invalid Request error; a body that is not JSON → 400 with a Parse error; JSON
//! that is not a JSON-RPC message (rmcp's 415) → 400 with an Invalid Request error. Every
//! error body is a JSON-RPC error object with `id: null`. A closed session (DELETE) is
//! answered 200, as MCP clients expect.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use crate::mcp::jsonrpc::{INVALID_REQUEST, PARSE_ERROR, error_response};

/// The largest accepted body, in bytes.
#[derive(Clone, Copy)]
pub struct BodyLimit(pub usize);

fn is_json(request: &Request) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim())
        .is_some_and(|v| v.eq_ignore_ascii_case("application/json"))
}

/// rmcp answers a session DELETE with 202; MCP clients (the official Python SDK among
/// them) expect 200 or 204 for a closed session, and the reference answers 200.
fn session_closed(mut response: Response) -> Response {
    if response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::OK;
    }
    response
}

/// The middleware (see the module doc).
pub async fn guard(
    State(BodyLimit(limit)): State<BodyLimit>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() == Method::DELETE {
        return session_closed(next.run(request).await);
    }
    if request.method() != Method::POST || !is_json(&request) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(b) => b,
        Err(_) => {
            return error_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                INVALID_REQUEST,
                format!("Request body exceeds {limit} bytes"),
            );
        }
    };
    if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
        return error_response(
            StatusCode::BAD_REQUEST,
            PARSE_ERROR,
            format!("Parse error: {e}"),
        );
    }
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
        let detail = axum::body::to_bytes(response.into_body(), 64 * 1024)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        return error_response(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            format!("Invalid Request: not a JSON-RPC message ({detail})"),
        );
    }
    response
}
