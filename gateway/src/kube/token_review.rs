//! The `kubernetes` auth backend's token check: a ServiceAccount token sent as bearer is
//! reviewed by the API server (`POST /apis/authentication.k8s.io/v1/tokenreviews`) with
//! the gateway's audience. Only ServiceAccount identities
//! (`system:serviceaccount:<namespace>:<name>`) are accepted; which catalog user one acts
//! as is the auth directory's business.
//!
//! Answers are remembered by the token's SHA-256 (never the token): an accepted token for
//! [`REMEMBER`], a refused one for [`REMEMBER_REFUSED`], so neither a busy agent nor a
//! client retrying a bad token costs one review per request. Reviews of tokens not
//! remembered are rate-limited ([`REVIEWS_PER_SEC`], bursts of [`REVIEW_BURST`]): a flood
//! of made-up tokens gets 503 from the gateway instead of reaching the API server, while
//! remembered tokens keep working. An unreachable API server is never remembered.
//! What the API server said is logged; callers get a short reason.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};

use crate::auth::{AuthError, ServiceAccount, TokenReviewer};

/// How long an accepted token is trusted without asking again.
pub const REMEMBER: Duration = Duration::from_secs(60);
/// How long a refused token is refused without asking again.
pub const REMEMBER_REFUSED: Duration = Duration::from_secs(10);
/// Reviews per second the gateway sends at most (steady rate)...
pub const REVIEWS_PER_SEC: f64 = 20.0;
/// ...and in one burst.
pub const REVIEW_BURST: f64 = 50.0;
/// Remembered answers kept at most (the cache is emptied when full).
const REMEMBER_MAX: usize = 10_000;
const SA_PREFIX: &str = "system:serviceaccount:";

/// A remembered answer: the ServiceAccount, or the refusal to repeat.
type Answer = Result<ServiceAccount, AuthError>;

/// Checks tokens with the TokenReview API.
pub struct KubeTokenReviewer {
    api: Api<TokenReview>,
    audience: Option<String>,
    answers: Mutex<HashMap<[u8; 32], (Answer, Instant)>>,
    budget: Mutex<Budget>,
}

/// A token bucket over reviews sent to the API server.
struct Budget {
    tokens: f64,
    at: Instant,
}

impl Budget {
    fn take(&mut self, now: Instant) -> bool {
        let refill = now.duration_since(self.at).as_secs_f64() * REVIEWS_PER_SEC;
        self.tokens = (self.tokens + refill).min(REVIEW_BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl KubeTokenReviewer {
    /// `audience`: what tokens must be minted for (`auth.token_audience`); `None` asks for
    /// the API server's own audience.
    pub fn new(client: kube::Client, audience: Option<String>) -> Self {
        Self {
            api: Api::all(client),
            audience,
            answers: Mutex::new(HashMap::new()),
            budget: Mutex::new(Budget {
                tokens: REVIEW_BURST,
                at: Instant::now(),
            }),
        }
    }

    fn remembered(&self, digest: &[u8; 32]) -> Option<Answer> {
        let cache = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        let (answer, at) = cache.get(digest)?;
        let ttl = if answer.is_ok() {
            REMEMBER
        } else {
            REMEMBER_REFUSED
        };
        (at.elapsed() < ttl).then(|| answer.clone())
    }

    fn remember(&self, digest: [u8; 32], answer: &Answer) {
        let mut cache = self.answers.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= REMEMBER_MAX {
            cache.clear();
        }
        cache.insert(digest, (answer.clone(), Instant::now()));
    }

    /// Whether a review may be sent now (see [`REVIEWS_PER_SEC`]).
    fn may_review(&self) -> bool {
        let mut budget = self.budget.lock().unwrap_or_else(|p| p.into_inner());
        budget.take(Instant::now())
    }

    /// The API server's answer; `Err(KeysUnavailable)` when it gave none.
    async fn ask(&self, token: &str) -> Answer {
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
            .map_err(|e| {
                tracing::warn!(error = %e, "TokenReview request failed");
                AuthError::KeysUnavailable(
                    "the Kubernetes API cannot check tokens right now; retry shortly".into(),
                )
            })?;
        let status = answer.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            if let Some(why) = &status.error {
                tracing::info!(reason = %why, "TokenReview refused a token");
            }
            return Err(AuthError::InvalidToken(
                "the Kubernetes API did not authenticate the token".into(),
            ));
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
        if let Some(answer) = self.remembered(&digest) {
            return answer;
        }
        if !self.may_review() {
            tracing::warn!("TokenReview rate limit reached; refusing new tokens for now");
            return Err(AuthError::KeysUnavailable(
                "too many new tokens to check; retry shortly".into(),
            ));
        }
        let answer = self.ask(token).await;
        // An unreachable API server says nothing about the token: ask again next time.
        if !matches!(answer, Err(AuthError::KeysUnavailable(_))) {
            self.remember(digest, &answer);
        }
        answer
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
        for (i, (reply, expected)) in cases.into_iter().enumerate() {
            let server = api.expect("POST", REVIEWS, 201, reply);
            let token = format!("t{i}");
            let (result, _) = tokio::join!(reviewer.review(&token), server);
            let err = result.unwrap_err();
            assert!(err.to_string().contains(expected), "{err}");
            // Remembered briefly: the same refusal, no second review.
            let again = tokio::time::timeout(Duration::from_secs(2), reviewer.review(&token));
            assert_eq!(again.await.expect("answered from memory").unwrap_err(), err);
        }
        let server = api.expect(
            "POST",
            REVIEWS,
            500,
            json!({"kind": "Status", "message": "etcd timeout at 10.0.0.3:2379", "code": 500}),
        );
        let (result, _) = tokio::join!(reviewer.review("t9"), server);
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
            answer(true, "system:serviceaccount:a:b", &["mcc-gateway"]),
        );
        let (result, _) = tokio::join!(reviewer.review("t9"), server);
        assert_eq!(result.unwrap().name, "b");
        api.expect_nothing().await;
    }

    #[tokio::test]
    async fn a_flood_of_new_tokens_is_rate_limited_and_remembered_ones_keep_working() {
        let (client, mut api) = ApiServer::new();
        let reviewer = KubeTokenReviewer::new(client, None);
        let server = api.expect(
            "POST",
            REVIEWS,
            201,
            answer(true, "system:serviceaccount:agents:bot", &[]),
        );
        let (good, _) = tokio::join!(reviewer.review("good"), server);
        good.unwrap();
        // Spend the burst without the API server: pretend the reviews were sent.
        reviewer.budget.lock().unwrap().tokens = 0.0;
        let flooded = tokio::time::timeout(Duration::from_secs(2), reviewer.review("made-up"))
            .await
            .expect("refused without asking the API server")
            .unwrap_err();
        assert!(
            matches!(&flooded, AuthError::KeysUnavailable(m) if m.contains("too many")),
            "{flooded:?}"
        );
        let good = tokio::time::timeout(Duration::from_secs(2), reviewer.review("good"));
        assert_eq!(good.await.unwrap().unwrap().name, "bot");
        api.expect_nothing().await;
    }

    #[test]
    fn the_budget_refills_at_the_steady_rate() {
        let start = Instant::now();
        let mut b = Budget {
            tokens: 0.0,
            at: start,
        };
        assert!(!b.take(start));
        assert!(
            b.take(start + Duration::from_millis(60)),
            "1.2 tokens after 60 ms"
        );
        assert!(!b.take(start + Duration::from_millis(60)));
        b.take(start + Duration::from_secs(3600));
        assert!(b.tokens <= REVIEW_BURST);
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
