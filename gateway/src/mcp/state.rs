//! Session variables as the MCP tools need them, behind one small type: read all vars of a
//! scope, set one (atomically, so concurrent `set_session` calls lose no update), replace
//! all (fn write-back), mint and check `new_session` handles, ping for `/readyz`.
//!
//! This is the gateway's adapter to the session store: in-memory for a single process,
//! Redis (hash per scope, JSON values, TTL refreshed on write) for replicas. It is the one
//! file to change when the shared `session` module replaces it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use serde_json::{Map, Value};

/// Whose variables: the session handle (MCP session id, `new_session` handle, or the
/// default bucket) and the caller's username.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    pub handle: String,
    pub username: String,
}

/// The handle of a caller's default bucket (no MCP session id, no `session` argument).
pub const DEFAULT_HANDLE: &str = "default";

/// The session store failed (Redis unreachable, bad data).
#[derive(Debug, thiserror::Error)]
#[error("session store unavailable: {0}")]
pub struct StoreError(pub String);

impl From<redis::RedisError> for StoreError {
    fn from(e: redis::RedisError) -> Self {
        StoreError(e.to_string())
    }
}

type MemoryMap = HashMap<Scope, (Map<String, Value>, Instant)>;

/// The session store. Cheap to clone.
#[derive(Clone)]
pub enum SessionStore {
    Memory {
        vars: Arc<Mutex<MemoryMap>>,
        handles: Arc<Mutex<HashMap<Scope, Instant>>>,
        ttl: Duration,
    },
    Redis {
        conn: redis::aio::ConnectionManager,
        ttl: Duration,
    },
}

/// A Redis connection manager that connects lazily and fails fast while Redis is down,
/// reconnecting by itself when it returns.
pub fn redis_connection(url: &str) -> Result<redis::aio::ConnectionManager, StoreError> {
    let client = redis::Client::open(url).map_err(|e| StoreError(format!("{url}: {e}")))?;
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(2)))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(500));
    Ok(redis::aio::ConnectionManager::new_lazy_with_config(
        client, config,
    )?)
}

fn vars_key(scope: &Scope) -> String {
    format!("mcc:ctx:{}:{}", scope.handle, scope.username)
}

fn handle_key(scope: &Scope) -> String {
    format!("mcc:handle:{}:{}", scope.handle, scope.username)
}

impl SessionStore {
    pub fn memory(ttl: Duration) -> Self {
        SessionStore::Memory {
            vars: Default::default(),
            handles: Default::default(),
            ttl,
        }
    }

    pub fn redis(conn: redis::aio::ConnectionManager, ttl: Duration) -> Self {
        SessionStore::Redis { conn, ttl }
    }

    pub fn backend_name(&self) -> &'static str {
        match self {
            SessionStore::Memory { .. } => "memory",
            SessionStore::Redis { .. } => "redis",
        }
    }

    /// All stored variables of a scope (empty when none or expired).
    pub async fn vars(&self, scope: &Scope) -> Result<Map<String, Value>, StoreError> {
        match self {
            SessionStore::Memory { vars, .. } => {
                let map = vars.lock().expect("session lock");
                Ok(match map.get(scope) {
                    Some((v, expires)) if *expires > Instant::now() => v.clone(),
                    _ => Map::new(),
                })
            }
            SessionStore::Redis { conn, .. } => {
                let raw: Vec<(String, String)> = conn.clone().hgetall(vars_key(scope)).await?;
                raw.into_iter()
                    .map(|(k, v)| {
                        serde_json::from_str(&v)
                            .map(|v| (k.clone(), v))
                            .map_err(|e| {
                                StoreError(format!("stored value of '{k}' is not JSON: {e}"))
                            })
                    })
                    .collect()
            }
        }
    }

    /// Sets one variable; other variables of the scope are untouched.
    pub async fn set(&self, scope: &Scope, name: &str, value: &Value) -> Result<(), StoreError> {
        match self {
            SessionStore::Memory { vars, ttl, .. } => {
                let mut map = vars.lock().expect("session lock");
                let now = Instant::now();
                let entry = map.entry(scope.clone()).or_insert((Map::new(), now));
                if entry.1 <= now {
                    entry.0.clear();
                }
                entry.0.insert(name.to_string(), value.clone());
                entry.1 = now + *ttl;
                Ok(())
            }
            SessionStore::Redis { conn, ttl } => {
                let key = vars_key(scope);
                redis::pipe()
                    .atomic()
                    .hset(&key, name, value.to_string())
                    .ignore()
                    .expire(&key, ttl.as_secs() as i64)
                    .ignore()
                    .query_async::<()>(&mut conn.clone())
                    .await?;
                Ok(())
            }
        }
    }

    /// Replaces all variables of a scope (`{}` clears them).
    pub async fn replace(&self, scope: &Scope, new: &Map<String, Value>) -> Result<(), StoreError> {
        match self {
            SessionStore::Memory { vars, ttl, .. } => {
                let expires = Instant::now() + *ttl;
                vars.lock()
                    .expect("session lock")
                    .insert(scope.clone(), (new.clone(), expires));
                Ok(())
            }
            SessionStore::Redis { conn, ttl } => {
                let key = vars_key(scope);
                let mut pipe = redis::pipe();
                pipe.atomic().del(&key).ignore();
                if !new.is_empty() {
                    let fields: Vec<(String, String)> = new
                        .iter()
                        .map(|(k, v)| (k.clone(), v.to_string()))
                        .collect();
                    pipe.hset_multiple(&key, &fields)
                        .ignore()
                        .expire(&key, ttl.as_secs() as i64)
                        .ignore();
                }
                pipe.query_async::<()>(&mut conn.clone()).await?;
                Ok(())
            }
        }
    }

    /// Mints a new session handle for `username`, valid for the TTL.
    pub async fn mint_handle(&self, username: &str) -> Result<String, StoreError> {
        let handle = format!("s-{}", uuid::Uuid::new_v4().simple());
        let scope = Scope {
            handle: handle.clone(),
            username: username.to_string(),
        };
        match self {
            SessionStore::Memory { handles, ttl, .. } => {
                handles
                    .lock()
                    .expect("session lock")
                    .insert(scope, Instant::now() + *ttl);
            }
            SessionStore::Redis { conn, ttl } => {
                conn.clone()
                    .set_ex::<_, _, ()>(handle_key(&scope), 1, ttl.as_secs())
                    .await?;
            }
        }
        Ok(handle)
    }

    /// Whether `scope.handle` was minted for `scope.username` and has not expired.
    pub async fn handle_valid(&self, scope: &Scope) -> Result<bool, StoreError> {
        match self {
            SessionStore::Memory { handles, .. } => Ok(handles
                .lock()
                .expect("session lock")
                .get(scope)
                .is_some_and(|expires| *expires > Instant::now())),
            SessionStore::Redis { conn, .. } => Ok(conn.clone().exists(handle_key(scope)).await?),
        }
    }

    /// Checks the store answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        match self {
            SessionStore::Memory { .. } => Ok(()),
            SessionStore::Redis { conn, .. } => {
                redis::cmd("PING")
                    .query_async::<String>(&mut conn.clone())
                    .await?;
                Ok(())
            }
        }
    }
}
