//! JSON-RPC error answers given over HTTP before a request reaches rmcp: an error object
//! with `id: null`, for the layers in front of `/mcp` (the HTTP guards, the session-owner
//! check). The MCP protocol's JSON-RPC, so it sits here, below the HTTP layers that use it.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// JSON-RPC error codes.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const INTERNAL_ERROR: i64 = -32603;

/// A JSON-RPC error body with `id: null`, answered with `status`.
pub fn error_response(status: StatusCode, code: i64, message: String) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}
