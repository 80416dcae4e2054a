//! The Redis session backend, shared by every gateway replica.
//!
//! A bucket is one Redis hash (`<prefix>:session:<handle>:<username>`), one field per
//! variable holding its JSON text: `HSET` of one field cannot lose a concurrent write to
//! another, and each write runs `HSET` + `EXPIRE` in one `MULTI`/`EXEC`. A full replace
//! is `DEL` + `HSET` + `EXPIRE` in one transaction. Minted handles are string keys
//! `<prefix>:handle:<handle>` holding the owner, set with `NX EX`.
//!
//! The connection is a [`ConnectionManager`] created lazily with short timeouts: while
//! Redis is down each call fails fast with "session store unavailable: …", and the
//! manager reconnects on its own once Redis is back.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use serde_json::{Map, Value};

use super::{Scope, SessionError, SessionSetupError, decode, handle_owner_key};

#[derive(Clone)]
pub struct RedisStore {
    conn: ConnectionManager,
    prefix: Arc<str>,
    ttl: Duration,
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
    /// A store over `url` (not contacted yet). Must be called within a Tokio runtime.
    pub fn new(
        url: &str,
        prefix: &str,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Self, SessionSetupError> {
        let client = redis::Client::open(url).map_err(|e| SessionSetupError {
            field: "redis_url",
            reason: format!("{} is not a Redis URL: {e}", super::redact_url(url)),
        })?;
        // Few, quick reconnection attempts per failure: a caller waits at most a few
        // timeouts, and the next call starts a new attempt.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        let conn = ConnectionManager::new_lazy_with_config(client, config).map_err(|e| {
            SessionSetupError {
                field: "redis_url",
                reason: e.to_string(),
            }
        })?;
        Ok(Self {
            conn,
            prefix: prefix.into(),
            ttl,
        })
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A handle on the (lazily connected, reconnecting) connection.
    pub fn connection(&self) -> ConnectionManager {
        self.conn.clone()
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

    pub async fn set(&self, scope: &Scope, name: &str, value: &Value) -> Result<(), SessionError> {
        let key = scope.key(&self.prefix);
        redis::pipe()
            .atomic()
            .cmd("HSET")
            .arg(&key)
            .arg(name)
            .arg(value.to_string())
            .ignore()
            .cmd("EXPIRE")
            .arg(&key)
            .arg(self.ttl_secs())
            .ignore()
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(unavailable)
    }

    pub async fn replace(
        &self,
        scope: &Scope,
        vars: &Map<String, Value>,
    ) -> Result<(), SessionError> {
        let key = scope.key(&self.prefix);
        let mut pipe = redis::pipe();
        pipe.atomic().cmd("DEL").arg(&key).ignore();
        if !vars.is_empty() {
            let hset = pipe.cmd("HSET").arg(&key);
            for (name, value) in vars {
                hset.arg(name).arg(value.to_string());
            }
            hset.ignore();
            pipe.cmd("EXPIRE").arg(&key).arg(self.ttl_secs()).ignore();
        }
        pipe.query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(unavailable)
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
        let reply: Option<String> = redis::cmd("SET")
            .arg(handle_owner_key(&self.prefix, handle))
            .arg(username)
            .arg("NX")
            .arg("EX")
            .arg(self.ttl_secs())
            .query_async(&mut self.conn.clone())
            .await
            .map_err(unavailable)?;
        Ok(reply.is_some())
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
