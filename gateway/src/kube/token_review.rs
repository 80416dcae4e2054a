//! The `kubernetes` auth backend's token check. A bearer token is first checked locally
//! ([`super::sa_keys`]: signed by the API server's ServiceAccount key, current, for the
//! gateway's audience, naming a ServiceAccount); only a token that passes is reviewed by
//! the API server (`POST /apis/authentication.k8s.io/v1/tokenreviews`), which also says
//! whether it was revoked. Which catalog user a ServiceAccount acts as is the auth
//! directory's business.
//!
//! Answers are remembered ([`super::review_memory`]): an accepted token for [`REMEMBER`]
//! (never past its `exp`), re-reviewed in the background from [`REFRESH_AFTER`] on while
//! it is used, so a busy agent is never held up by its own review; a refused one for
//! [`REMEMBER_REFUSED`]. Reviews are budgeted per namespace. An unreachable API server is
//! never remembered. What the API server said is logged; callers get a short reason.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};
use sha2::{Digest as _, Sha256};

use super::review_memory::{Accepted, Answers, Budgets, Digest};
use super::sa_keys::{ServiceAccountKeys, Verified, service_account};
use crate::auth::{AuthError, ServiceAccount, TokenReviewer};

/// How long an accepted token is trusted without asking again: a revoked token (its Pod
/// deleted) stops working within this.
pub const REMEMBER: Duration = Duration::from_secs(60);
/// From this age on, using an accepted token re-reviews it in the background.
pub const REFRESH_AFTER: Duration = Duration::from_secs(45);
/// How long a refused token is refused without asking again.
pub const REMEMBER_REFUSED: Duration = Duration::from_secs(10);

/// A remembered answer: the ServiceAccount, or the refusal to repeat.
type Answer = Result<ServiceAccount, AuthError>;

/// Checks tokens: locally, then with the TokenReview API.
pub struct KubeTokenReviewer {
    reviews: Reviews,
    keys: ServiceAccountKeys,
    answers: Arc<Mutex<Answers>>,
    budgets: Arc<Mutex<Budgets>>,
}

/// What sends a review (cloned into background refreshes).
#[derive(Clone)]
struct Reviews {
    api: Api<TokenReview>,
    audience: Option<String>,
}

impl KubeTokenReviewer {
    /// `audience`: what tokens must be minted for (`auth.token_audience`); `None` asks for
    /// the API server's own audience.
    pub fn new(client: kube::Client, audience: Option<String>) -> Self {
        Self {
            keys: ServiceAccountKeys::new(client.clone(), audience.clone()),
            reviews: Reviews {
                api: Api::all(client),
                audience,
            },
            answers: Arc::default(),
            budgets: Arc::default(),
        }
    }

    fn answers(&self) -> std::sync::MutexGuard<'_, Answers> {
        self.answers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The remembered answer; starts a background refresh of an accepted one that is
    /// getting old.
    fn remembered(&self, digest: &Digest, token: &str) -> Option<Answer> {
        let now = Instant::now();
        let mut answers = self.answers();
        if let Some(accepted) = answers.accepted(digest, now) {
            let account = accepted.account.clone();
            if now.duration_since(accepted.reviewed) >= REFRESH_AFTER && !accepted.refreshing {
                accepted.refreshing = true;
                let expires = accepted.expires;
                drop(answers);
                self.refresh(*digest, token, account.clone(), expires);
            }
            return Some(Ok(account));
        }
        answers.refused(digest, REMEMBER_REFUSED).map(Err)
    }

    /// Re-reviews an accepted token in the background (within its namespace's budget).
    fn refresh(&self, digest: Digest, token: &str, account: ServiceAccount, expires: Instant) {
        let (reviews, answers, budgets) = (
            self.reviews.clone(),
            self.answers.clone(),
            self.budgets.clone(),
        );
        let token = token.to_string();
        tokio::spawn(async move {
            let allowed = budgets
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(&account.namespace, Instant::now());
            let answer = match allowed {
                true => reviews.ask(&token).await,
                false => Err(AuthError::KeysUnavailable("no review budget".into())),
            };
            let now = Instant::now();
            let mut memory = answers.lock().unwrap_or_else(|p| p.into_inner());
            match answer {
                Ok(account) => memory.accept(digest, accepted(account, now, expires)),
                // Not asked, or no answer: the old one holds until it expires.
                Err(AuthError::KeysUnavailable(_)) => memory.refresh_failed(&digest),
                Err(refused) => memory.refuse(digest, refused, now),
            }
        });
    }
}

/// An answer reviewed at `now` for a token that expires at `expires`.
fn accepted(account: ServiceAccount, now: Instant, expires: Instant) -> Accepted {
    Accepted {
        account,
        reviewed: now,
        until: (now + REMEMBER).min(expires),
        expires,
        refreshing: false,
    }
}

impl Reviews {
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

/// Time left until the Unix time `exp`.
fn remaining(exp: u64) -> Duration {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    Duration::from_secs(exp.saturating_sub(now))
}

#[async_trait::async_trait]
impl TokenReviewer for KubeTokenReviewer {
    async fn review(&self, token: &str) -> Result<ServiceAccount, AuthError> {
        let digest: Digest = Sha256::digest(token.as_bytes()).into();
        if let Some(answer) = self.remembered(&digest, token) {
            return answer;
        }
        // Made-up and forged tokens stop here, without a review or a budget spent.
        let Verified {
            account,
            expires_at,
        } = self.keys.verify(token).await?;
        let allowed = self
            .budgets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(&account.namespace, Instant::now());
        if !allowed {
            tracing::warn!(namespace = %account.namespace, "TokenReview budget of a namespace used up");
            return Err(AuthError::KeysUnavailable(format!(
                "too many new tokens from namespace '{}' to check; retry shortly",
                account.namespace
            )));
        }
        let answer = self.reviews.ask(token).await;
        let now = Instant::now();
        match &answer {
            // An unreachable API server says nothing about the token: ask again next time.
            Err(AuthError::KeysUnavailable(_)) => {}
            Ok(reviewed) => self.answers().accept(
                digest,
                accepted(reviewed.clone(), now, now + remaining(expires_at)),
            ),
            Err(refused) => self.answers().refuse(digest, refused.clone(), now),
        }
        answer
    }
}

#[cfg(test)]
#[path = "token_review_tests.rs"]
mod tests;
