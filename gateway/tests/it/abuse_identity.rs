//! Abuse suite, identity class: a caller with a valid token from the identity provider
//! tries to become someone else. Against a real gateway over HTTP (in process, file
//! mode), real Redis sessions and real tool subprocesses:
//!
//! - an `iss`+`sub` pair bound by `oidc_subjects` selects its user; the same subject from
//!   another issuer does not, and a gateway without a pinned issuer does not start;
//! - an `email` claim selects a user only when `email_verified` is true (configurable);
//! - `preferred_username`, `name` and `login` never select a user unless configured;
//! - a subject named like a catalog user it is not mapped to is refused, so it cannot
//!   share that user's session bucket;
//! - a tool's `env`/`env_file` cannot hand a caller without an email an `MCC_CTX_EMAIL`
//!   (or any other `MCC_CTX*` name).

use crate::auth_support::{self, in_ten_minutes as exp};
use crate::mcp_support;

use mcp_support::*;
use serde_json::{Value, json};

const SECRET: &str = "an-hs256-secret-for-abuse-tests-32-bytes+";
const IDP: &str = "https://idp.example.test/";
const AUD: &str = "mcc-gateway";

const USERS: &str = r#"
users:
  - username: alice
    email: alice@example.com
    groups: [admin]
    oidc_subjects:
      - {issuer: "https://idp.example.test/", subject: "00u-alice"}
  - username: bob
    groups: [public]
    oidc_subjects: [legacy-bob]
"#;

fn tools(dir: &std::path::Path) -> String {
    let env_file = dir.join("ctx.env");
    std::fs::write(&env_file, "MCC_CTX_GROUPS='[\"admin\"]'\nMCC_CTX=forged\n").unwrap();
    format!(
        r#"
tools:
  - name: whoenv
    groups: [public]
    description: Print the identity variables a shell tool receives.
    env:
      MCC_CTX_EMAIL: boss@corp.example
      MCC_CTX_USER: mallory
    env_file: {}
    exec: 'echo "user=$MCC_CTX_USER email=${{MCC_CTX_EMAIL-unset}} groups=$MCC_CTX_GROUPS ctx=${{MCC_CTX-unset}}"'
  - name: shell
    groups: [admin]
    description: Admin only.
    exec: echo admin-only
"#,
        env_file.display()
    )
}

/// A gateway on the `jwt` backend (HS256), with `configure` applied to its settings.
async fn gateway(configure: impl FnOnce(&mut mcc_gateway::config::Settings)) -> Server {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("tools")).unwrap();
    std::fs::write(dir.path().join("tools/tools.yaml"), tools(dir.path())).unwrap();
    std::fs::write(dir.path().join("users.yaml"), USERS).unwrap();
    let mut s = settings(dir.path(), "jwt", Some(&redis_url()));
    s.auth.jwt.hs256_secret = Some(SECRET.into());
    s.auth.jwt.audience = vec![AUD.into()];
    s.auth.jwt.issuer = Some(IDP.into());
    configure(&mut s);
    start_with(s, dir).await
}

fn token(claims: Value) -> String {
    let mut full = json!({"iss": IDP, "aud": AUD, "exp": exp()});
    for (k, v) in claims.as_object().unwrap() {
        full[k] = v.clone();
    }
    auth_support::hs256(SECRET, &full)
}

/// `whoami`'s first line for a token, or the HTTP status it was refused with.
async fn who(server: &Server, claims: Value) -> Result<String, u16> {
    let resp = mcp_support::http_client()
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {}", token(claims.clone())))
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    if !resp.status().is_success() {
        return Err(resp.status().as_u16());
    }
    let client = with_token(&server.url, &token(claims), true).await;
    let text = call_text(&client, "whoami", json!({})).await;
    client.cancel().await.unwrap();
    Ok(text.lines().next().unwrap_or_default().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_subjects_select_by_issuer_and_subject() {
    let pinned = gateway(|_| {}).await;
    assert_eq!(
        who(&pinned, json!({"sub": "00u-alice"})).await,
        Ok("username: alice".into())
    );
    // The old plain subject counts under the pinned issuer.
    assert_eq!(
        who(&pinned, json!({"sub": "legacy-bob"})).await,
        Ok("username: bob".into())
    );
    // Another issuer is refused outright by a gateway that pins one.
    assert_eq!(
        who(
            &pinned,
            json!({"iss": "https://evil.test/", "sub": "00u-alice"})
        )
        .await,
        Err(401)
    );
    pinned.stop().await;

    // A gateway without an issuer would trust any provider minting for its audience
    // (`https://evil.test/` naming `00u-alice`): it does not start (issue 32, item 11).
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path(), "jwt", None);
    s.auth.jwt.hs256_secret = Some(SECRET.into());
    s.auth.jwt.audience = vec![AUD.into()];
    let refused = mcc_gateway::app::build(&s, Default::default()).await;
    let e = refused
        .err()
        .expect("a jwt gateway without an issuer starts")
        .to_string();
    assert!(e.contains("auth.jwt.issuer: required"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_counts_only_when_verified() {
    let server = gateway(|_| {}).await;
    let email = "Alice@Example.com";
    for (verified, expected) in [
        (Value::Null, "username: s-1"),
        (json!(false), "username: s-1"),
        (json!("false"), "username: s-1"),
        (json!(true), "username: alice"),
        (json!("true"), "username: alice"),
    ] {
        let mut claims = json!({"sub": "s-1", "email": email});
        if !verified.is_null() {
            claims["email_verified"] = verified.clone();
        }
        assert_eq!(
            who(&server, claims).await,
            Ok(expected.into()),
            "email_verified: {verified}"
        );
    }
    server.stop().await;

    // Configured off: a token that does not say counts, one that says false never does.
    let lax = gateway(|s| s.auth.jwt.require_email_verified = false).await;
    let unsaid = json!({"sub": "s-1", "email": email});
    assert_eq!(who(&lax, unsaid).await, Ok("username: alice".into()));
    let denied = json!({"sub": "s-1", "email": email, "email_verified": false});
    assert_eq!(who(&lax, denied).await, Ok("username: s-1".into()));
    lax.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_the_user_can_edit_never_select_a_user_unless_configured() {
    let server = gateway(|_| {}).await;
    let editable =
        json!({"sub": "s-2", "preferred_username": "alice", "name": "alice", "login": "alice"});
    assert_eq!(
        who(&server, editable.clone()).await,
        Ok("username: s-2".into())
    );
    // Nor does it reach alice's admin tools.
    let client = with_token(&server.url, &token(editable.clone()), true).await;
    let out = call_text(
        &client,
        "execute",
        json!({"key": "admin.shell", "params": {}}),
    )
    .await;
    assert!(!out.contains("admin-only"), "{out}");
    client.cancel().await.unwrap();
    server.stop().await;

    let configured =
        gateway(|s| s.auth.jwt.username_claims = vec!["preferred_username".into()]).await;
    assert_eq!(
        who(&configured, editable).await,
        Ok("username: alice".into())
    );
    configured.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subject_named_like_an_unmapped_user_cannot_take_its_sessions() {
    let server = gateway(|s| s.auth.jwt.username_claims = vec![]).await;
    // alice stores a value in her default bucket.
    let alice = with_token(&server.url, &token(json!({"sub": "00u-alice"})), true).await;
    let set = call_text(
        &alice,
        "set_session",
        json!({"name": "secret", "value": "a-1"}),
    )
    .await;
    assert_eq!(set, "Set 'secret'.");
    alice.cancel().await.unwrap();
    // A token whose subject is the string "alice" is not alice, and is refused rather
    // than run as a stranger named "alice" (who would share alice's buckets).
    assert_eq!(who(&server, json!({"sub": "alice"})).await, Err(403));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_env_cannot_hand_out_identity() {
    let server = gateway(|_| {}).await;
    // bob has no email; the tool's env and env_file try to give him one, and groups.
    let bob = with_token(&server.url, &token(json!({"sub": "legacy-bob"})), true).await;
    let out = call_text(
        &bob,
        "execute",
        json!({"key": "public.whoenv", "params": {}}),
    )
    .await;
    assert_eq!(
        out.trim(),
        "user=bob email=unset groups=[\"public\"] ctx=unset",
        "{out}"
    );
    bob.cancel().await.unwrap();
    // alice's own email is what she sees.
    let alice = with_token(&server.url, &token(json!({"sub": "00u-alice"})), true).await;
    let out = call_text(
        &alice,
        "execute",
        json!({"key": "public.whoenv", "params": {}}),
    )
    .await;
    assert!(
        out.starts_with("user=alice email=alice@example.com groups=[\"admin\"]"),
        "{out}"
    );
    alice.cancel().await.unwrap();
    server.stop().await;
}
