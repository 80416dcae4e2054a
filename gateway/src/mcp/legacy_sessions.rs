//! The registry of legacy (`Mcp-Session-Id`) MCP sessions shared by all replicas: rmcp's
//! `session_store` hook backed by Redis. A replica that receives a session id it does not
//! hold loads the client's `initialize` parameters from here and replays the handshake, so
//! any replica serves any session and one may die between two calls of a client.

use std::time::Duration;

use redis::AsyncCommands;
use rmcp::transport::streamable_http_server::session::{
    SessionState, SessionStore, SessionStoreError,
};

/// rmcp session states in Redis under `mcc:mcp-session:<id>`, with the session TTL.
pub struct RedisSessionRegistry {
    conn: redis::aio::ConnectionManager,
    ttl: Duration,
}

impl RedisSessionRegistry {
    pub fn new(conn: redis::aio::ConnectionManager, ttl: Duration) -> Self {
        Self { conn, ttl }
    }
}

fn key(session_id: &str) -> String {
    format!("mcc:mcp-session:{session_id}")
}

#[async_trait::async_trait]
impl SessionStore for RedisSessionRegistry {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let raw: Option<String> = self.conn.clone().get(key(session_id)).await?;
        match raw {
            None => Ok(None),
            Some(text) => {
                // Each use extends the session's life, like the variables it scopes.
                let _: Result<(), _> = self
                    .conn
                    .clone()
                    .expire(key(session_id), self.ttl.as_secs() as i64)
                    .await;
                Ok(Some(serde_json::from_str(&text)?))
            }
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let text = serde_json::to_string(state)?;
        self.conn
            .clone()
            .set_ex::<_, _, ()>(key(session_id), text, self.ttl.as_secs())
            .await?;
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        self.conn.clone().del::<_, ()>(key(session_id)).await?;
        Ok(())
    }
}
