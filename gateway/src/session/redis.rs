//! The Redis session backend, shared by every gateway replica.
//!
//! A bucket is one Redis hash (`<prefix>:session:<handle>:<username>`), one field per
//! variable holding its JSON text. Every write is one Lua script, so the limit check
//! and the write are atomic and a write never loses a concurrent write to another
//! field: `set_session` checks the bucket's would-be size and runs `HSET` + `EXPIRE`; a
//! write-back applies its `HDEL`s and `HSET`s (or, for a full replace, drops every other
//! field) the same way. Minted handles are string keys `<prefix>:handle:<handle>`
//! holding the owner (`SET NX EX`), counted per user in a sorted set
//! `<prefix>:handles-of:<username>` scored by expiry.
//!
//! The connection comes from [`crate::redis_conn::connect`], the gateway's one Redis
//! connection definition: lazy, short timeouts. While Redis is down each call fails fast
//! with "session store unavailable: …", and the manager reconnects on its own once Redis
//! is back. Everything else that talks to Redis (the legacy MCP session registry, the
//! result cache) uses the session store's connection.

use std::sync::Arc;
use std::time::Duration;

use crate::redis_conn::{Conn, Redis};
use serde_json::{Map, Value};

use super::limits::Limits;
use super::{Scope, SessionError, decode, handle_owner_key, handles_of_key};

/// Applies a bucket write if the result stays within the limits.
/// KEYS[1]: the bucket. ARGV: ttl, max_vars, max_bytes, replace_all (0/1), number of
/// sets n, then n (name, text) pairs, then the names to delete.
/// Returns {"ok", bytes} or {"vars"|"bytes", would-be value}.
const WRITE_SCRIPT: &str = r#"
local n = tonumber(ARGV[5])
local sets, dels = {}, {}
for i = 0, n - 1 do sets[ARGV[6 + 2 * i]] = ARGV[7 + 2 * i] end
for i = 6 + 2 * n, #ARGV do dels[ARGV[i]] = true end
local fields = redis.call('HGETALL', KEYS[1])
local count, bytes, stale = 0, 0, {}
for i = 1, #fields, 2 do
  local name = fields[i]
  if ARGV[4] == '1' or dels[name] then
    if sets[name] == nil then stale[#stale + 1] = name end
  elseif sets[name] == nil then
    count = count + 1
    bytes = bytes + #name + #fields[i + 1]
  end
end
for name, text in pairs(sets) do
  count = count + 1
  bytes = bytes + #name + #text
end
if count > tonumber(ARGV[2]) then return {'vars', count} end
if bytes > tonumber(ARGV[3]) then return {'bytes', bytes} end
for _, name in ipairs(stale) do redis.call('HDEL', KEYS[1], name) end
for name, text in pairs(sets) do redis.call('HSET', KEYS[1], name, text) end
if count > 0 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return {'ok', bytes}
"#;

/// Counts a new handle for a user unless they hold the most allowed. One key, so it
/// runs as is in a Redis Cluster; the handle key is then claimed with `SET NX` (its own
/// slot), and the count taken back if that fails.
/// KEYS[1]: the user's handle set. ARGV: the handle key, ttl secs, now (ms), max.
/// Returns 1 (counted), -1 (limit reached).
const COUNT_SCRIPT: &str = r#"
local now, ttl = tonumber(ARGV[3]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return -1 end
redis.call('ZADD', KEYS[1], now + ttl * 1000, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl * 1000)
return 1
"#;

/// Replicas a write must reach before it is acknowledged (`session.redis_wait_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub replicas: u32,
    pub timeout: Duration,
}

#[derive(Clone)]
pub struct RedisStore {
    redis: Redis,
    conn: Conn,
    wait: Option<Wait>,
    prefix: Arc<str>,
    ttl: Duration,
    limits: Limits,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

fn unavailable(err: redis::RedisError) -> SessionError {
    SessionError::Unavailable(err.to_string())
}

impl RedisStore {
    /// A store over `redis` ([`crate::redis_conn`]).
    pub fn new(redis: Redis, prefix: &str, ttl: Duration, limits: Limits) -> Self {
        Self {
            conn: redis.conn(),
            redis,
            wait: None,
            prefix: prefix.into(),
            ttl,
            limits,
        }
    }

    /// Writes wait for `wait`'s replicas before they are acknowledged.
    pub fn with_wait(mut self, wait: Option<Wait>) -> Self {
        self.wait = wait;
        self
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// A handle on the (lazily connected, reconnecting) connection.
    pub fn connection(&self) -> Conn {
        self.conn.clone()
    }

    /// The first segment of every key.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The deployment behind the connection (pub/sub, blocking connections).
    pub fn redis(&self) -> Redis {
        self.redis.clone()
    }

    fn ttl_secs(&self) -> i64 {
        i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX)
    }

    pub async fn get(&self, scope: &Scope, name: &str) -> Result<Option<Value>, SessionError> {
        let text: Option<String> = redis::cmd("HGET")
            .arg(scope.key(&self.prefix))
            .arg(name)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        text.map(|t| decode(name, &t)).transpose()
    }

    pub async fn vars(&self, scope: &Scope) -> Result<Map<String, Value>, SessionError> {
        let fields: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(scope.key(&self.prefix))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        fields
            .into_iter()
            .map(|(name, text)| decode(&name, &text).map(|v| (name, v)))
            .collect()
    }

    /// Stores one variable's text (already within the value limit) if the bucket stays
    /// within the limits.
    pub async fn set(&self, scope: &Scope, name: &str, text: &str) -> Result<(), SessionError> {
        self.apply(scope, &[(name.to_string(), text.to_string())], &[], false)
            .await
    }

    /// Sets and deletes in one atomic script, refused as a whole over a limit.
    /// `replace_all` drops every field not in `set` (a full replace).
    pub async fn apply(
        &self,
        scope: &Scope,
        set: &[(String, String)],
        delete: &[String],
        replace_all: bool,
    ) -> Result<(), SessionError> {
        // EVAL rather than EVALSHA: the script is small, and this needs no script cache.
        let key = scope.key(&self.prefix);
        let mut invocation = redis::cmd("EVAL");
        invocation
            .arg(WRITE_SCRIPT)
            .arg(1)
            .arg(&key)
            .arg(self.ttl_secs())
            .arg(self.limits.max_vars)
            .arg(self.limits.max_bucket_bytes)
            .arg(if replace_all { "1" } else { "0" })
            .arg(set.len());
        for (name, text) in set {
            invocation.arg(name).arg(text);
        }
        for name in delete {
            invocation.arg(name);
        }
        let (verdict, amount): (String, usize) = match self.wait {
            None => invocation
                .query_async(&mut self.conn.clone())
                .await
                .map_err(unavailable)?,
            // WAIT where the write ran (the connection; in a Cluster the key's master).
            Some(wait) => {
                let ((verdict, amount), reached): ((String, usize), u32) = self
                    .conn
                    .write_and_wait(&key, invocation, wait.replicas, wait.timeout)
                    .await
                    .map_err(unavailable)?;
                if verdict == "ok" && reached < wait.replicas {
                    return Err(SessionError::Unavailable(format!(
                        "the write reached {reached} of {} replicas within {:?} \
                         (session.redis_wait_replicas); it may be lost on a failover: retry it",
                        wait.replicas, wait.timeout
                    )));
                }
                (verdict, amount)
            }
        };
        match verdict.as_str() {
            "vars" => Err(SessionError::TooManyVars {
                count: amount,
                limit: self.limits.max_vars,
            }),
            "bytes" => Err(SessionError::BucketTooLarge {
                size: amount,
                limit: self.limits.max_bucket_bytes,
            }),
            _ => Ok(()),
        }
    }

    pub async fn remaining(&self, scope: &Scope) -> Result<Option<Duration>, SessionError> {
        let millis: i64 = redis::cmd("PTTL")
            .arg(scope.key(&self.prefix))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        // -2: no such key; -1: no expiry (never written by us, but report it honestly).
        Ok(match millis {
            -2 => None,
            -1 => Some(Duration::MAX),
            ms => Some(Duration::from_millis(ms.max(0) as u64)),
        })
    }

    pub async fn claim_handle(&self, handle: &str, username: &str) -> Result<bool, SessionError> {
        // Replicas' clocks only decide when a counted handle stops counting; the handle
        // key itself expires by Redis's clock.
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let owner_key = handle_owner_key(&self.prefix, handle);
        let handles_of = handles_of_key(&self.prefix, username);
        let counted: i64 = redis::cmd("EVAL")
            .arg(COUNT_SCRIPT)
            .arg(1)
            .arg(&handles_of)
            .arg(&owner_key)
            .arg(self.ttl_secs())
            .arg(now_ms)
            .arg(self.limits.max_handles_per_user)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        if counted == -1 {
            return Err(SessionError::TooManyHandles {
                limit: self.limits.max_handles_per_user,
            });
        }
        let claimed: Option<String> = redis::cmd("SET")
            .arg(&owner_key)
            .arg(username)
            .arg("NX")
            .arg("EX")
            .arg(self.ttl_secs())
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        if claimed.is_none() {
            // Taken (a 128-bit collision): uncount it. Should this fail, the entry stops
            // counting when it expires.
            let _: redis::RedisResult<i64> = redis::cmd("ZREM")
                .arg(&handles_of)
                .arg(&owner_key)
                .query_async(&mut self.conn.clone())
                .await;
        }
        Ok(claimed.is_some())
    }

    pub async fn handle_owner(&self, handle: &str) -> Result<Option<String>, SessionError> {
        redis::cmd("GET")
            .arg(handle_owner_key(&self.prefix, handle))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)
    }

    pub async fn ping(&self) -> Result<(), SessionError> {
        redis::cmd("PING")
            .query_async::<String>(&mut self.conn.clone())
            .await
            .map(drop)
            .map_err(unavailable)
    }
}
