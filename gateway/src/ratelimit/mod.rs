//! Rate limits on `execute`: how many calls a caller may make in a window, per (user,
//! tool) and per user across all tools. This module owns which limit applies
//! ([`RateLimits::resolve`]) and the refusal ([`RateLimited`]); [`store`] owns counting
//! (in-process, or in Redis shared by every replica).
//!
//! Which limit applies, most specific first:
//! - per (user, tool): the settings' `rate_limit.tools[<key>]`, else the tool's own
//!   `rate_limit` (tool file / `Tool` resource), else the strictest `per_tool` limit of
//!   the caller's groups in `rate_limit.groups`, else `rate_limit.default`;
//! - per user (all tools together): the strictest `per_user` limit of the caller's
//!   groups, else `rate_limit.per_user`.
//!
//! A call must fit both; a refused call counts against neither. Windows are fixed: one
//! starts at the first call counted in it and lasts the limit's length; the refusal says
//! when it ends. The check happens after a call's params are complete and valid and
//! before the result cache (a cached result counts: it is a call).

pub mod store;

use std::collections::BTreeMap;
use std::time::Duration;

use mcc_catalog::rate::RateLimit;
use mcc_catalog::{Tool, User};
use serde::Deserialize;

use crate::metrics::Metrics;
pub use store::{Counter, StoreError};

/// The `rate_limit` settings section (MCC's `rate_limit.enabled/default/tools` included).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitSettings {
    /// `false` turns every limit off, the tools' own included.
    pub enabled: bool,
    /// Per (user, tool), when neither the tool nor a group of the caller sets one.
    pub default: Option<RateLimit>,
    /// Per user across all tools, when no group of the caller sets one.
    pub per_user: Option<RateLimit>,
    /// Group name → its members' limits (`ops: 100/1min` is `ops: {per_tool: 100/1min}`).
    pub groups: BTreeMap<String, GroupLimit>,
    /// Tool key → limit; wins over the tool's own `rate_limit` (MCC's `rate_limit.tools`).
    pub tools: BTreeMap<String, RateLimit>,
    /// When Redis cannot answer: `open` (default; the call runs, logged and counted in
    /// `mcc_rate_limit_store_errors_total`) or `closed` (the call is refused).
    pub on_redis_error: OnStoreError,
    /// Count in this Redis; default: the session store's when sessions are in Redis,
    /// else in process (each replica its own counts).
    pub redis_url: Option<String>,
}

impl Default for RateLimitSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            default: None,
            per_user: None,
            groups: BTreeMap::new(),
            tools: BTreeMap::new(),
            on_redis_error: OnStoreError::Open,
            redis_url: None,
        }
    }
}

/// A group's limits: a bare limit is its `per_tool` limit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupLimit {
    pub per_tool: Option<RateLimit>,
    pub per_user: Option<RateLimit>,
}

impl<'de> Deserialize<'de> for GroupLimit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            #[serde(default)]
            per_tool: Option<RateLimit>,
            #[serde(default)]
            per_user: Option<RateLimit>,
        }
        let value = serde_json::Value::deserialize(d)?;
        if value.is_object() {
            let full: Full = serde_json::from_value(value).map_err(serde::de::Error::custom)?;
            return Ok(GroupLimit {
                per_tool: full.per_tool,
                per_user: full.per_user,
            });
        }
        let limit: RateLimit = serde_json::from_value(value).map_err(serde::de::Error::custom)?;
        Ok(GroupLimit {
            per_tool: Some(limit),
            per_user: None,
        })
    }
}

/// What a Redis failure does to a call.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum OnStoreError {
    #[default]
    Open,
    Closed,
}

impl OnStoreError {
    fn label(self) -> &'static str {
        match self {
            OnStoreError::Open => "open",
            OnStoreError::Closed => "closed",
        }
    }
}

/// Which bucket a limit counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The caller's calls of this tool.
    Tool,
    /// The caller's calls of every tool.
    User,
}

/// The limits that apply to one call (`None`: that bucket is not limited).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Applicable {
    pub per_tool: Option<RateLimit>,
    pub per_user: Option<RateLimit>,
}

/// Why a call was not admitted. A REST surface answers [`RateLimited::Exceeded`] with
/// 429 and `Retry-After: <`[`RateLimited::retry_after_secs`]`>`, and
/// [`RateLimited::Unavailable`] with 503.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateLimited {
    /// The MCC text (`Rate limit exceeded for <key> — retry in <n>s.`) and which limit.
    #[error("Rate limit exceeded for {tool} — retry in {}s. ({})", secs(*retry_after), describe(*scope, limit))]
    Exceeded {
        tool: String,
        scope: Scope,
        limit: RateLimit,
        retry_after: Duration,
    },
    /// `rate_limit.on_redis_error: closed` and the store could not answer.
    #[error(
        "Rate limits cannot be checked right now (the rate-limit store is unavailable); the call was not run — retry in {}s.",
        secs(*retry_after)
    )]
    Unavailable { retry_after: Duration },
}

impl RateLimited {
    /// The HTTP status a REST surface answers with: 429, or 503 when the limits could
    /// not be checked.
    pub fn http_status(&self) -> u16 {
        match self {
            RateLimited::Exceeded { .. } => 429,
            RateLimited::Unavailable { .. } => 503,
        }
    }

    /// Whole seconds to wait (at least 1): the `Retry-After` value.
    pub fn retry_after_secs(&self) -> u64 {
        match self {
            RateLimited::Exceeded { retry_after, .. }
            | RateLimited::Unavailable { retry_after } => secs(*retry_after),
        }
    }
}

fn secs(d: Duration) -> u64 {
    d.as_millis().div_ceil(1000).max(1) as u64
}

fn describe(scope: Scope, limit: &RateLimit) -> String {
    match scope {
        Scope::Tool => format!("limit {limit} per caller for this tool"),
        Scope::User => format!("limit {limit} per caller across all tools"),
    }
}

/// How long a closed-on-error refusal tells the caller to wait.
const UNAVAILABLE_RETRY: Duration = Duration::from_secs(5);

/// Resolves and checks limits. Cheap to clone.
#[derive(Clone)]
pub struct RateLimits {
    settings: std::sync::Arc<RateLimitSettings>,
    counter: Counter,
    metrics: Metrics,
    /// When the last store error was logged (one warning per interval, not per call).
    last_log: std::sync::Arc<std::sync::Mutex<Option<std::time::Instant>>>,
}

impl std::fmt::Debug for RateLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimits")
            .field("settings", &self.settings)
            .field("counter", &self.counter)
            .finish()
    }
}

impl RateLimits {
    pub fn new(settings: RateLimitSettings, counter: Counter, metrics: Metrics) -> Self {
        Self {
            settings: std::sync::Arc::new(settings),
            counter,
            metrics,
            last_log: Default::default(),
        }
    }

    /// No limits at all (tests, and gateways built without settings).
    pub fn off() -> Self {
        Self::new(
            RateLimitSettings {
                enabled: false,
                ..RateLimitSettings::default()
            },
            Counter::local(),
            Metrics::new(),
        )
    }

    /// The limits that apply to `user` calling `tool` (see the module doc).
    pub fn resolve(&self, user: Option<&User>, tool: &Tool) -> Applicable {
        let s = &self.settings;
        if !s.enabled {
            return Applicable::default();
        }
        let groups: Vec<&GroupLimit> = user
            .map(|u| u.groups.iter().filter_map(|g| s.groups.get(g)).collect())
            .unwrap_or_default();
        let strictest = |pick: fn(&GroupLimit) -> Option<&RateLimit>| {
            RateLimit::strictest(groups.iter().filter_map(|g| pick(g)))
        };
        let per_tool = s
            .tools
            .get(&tool.key)
            .copied()
            .or(tool.rate_limit)
            .or_else(|| strictest(|g| g.per_tool.as_ref()))
            .or(s.default);
        let per_user = strictest(|g| g.per_user.as_ref()).or(s.per_user);
        let limited = |l: Option<RateLimit>| l.filter(|l| !l.is_unlimited());
        Applicable {
            per_tool: limited(per_tool),
            per_user: limited(per_user),
        }
    }

    /// Admits one call of `tool` by `username` (whose catalog user is `user`) or says
    /// why not. Counts the call only when it is admitted.
    pub async fn check(
        &self,
        user: Option<&User>,
        username: &str,
        tool: &Tool,
    ) -> Result<(), RateLimited> {
        let limits = self.resolve(user, tool);
        if limits == Applicable::default() {
            return Ok(());
        }
        let mut buckets = Vec::with_capacity(2);
        if let Some(limit) = limits.per_tool {
            buckets.push((store::tool_bucket(username, &tool.key), Scope::Tool, limit));
        }
        if let Some(limit) = limits.per_user {
            buckets.push((store::user_bucket(username), Scope::User, limit));
        }
        match self.counter.admit(&buckets).await {
            Ok(None) => Ok(()),
            Ok(Some((i, retry_after))) => Err(RateLimited::Exceeded {
                tool: tool.key.clone(),
                scope: buckets[i].1,
                limit: buckets[i].2,
                retry_after,
            }),
            Err(e) => self.store_failed(e),
        }
    }

    fn store_failed(&self, e: StoreError) -> Result<(), RateLimited> {
        let mode = self.settings.on_redis_error;
        self.metrics.rate_limit_store_error(mode.label());
        let mut last = self.last_log.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
            *last = Some(std::time::Instant::now());
            tracing::warn!(error = %e, on_redis_error = mode.label(), "rate limits could not be checked (rate_limit.on_redis_error: open runs the call, closed refuses it); counted in mcc_rate_limit_store_errors_total");
        }
        match mode {
            OnStoreError::Open => Ok(()),
            OnStoreError::Closed => Err(RateLimited::Unavailable {
                retry_after: UNAVAILABLE_RETRY,
            }),
        }
    }
}

#[cfg(test)]
mod tests;
