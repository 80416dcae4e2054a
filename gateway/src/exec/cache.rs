//! The result cache of tools with `cache_ttl`: successful results only, keyed by tool
//! key, tool definition, caller, and canonical hashes of the params and of the context
//! the tool would receive, so a result is never shared between users or between sessions
//! whose variables differ, and a changed tool never serves a result of its old form. In
//! memory by default; in Redis when configured.
//!
//! Key format (the one place it is defined):
//! `<session.key_prefix>:exec:<tool key>:<sha256(tool)>:<sha256(caller)>:<sha256(params)>:<sha256(context)>`,
//! each hash 64 hex digits, over canonical JSON (object keys sorted at every level) for
//! the tool definition, params and context. The prefix is the deployment's
//! `session.key_prefix`, so two deployments sharing one Redis never read each other's
//! results.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::redis_conn::Conn;
use mcc_catalog::Tool;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The key prefix of a cache built without one (`session.key_prefix`'s default).
pub const DEFAULT_KEY_PREFIX: &str = "mcc";

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

/// Where cached results live, and the prefix of their keys. Cheap to clone.
#[derive(Clone)]
pub struct ResultCache {
    store: Store,
    prefix: Arc<str>,
}

#[derive(Clone)]
enum Store {
    Memory(Arc<Mutex<MemoryCache>>),
    Redis(Conn),
}

impl std::fmt::Debug for ResultCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let store = match self.store {
            Store::Memory(_) => "memory",
            Store::Redis(_) => "redis",
        };
        f.debug_struct("ResultCache")
            .field("store", &store)
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl ResultCache {
    /// The embedded default, per process.
    pub fn memory() -> Self {
        Self {
            store: Store::Memory(Arc::new(Mutex::new(MemoryCache::default()))),
            prefix: DEFAULT_KEY_PREFIX.into(),
        }
    }

    /// A Redis-backed cache shared by gateway replicas, over an open connection (the
    /// session store's); `key_prefix` is `session.key_prefix`.
    pub fn redis_with(conn: Conn, key_prefix: &str) -> Self {
        Self {
            store: Store::Redis(conn),
            prefix: key_prefix.into(),
        }
    }

    /// A Redis-backed cache from a URL (any [`crate::redis_conn`] URL).
    pub async fn redis(url: &str, key_prefix: &str) -> Result<Self, CacheError> {
        let redis = crate::redis_conn::Redis::connect(
            "session.redis_url",
            url,
            &Default::default(),
            REDIS_TIMEOUT,
        )
        .map_err(|e| {
            redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "bad Redis URL",
                e.to_string(),
            ))
        })?;
        Ok(Self::redis_with(redis.conn(), key_prefix))
    }

    /// The same cache with keys under `key_prefix` (`session.key_prefix`).
    pub fn with_prefix(mut self, key_prefix: &str) -> Self {
        self.prefix = key_prefix.into();
        self
    }

    /// The cache key of one call of `tool` (see the module doc for the format).
    pub fn key(
        &self,
        tool: &Tool,
        caller: &str,
        params: &Map<String, Value>,
        context: &Map<String, Value>,
    ) -> String {
        call_key(&self.prefix, tool, caller, params, context)
    }

    pub async fn get(&self, key: &str) -> Result<Option<Value>, CacheError> {
        match &self.store {
            Store::Memory(m) => Ok(lock(m).get(key, Instant::now())),
            Store::Redis(conn) => {
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
        match &self.store {
            Store::Memory(m) => {
                lock(m).put(key.to_string(), value.clone(), Instant::now() + ttl);
                Ok(())
            }
            Store::Redis(conn) => {
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

async fn query<T: redis::FromRedisValue>(conn: &Conn, cmd: &redis::Cmd) -> Result<T, CacheError> {
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
pub fn call_key(
    prefix: &str,
    tool: &Tool,
    caller: &str,
    params: &Map<String, Value>,
    context: &Map<String, Value>,
) -> String {
    format!(
        "{prefix}:exec:{}:{}:{}:{}:{}",
        tool.key,
        definition_hash(tool),
        sha256_hex(caller.as_bytes()),
        canonical_hash(params),
        canonical_hash(context)
    )
}

/// SHA-256 (hex) of a tool's definition (command, params, env, limits, …) as canonical
/// JSON: any change to what the tool does changes its cache keys. `source` (where the
/// tool was declared, for messages) is left out, so replicas that load the same tool
/// from different paths share results.
pub fn definition_hash(tool: &Tool) -> String {
    // A `Tool` always serializes (plain data); `Null` would only merge every key.
    let mut value = serde_json::to_value(tool).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.remove("source");
    }
    let mut text = String::new();
    write_canonical(&mut text, &value);
    sha256_hex(text.as_bytes())
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

    fn tool(command: &str) -> Tool {
        serde_json::from_value(json!({"key": "t", "name": "t", "kind": "exec", "command": command}))
            .unwrap()
    }

    #[test]
    fn key_order_does_not_matter_but_every_part_does() {
        let a = obj(json!({"x": 1, "y": {"b": 2, "a": [1, {"d": 0, "c": 1}]}}));
        let mut b = Map::new();
        b.insert("y".into(), json!({"a": [1, {"c": 1, "d": 0}], "b": 2}));
        b.insert("x".into(), json!(1));
        let ctx = obj(json!({"user": "alice"}));
        let t = tool("echo {{ x }}");
        let k = call_key("mcc", &t, "alice", &a, &ctx);
        assert_eq!(k, call_key("mcc", &t, "alice", &b, &ctx));
        assert!(k.starts_with("mcc:exec:t:"), "{k}");
        assert_ne!(k, call_key("mcc", &t, "bob", &a, &ctx));
        let mut u = t.clone();
        u.key = "u".into();
        assert_ne!(k, call_key("mcc", &u, "alice", &a, &ctx));
        assert_ne!(
            k,
            call_key("mcc", &t, "alice", &a, &obj(json!({"user": "bob"})))
        );
        assert_ne!(k, call_key("mcc", &t, "alice", &obj(json!({"x": 2})), &ctx));
    }

    #[test]
    fn the_deployment_prefix_and_the_tool_definition_are_part_of_the_key() {
        let (params, ctx) = (obj(json!({"x": 1})), obj(json!({"user": "alice"})));
        let t = tool("echo {{ x }}");
        let k = call_key("mcc", &t, "alice", &params, &ctx);
        let other_deployment = call_key("team-b", &t, "alice", &params, &ctx);
        assert!(
            other_deployment.starts_with("team-b:exec:t:"),
            "{other_deployment}"
        );
        assert_ne!(k, other_deployment);
        // Same key and params, changed command: never the old result.
        let changed = tool("echo changed {{ x }}");
        assert_ne!(k, call_key("mcc", &changed, "alice", &params, &ctx));
        let mut ttl = t.clone();
        ttl.cache_ttl = Some(60);
        assert_ne!(k, call_key("mcc", &ttl, "alice", &params, &ctx));
        let mut elsewhere = t.clone();
        elsewhere.source = "/other/replica/tools.yaml: tools[0] 't'".into();
        assert_eq!(
            k,
            call_key("mcc", &elsewhere, "alice", &params, &ctx),
            "source is not behaviour"
        );
        let cache = ResultCache::memory().with_prefix("team-c");
        assert!(
            cache
                .key(&t, "alice", &params, &ctx)
                .starts_with("team-c:exec:t:")
        );
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
