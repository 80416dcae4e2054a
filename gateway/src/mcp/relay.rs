//! Any replica, elicitation and cancellation included: a legacy client's answer to a
//! server request (the `elicitation/create` question of `execute`), and its
//! `notifications/cancelled` of one of its own requests, reach the replica whose call
//! waits for it or runs it, whichever replica the client's POST landed on.
//!
//! [`RelayingSessionManager`] wraps rmcp's [`LocalSessionManager`] and changes one
//! thing: a client *response*, *error* or *cancellation* (never a request nor any other
//! notification: [`relayed`]) accepted for a session is delivered to this replica's copy
//! of the session when it holds one, and published on the Redis channel
//! `<prefix>:mcp-replies`. Every replica subscribes and hands a message from another
//! replica to its own copy of that session, if it holds one.
//!
//! - An answer: the replica that asked has the waiting request and resumes it; any other
//!   copy (a replica that restored the session for an earlier call) has no request with
//!   that id and ignores it. Request ids of questions are per session copy, so a copy
//!   that happens to wait on the same id itself would take the answer: a replica only
//!   asks on the copy that serves the call, which is why this is rare, and documented in
//!   docs/sessions.md.
//! - A cancellation names a request id the *client* chose, unique in its session: rmcp
//!   cancels the request of that id on the copy that runs it (which kills the tool:
//!   [`crate::calls::execute`]); on every other copy no request has it and rmcp ignores it.
//!
//! Without Redis (or while it is down) the message is delivered locally only, as rmcp
//! does on its own.

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// Whether a client message accepted for a session goes to the other replicas: answers
/// to server requests, and cancellations of the client's own requests.
fn relayed(message: &ClientJsonRpcMessage) -> bool {
    match message {
        ClientJsonRpcMessage::Response(_) | ClientJsonRpcMessage::Error(_) => true,
        ClientJsonRpcMessage::Notification(n) => {
            matches!(n.notification, ClientNotification::CancelledNotification(_))
        }
        ClientJsonRpcMessage::Request(_) => false,
    }
}

/// One relayed client answer or cancellation.
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
    redis: crate::redis_conn::Redis,
    channel: String,
    origin: String,
}

impl Relay {
    /// A relay over the session store's Redis (`None` with in-memory sessions).
    pub fn for_store(store: &crate::session::SessionStore) -> Option<Self> {
        let (redis, _, prefix) = store.redis_client()?;
        let mut id = [0u8; 8];
        getrandom::fill(&mut id).ok()?;
        Some(Self {
            redis,
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
        if let Err(e) = self.redis.publish(&self.channel, &text).await {
            tracing::warn!(error = %e, "could not relay a client answer or cancellation to the other replicas");
        }
    }

    /// Hands answers and cancellations published by other replicas to `sessions`' copies, until
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
        // Sharded pub/sub in a Redis Cluster; on a Sentinel master the stream ends with
        // the master, and the next subscription goes to the new one.
        let mut messages = self.redis.subscribe(&self.channel).await?;
        while let Some(payload) = messages.next().await {
            let Ok(envelope) = serde_json::from_slice::<Envelope>(&payload) else {
                continue;
            };
            // Only what this replica would have relayed itself is delivered.
            if envelope.origin == self.origin || !relayed(&envelope.message) {
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

/// rmcp's local session manager, with client answers and cancellations relayed between
/// replicas, and its streams resumable on any replica ([`super::events`]).
pub struct RelayingSessionManager {
    inner: Arc<LocalSessionManager>,
    relay: Option<Relay>,
    events: Option<Arc<dyn super::events::SessionEvents>>,
}

impl RelayingSessionManager {
    /// Wraps `inner`; with a relay, starts its subscriber (until `shutdown`). With
    /// `events`, the sessions' events are kept there (rmcp asks the manager's
    /// `event_store()` only for sessionless streams, which keep none).
    pub fn new(
        mut inner: LocalSessionManager,
        relay: Option<Relay>,
        events: Option<Arc<dyn super::events::SessionEvents>>,
        shutdown: CancellationToken,
    ) -> Self {
        if let Some(events) = &events {
            inner = inner.with_event_store(events.clone());
        }
        let inner = Arc::new(inner);
        if let Some(relay) = &relay {
            relay.spawn_subscriber(inner.clone(), shutdown);
        }
        Self {
            inner,
            relay,
            events,
        }
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
        let mut stream = self.inner.create_stream(id, message).await?;
        // rmcp has put the stream's priming event (its first id) in the channel by now:
        // that id binds the stream to this session before the client can resume it.
        let first = match &self.events {
            Some(events) => match stream.next().now_or_never().flatten() {
                Some(first) => {
                    if let Some(event_id) = &first.event_id {
                        events.bind(id, event_id).await;
                    }
                    Some(first)
                }
                None => None,
            },
            None => None,
        };
        Ok(futures::stream::iter(first).chain(stream))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Error> {
        match &self.relay {
            Some(relay) if relayed(&message) => {
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
        match &self.events {
            Some(events) => {
                let stream = match events.resume(id, &last_event_id).await {
                    Ok(stream) => stream,
                    Err(e) => {
                        // rmcp answers a failed resume with an empty stream too.
                        tracing::info!(reason = %e, "an SSE resume replays nothing");
                        Box::pin(futures::stream::empty())
                    }
                };
                Ok(stream.left_stream())
            }
            None => Ok(self.inner.resume(id, last_event_id).await?.right_stream()),
        }
    }

    async fn restore_session(&self, id: SessionId) -> Result<RestoreOutcome<Transport>, Error> {
        self.inner.restore_session(id).await
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        // Sessionless (2026-07-28) streams keep no events: see [`super::events`].
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(v: serde_json::Value) -> ClientJsonRpcMessage {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn answers_and_cancellations_are_relayed_nothing_else() {
        let answer = json!({"jsonrpc": "2.0", "id": 3, "result": {"action": "decline"}});
        let error = json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "no"}});
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "user"}});
        for relay in [answer, error, cancel] {
            assert!(relayed(&message(relay.clone())), "{relay}");
        }
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1}});
        let request = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"});
        for kept in [initialized, progress, request] {
            assert!(!relayed(&message(kept.clone())), "{kept}");
        }
    }
}
