//! The session store: per-(handle, username) buckets of JSON variables that tools read
//! through their context and the LLM reads and writes with `get_session`/`set_session`.
//!
//! - A bucket is addressed by a [`Scope`]: the handle (the legacy `Mcp-Session-Id`, a
//!   handle minted by `new_session`, or [`DEFAULT_HANDLE`]) and the caller's username, so
//!   two users never share a bucket and a handle is useless to anyone but its owner.
//! - Values keep their JSON types. Each write refreshes the bucket's TTL (24 h default).
//! - Names are checked with [`mcc_catalog::context`]'s rules before anything is stored,
//!   so a bucket never holds a reserved or non-slug name.
//! - Bounded ([`limits`]): one value's size, variables and bytes per bucket, handles per
//!   user; a refused write changes nothing. An fn tool's write-back is applied as a diff
//!   against the context it was given, atomically, so a concurrent `set_session` of
//!   another variable survives it.
//! - Anonymous callers never share a bucket: the anonymous default bucket (no MCP
//!   session, no handle) is never written.
//! - Two backends behind one type: in-memory (the embedded default, one process) and
//!   Redis (shared by every replica). When Redis is down, calls fail with
//!   [`SessionError::Unavailable`] and work again once it is back, without a restart.
//!
//! Identity keys are not stored here: the context a tool sees is assembled by
//! [`mcc_catalog::context::assemble`] from these variables and the authenticated caller.

pub mod limits;
mod memory;
mod redis;

use std::time::Duration;

use mcc_catalog::context::{ANONYMOUS, NameError, WriteBack, check_writable};
use serde::Deserialize;
use serde_json::{Map, Value};

pub use limits::Limits;
pub use memory::MemoryStore;
pub use redis::RedisStore;

/// The handle of a caller's bucket when the request names no session (2026-07-28
/// clients that did not call `new_session`).
pub const DEFAULT_HANDLE: &str = "default";

/// Longest accepted handle.
const MAX_HANDLE_LEN: usize = 128;

/// The `session` section of the settings.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSettings {
    /// `memory` (default; one process only) or `redis` (shared by replicas).
    #[serde(default)]
    pub backend: SessionBackend,
    /// `redis://[user:password@]host:port[/db]` (or `rediss://`). Unset: the `REDIS_URL`
    /// environment variable.
    #[serde(default)]
    pub redis_url: Option<String>,
    /// PEM file of the CA certificates a `rediss://` server must chain to, instead of
    /// the system's roots. Holds for every Redis connection of the gateway.
    #[serde(default)]
    pub redis_tls_ca_file: Option<std::path::PathBuf>,
    /// Seconds a bucket lives after its last write, and a `new_session` handle after
    /// minting.
    #[serde(default = "default_ttl")]
    pub ttl_secs: u64,
    /// First segment of every Redis key (`<prefix>:session:…`, `<prefix>:handle:…`).
    #[serde(default = "default_prefix")]
    pub key_prefix: String,
    /// Redis connect and response timeout, in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Replicas that must hold a session write before it is acknowledged (`WAIT`); 0:
    /// acknowledged once the master has it (a failover may lose the last writes).
    #[serde(default)]
    pub redis_wait_replicas: u32,
    /// How long a write waits for those replicas, in milliseconds; short of them, the
    /// write fails as unavailable (it may still have been applied: retry it).
    #[serde(default = "default_wait_timeout_ms")]
    pub redis_wait_timeout_ms: u64,
    /// Largest value of one variable, in bytes of its JSON text.
    #[serde(default = "limits_default::value")]
    pub max_value_bytes: usize,
    /// Most variables in one bucket.
    #[serde(default = "limits_default::vars")]
    pub max_vars: usize,
    /// Largest bucket: names plus JSON texts of all its variables, in bytes.
    #[serde(default = "limits_default::bucket")]
    pub max_bucket_bytes: usize,
    /// Most live `new_session` handles one user holds at once.
    #[serde(default = "limits_default::handles")]
    pub max_handles_per_user: usize,
}

mod limits_default {
    pub fn value() -> usize {
        super::limits::DEFAULT_MAX_VALUE_BYTES
    }
    pub fn vars() -> usize {
        super::limits::DEFAULT_MAX_VARS
    }
    pub fn bucket() -> usize {
        super::limits::DEFAULT_MAX_BUCKET_BYTES
    }
    pub fn handles() -> usize {
        super::limits::DEFAULT_MAX_HANDLES_PER_USER
    }
}

impl SessionSettings {
    /// The limits these settings enforce.
    pub fn limits(&self) -> Limits {
        Limits {
            max_value_bytes: self.max_value_bytes,
            max_vars: self.max_vars,
            max_bucket_bytes: self.max_bucket_bytes,
            max_handles_per_user: self.max_handles_per_user,
        }
    }

    /// How every Redis connection of the gateway is made (beyond its URL).
    pub fn redis_options(&self) -> crate::redis_conn::RedisOptions {
        crate::redis_conn::RedisOptions {
            tls_ca_file: self.redis_tls_ca_file.clone(),
        }
    }

    /// The Redis URL every Redis user of the gateway connects to (sessions, the legacy
    /// MCP session registry, the result cache, the search cache unless it names its own):
    /// `session.redis_url`, which the settings loader fills from `REDIS_URL`. `None`
    /// unless the backend is `redis`. The one place that answers "which Redis".
    pub fn redis_url(&self) -> Option<&str> {
        match self.backend {
            SessionBackend::Redis => self.redis_url.as_deref().filter(|u| !u.is_empty()),
            SessionBackend::Memory => None,
        }
    }
}

/// Which backend holds the buckets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionBackend {
    #[default]
    Memory,
    Redis,
}

fn default_ttl() -> u64 {
    24 * 60 * 60
}
fn default_prefix() -> String {
    "mcc".into()
}
fn default_timeout_ms() -> u64 {
    2000
}
fn default_wait_timeout_ms() -> u64 {
    1000
}

impl Default for SessionSettings {
    fn default() -> Self {
        Self {
            backend: SessionBackend::Memory,
            redis_url: None,
            redis_tls_ca_file: None,
            ttl_secs: default_ttl(),
            key_prefix: default_prefix(),
            timeout_ms: default_timeout_ms(),
            redis_wait_replicas: 0,
            redis_wait_timeout_ms: default_wait_timeout_ms(),
            max_value_bytes: limits::DEFAULT_MAX_VALUE_BYTES,
            max_vars: limits::DEFAULT_MAX_VARS,
            max_bucket_bytes: limits::DEFAULT_MAX_BUCKET_BYTES,
            max_handles_per_user: limits::DEFAULT_MAX_HANDLES_PER_USER,
        }
    }
}

impl std::fmt::Debug for SessionSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionSettings")
            .field("backend", &self.backend)
            .field("redis_url", &self.redis_url.as_deref().map(redact_url))
            .field("redis_tls_ca_file", &self.redis_tls_ca_file)
            .field("ttl_secs", &self.ttl_secs)
            .field("key_prefix", &self.key_prefix)
            .field("timeout_ms", &self.timeout_ms)
            .field("redis_wait_replicas", &self.redis_wait_replicas)
            .field("redis_wait_timeout_ms", &self.redis_wait_timeout_ms)
            .field("limits", &self.limits())
            .finish()
    }
}

pub use crate::redis_conn::redact_url;

/// A failed session operation. The texts are shown to the LLM as tool errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("session store unavailable: {0}")]
    Unavailable(String),
    #[error(transparent)]
    Name(#[from] NameError),
    #[error("Invalid session '{0}': a session handle is 1 to 128 letters, digits, '-' or '_'.")]
    BadHandle(String),
    #[error("Unknown or expired session '{0}'. Call new_session to start a new one.")]
    UnknownHandle(String),
    #[error("Session '{0}' belongs to another user.")]
    NotYourHandle(String),
    #[error("session store holds an unreadable value for '{name}': {reason}")]
    Corrupt { name: String, reason: String },
    #[error(
        "Value of {} is {size} bytes as JSON, over the limit of {limit} bytes \
         (setting session.max_value_bytes). Nothing was stored.",
        mcc_catalog::pyfmt::repr_str(.name)
    )]
    ValueTooLarge {
        name: String,
        size: usize,
        limit: usize,
    },
    #[error(
        "The session would hold {count} variables, over the limit of {limit} \
         (setting session.max_vars). Nothing was stored."
    )]
    TooManyVars { count: usize, limit: usize },
    #[error(
        "The session's variables would take {size} bytes, over the limit of {limit} bytes \
         (setting session.max_bucket_bytes). Nothing was stored; set a large variable \
         to null to make room."
    )]
    BucketTooLarge { size: usize, limit: usize },
    #[error(
        "You already hold {limit} live sessions from new_session, the limit \
         (setting session.max_handles_per_user). Reuse one of them; each expires \
         session.ttl_secs after it was created."
    )]
    TooManyHandles { limit: usize },
    #[error(
        "Anonymous callers have no shared default session. Call new_session and pass \
         the handle it returns as the `session` argument."
    )]
    AnonymousDefault,
}

/// A bad `session` setting, named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("session.{field}: {reason}")]
pub struct SessionSetupError {
    pub field: &'static str,
    pub reason: String,
}

/// Which bucket: (handle, username). The one place that turns it into storage keys.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    handle: String,
    username: String,
}

impl Scope {
    /// A bucket of `username` under `handle`. The handle may hold only letters, digits,
    /// `-` and `_` (so keys stay unambiguous: usernames may contain `:`).
    pub fn new(handle: &str, username: &str) -> Result<Self, SessionError> {
        if !is_valid_handle(handle) {
            return Err(SessionError::BadHandle(
                handle.chars().take(MAX_HANDLE_LEN).collect(),
            ));
        }
        Ok(Self {
            handle: handle.to_string(),
            username: username.to_string(),
        })
    }

    /// The caller's bucket for requests that name no session.
    pub fn default_for(username: &str) -> Self {
        Self {
            handle: DEFAULT_HANDLE.to_string(),
            username: username.to_string(),
        }
    }

    /// The default bucket of `anonymous`: every anonymous caller would share it, so it
    /// is never written (reads find it empty).
    pub fn is_shared_anonymous(&self) -> bool {
        self.handle == DEFAULT_HANDLE && self.username == ANONYMOUS
    }

    pub fn handle(&self) -> &str {
        &self.handle
    }

    pub fn username(&self) -> &str {
        &self.username
    }

    /// `<prefix>:session:<handle>:<username>`.
    pub fn key(&self, prefix: &str) -> String {
        format!("{prefix}:session:{}:{}", self.handle, self.username)
    }
}

fn is_valid_handle(handle: &str) -> bool {
    (1..=MAX_HANDLE_LEN).contains(&handle.len())
        && handle
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `<prefix>:handle:<handle>`: who minted a `new_session` handle.
fn handle_owner_key(prefix: &str, handle: &str) -> String {
    format!("{prefix}:handle:{handle}")
}

/// `<prefix>:handles-of:<username>`: the live handles a user minted (to bound them).
fn handles_of_key(prefix: &str, username: &str) -> String {
    format!("{prefix}:handles-of:{username}")
}

/// A fresh random handle, `s_` + 32 hex characters (128 bits).
fn random_handle() -> Result<String, SessionError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| SessionError::Unavailable(format!("system random source failed: {e}")))?;
    Ok(format!("s_{}", hex::encode(bytes)))
}

/// The session store: one of the backends. Cheap to clone.
#[derive(Clone, Debug)]
pub enum SessionStore {
    Memory(MemoryStore),
    Redis(RedisStore),
}

impl SessionStore {
    /// The Redis connection behind this store, for other per-replica-shared state (the
    /// execute result cache) to use the same server and connection.
    pub fn redis_connection(&self) -> Option<crate::redis_conn::Conn> {
        match self {
            SessionStore::Memory(_) => None,
            SessionStore::Redis(store) => Some(store.connection()),
        }
    }

    /// The Redis deployment and connection behind this store, for pub/sub on the same
    /// Redis (the legacy clients' answer relay), and the key prefix, for key and
    /// channel names. Every Redis user of the gateway starts here ([`crate::redis_conn`]).
    pub fn redis_client(
        &self,
    ) -> Option<(crate::redis_conn::Redis, crate::redis_conn::Conn, String)> {
        match self {
            SessionStore::Memory(_) => None,
            SessionStore::Redis(store) => Some((
                store.redis(),
                store.connection(),
                store.prefix().to_string(),
            )),
        }
    }

    /// Build the configured backend. Redis connects lazily: the gateway starts (and
    /// serves what needs no sessions) while Redis is down.
    pub fn from_settings(settings: &SessionSettings) -> Result<Self, SessionSetupError> {
        if settings.ttl_secs == 0 {
            return Err(setup("ttl_secs", "must be at least 1"));
        }
        let ttl = Duration::from_secs(settings.ttl_secs);
        let limits = settings.limits();
        limits
            .validate()
            .map_err(|(field, reason)| SessionSetupError { field, reason })?;
        match settings.backend {
            SessionBackend::Memory => Ok(Self::Memory(MemoryStore::new(ttl, limits))),
            SessionBackend::Redis => {
                if settings.key_prefix.is_empty()
                    || settings.key_prefix.contains(char::is_whitespace)
                {
                    return Err(setup("key_prefix", "must be non-empty, without spaces"));
                }
                let url = settings
                    .redis_url()
                    .ok_or_else(|| setup("redis_url", "not set (nor REDIS_URL)"))?;
                // The write and its WAIT are one round trip, bounded by the response
                // timeout: a longer WAIT would end as a bare "timed out" instead of
                // saying how many replicas the write reached.
                if settings.redis_wait_replicas > 0
                    && settings.redis_wait_timeout_ms >= settings.timeout_ms
                {
                    return Err(setup(
                        "redis_wait_timeout_ms",
                        &format!(
                            "{} ms must be below session.timeout_ms ({} ms), which bounds \
                             the write and its WAIT together",
                            settings.redis_wait_timeout_ms, settings.timeout_ms
                        ),
                    ));
                }
                let timeout = Duration::from_millis(settings.timeout_ms.max(1));
                let redis = crate::redis_conn::Redis::connect(
                    "session.redis_url",
                    url,
                    &settings.redis_options(),
                    timeout,
                )
                .map_err(|e| SessionSetupError {
                    field: e.setting.strip_prefix("session.").unwrap_or(e.setting),
                    reason: e.reason,
                })?;
                let wait = (settings.redis_wait_replicas > 0).then(|| self::redis::Wait {
                    replicas: settings.redis_wait_replicas,
                    timeout: Duration::from_millis(settings.redis_wait_timeout_ms.max(1)),
                });
                Ok(Self::Redis(
                    RedisStore::new(redis, &settings.key_prefix, ttl, limits).with_wait(wait),
                ))
            }
        }
    }

    /// The TTL given to buckets on write and to minted handles.
    pub fn ttl(&self) -> Duration {
        match self {
            Self::Memory(m) => m.ttl(),
            Self::Redis(r) => r.ttl(),
        }
    }

    /// The stored value of `name`, or `None` when unset.
    pub async fn get(&self, scope: &Scope, name: &str) -> Result<Option<Value>, SessionError> {
        match self {
            Self::Memory(m) => Ok(m.get(scope, name)),
            Self::Redis(r) => r.get(scope, name).await,
        }
    }

    /// Store one variable (atomic per variable; the bucket's TTL is refreshed). Refuses
    /// reserved and non-slug names with the catalog's messages, values and buckets over
    /// the limits (nothing changes), and the shared anonymous bucket.
    pub async fn set(&self, scope: &Scope, name: &str, value: Value) -> Result<(), SessionError> {
        check_writable(name)?;
        if scope.is_shared_anonymous() {
            return Err(SessionError::AnonymousDefault);
        }
        let text = limits::value_text(&value);
        self.limits().check_value(name, &text)?;
        match self {
            Self::Memory(m) => m.set(scope, name, value, &text),
            Self::Redis(r) => r.set(scope, name, &text).await,
        }
    }

    /// The limits this store enforces.
    pub fn limits(&self) -> Limits {
        match self {
            Self::Memory(m) => m.limits(),
            Self::Redis(r) => r.limits(),
        }
    }

    /// Apply an fn tool's write-back (see [`mcc_catalog::context::write_back_diff`]):
    /// its sets and deletes in one atomic step, checked against the limits as a whole —
    /// over a limit, nothing is written. Keys it did not touch keep whatever concurrent
    /// calls stored meanwhile.
    pub async fn apply(&self, scope: &Scope, changes: &WriteBack) -> Result<(), SessionError> {
        if changes.is_empty() {
            return Ok(());
        }
        if scope.is_shared_anonymous() {
            return Err(SessionError::AnonymousDefault);
        }
        let set = self.checked_texts(&changes.set)?;
        match self {
            Self::Memory(m) => m.apply(scope, &changes.set, &set, &changes.delete, false),
            Self::Redis(r) => r.apply(scope, &set, &changes.delete, false).await,
        }
    }

    /// Names checked and values turned into their stored texts, each within the value
    /// limit.
    fn checked_texts(
        &self,
        vars: &Map<String, Value>,
    ) -> Result<Vec<(String, String)>, SessionError> {
        let limits = self.limits();
        vars.iter()
            .map(|(name, value)| {
                check_writable(name)?;
                let text = limits::value_text(value);
                limits.check_value(name, &text)?;
                Ok((name.clone(), text))
            })
            .collect()
    }

    /// Every stored variable of the bucket (empty when none).
    pub async fn vars(&self, scope: &Scope) -> Result<Map<String, Value>, SessionError> {
        match self {
            Self::Memory(m) => Ok(m.vars(scope)),
            Self::Redis(r) => r.vars(scope).await,
        }
    }

    /// Replace all variables of the bucket at once (an fn tool's write-back). Every name
    /// must be writable, else nothing is written: pass the output of
    /// [`mcc_catalog::context::sanitize_write_back`].
    pub async fn replace(
        &self,
        scope: &Scope,
        vars: Map<String, Value>,
    ) -> Result<(), SessionError> {
        if scope.is_shared_anonymous() {
            return Err(SessionError::AnonymousDefault);
        }
        let set = self.checked_texts(&vars)?;
        match self {
            Self::Memory(m) => m.apply(scope, &vars, &set, &[], true),
            Self::Redis(r) => r.apply(scope, &set, &[], true).await,
        }
    }

    /// Time left before the bucket expires; `None` when there is no bucket.
    pub async fn remaining(&self, scope: &Scope) -> Result<Option<Duration>, SessionError> {
        match self {
            Self::Memory(m) => Ok(m.remaining(scope)),
            Self::Redis(r) => r.remaining(scope).await,
        }
    }

    /// Mint a `new_session` handle owned by `username`, valid for [`Self::ttl`]; refused
    /// when the user already holds `max_handles_per_user` live ones.
    pub async fn mint_handle(&self, username: &str) -> Result<String, SessionError> {
        loop {
            let handle = random_handle()?;
            let claimed = match self {
                Self::Memory(m) => m.claim_handle(&handle, username)?,
                Self::Redis(r) => r.claim_handle(&handle, username).await?,
            };
            // A collision of 128 random bits will not happen; if it did, draw again.
            if claimed {
                return Ok(handle);
            }
        }
    }

    /// The bucket a `session` argument names, if `username` minted that handle.
    pub async fn scope_for_handle(
        &self,
        handle: &str,
        username: &str,
    ) -> Result<Scope, SessionError> {
        let scope = Scope::new(handle, username)?;
        let owner = match self {
            Self::Memory(m) => m.handle_owner(handle),
            Self::Redis(r) => r.handle_owner(handle).await?,
        };
        match owner {
            None => Err(SessionError::UnknownHandle(handle.to_string())),
            Some(owner) if owner != username => {
                Err(SessionError::NotYourHandle(handle.to_string()))
            }
            Some(_) => Ok(scope),
        }
    }

    /// Whether the store answers (for `/readyz`).
    pub async fn ping(&self) -> Result<(), SessionError> {
        match self {
            Self::Memory(_) => Ok(()),
            Self::Redis(r) => r.ping().await,
        }
    }
}

fn setup(field: &'static str, reason: &str) -> SessionSetupError {
    SessionSetupError {
        field,
        reason: reason.to_string(),
    }
}

/// A stored JSON text back into its value.
fn decode(name: &str, text: &str) -> Result<Value, SessionError> {
    serde_json::from_str(text).map_err(|e| SessionError::Corrupt {
        name: name.to_string(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
