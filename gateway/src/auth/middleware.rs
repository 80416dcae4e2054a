//! The HTTP face of authentication: an axum middleware that authenticates each request
//! and stores its [`Identity`] in the request extensions, and the refusal responses
//! (RFC 6750 `WWW-Authenticate: Bearer ...` challenges).
//!
//! Mount it on the `/mcp` routes only:
//!
//! ```ignore
//! let mcp = Router::new()
//!     .nest_service("/mcp", streamable_http_service)
//!     .layer(axum::middleware::from_fn_with_state(authenticator, auth::authenticate_request));
//! ```
//!
//! rmcp passes the request's `http::request::Parts` to tool handlers in the request
//! context extensions; the [`Identity`] is in `parts.extensions`.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};

use super::{AuthError, Authenticator, Identity};

/// Authenticate the request; on success run the rest of the stack with the caller's
/// [`Identity`] in the extensions, else answer with [`challenge`].
pub async fn authenticate_request(
    State(auth): State<Authenticator>,
    mut request: Request,
    next: Next,
) -> Response {
    match crate::telemetry::spans::auth(auth.authenticate(request.headers())).await {
        Ok(identity) => {
            // Whatever a client may have smuggled in is replaced by what we resolved.
            request.extensions_mut().insert::<Identity>(identity);
            next.run(request).await
        }
        Err(err) => {
            tracing::info!(reason = %err, "request refused by authentication");
            challenge(&auth, &err)
        }
    }
}

/// The response for a refused credential: 401 (missing or invalid), 403 (insufficient
/// scope, or a genuine identity that is no catalog user) or 503 (keys unavailable), with a `WWW-Authenticate` header and a small JSON
/// body `{"error": ..., "error_description": ...}`.
pub fn challenge(auth: &Authenticator, err: &AuthError) -> Response {
    let (status, code) = status_and_code(err);
    let body = serde_json::json!({
        "error": code.unwrap_or(if status == StatusCode::FORBIDDEN {
            "forbidden"
        } else {
            "unauthorized"
        }),
        "error_description": err.to_string(),
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if status != StatusCode::SERVICE_UNAVAILABLE {
        headers.insert(header::WWW_AUTHENTICATE, www_authenticate(auth, err));
    }
    response
}

fn status_and_code(err: &AuthError) -> (StatusCode, Option<&'static str>) {
    match err {
        AuthError::Missing(_) => (StatusCode::UNAUTHORIZED, None),
        AuthError::InvalidToken(_) => (StatusCode::UNAUTHORIZED, Some("invalid_token")),
        AuthError::InsufficientScope(_) => (StatusCode::FORBIDDEN, Some("insufficient_scope")),
        AuthError::KeysUnavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, None),
        AuthError::Forbidden(_) => (StatusCode::FORBIDDEN, None),
    }
}

/// `Bearer realm="mcc"[, resource_metadata="…"][, error="…", error_description="…"][, scope="…"]`.
/// Per RFC 6750 a request without any credential gets no error code. `scope` names what
/// was missing on a 403, and on a 401 the required scopes when OAuth discovery is on (MCP
/// clients request the challenge's scopes first).
pub fn www_authenticate(auth: &Authenticator, err: &AuthError) -> HeaderValue {
    let mut value = format!("Bearer realm=\"{}\"", quoted(auth.realm()));
    if let Some(url) = auth.resource_metadata_url() {
        value.push_str(&format!(", resource_metadata=\"{}\"", quoted(url)));
    }
    if let (_, Some(code)) = status_and_code(err) {
        value.push_str(&format!(
            ", error=\"{code}\", error_description=\"{}\"",
            quoted(&err.to_string())
        ));
    }
    let scope = match err {
        AuthError::InsufficientScope(scope) => Some(scope.as_str()),
        AuthError::Missing(_) | AuthError::InvalidToken(_) => auth.challenge_scope(),
        _ => None,
    };
    if let Some(scope) = scope {
        value.push_str(&format!(", scope=\"{}\"", quoted(scope)));
    }
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
}

/// Text safe inside a quoted-string: visible ASCII without `"` and `\`, bounded length
/// (descriptions can echo token fields such as an attacker-chosen `kid`).
fn quoted(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '"' | '\\' => '\'',
            ' '..='~' => c,
            _ => '?',
        })
        .take(200)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{AuthSettings, SharedDirectory};

    fn auth() -> Authenticator {
        let settings = AuthSettings {
            backend: "api_key".into(),
            resource_metadata_url: Some("https://gw/.well-known/oauth-protected-resource".into()),
            ..AuthSettings::default()
        };
        Authenticator::new(&settings, SharedDirectory::default()).unwrap()
    }

    #[test]
    fn challenges_follow_rfc_6750() {
        let auth = auth();
        let missing = www_authenticate(&auth, &AuthError::Missing(""));
        assert_eq!(
            missing,
            "Bearer realm=\"mcc\", resource_metadata=\"https://gw/.well-known/oauth-protected-resource\""
        );
        let bad = www_authenticate(
            &auth,
            &AuthError::InvalidToken("unknown signing key 'a\"b\u{7}'".into()),
        );
        assert!(
            bad.to_str().unwrap().ends_with(
                "error=\"invalid_token\", error_description=\"invalid token: unknown signing key 'a'b?'\""
            ),
            "{bad:?}"
        );
        let scope = challenge(&auth, &AuthError::InsufficientScope("mcp:tools".into()));
        assert_eq!(scope.status(), StatusCode::FORBIDDEN);
        let value = scope.headers()[header::WWW_AUTHENTICATE].to_str().unwrap();
        assert!(
            value.contains("error=\"insufficient_scope\"")
                && value.ends_with("scope=\"mcp:tools\"")
        );
        let unbound = challenge(
            &auth,
            &AuthError::Forbidden("ServiceAccount a/b is not bound".into()),
        );
        assert_eq!(unbound.status(), StatusCode::FORBIDDEN);
        let value = unbound.headers()[header::WWW_AUTHENTICATE]
            .to_str()
            .unwrap();
        assert!(!value.contains("error="), "{value}");
    }
}
