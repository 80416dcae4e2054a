//! JWKS fetching against real HTTP(S) servers: caching, rotation by `kid`, rate-limited
//! refetches, TTL expiry, an unreachable provider, and TLS with a configured CA.

use crate::auth_support;

use auth_support::*;
use std::path::PathBuf;
use std::time::Duration;

use jsonwebtoken::Algorithm;
use mcc_gateway::auth::{AuthError, Authenticator, JwtSettings};
use serde_json::json;
#[tokio::test]
async fn rotated_key_is_accepted_after_refetch() {
    let jwks = JwksServer::start(vec![public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1")]).await;
    let auth = jwks_auth(&jwks.url, 0, 300);
    let old = rs256("rsa1", "rsa1.key.pem", &claims(json!({"sub": "bob"})));
    let new = rs256("rsa2", "rsa2.key.pem", &claims(json!({"sub": "bob"})));
    assert_eq!(username(&auth, &old).await.unwrap(), "bob");
    assert_eq!(
        username(&auth, &new).await,
        Err(AuthError::InvalidToken("unknown signing key 'rsa2'".into()))
    );
    assert_eq!(jwks.hits(), 2, "an unknown kid triggers a refetch");

    jwks.publish(vec![
        public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1"),
        public_jwk("rsa2.key.pem", Algorithm::RS256, "rsa2"),
    ]);
    assert_eq!(username(&auth, &new).await.unwrap(), "bob");
    assert_eq!(username(&auth, &old).await.unwrap(), "bob");
    assert_eq!(jwks.hits(), 3);
}

#[tokio::test]
async fn refetching_for_unknown_kids_is_rate_limited() {
    let jwks = JwksServer::start(vec![public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1")]).await;
    let auth = jwks_auth(&jwks.url, 60, 300);
    let good = rs256("rsa1", "rsa1.key.pem", &claims(json!({"sub": "bob"})));
    assert!(username(&auth, &good).await.is_ok());
    for i in 0..5 {
        let forged = rs256(
            &format!("forged{i}"),
            "rsa2.key.pem",
            &claims(json!({"sub": "bob"})),
        );
        assert!(username(&auth, &forged).await.is_err());
    }
    assert_eq!(
        jwks.hits(),
        1,
        "forged kids must not hammer the identity provider"
    );
}

#[tokio::test]
async fn key_set_is_refetched_after_its_ttl() {
    let jwks = JwksServer::start(vec![public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1")]).await;
    let auth = jwks_auth(&jwks.url, 0, 1);
    let good = rs256("rsa1", "rsa1.key.pem", &claims(json!({"sub": "bob"})));
    assert!(username(&auth, &good).await.is_ok());
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(username(&auth, &good).await.is_ok());
    assert_eq!(jwks.hits(), 2);
}

#[tokio::test]
async fn a_key_set_is_not_trusted_past_its_ttl_while_fetches_fail() {
    let jwks = JwksServer::start(vec![public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1")]).await;
    let auth = jwks_auth(&jwks.url, 0, 2);
    let good = rs256("rsa1", "rsa1.key.pem", &claims(json!({"sub": "bob"})));
    assert!(username(&auth, &good).await.is_ok());
    // The provider goes dark (or an attacker blocks the fetch) after removing the key.
    jwks.fail(true);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // Past half the TTL a refresh is tried; it fails, and the set is still young enough.
    assert!(username(&auth, &good).await.is_ok());
    assert_eq!(jwks.hits(), 2, "a refresh is tried from half the TTL on");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // Past the TTL, the key is no longer trusted.
    let err = username(&auth, &good).await.unwrap_err();
    assert!(matches!(err, AuthError::KeysUnavailable(_)), "{err}");
    jwks.fail(false);
    assert!(username(&auth, &good).await.is_ok());
}

#[tokio::test]
async fn unreachable_jwks_is_unavailable_not_invalid() {
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let auth = jwks_auth(&format!("http://127.0.0.1:{closed_port}/jwks"), 0, 300);
    let good = rs256("rsa1", "rsa1.key.pem", &claims(json!({"sub": "bob"})));
    let err = username(&auth, &good).await.unwrap_err();
    assert!(matches!(err, AuthError::KeysUnavailable(_)), "{err}");
}

#[tokio::test]
async fn jwks_over_https_trusts_the_configured_ca_only() {
    let body = json!({"keys": [public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1")]}).to_string();
    let addr = serve_https(body).await;
    let url = format!("https://127.0.0.1:{}/jwks", addr.port());
    let settings = |ca: Option<PathBuf>| {
        jwt_settings(JwtSettings {
            jwks_url: Some(url.clone()),
            jwks_ca_file: ca,
            jwks_timeout_secs: 2,
            ..JwtSettings::default()
        })
    };
    let good = rs256("rsa1", "rsa1.key.pem", &claims(json!({"sub": "bob"})));

    let with_ca = Authenticator::new(&settings(Some(fixture("tls-ca.pem"))), users()).unwrap();
    assert_eq!(username(&with_ca, &good).await.unwrap(), "bob");

    // Without the CA the server's certificate is not trusted: no keys, 503 not 401.
    let without_ca = Authenticator::new(&settings(None), users()).unwrap();
    let err = username(&without_ca, &good).await.unwrap_err();
    assert_eq!(
        err,
        AuthError::KeysUnavailable("the signing keys could not be fetched".into())
    );

    let bad_ca = Authenticator::new(&settings(Some(fixture("rsa1.pub.pem"))), users());
    assert_eq!(
        bad_ca.err().unwrap().to_string(),
        "auth.jwt.jwks_ca_file: not a PEM certificate bundle: no certificate in it"
    );
}
