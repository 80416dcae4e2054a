//! The authentication middleware over real HTTP: identity in the request extensions,
//! 401/403 with `WWW-Authenticate`, anonymous access only when allowed.

use crate::auth_support;

use auth_support::*;
use std::net::SocketAddr;

use axum::Router;
use axum::body::Bytes;
use axum::routing::get;
use http::{HeaderMap, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::Algorithm;
use mcc_gateway::auth::{AuthSettings, Authenticator, Identity, JwtSettings, authenticate_request};
use serde_json::json;

/// Reads the identity from the request parts, as an rmcp tool handler does.
async fn whoami(parts: http::request::Parts) -> String {
    Identity::from_parts(&parts).map_or("<no identity>".into(), |id| id.username().to_string())
}

async fn gateway(allow_anonymous: bool) -> SocketAddr {
    let settings = AuthSettings {
        allow_anonymous,
        ..jwt_settings(JwtSettings {
            hs256_secret: Some(SECRET.into()),
            ..JwtSettings::default()
        })
    };
    let auth = Authenticator::new(&settings, users()).unwrap();
    let router =
        Router::new()
            .route("/mcp", get(whoami))
            .layer(axum::middleware::from_fn_with_state(
                auth,
                authenticate_request,
            ));
    serve(router).await
}

async fn call(addr: SocketAddr, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, String) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut request = http::Request::get(format!("http://{addr}/mcp"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client
        .request(request.body(Empty::new()).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

#[tokio::test]
async fn middleware_sets_identity_or_answers_401() {
    let addr = gateway(false).await;
    let good = token(
        "",
        Algorithm::HS256,
        None,
        &claims(json!({"email": "alice@example.com", "email_verified": true})),
    );
    let (status, _, body) = call(addr, &[("authorization", &format!("Bearer {good}"))]).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "alice"));

    let (status, headers, body) = call(addr, &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer realm=\"mcc\"");
    assert!(body.contains("authentication required"), "{body}");

    let expired = token(
        "",
        Algorithm::HS256,
        None,
        &claims(json!({"sub": "bob", "exp": now() - 3600})),
    );
    let (status, headers, _) = call(addr, &[("authorization", &format!("Bearer {expired}"))]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        headers[header::WWW_AUTHENTICATE],
        "Bearer realm=\"mcc\", error=\"invalid_token\", error_description=\"invalid token: token expired\""
    );

    let unscoped = token(
        "",
        Algorithm::HS256,
        None,
        &claims(json!({"sub": "bob", "scope": "openid"})),
    );
    let (status, headers, _) =
        call(addr, &[("authorization", &format!("Bearer {unscoped}"))]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        headers[header::WWW_AUTHENTICATE]
            .to_str()
            .unwrap()
            .contains("error=\"insufficient_scope\"")
    );
}

#[tokio::test]
async fn anonymous_allowed_only_without_any_credential() {
    let addr = gateway(true).await;
    let (status, _, body) = call(addr, &[]).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "anonymous"));
    let (status, _, _) = call(addr, &[("authorization", "Bearer garbage")]).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a bad credential is never downgraded"
    );
}
