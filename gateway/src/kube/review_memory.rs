//! What the TokenReview check remembers, and what it may spend: accepted and refused
//! answers by the token's SHA-256 (never the token), and a review budget per namespace.
//!
//! Only tokens that passed the local signature check ([`super::sa_keys`]) get here, so a
//! flood of made-up tokens neither fills this memory nor spends a budget. What a tenant
//! with genuine tokens can do is bounded per tenant:
//! - accepted answers are kept per ServiceAccount, at most [`TOKENS_PER_ACCOUNT`] each (a
//!   new one replaces that account's oldest): no account can push another's out;
//! - reviews are budgeted per namespace of the verified token, not per client address
//!   (behind an Ingress every client shares one), so a namespace that mints tokens in a
//!   loop waits for its own budget while the others' reviews go on;
//! - refused answers (genuine but revoked tokens) are few and cheap to forget: past
//!   [`REFUSED_MAX`] they are forgotten together.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::auth::{AuthError, ServiceAccount};

/// Accepted tokens remembered per ServiceAccount.
pub const TOKENS_PER_ACCOUNT: usize = 16;
/// Refused answers remembered at most.
pub const REFUSED_MAX: usize = 10_000;
/// Reviews per second of one namespace's tokens (steady rate)...
pub const REVIEWS_PER_SEC: f64 = 10.0;
/// ...and in one burst.
pub const REVIEW_BURST: f64 = 50.0;
/// Namespaces whose budget is tracked at most (full ones, i.e. idle, are forgotten first).
const NAMESPACES_MAX: usize = 10_000;

pub type Digest = [u8; 32];

/// An accepted token.
#[derive(Debug, Clone)]
pub struct Accepted {
    pub account: ServiceAccount,
    /// When the API server last said yes.
    pub reviewed: Instant,
    /// Until when the answer holds: the review's lifetime, never past the token's `exp`.
    pub until: Instant,
    /// The token's `exp`.
    pub expires: Instant,
    /// A refresh is under way (one at a time per token).
    pub refreshing: bool,
}

/// Remembered answers.
#[derive(Default)]
pub struct Answers {
    accepted: HashMap<Digest, Accepted>,
    by_account: HashMap<(String, String), VecDeque<Digest>>,
    refused: HashMap<Digest, (AuthError, Instant)>,
}

impl Answers {
    /// The live accepted answer for `digest`, if any.
    pub fn accepted(&mut self, digest: &Digest, now: Instant) -> Option<&mut Accepted> {
        if self.accepted.get(digest).is_some_and(|a| a.until <= now) {
            self.forget_accepted(digest);
        }
        self.accepted.get_mut(digest)
    }

    /// The refusal for `digest` while younger than `ttl`.
    pub fn refused(&self, digest: &Digest, ttl: Duration) -> Option<AuthError> {
        let (error, at) = self.refused.get(digest)?;
        (at.elapsed() < ttl).then(|| error.clone())
    }

    pub fn accept(&mut self, digest: Digest, accepted: Accepted) {
        self.refused.remove(&digest);
        let key = (
            accepted.account.namespace.clone(),
            accepted.account.name.clone(),
        );
        let tokens = self.by_account.entry(key).or_default();
        if !tokens.contains(&digest) {
            if tokens.len() >= TOKENS_PER_ACCOUNT
                && let Some(oldest) = tokens.pop_front()
            {
                self.accepted.remove(&oldest);
            }
            tokens.push_back(digest);
        }
        self.accepted.insert(digest, accepted);
    }

    pub fn refuse(&mut self, digest: Digest, error: AuthError, now: Instant) {
        self.forget_accepted(&digest);
        if self.refused.len() >= REFUSED_MAX {
            self.refused.clear();
        }
        self.refused.insert(digest, (error, now));
    }

    /// Ends a refresh that could not ask (no budget, API server unreachable).
    pub fn refresh_failed(&mut self, digest: &Digest) {
        if let Some(a) = self.accepted.get_mut(digest) {
            a.refreshing = false;
        }
    }

    fn forget_accepted(&mut self, digest: &Digest) {
        let Some(gone) = self.accepted.remove(digest) else {
            return;
        };
        let key = (gone.account.namespace, gone.account.name);
        if let Some(tokens) = self.by_account.get_mut(&key) {
            tokens.retain(|d| d != digest);
            if tokens.is_empty() {
                self.by_account.remove(&key);
            }
        }
    }

    #[cfg(test)]
    pub fn accepted_count(&self) -> usize {
        self.accepted.len()
    }
}

/// A token bucket over reviews.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    fn refill(&mut self, now: Instant) {
        let refill = now.duration_since(self.at).as_secs_f64() * REVIEWS_PER_SEC;
        self.tokens = (self.tokens + refill).min(REVIEW_BURST);
        self.at = now;
    }
}

/// Review budgets by namespace.
#[derive(Default)]
pub struct Budgets {
    by_namespace: HashMap<String, Bucket>,
}

impl Budgets {
    /// Spends one review of `namespace`'s budget; false when it is used up.
    pub fn take(&mut self, namespace: &str, now: Instant) -> bool {
        if !self.by_namespace.contains_key(namespace) && self.by_namespace.len() >= NAMESPACES_MAX {
            // A full bucket is the same as no bucket: forget those first.
            self.by_namespace.retain(|_, b| {
                b.refill(now);
                b.tokens < REVIEW_BURST
            });
            if self.by_namespace.len() >= NAMESPACES_MAX {
                return false;
            }
        }
        self.by_namespace
            .entry(namespace.to_string())
            .or_insert(Bucket {
                tokens: REVIEW_BURST,
                at: now,
            })
            .take(now)
    }

    #[cfg(test)]
    pub fn drain(&mut self, namespace: &str, now: Instant) {
        while self.take(namespace, now) {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(ns: &str, name: &str) -> ServiceAccount {
        ServiceAccount {
            namespace: ns.into(),
            name: name.into(),
        }
    }

    fn accepted(ns: &str, name: &str, now: Instant) -> Accepted {
        Accepted {
            account: account(ns, name),
            reviewed: now,
            until: now + Duration::from_secs(60),
            expires: now + Duration::from_secs(3600),
            refreshing: false,
        }
    }

    #[test]
    fn one_account_cannot_push_out_another() {
        let now = Instant::now();
        let mut answers = Answers::default();
        answers.accept([1; 32], accepted("agents", "bot", now));
        for i in 0..1000u32 {
            let mut d = [0xee; 32];
            d[..4].copy_from_slice(&i.to_be_bytes());
            answers.accept(d, accepted("tenant", "flood", now));
        }
        assert!(answers.accepted(&[1; 32], now).is_some());
        assert_eq!(answers.accepted_count(), 1 + TOKENS_PER_ACCOUNT);
    }

    #[test]
    fn an_answer_never_outlives_its_until() {
        let now = Instant::now();
        let mut answers = Answers::default();
        let mut a = accepted("agents", "bot", now);
        a.until = now + Duration::from_millis(5);
        answers.accept([2; 32], a);
        assert!(answers.accepted(&[2; 32], now).is_some());
        assert!(
            answers
                .accepted(&[2; 32], now + Duration::from_millis(6))
                .is_none()
        );
        assert_eq!(answers.accepted_count(), 0);
    }

    #[test]
    fn budgets_are_per_namespace_and_refill() {
        let now = Instant::now();
        let mut budgets = Budgets::default();
        budgets.drain("tenant", now);
        assert!(!budgets.take("tenant", now));
        assert!(
            budgets.take("agents", now),
            "another namespace still reviews"
        );
        assert!(budgets.take("tenant", now + Duration::from_millis(150)));
    }
}
