//! Every auth backend through the MCP server: API keys (minted here, revoked by editing
//! the users file), HS256 JWTs (minted here), anonymous access when allowed, and the 401
//! challenge for a missing or bad credential.

use crate::auth_support::{self, in_ten_minutes as exp};
use crate::mcp_support;

use std::time::Duration;

use mcc_gateway::auth::api_key;
use mcp_support::*;
use serde_json::{Value, json};

const SECRET: &str = "an-hs256-secret-for-tests-only-32-bytes+";

async fn initialize_status(url: &str, token: Option<&str>) -> (u16, Option<String>) {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let mut req = mcp_support::http_client()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(init.to_string());
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let resp = req.send().await.unwrap();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string());
    (resp.status().as_u16(), challenge)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_authenticate_and_revocation_is_immediate() {
    let key = api_key::mint(None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let users_with_key = users_file(&[("bob", &["public", "ops"], &[&key])]);
    std::fs::write(dir.path().join("users.yaml"), &users_with_key).unwrap();
    let s = settings(dir.path(), "api_key", Some(&redis_url()));
    let server = start_with(s, dir).await;

    let (status, challenge) = initialize_status(&server.url, None).await;
    assert_eq!(status, 401);
    assert!(challenge.unwrap().starts_with("Bearer realm=\"mcc\""));
    let (status, challenge) = initialize_status(&server.url, Some("mcc_000000000000_forged")).await;
    assert_eq!(status, 401);
    assert!(challenge.unwrap().contains("error=\"invalid_token\""));

    let client = with_token(&server.url, key.raw.expose(), true).await;
    assert_eq!(
        call_text(&client, "whoami", json!({})).await,
        "username: bob\nemail: (none)\ngroups: public, ops\ntools: ops.restart, public.ctx, public.echo, public.greet"
    );
    assert_eq!(
        call_text(&client, "get_session", json!({"name": "user"})).await,
        "\"bob\""
    );

    // Revoke: the users file without the key; the reload takes it away.
    std::fs::write(
        server.dir.path().join("users.yaml"),
        "users:\n  - username: bob\n    groups: [public, ops]\n",
    )
    .unwrap();
    let mut refused = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if initialize_status(&server.url, Some(key.raw.expose()))
            .await
            .0
            == 401
        {
            refused = true;
            break;
        }
    }
    assert!(refused, "a revoked key kept working");
    server.stop().await;
}

const ISSUER: &str = "https://idp.mcp-auth.test/";

/// A token of the test issuer (`iss` added unless the claims name one).
fn hs256(mut claims: Value) -> String {
    if claims.get("iss").is_none() {
        claims["iss"] = json!(ISSUER);
    }
    auth_support::hs256(SECRET, &claims)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwts_authenticate_by_email_or_login_and_rbac_follows() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path(), "jwt", Some(&redis_url()));
    s.auth.jwt.hs256_secret = Some(SECRET.into());
    s.auth.jwt.audience = vec!["mcc-gateway".into()];
    s.auth.jwt.issuer = Some(ISSUER.into());
    s.auth.allow_anonymous = true;
    let server = start_with(s, dir).await;

    // carol: public, plus an explicit grant of admin.shell.
    let carol = hs256(json!({"aud": "mcc-gateway", "exp": exp(), "sub": "carol"}));
    let client = with_token(&server.url, &carol, false).await;
    let described = call_text(&client, "describe_tools", json!({})).await;
    assert!(described.starts_with("## admin.shell\n"), "{described}");
    assert!(!described.contains("ops.restart"), "{described}");
    client.cancel().await.unwrap();

    // alice by email claim: admin.
    let alice = hs256(
        json!({"aud": "mcc-gateway", "exp": exp(), "email": "alice@example.com", "email_verified": true}),
    );
    let client = with_token(&server.url, &alice, true).await;
    assert!(
        call_text(&client, "whoami", json!({}))
            .await
            .starts_with("username: alice\n")
    );
    client.cancel().await.unwrap();

    // A token for another audience is refused.
    let other = hs256(json!({"aud": "someone-else", "exp": exp(), "login": "alice"}));
    assert_eq!(initialize_status(&server.url, Some(&other)).await.0, 401);

    // No credential at all: anonymous, public tools only.
    let anon = stateless(&server.url, TestClient::plain()).await;
    assert_eq!(
        call_text(&anon, "whoami", json!({})).await,
        "Not authenticated: no user is associated with this session."
    );
    assert_eq!(
        call_text(&anon, "get_session", json!({"name": "user"})).await,
        "\"anonymous\""
    );
    let described = call_text(&anon, "describe_tools", json!({})).await;
    assert!(
        !described.contains("admin.") && !described.contains("ops."),
        "{described}"
    );
    assert_eq!(
        call_text(
            &anon,
            "execute",
            json!({"key": "ops.restart", "params": {"service": "x"}})
        )
        .await,
        "Unauthorized"
    );
    anon.cancel().await.unwrap();
    server.stop().await;
}
