//! The registry of legacy (`Mcp-Session-Id`) MCP sessions shared by all replicas: rmcp's
//! `session_store` hook backed by Redis. A replica that receives a session id it does not
//! hold loads the client's `initialize` parameters from here and replays the handshake, so
//! any replica serves any session and one may die between two calls of a client.

use std::time::Duration;

use redis::AsyncCommands;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};

/// rmcp session states in Redis under `<prefix>:mcp-session:<id>`, with the session TTL.
pub struct RedisSessionRegistry {
    conn: crate::redis_conn::Conn,
    prefix: String,
    ttl: Duration,
}

/// The registry could not be set up (bad URL).
#[derive(Debug, thiserror::Error)]
#[error("session.redis_url: {0}")]
pub struct RegistryError(String);

impl RedisSessionRegistry {
    /// Over the session store's connection ([`crate::redis_conn`]): lazy,
    /// failing fast while Redis is down and reconnecting by itself when it returns.
    pub fn over_connection(conn: crate::redis_conn::Conn, prefix: &str, ttl: Duration) -> Self {
        Self {
            conn,
            prefix: prefix.to_string(),
            ttl,
        }
    }

    /// A registry on its own connection to `url`, set up like the session store's.
    /// Prefer [`Self::over_connection`] with the store's connection.
    pub fn new(url: &str, prefix: &str, ttl: Duration) -> Result<Self, RegistryError> {
        let redis = crate::redis_conn::Redis::connect(
            "session.redis_url",
            url,
            &Default::default(),
            Duration::from_secs(2),
        )
        .map_err(|e| RegistryError(e.reason))?;
        Ok(Self::over_connection(redis.conn(), prefix, ttl))
    }

    fn key(&self, session_id: &str) -> String {
        format!("{}:mcp-session:{session_id}", self.prefix)
    }
}

/// `<prefix>:mcp-session-owner:<id>`: the user a legacy session belongs to
/// ([`super::session_owner`]).
pub(crate) fn owner_key(prefix: &str, session_id: &str) -> String {
    format!("{prefix}:mcp-session-owner:{session_id}")
}

#[async_trait::async_trait]
impl SessionStore for RedisSessionRegistry {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let raw: Option<String> = self.conn.clone().get(self.key(session_id)).await?;
        match raw {
            None => Ok(None),
            Some(text) => {
                // Each use extends the session's life, like the variables it scopes.
                let _: Result<(), _> = self
                    .conn
                    .clone()
                    .expire(self.key(session_id), self.ttl.as_secs() as i64)
                    .await;
                Ok(Some(serde_json::from_str(&text)?))
            }
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let text = serde_json::to_string(state)?;
        self.conn
            .clone()
            .set_ex::<_, _, ()>(self.key(session_id), text, self.ttl.as_secs())
            .await?;
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        self.conn.clone().del::<_, ()>(self.key(session_id)).await?;
        Ok(())
    }
}
