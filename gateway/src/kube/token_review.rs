//! The `kubernetes` auth backend's token check: a ServiceAccount token sent as bearer is
//! reviewed by the API server (`POST /apis/authentication.k8s.io/v1/tokenreviews`) with
//! the gateway's audience. Only ServiceAccount identities
//! (`system:serviceaccount:<namespace>:<name>`) are accepted; which catalog user one acts
//! as is the auth directory's business. Accepted tokens are remembered (by SHA-256, never
//! the token) for a minute so a busy agent does not cost one review per request.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};

use crate::auth::{AuthError, ServiceAccount, TokenReviewer};

/// How long an accepted token is trusted without asking again.
const REMEMBER: Duration = Duration::from_secs(60);
/// Remembered tokens kept at most (the cache is emptied when full).
const REMEMBER_MAX: usize = 10_000;
const SA_PREFIX: &str = "system:serviceaccount:";

/// Checks tokens with the TokenReview API.
pub struct KubeTokenReviewer {
    api: Api<TokenReview>,
    audience: Option<String>,
    accepted: Mutex<HashMap<[u8; 32], (ServiceAccount, Instant)>>,
}

impl KubeTokenReviewer {
    /// `audience`: what tokens must be minted for (`auth.token_audience`); `None` asks for
    /// the API server's own audience.
    pub fn new(client: kube::Client, audience: Option<String>) -> Self {
        Self {
            api: Api::all(client),
            audience,
            accepted: Mutex::new(HashMap::new()),
        }
    }

    fn remembered(&self, digest: &[u8; 32]) -> Option<ServiceAccount> {
        let cache = self.accepted.lock().expect("token cache lock");
        let (sa, at) = cache.get(digest)?;
        (at.elapsed() < REMEMBER).then(|| sa.clone())
    }

    fn remember(&self, digest: [u8; 32], sa: &ServiceAccount) {
        let mut cache = self.accepted.lock().expect("token cache lock");
        if cache.len() >= REMEMBER_MAX {
            cache.clear();
        }
        cache.insert(digest, (sa.clone(), Instant::now()));
    }

    async fn ask(&self, token: &str) -> Result<ServiceAccount, AuthError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: self.audience.clone().map(|a| vec![a]),
            },
            ..Default::default()
        };
        let answer = self
            .api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| AuthError::KeysUnavailable(format!("TokenReview failed: {e}")))?;
        let status = answer.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            let why = status.error.map(|e| format!(": {e}")).unwrap_or_default();
            return Err(AuthError::InvalidToken(format!(
                "the Kubernetes API did not authenticate the token{why}"
            )));
        }
        if let Some(audience) = &self.audience {
            let audiences = status.audiences.unwrap_or_default();
            if !audiences.contains(audience) {
                return Err(AuthError::InvalidToken(format!(
                    "the token is not for audience '{audience}' (mint it with that audience)"
                )));
            }
        }
        let username = status.user.and_then(|u| u.username).unwrap_or_default();
        service_account(&username).ok_or_else(|| {
            AuthError::Forbidden(format!(
                "'{username}' is not a ServiceAccount; only ServiceAccount tokens are accepted"
            ))
        })
    }
}

#[async_trait::async_trait]
impl TokenReviewer for KubeTokenReviewer {
    async fn review(&self, token: &str) -> Result<ServiceAccount, AuthError> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(sa) = self.remembered(&digest) {
            return Ok(sa);
        }
        let sa = self.ask(token).await?;
        self.remember(digest, &sa);
        Ok(sa)
    }
}

/// `system:serviceaccount:<namespace>:<name>` as a ServiceAccount.
fn service_account(username: &str) -> Option<ServiceAccount> {
    let (namespace, name) = username.strip_prefix(SA_PREFIX)?.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then(|| ServiceAccount {
        namespace: namespace.to_string(),
        name: name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcc_catalog::kube_mock::ApiServer;
    use serde_json::json;

    const REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

    fn answer(authenticated: bool, username: &str, audiences: &[&str]) -> serde_json::Value {
        json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {},
            "status": {"authenticated": authenticated, "user": {"username": username},
                       "audiences": audiences}
        })
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
    async fn review_posts_token_and_audience_and_maps_the_answer() {
        let (client, mut api) = ApiServer::new();
        let reviewer = KubeTokenReviewer::new(client, Some("mcc-gateway".into()));
        let server = async {
            let seen = api
                .expect(
                    "POST",
                    REVIEWS,
                    201,
                    answer(true, "system:serviceaccount:agents:bot", &["mcc-gateway"]),
                )
                .await;
            assert_eq!(seen.body["spec"]["token"], "sa-token");
            assert_eq!(seen.body["spec"]["audiences"], json!(["mcc-gateway"]));
            assert_eq!(seen.body["kind"], "TokenReview");
            api
        };
        let (result, mut api) = tokio::join!(reviewer.review("sa-token"), server);
        let sa = result.unwrap();
        assert_eq!((sa.namespace.as_str(), sa.name.as_str()), ("agents", "bot"));
        // Remembered: no second review for the same token.
        assert_eq!(reviewer.review("sa-token").await.unwrap(), sa);
        api.expect_nothing().await;
    }

    #[tokio::test]
    async fn refused_tokens_say_why() {
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
        for (reply, expected) in cases {
            let server = api.expect("POST", REVIEWS, 201, reply);
            let (result, _) = tokio::join!(reviewer.review("t"), server);
            let err = result.unwrap_err();
            assert!(err.to_string().contains(expected), "{err}");
        }
        let server = api.expect(
            "POST",
            REVIEWS,
            500,
            json!({"kind": "Status", "message": "boom", "code": 500}),
        );
        let (result, _) = tokio::join!(reviewer.review("t"), server);
        assert!(
            matches!(result, Err(AuthError::KeysUnavailable(_))),
            "{result:?}"
        );
    }

    /// The whole `kubernetes` backend: bearer → TokenReview → the user whose grant binds
    /// the ServiceAccount (from the operator's document); API keys need no review.
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
        let (_, directory) = crate::published::from_document(
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

        let server = api.expect(
            "POST",
            REVIEWS,
            201,
            answer(true, "system:serviceaccount:agents:bot", &["mcc-gateway"]),
        );
        let headers = bearer("bot-token");
        let (identity, seen) = tokio::join!(auth.authenticate(&headers), server);
        assert_eq!(seen.body["spec"]["token"], "bot-token");
        assert_eq!(identity.unwrap().username(), "alice");

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
        let headers = bearer("stranger-token");
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
}
