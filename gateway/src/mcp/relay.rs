//! Any replica, elicitation included: a legacy client's answer to a server request (the
//! `elicitation/create` question of `execute`) reaches the replica whose call waits for
//! it, whichever replica the client's POST landed on.
//!
//! [`RelayingSessionManager`] wraps rmcp's [`LocalSessionManager`] and changes one
//! thing: a client *response* or *error* (never a request or notification) accepted
//! for a session is delivered to this replica's copy of the session when it holds one,
//! and published on the Redis channel `<prefix>:mcp-replies`. Every replica subscribes
//! and hands a message from another replica to its own copy of that session, if it holds
//! one. The replica that asked has the waiting request and resumes it; any other copy
//! (a replica that restored the session for an earlier call) has no request with that
//! id and ignores it. Request ids are per session copy, so a copy that happens to wait
//! on the same id itself would take the answer: a replica only asks on the copy that
//! serves the call, which is why this is rare, and documented in docs/sessions.md.
//!
//! Without Redis (or while it is down) the answer is delivered locally only, as rmcp
//! does on its own.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// One relayed client answer.
#[derive(Serialize, Deserialize)]
struct Envelope {
    /// The replica that accepted it (it has already delivered it locally).
    origin: String,
    session: String,
    message: ClientJsonRpcMessage,
}

/// Where relayed answers go: the Redis channel and this replica's id.
#[derive(Clone)]
pub struct Relay {
    conn: redis::aio::ConnectionManager,
    client: redis::Client,
    channel: String,
    origin: String,
}

impl Relay {
    /// A relay over the session store's Redis (`None` with in-memory sessions).
    pub fn for_store(store: &crate::session::SessionStore) -> Option<Self> {
        let (client, conn, prefix) = store.redis_client()?;
        let mut id = [0u8; 8];
        getrandom::fill(&mut id).ok()?;
        Some(Self {
            conn,
            client,
            channel: format!("{prefix}:mcp-replies"),
            origin: hex::encode(id),
        })
    }

    async fn publish(&self, session: &SessionId, message: &ClientJsonRpcMessage) {
        let envelope = Envelope {
            origin: self.origin.clone(),
            session: session.to_string(),
            message: message.clone(),
        };
        let Ok(text) = serde_json::to_string(&envelope) else {
            return;
        };
        let sent: Result<i64, _> = redis::cmd("PUBLISH")
            .arg(&self.channel)
            .arg(text)
            .query_async(&mut self.conn.clone())
            .await;
        if let Err(e) = sent {
            tracing::warn!(error = %e, "could not relay a client answer to the other replicas");
        }
    }

    /// Hands answers published by other replicas to `sessions`' copies, until
    /// `shutdown`; reconnects after Redis failures.
    pub fn spawn_subscriber(
        &self,
        sessions: Arc<LocalSessionManager>,
        shutdown: CancellationToken,
    ) {
        let relay = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    result = relay.listen(&sessions) => {
                        if let Err(e) = result {
                            tracing::warn!(error = %e, "client answer relay: Redis subscription lost; retrying");
                        }
                    }
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        });
    }

    async fn listen(&self, sessions: &LocalSessionManager) -> redis::RedisResult<()> {
        let mut pubsub = self.client.get_async_pubsub().await?;
        pubsub.subscribe(&self.channel).await?;
        let mut messages = pubsub.on_message();
        while let Some(msg) = messages.next().await {
            let Ok(text) = msg.get_payload::<String>() else {
                continue;
            };
            let Ok(envelope) = serde_json::from_str::<Envelope>(&text) else {
                continue;
            };
            if envelope.origin == self.origin {
                continue;
            }
            let id: SessionId = envelope.session.into();
            if sessions.has_session(&id).await.unwrap_or(false) {
                let _ = sessions.accept_message(&id, envelope.message).await;
            }
        }
        Err(redis::RedisError::from(std::io::Error::other(
            "subscription closed",
        )))
    }
}

/// rmcp's local session manager, with client answers relayed between replicas.
pub struct RelayingSessionManager {
    inner: Arc<LocalSessionManager>,
    relay: Option<Relay>,
}

impl RelayingSessionManager {
    /// Wraps `inner`; with a relay, starts its subscriber (until `shutdown`).
    pub fn new(
        inner: LocalSessionManager,
        relay: Option<Relay>,
        shutdown: CancellationToken,
    ) -> Self {
        let inner = Arc::new(inner);
        if let Some(relay) = &relay {
            relay.spawn_subscriber(inner.clone(), shutdown);
        }
        Self { inner, relay }
    }
}

type Error = <LocalSessionManager as SessionManager>::Error;
type Transport = <LocalSessionManager as SessionManager>::Transport;

impl SessionManager for RelayingSessionManager {
    type Error = Error;
    type Transport = Transport;

    async fn create_session(&self) -> Result<(SessionId, Transport), Error> {
        self.inner.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Error> {
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Error> {
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Error> {
        let answer = matches!(
            message,
            ClientJsonRpcMessage::Response(_) | ClientJsonRpcMessage::Error(_)
        );
        match &self.relay {
            Some(relay) if answer => {
                relay.publish(id, &message).await;
                self.inner.accept_message(id, message).await
            }
            _ => self.inner.accept_message(id, message).await,
        }
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Error> {
        self.inner.resume(id, last_event_id).await
    }

    async fn restore_session(&self, id: SessionId) -> Result<RestoreOutcome<Transport>, Error> {
        self.inner.restore_session(id).await
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}
