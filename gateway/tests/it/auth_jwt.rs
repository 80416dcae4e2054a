//! The `jwt` backend against real tokens signed with the test keys in `tests/fixtures`:
//! claims to users, every refusal reason, scopes, ES256, static PEM keys, HS256 secrets,
//! and settings errors.

use crate::auth_support;

use auth_support::*;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use mcc_gateway::auth::{AuthError, AuthSettings, Authenticator, JwtSettings};
use serde_json::{Value, json};
#[tokio::test]
async fn claims_select_catalog_users() {
    let jwks = JwksServer::start(vec![public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1")]).await;
    let auth = jwks_auth(&jwks.url, 10, 300);
    let by_email = rs256(
        "rsa1",
        "rsa1.key.pem",
        &claims(json!({"email": "Alice@Example.com", "email_verified": true, "sub": "x1"})),
    );
    let identity = auth.authenticate(&bearer(&by_email)).await.unwrap();
    assert_eq!(identity.user.unwrap().groups, vec!["osint".to_string()]);

    let by_login = rs256(
        "rsa1",
        "rsa1.key.pem",
        &claims(json!({"login": "bob", "sub": "x2"})),
    );
    // `login` and `preferred_username` are not in `username_claims` (default `[sub]`).
    assert_eq!(username(&auth, &by_login).await.unwrap(), "x2");
    let by_preferred = rs256(
        "rsa1",
        "rsa1.key.pem",
        &claims(json!({"preferred_username": "bob"})),
    );
    assert_eq!(
        username(&auth, &by_preferred).await,
        Err(AuthError::InvalidToken(
            "token names no catalog user and has no 'sub' claim".into()
        ))
    );

    // Valid, but not in the catalog: a user of that name with no groups and no grants.
    let stranger = rs256(
        "rsa1",
        "rsa1.key.pem",
        &claims(json!({"sub": "carol", "email": "c@x.org"})),
    );
    let carol = auth
        .authenticate(&bearer(&stranger))
        .await
        .unwrap()
        .user
        .unwrap();
    assert_eq!(
        (
            carol.username.as_str(),
            carol.groups.len(),
            carol.tools.len()
        ),
        ("carol", 0, 0)
    );

    // An email the provider says is unverified does not select a catalog user.
    let unverified = rs256(
        "rsa1",
        "rsa1.key.pem",
        &claims(json!({"email": "alice@example.com", "email_verified": false, "sub": "zed"})),
    );
    assert_eq!(username(&auth, &unverified).await.unwrap(), "zed");

    let nameless = rs256("rsa1", "rsa1.key.pem", &claims(json!({})));
    assert_eq!(
        username(&auth, &nameless).await.unwrap_err().to_string(),
        "invalid token: token names no catalog user and has no 'sub' claim"
    );
    assert_eq!(jwks.hits(), 1, "the key set is fetched once and cached");
}

#[tokio::test]
async fn bad_tokens_are_refused_with_the_reason() {
    let jwks = JwksServer::start(vec![public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1")]).await;
    let auth = jwks_auth(&jwks.url, 10, 300);
    let signed = |extra: Value| rs256("rsa1", "rsa1.key.pem", &claims(extra));
    let cases = [
        (
            signed(json!({"sub": "bob", "exp": now() - 3600})),
            "token expired",
        ),
        (
            signed(json!({"sub": "bob", "aud": "someone-else"})),
            "token audience not accepted",
        ),
        (
            signed(json!({"sub": "bob", "iss": "https://evil.test"})),
            "token issuer not accepted",
        ),
        (
            signed(json!({"sub": "bob", "nbf": now() + 3600})),
            "token not yet valid (nbf)",
        ),
        (
            rs256("rsa1", "rsa2.key.pem", &claims(json!({"sub": "bob"}))),
            "bad token signature",
        ),
        (
            token(
                "",
                Algorithm::HS256,
                Some("rsa1"),
                &claims(json!({"sub": "bob"})),
            ),
            "token algorithm not accepted",
        ),
        ("not.a.jwt".to_string(), "malformed token"),
    ];
    for (token, reason) in cases {
        assert_eq!(
            username(&auth, &token).await,
            Err(AuthError::InvalidToken(reason.into())),
            "{reason}"
        );
    }
    let no_aud = json!({"iss": ISS, "exp": now() + 600, "scope": "mcp", "sub": "bob"});
    assert_eq!(
        username(&auth, &rs256("rsa1", "rsa1.key.pem", &no_aud)).await,
        Err(AuthError::InvalidToken(
            "token lacks the 'aud' claim".into()
        ))
    );
}

#[tokio::test]
async fn required_scopes_come_from_scope_or_scp() {
    let jwks = JwksServer::start(vec![public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1")]).await;
    let auth = jwks_auth(&jwks.url, 10, 300);
    let signed = |extra: Value| rs256("rsa1", "rsa1.key.pem", &claims(extra));
    assert_eq!(
        username(&auth, &signed(json!({"sub": "bob", "scope": "openid"}))).await,
        Err(AuthError::InsufficientScope("mcp".into()))
    );
    let scp_list = signed(json!({"sub": "bob", "scope": null, "scp": ["mcp"]}));
    assert_eq!(username(&auth, &scp_list).await.unwrap(), "bob");
    let scp_text = signed(json!({"sub": "bob", "scope": null, "scp": "read mcp"}));
    assert_eq!(username(&auth, &scp_text).await.unwrap(), "bob");
    let audience_list = signed(json!({"sub": "bob", "aud": ["other", AUD]}));
    assert_eq!(username(&auth, &audience_list).await.unwrap(), "bob");
}

#[tokio::test]
async fn es256_keys_from_jwks() {
    let jwks = JwksServer::start(vec![public_jwk("ec1.key.pem", Algorithm::ES256, "ec1")]).await;
    let auth = jwks_auth(&jwks.url, 10, 300);
    let good = token(
        "ec1.key.pem",
        Algorithm::ES256,
        Some("ec1"),
        &claims(json!({"sub": "bob"})),
    );
    assert_eq!(username(&auth, &good).await.unwrap(), "bob");
}

#[tokio::test]
async fn static_pem_keys_and_hs256_secrets() {
    let pem_file = Authenticator::new(
        &jwt_settings(JwtSettings {
            public_key_file: Some(fixture("rsa1.pub.pem")),
            ..JwtSettings::default()
        }),
        users(),
    )
    .unwrap();
    let by_rsa1 = rs256("any", "rsa1.key.pem", &claims(json!({"sub": "bob"})));
    assert_eq!(username(&pem_file, &by_rsa1).await.unwrap(), "bob");
    let by_rsa2 = rs256("any", "rsa2.key.pem", &claims(json!({"sub": "bob"})));
    assert!(username(&pem_file, &by_rsa2).await.is_err());

    let ec_inline = Authenticator::new(
        &jwt_settings(JwtSettings {
            public_key_pem: Some(std::fs::read_to_string(fixture("ec1.pub.pem")).unwrap()),
            ..JwtSettings::default()
        }),
        users(),
    )
    .unwrap();
    let by_ec = token(
        "ec1.key.pem",
        Algorithm::ES256,
        None,
        &claims(json!({"sub": "bob"})),
    );
    assert_eq!(username(&ec_inline, &by_ec).await.unwrap(), "bob");
    assert!(username(&ec_inline, &by_rsa1).await.is_err());

    let hs = Authenticator::new(
        &jwt_settings(JwtSettings {
            hs256_secret: Some(SECRET.into()),
            ..JwtSettings::default()
        }),
        users(),
    )
    .unwrap();
    let by_secret = token("", Algorithm::HS256, None, &claims(json!({"sub": "bob"})));
    assert_eq!(username(&hs, &by_secret).await.unwrap(), "bob");
    let other_secret = encode(
        &Header::new(Algorithm::HS256),
        &claims(json!({"login": "bob"})),
        &EncodingKey::from_secret(b"another-secret-that-is-32-bytes-long!!").unwrap(),
    )
    .unwrap();
    assert_eq!(
        username(&hs, &other_secret).await,
        Err(AuthError::InvalidToken("bad token signature".into()))
    );
    assert_eq!(
        username(&hs, &by_rsa1).await,
        Err(AuthError::InvalidToken(
            "token algorithm not accepted".into()
        ))
    );
}

#[test]
fn bad_jwt_settings_are_named() {
    let err = |jwt: JwtSettings| {
        Authenticator::new(&jwt_settings(jwt), users())
            .err()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        err(JwtSettings::default()),
        "auth.jwt: set exactly one of jwks_url, public_key_pem, public_key_file, hs256_secret (found 0)"
    );
    assert_eq!(
        err(JwtSettings {
            hs256_secret: Some("short".into()),
            ..JwtSettings::default()
        }),
        "auth.jwt.hs256_secret: must be at least 32 bytes"
    );
    assert!(
        err(JwtSettings {
            public_key_pem: Some("not a key".into()),
            ..JwtSettings::default()
        })
        .starts_with("auth.jwt.public_key_pem: not an RSA or EC public key")
    );
    assert_eq!(
        err(JwtSettings {
            jwks_url: Some("ftp://x".into()),
            ..JwtSettings::default()
        }),
        "auth.jwt.jwks_url: 'ftp://x' is not an http(s) URL"
    );
    let no_audience = AuthSettings {
        backend: "jwt".into(),
        jwt: JwtSettings {
            hs256_secret: Some(SECRET.into()),
            ..JwtSettings::default()
        },
        ..AuthSettings::default()
    };
    assert_eq!(
        Authenticator::new(&no_audience, users())
            .err()
            .unwrap()
            .to_string(),
        "auth.jwt.audience: required (the token's 'aud' must name this gateway)"
    );
}
