//! The result cache of tools with `cache_ttl`: successful results only, keyed by tool
//! key, caller, and canonical hashes of the params and of the context the tool would
//! receive, so a result is never shared between users or between sessions whose
//! variables differ. In memory by default; in Redis when configured.
//!
//! Key format (the one place it is defined):
//! `mcc:exec:<tool key>:<sha256(caller)>:<sha256(params)>:<sha256(context)>`, each hash
//! 64 hex digits over canonical JSON (object keys sorted at every level).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::ConnectionManager;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Prefix of every cache key.
pub const KEY_PREFIX: &str = "mcc:exec:";

/// Entries the in-memory cache holds at most; past it, the entry closest to expiry goes.
pub const MEMORY_CAPACITY: usize = 10_000;

/// How long one Redis command may take before the cache is treated as unavailable: a
/// stuck cache must not stall tool calls.
pub const REDIS_TIMEOUT: Duration = Duration::from_secs(2);

/// A cache backend failure. Callers log it and run the tool uncached.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("result cache (Redis): {0}")]
    Redis(#[from] redis::RedisError),
    #[error("result cache (Redis): no answer within {REDIS_TIMEOUT:?}")]
    Timeout,
    #[error("result cache: stored value under {key} is not JSON: {reason}")]
    Corrupt { key: String, reason: String },
}

/// Where cached results live. Cheap to clone.
#[derive(Clone)]
pub enum ResultCache {
    Memory(Arc<Mutex<MemoryCache>>),
    Redis(ConnectionManager),
}

impl std::fmt::Debug for ResultCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResultCache::Memory(_) => f.write_str("ResultCache::Memory"),
            ResultCache::Redis(_) => f.write_str("ResultCache::Redis"),
        }
    }
}

impl ResultCache {
    /// The embedded default, per process.
    pub fn memory() -> Self {
        ResultCache::Memory(Arc::new(Mutex::new(MemoryCache::default())))
    }

    /// A Redis-backed cache shared by gateway replicas (`redis://host:port/db`).
    pub async fn redis(url: &str) -> Result<Self, CacheError> {
        let client = redis::Client::open(url)?;
        Ok(ResultCache::Redis(client.get_connection_manager().await?))
    }

    pub async fn get(&self, key: &str) -> Result<Option<Value>, CacheError> {
        match self {
            ResultCache::Memory(m) => Ok(lock(m).get(key, Instant::now())),
            ResultCache::Redis(conn) => {
                let mut get = redis::cmd("GET");
                get.arg(key);
                let raw: Option<String> = query(conn, &get).await?;
                raw.map(|text| {
                    serde_json::from_str(&text).map_err(|e| CacheError::Corrupt {
                        key: key.to_string(),
                        reason: e.to_string(),
                    })
                })
                .transpose()
            }
        }
    }

    pub async fn put(&self, key: &str, value: &Value, ttl: Duration) -> Result<(), CacheError> {
        match self {
            ResultCache::Memory(m) => {
                lock(m).put(key.to_string(), value.clone(), Instant::now() + ttl);
                Ok(())
            }
            ResultCache::Redis(conn) => {
                let mut set = redis::cmd("SET");
                set.arg(key)
                    .arg(value.to_string())
                    .arg("EX")
                    .arg(ttl.as_secs().max(1));
                query(conn, &set).await
            }
        }
    }
}

async fn query<T: redis::FromRedisValue>(
    conn: &ConnectionManager,
    cmd: &redis::Cmd,
) -> Result<T, CacheError> {
    let mut conn = conn.clone();
    match tokio::time::timeout(REDIS_TIMEOUT, cmd.query_async(&mut conn)).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(CacheError::Timeout),
    }
}

fn lock(m: &Mutex<MemoryCache>) -> std::sync::MutexGuard<'_, MemoryCache> {
    // A panic while holding the lock cannot leave the map inconsistent: keep using it.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Entries with their expiry instant.
#[derive(Debug, Default)]
pub struct MemoryCache {
    entries: HashMap<String, (Instant, Value)>,
}

impl MemoryCache {
    fn get(&mut self, key: &str, now: Instant) -> Option<Value> {
        match self.entries.get(key) {
            Some((expires, value)) if *expires > now => Some(value.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    fn put(&mut self, key: String, value: Value, expires: Instant) {
        if self.entries.len() >= MEMORY_CAPACITY && !self.entries.contains_key(&key) {
            let now = Instant::now();
            self.entries.retain(|_, (e, _)| *e > now);
            if self.entries.len() >= MEMORY_CAPACITY {
                let soonest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (e, _))| *e)
                    .map(|(k, _)| k.clone());
                if let Some(k) = soonest {
                    self.entries.remove(&k);
                }
            }
        }
        self.entries.insert(key, (expires, value));
    }
}

/// The cache key of one call (see the module doc for the format).
pub fn key(
    tool_key: &str,
    caller: &str,
    params: &Map<String, Value>,
    context: &Map<String, Value>,
) -> String {
    format!(
        "{KEY_PREFIX}{tool_key}:{}:{}:{}",
        sha256_hex(caller.as_bytes()),
        canonical_hash(params),
        canonical_hash(context)
    )
}

/// SHA-256 (hex) of the canonical JSON of a map: keys sorted at every level, compact.
pub fn canonical_hash(map: &Map<String, Value>) -> String {
    let mut text = String::new();
    write_canonical(&mut text, &Value::Object(map.clone()));
    sha256_hex(text.as_bytes())
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Canonical JSON does not depend on serde_json's map order (a `preserve_order` feature
/// turned on anywhere in the build would otherwise change every key).
fn write_canonical(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(out, v);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(out, v);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn key_order_does_not_matter_but_every_part_does() {
        let a = obj(json!({"x": 1, "y": {"b": 2, "a": [1, {"d": 0, "c": 1}]}}));
        let mut b = Map::new();
        b.insert("y".into(), json!({"a": [1, {"c": 1, "d": 0}], "b": 2}));
        b.insert("x".into(), json!(1));
        let ctx = obj(json!({"user": "alice"}));
        let k = key("t", "alice", &a, &ctx);
        assert_eq!(k, key("t", "alice", &b, &ctx));
        assert!(k.starts_with("mcc:exec:t:"));
        assert_ne!(k, key("t", "bob", &a, &ctx));
        assert_ne!(k, key("u", "alice", &a, &ctx));
        assert_ne!(k, key("t", "alice", &a, &obj(json!({"user": "bob"}))));
        assert_ne!(k, key("t", "alice", &obj(json!({"x": 2})), &ctx));
    }

    #[test]
    fn memory_entries_expire_and_stay_bounded() {
        let mut m = MemoryCache::default();
        let now = Instant::now();
        m.put("a".into(), json!(1), now + Duration::from_secs(5));
        assert_eq!(m.get("a", now), Some(json!(1)));
        assert_eq!(m.get("a", now + Duration::from_secs(6)), None);
        for i in 0..MEMORY_CAPACITY + 10 {
            m.put(
                format!("k{i}"),
                json!(i),
                now + Duration::from_secs(60 + i as u64),
            );
        }
        assert_eq!(m.entries.len(), MEMORY_CAPACITY);
        assert_eq!(
            m.get("k0", now),
            None,
            "the entry closest to expiry went first"
        );
    }
}
