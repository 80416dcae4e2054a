//! The reviewer against a mocked API server: which requests each token costs.

use std::time::{Duration, Instant};

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use mcc_catalog::kube_mock::ApiServer;
use serde_json::{Value, json};

use super::*;
use crate::kube::review_memory::REVIEW_BURST;

const REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
const JWKS: &str = "/openid/v1/jwks";
const RSA1: &[u8] = include_bytes!("../../tests/fixtures/rsa1.key.pem");
const RSA2: &[u8] = include_bytes!("../../tests/fixtures/rsa2.key.pem");

fn answer(authenticated: bool, username: &str, audiences: &[&str]) -> Value {
    json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {},
        "status": {"authenticated": authenticated, "user": {"username": username},
                   "audiences": audiences}
    })
}

/// The API server's key set: rsa1 under kid `sa1`.
fn key_set() -> Value {
    let key = EncodingKey::from_rsa_pem(RSA1).unwrap();
    let mut jwk = Jwk::from_encoding_key(&key, Algorithm::RS256).unwrap();
    jwk.common.key_id = Some("sa1".into());
    json!({"keys": [jwk]})
}

/// A ServiceAccount token as the API server mints it (signed with `pem`, kid `sa1`).
fn minted(pem: &[u8], sub: &str, audience: &str, ttl_secs: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("sa1".into());
    let claims = json!({"iss": "https://kubernetes.default.svc", "sub": sub,
        "aud": [audience], "exp": now + ttl_secs, "iat": now, "nbf": now});
    encode(&header, &claims, &EncodingKey::from_rsa_pem(pem).unwrap()).unwrap()
}

fn bot(n: u32) -> String {
    // The jti-like difference: each token of one account is distinct.
    minted(
        RSA1,
        "system:serviceaccount:agents:bot",
        "mcc-gateway",
        600 + n as i64,
    )
}

#[test]
fn only_service_account_usernames_map() {
    let sa = service_account("system:serviceaccount:agents:bot").unwrap();
    assert_eq!((sa.namespace.as_str(), sa.name.as_str()), ("agents", "bot"));
    for bad in [
        "alice",
        "system:serviceaccount:agents",
        "system:serviceaccount::bot",
        "system:node:n1",
    ] {
        assert!(service_account(bad).is_none(), "{bad}");
    }
}

#[tokio::test]
async fn a_genuine_token_is_reviewed_once_and_remembered() {
    let (client, mut api) = ApiServer::new();
    let reviewer = KubeTokenReviewer::new(client, Some("mcc-gateway".into()));
    let token = bot(0);
    let server = async {
        api.expect("GET", JWKS, 200, key_set()).await;
        let seen = api
            .expect(
                "POST",
                REVIEWS,
                201,
                answer(true, "system:serviceaccount:agents:bot", &["mcc-gateway"]),
            )
            .await;
        assert_eq!(seen.body["spec"]["token"], token.as_str());
        assert_eq!(seen.body["spec"]["audiences"], json!(["mcc-gateway"]));
        api
    };
    let (result, mut api) = tokio::join!(reviewer.review(&token), server);
    let sa = result.unwrap();
    assert_eq!((sa.namespace.as_str(), sa.name.as_str()), ("agents", "bot"));
    assert_eq!(reviewer.review(&token).await.unwrap(), sa);
    api.expect_nothing().await;
}

#[tokio::test]
async fn forged_tokens_cost_the_api_server_nothing() {
    let (client, mut api) = ApiServer::new();
    let reviewer = KubeTokenReviewer::new(client, Some("mcc-gateway".into()));
    // Not even a JWT: refused before anything is fetched.
    let err = reviewer.review("made-up").await.unwrap_err();
    assert!(matches!(err, AuthError::InvalidToken(_)), "{err:?}");
    // Signed with another key: the keys are fetched once, the signature fails.
    let forged = minted(RSA2, "system:serviceaccount:agents:bot", "mcc-gateway", 600);
    let (err, _) = tokio::join!(
        reviewer.review(&forged),
        api.expect("GET", JWKS, 200, key_set())
    );
    assert_eq!(
        err.unwrap_err(),
        AuthError::InvalidToken("bad token signature".into())
    );
    // A flood of them, far past any review budget: no request at all.
    for i in 0..(3 * REVIEW_BURST as i64) {
        let forged = minted(
            RSA2,
            "system:serviceaccount:agents:bot",
            "mcc-gateway",
            600 + i,
        );
        assert!(reviewer.review(&forged).await.is_err());
    }
    api.expect_nothing().await;
    // Expired, or for another audience, or no ServiceAccount: refused here too.
    let expired = minted(
        RSA1,
        "system:serviceaccount:agents:bot",
        "mcc-gateway",
        -600,
    );
    let other = minted(RSA1, "system:serviceaccount:agents:bot", "vault", 600);
    let person = minted(RSA1, "alice@example.com", "mcc-gateway", 600);
    for (token, expected) in [
        (expired, "token expired"),
        (other, "audience not accepted"),
        (person, "not a ServiceAccount"),
    ] {
        let err = reviewer.review(&token).await.unwrap_err();
        assert!(err.to_string().contains(expected), "{err}");
    }
    api.expect_nothing().await;
    // A genuine token is still reviewed at once.
    let genuine = bot(1);
    let (good, _) = tokio::join!(
        reviewer.review(&genuine),
        api.expect(
            "POST",
            REVIEWS,
            201,
            answer(true, "system:serviceaccount:agents:bot", &["mcc-gateway"]),
        )
    );
    assert_eq!(good.unwrap().name, "bot");
}

#[tokio::test]
async fn refused_tokens_say_why_and_an_outage_is_not_remembered() {
    let (client, mut api) = ApiServer::new();
    let reviewer = KubeTokenReviewer::new(client, Some("mcc-gateway".into()));
    let cases = [
        (answer(false, "", &[]), "did not authenticate"),
        (
            answer(true, "system:serviceaccount:a:b", &["other"]),
            "audience 'mcc-gateway'",
        ),
        (
            answer(true, "alice@example.com", &["mcc-gateway"]),
            "not a ServiceAccount",
        ),
    ];
    for (i, (reply, expected)) in cases.into_iter().enumerate() {
        let token = bot(i as u32);
        let server = async {
            if i == 0 {
                api.expect("GET", JWKS, 200, key_set()).await;
            }
            api.expect("POST", REVIEWS, 201, reply).await
        };
        let (result, _) = tokio::join!(reviewer.review(&token), server);
        let err = result.unwrap_err();
        assert!(err.to_string().contains(expected), "{err}");
        // Remembered briefly: the same refusal, no second review.
        let again = tokio::time::timeout(Duration::from_secs(2), reviewer.review(&token));
        assert_eq!(again.await.expect("answered from memory").unwrap_err(), err);
    }
    let token = bot(9);
    let server = api.expect(
        "POST",
        REVIEWS,
        500,
        json!({"kind": "Status", "message": "etcd timeout at 10.0.0.3:2379", "code": 500}),
    );
    let (result, _) = tokio::join!(reviewer.review(&token), server);
    let err = result.unwrap_err();
    assert!(matches!(err, AuthError::KeysUnavailable(_)), "{err:?}");
    assert!(
        !err.to_string().contains("etcd") && !err.to_string().contains("10.0.0.3"),
        "no internal detail reaches the caller: {err}"
    );
    // Not remembered: the next request asks again.
    let server = api.expect(
        "POST",
        REVIEWS,
        201,
        answer(true, "system:serviceaccount:agents:bot", &["mcc-gateway"]),
    );
    let (result, _) = tokio::join!(reviewer.review(&token), server);
    assert_eq!(result.unwrap().name, "bot");
    api.expect_nothing().await;
}

#[tokio::test]
async fn one_namespace_spending_its_budget_leaves_the_others_theirs() {
    let (client, mut api) = ApiServer::new();
    let reviewer = KubeTokenReviewer::new(client, Some("mcc-gateway".into()));
    let tenant = minted(
        RSA1,
        "system:serviceaccount:tenant:loop",
        "mcc-gateway",
        600,
    );
    // Fetch the keys, then pretend the tenant spent its whole budget.
    let (_, _) = tokio::join!(
        reviewer.keys.verify(&tenant),
        api.expect("GET", JWKS, 200, key_set())
    );
    reviewer
        .budgets
        .lock()
        .unwrap()
        .drain("tenant", Instant::now());
    let refused = tokio::time::timeout(Duration::from_secs(2), reviewer.review(&tenant))
        .await
        .expect("refused without asking the API server")
        .unwrap_err();
    assert!(
        matches!(&refused, AuthError::KeysUnavailable(m) if m.contains("namespace 'tenant'")),
        "{refused:?}"
    );
    api.expect_nothing().await;
    let genuine = bot(0);
    let (good, _) = tokio::join!(
        reviewer.review(&genuine),
        api.expect(
            "POST",
            REVIEWS,
            201,
            answer(true, "system:serviceaccount:agents:bot", &["mcc-gateway"]),
        )
    );
    assert_eq!(good.unwrap().name, "bot");
}

#[tokio::test]
async fn an_accepted_token_is_refreshed_in_the_background_and_revocation_lands() {
    let (client, mut api) = ApiServer::new();
    let reviewer = KubeTokenReviewer::new(client, Some("mcc-gateway".into()));
    let token = bot(0);
    let digest: Digest = Sha256::digest(token.as_bytes()).into();
    let (first, _) = tokio::join!(reviewer.review(&token), async {
        api.expect("GET", JWKS, 200, key_set()).await;
        api.expect(
            "POST",
            REVIEWS,
            201,
            answer(true, "system:serviceaccount:agents:bot", &["mcc-gateway"]),
        )
        .await
    });
    first.unwrap();
    // The answer gets old: the next use is answered at once and refreshes it.
    let backdate = |by: Duration| {
        let now = Instant::now();
        let mut answers = reviewer.answers();
        let a = answers.accepted(&digest, now).unwrap();
        a.reviewed = now - by;
    };
    backdate(REFRESH_AFTER + Duration::from_secs(1));
    let quick = tokio::time::timeout(Duration::from_millis(100), reviewer.review(&token));
    assert_eq!(quick.await.unwrap().unwrap().name, "bot");
    // The refresh finds the token revoked (its Pod was deleted).
    api.expect("POST", REVIEWS, 201, answer(false, "", &[]))
        .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let err = reviewer.review(&token).await.unwrap_err();
    assert!(err.to_string().contains("did not authenticate"), "{err}");
    api.expect_nothing().await;
}

/// The whole `kubernetes` backend: bearer → local check → TokenReview → the user whose
/// grant binds the ServiceAccount (from the operator's document); API keys need no review.
#[tokio::test]
async fn the_backend_maps_service_accounts_to_granted_users() {
    use crate::auth::{AuthSettings, Authenticator, SharedDirectory};
    let raw = mcc_catalog::apikey::format_key(&[0xcd; 6], &[3; 32]);
    let key = mcc_catalog::apikey::ApiKeyRecord::of(&raw, None).unwrap();
    let doc: mcc_catalog::document::CatalogDocument = serde_json::from_value(json!({
        "format": 1, "tools": [],
        "users": [{"user": {"username": "alice", "groups": ["ops"]},
                   "serviceAccounts": [{"namespace": "agents", "name": "bot"}],
                   "apiKeys": [key]}]
    }))
    .unwrap();
    let (_, directory) = crate::catalog::published::from_document(
        "mcc/mcc-catalog",
        doc,
        &mcc_catalog::introspect::Introspector::default(),
    )
    .unwrap();
    let (client, mut api) = ApiServer::new();
    let settings = AuthSettings {
        backend: "kubernetes".into(),
        token_audience: Some("mcc-gateway".into()),
        ..AuthSettings::default()
    };
    let reviewer = std::sync::Arc::new(KubeTokenReviewer::new(
        client,
        settings.token_audience.clone(),
    ));
    let auth = Authenticator::with_token_reviewer(
        &settings,
        SharedDirectory::new(directory),
        Some(reviewer),
    )
    .unwrap();
    let bearer = |token: &str| {
        let mut h = http::HeaderMap::new();
        h.insert(
            http::header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        h
    };

    let token = bot(0);
    let headers = bearer(&token);
    let (identity, seen) = tokio::join!(auth.authenticate(&headers), async {
        api.expect("GET", JWKS, 200, key_set()).await;
        api.expect(
            "POST",
            REVIEWS,
            201,
            answer(true, "system:serviceaccount:agents:bot", &["mcc-gateway"]),
        )
        .await
    });
    assert_eq!(seen.body["spec"]["token"], token.as_str());
    assert_eq!(identity.unwrap().username(), "alice");

    let stranger = minted(
        RSA1,
        "system:serviceaccount:agents:stranger",
        "mcc-gateway",
        600,
    );
    let headers = bearer(&stranger);
    let server = api.expect(
        "POST",
        REVIEWS,
        201,
        answer(
            true,
            "system:serviceaccount:agents:stranger",
            &["mcc-gateway"],
        ),
    );
    let (refused, _) = tokio::join!(auth.authenticate(&headers), server);
    let refused = refused.unwrap_err();
    assert!(matches!(refused, AuthError::Forbidden(_)), "{refused:?}");
    assert!(
        refused.to_string().contains("agents/stranger is not bound"),
        "{refused}"
    );

    // An API key the operator minted: checked locally, no TokenReview.
    assert_eq!(
        auth.authenticate(&bearer(&raw)).await.unwrap().username(),
        "alice"
    );
    // No credential: refused (anonymous is off).
    assert!(matches!(
        auth.authenticate(&http::HeaderMap::new()).await,
        Err(AuthError::Missing(_))
    ));
    api.expect_nothing().await;
}
