//! Resumable SSE streams of legacy MCP sessions on any replica: rmcp's `EventStore`
//! backed by Redis streams. Every event rmcp sends on a legacy session's stream (a call's
//! POST stream, or the session's standalone `GET` stream) is kept in Redis with an id
//! that names its stream; a client whose stream broke sends `GET /mcp` with its
//! `Mcp-Session-Id` and `Last-Event-ID` to any replica, which replays what followed and
//! keeps following the stream (the call may still run on another replica) until the
//! call's response.
//!
//! Bounds ([`Bounds`]): a stream keeps at most about [`Bounds::events`] events and
//! [`Bounds::bytes`] bytes (past that, a response is replaced by an error saying so and a
//! notification by a gap), and disappears [`Bounds::ttl`] after its last event.
//!
//! A stream is bound to its session: a call's stream when its POST answers
//! ([`SessionEvents::bind`]), the standalone stream by its name (rmcp's
//! `<session>:common`).
//!
//! A call's stream starts with rmcp's priming event (a `retry:` hint, no message). Its id
//! is what a client resumes from when the stream breaks before anything else came, but
//! the event itself is never replayed (a resume starts after it), so it is not written:
//! it gets the id [`PRIMING_ENTRY`], before every Redis entry id, and the binding written
//! by [`SessionEvents::bind`] (one `SET`) is what says the stream exists. A call then
//! costs the store two round trips: that `SET`, and one script for its answer.
//! A resume with another session's event id replays nothing. The 2026-07-28 generation
//! has no sessions and keeps no events (its closed stream cancels the call:
//! docs/execution.md).
//!
//! All keys of one stream share one Redis hash slot (`{<stream>}`), and are spelled in
//! one place, `StreamKeys`. A store that fails (Redis down) never fails the send: the
//! event goes out with an id no replica can resume from (a priming id whose binding
//! failed resumes nothing either).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::common::server_side_http::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::{
    EventId, EventStore as RmcpEventStore, EventStoreError, EventStream,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What one stream may hold, and how long.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Events kept per stream (Redis `MAXLEN ~`: the oldest go first).
    pub events: usize,
    /// Bytes of events stored per stream over its life.
    pub bytes: usize,
    /// A stream is forgotten this long after its last event.
    pub ttl: Duration,
    /// How often a resumed stream looks for new events.
    pub poll: Duration,
    /// The longest one resume follows a standalone (`GET`) stream before it ends (the
    /// client reconnects with its last event id).
    pub follow: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            events: 1000,
            bytes: 8 << 20,
            ttl: Duration::from_secs(600),
            poll: Duration::from_millis(200),
            follow: Duration::from_secs(600),
        }
    }
}

/// The Redis keys of one stream, all in its hash slot.
struct StreamKeys {
    /// The events (a Redis stream).
    events: String,
    /// Bytes stored so far.
    bytes: String,
    /// The legacy session the stream belongs to (a call's stream).
    session: String,
}

impl StreamKeys {
    fn new(prefix: &str, stream: &str) -> Self {
        let slot = format!("{{{stream}}}");
        Self {
            events: format!("{prefix}:mcp-events:{slot}"),
            bytes: format!("{prefix}:mcp-events-bytes:{slot}"),
            session: format!("{prefix}:mcp-events-session:{slot}"),
        }
    }
}

/// rmcp names a session's standalone stream `<session id>:common`.
fn standalone_stream(session: &str) -> String {
    format!("{session}:common")
}

/// An event id: `<stream>/<Redis entry id>`. Stream ids are rmcp's (UUIDs, or
/// `<session>:common`); anything else a client sends is not ours.
fn event_id(stream: &str, entry: &str) -> String {
    format!("{stream}/{entry}")
}

fn parse_event_id(id: &str) -> Option<(&str, &str)> {
    let (stream, entry) = id.rsplit_once('/')?;
    let stream_ok = !stream.is_empty()
        && stream.len() <= 128
        && stream
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b':');
    let entry_ok = entry
        .split_once('-')
        .is_some_and(|(ms, seq)| is_number(ms) && is_number(seq));
    (stream_ok && entry_ok).then_some((stream, entry))
}

/// The entry id of a call stream's priming event: lower than any id `XADD *` gives, so a
/// resume from it replays the whole stream. rmcp (3.11) sends a priming event on a call's
/// stream only as its first event (`establish_request_wise_channel`; the gateway never
/// calls `close_sse_stream`, which would send one later).
const PRIMING_ENTRY: &str = "0-1";

/// A call's stream (rmcp: a UUID), not a session's standalone stream.
fn is_call_stream(stream: &str) -> bool {
    !stream.ends_with(":common")
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit())
}

/// One stored event: the message (absent: a `retry:` priming event) and the retry hint.
#[derive(Serialize, Deserialize)]
struct Stored {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    m: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    r: Option<u64>,
}

/// Adds an event within the stream's byte budget: `ARGV[5]` if it fits, else
/// `ARGV[6]` (a small substitute, or `""`: a gap). Returns the entry id.
const APPEND: &str = r"
local size = tonumber(ARGV[1])
local payload = ARGV[5]
if redis.call('INCRBY', KEYS[2], size) > tonumber(ARGV[2]) then
  redis.call('DECRBY', KEYS[2], size)
  payload = ARGV[6]
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*', 'e', payload)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
return id
";

/// The Redis event store of legacy MCP sessions, over the gateway's shared Redis command
/// connection `C` (the session store's). Cheap to clone.
pub struct EventStore<C> {
    inner: Arc<Inner<C>>,
}

impl<C> Clone for EventStore<C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

struct Inner<C> {
    conn: C,
    prefix: String,
    bounds: Bounds,
}

/// What the session manager asks of the event store beyond rmcp's trait.
#[async_trait::async_trait]
pub trait SessionEvents: RmcpEventStore {
    /// Records that the stream of `event_id` (a call's stream, as its POST answers) is
    /// `session`'s, which also makes the stream exist for a resume before its first
    /// written event. An id that is not ours binds nothing.
    async fn bind(&self, session: &str, event_id: &str);

    /// The events of `session`'s stream after `last_event_id`, then the ones that follow
    /// (see the module). The standalone stream's priming id `0` resumes it from its start.
    async fn resume(&self, session: &str, last_event_id: &str) -> Result<EventStream, ResumeError>;
}

/// A Redis command connection the store can use.
pub trait Connection: redis::aio::ConnectionLike + Clone + Send + Sync + 'static {}
impl<C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static> Connection for C {}

/// Why a resume replays nothing.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("Last-Event-ID is not an event id of this gateway")]
    NotOurs,
    #[error("the event id belongs to another session's stream")]
    OtherSession,
    #[error("the event store is unavailable: {0}")]
    Unavailable(#[from] redis::RedisError),
}

impl<C: Connection> EventStore<C> {
    /// Over the session store's Redis connection, keys under `prefix`.
    pub fn new(conn: C, prefix: &str, bounds: Bounds) -> Self {
        Self {
            inner: Arc::new(Inner {
                conn,
                prefix: prefix.to_string(),
                bounds,
            }),
        }
    }

    fn keys(&self, stream: &str) -> StreamKeys {
        StreamKeys::new(&self.inner.prefix, stream)
    }

    async fn append(&self, stream: &str, event: &ServerSseMessage) -> redis::RedisResult<String> {
        let stored = Stored {
            m: event
                .message
                .as_deref()
                .and_then(|m| serde_json::to_value(m).ok()),
            r: event.retry.map(|r| r.as_millis() as u64),
        };
        let payload = serde_json::to_string(&stored).unwrap_or_default();
        let bounds = self.inner.bounds;
        let keys = self.keys(stream);
        redis::cmd("EVAL")
            .arg(APPEND)
            .arg(3)
            .arg(&keys.events)
            .arg(&keys.bytes)
            .arg(&keys.session)
            .arg(payload.len())
            .arg(bounds.bytes)
            .arg(bounds.events)
            .arg(bounds.ttl.as_millis() as u64)
            .arg(&payload)
            .arg(substitute(
                event.message.as_deref(),
                payload.len(),
                bounds.bytes,
            ))
            .query_async(&mut self.inner.conn.clone())
            .await
    }
}

/// What is kept in place of an event over the stream's byte budget: for a response or
/// error, an error answering the same request (the client is not left waiting); for
/// anything else, a gap (`""`: replayed as nothing).
fn substitute(message: Option<&ServerJsonRpcMessage>, size: usize, budget: usize) -> String {
    let id = match message {
        Some(ServerJsonRpcMessage::Response(r)) => serde_json::to_value(&r.id).ok(),
        Some(ServerJsonRpcMessage::Error(e)) => {
            e.id.as_ref().and_then(|id| serde_json::to_value(id).ok())
        }
        _ => None,
    };
    let Some(id) = id else {
        return String::new();
    };
    let text = format!(
        "the response ({size} bytes) is over what a resumable stream keeps ({budget} bytes); \
         call again on a stream that stays open"
    );
    let error = serde_json::json!({"jsonrpc": "2.0", "id": id,
        "error": {"code": -32603, "message": text}});
    serde_json::to_string(&Stored {
        m: Some(error),
        r: None,
    })
    .unwrap_or_default()
}

#[async_trait::async_trait]
impl<C: Connection> SessionEvents for EventStore<C> {
    async fn bind(&self, session: &str, event_id: &str) {
        let Some((stream, _)) = parse_event_id(event_id) else {
            return;
        };
        let ttl = self.inner.bounds.ttl.as_millis() as u64;
        let set: redis::RedisResult<()> = redis::cmd("SET")
            .arg(self.keys(stream).session)
            .arg(session)
            .arg("PX")
            .arg(ttl)
            .query_async(&mut self.inner.conn.clone())
            .await;
        if let Err(e) = set {
            tracing::warn!(error = %e, "could not record a stream's session: it cannot be resumed");
        }
    }

    async fn resume(&self, session: &str, last_event_id: &str) -> Result<EventStream, ResumeError> {
        let standalone = standalone_stream(session);
        let (stream, after) = if last_event_id == "0" {
            (standalone.as_str(), "0-0")
        } else {
            parse_event_id(last_event_id).ok_or(ResumeError::NotOurs)?
        };
        let is_standalone = stream == standalone;
        if !is_standalone {
            let owner: Option<String> = redis::cmd("GET")
                .arg(self.keys(stream).session)
                .query_async(&mut self.inner.conn.clone())
                .await?;
            if owner.as_deref() != Some(session) {
                return Err(ResumeError::OtherSession);
            }
        }
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let follower = Follower {
            store: self.clone(),
            stream: stream.to_string(),
            cursor: after.to_string(),
            standalone: is_standalone,
        };
        tokio::spawn(follower.run(tx));
        // Ends when the follower does (it drops its sender).
        Ok(Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|event| (event, rx))
        })))
    }
}

#[async_trait::async_trait]
impl<C: Connection> RmcpEventStore for EventStore<C> {
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<EventId, EventStoreError> {
        if event.message.is_none() && is_call_stream(stream_id) {
            // A call stream's priming event: see the module.
            return Ok(event_id(stream_id, PRIMING_ENTRY));
        }
        match self.append(stream_id, event).await {
            Ok(entry) => Ok(event_id(stream_id, &entry)),
            Err(e) => {
                // rmcp fails the send when this fails: send the event with an id that
                // resumes nothing instead.
                tracing::warn!(error = %e, "could not keep an SSE event for resumption");
                Ok(format!(
                    "{stream_id}/unkept-{}",
                    uuid::Uuid::new_v4().simple()
                ))
            }
        }
    }

    async fn replay_events_after(
        &self,
        _last_event_id: &str,
    ) -> Result<EventStream, EventStoreError> {
        // Only reached without a session (2026-07-28 GET): not offered, see the module.
        Err("resumption needs the legacy session the stream belongs to".into())
    }
}

/// A Redis stream entry as `XRANGE` gives it: its id and its fields.
type Entry = (String, Vec<(String, String)>);

/// Replays one stream from a cursor into a channel, polling for new events.
struct Follower<C> {
    store: EventStore<C>,
    stream: String,
    /// The last entry id sent (exclusive start of the next read).
    cursor: String,
    standalone: bool,
}

impl<C: Connection> Follower<C> {
    async fn run(mut self, tx: tokio::sync::mpsc::Sender<ServerSseMessage>) {
        let bounds = self.store.inner.bounds;
        let deadline = tokio::time::Instant::now() + bounds.follow;
        let keys = self.store.keys(&self.stream);
        // The first read includes the client's last event: when that was the call's
        // answer, the stream is over and the resume ends at once.
        let mut first = true;
        loop {
            let from = match first {
                true => self.cursor.clone(),
                false => format!("({}", self.cursor),
            };
            let read: redis::RedisResult<(Vec<Entry>, bool)> = redis::pipe()
                .cmd("XRANGE")
                .arg(&keys.events)
                .arg(from)
                .arg("+")
                .arg("COUNT")
                .arg(64)
                .cmd("EXISTS")
                .arg(match self.standalone {
                    // A call's stream exists from its binding on (its priming event is
                    // not written); every event refreshes both.
                    false => &keys.session,
                    true => &keys.events,
                })
                .query_async(&mut self.store.inner.conn.clone())
                .await;
            let (entries, exists) = match read {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "a resumed SSE stream lost the event store");
                    return;
                }
            };
            let mut got = entries.len();
            for (entry, fields) in entries {
                let event = decode(&self.stream, &entry, &fields);
                let ends = !self.standalone && event.as_ref().is_some_and(is_answer);
                if std::mem::take(&mut first) && entry == self.cursor {
                    // The client has this one already.
                    got -= 1;
                    if ends {
                        return;
                    }
                    continue;
                }
                self.cursor = entry;
                let Some(event) = event else {
                    continue;
                };
                if tx.send(event).await.is_err() || ends {
                    return;
                }
            }
            first = false;
            if got > 0 {
                continue;
            }
            // A call's stream that expired (or never was bound) has nothing more to come.
            if !exists && !self.standalone {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                return;
            }
            tokio::select! {
                _ = tx.closed() => return,
                _ = tokio::time::sleep(bounds.poll) => {}
            }
        }
    }
}

fn is_answer(event: &ServerSseMessage) -> bool {
    matches!(
        event.message.as_deref(),
        Some(ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_))
    )
}

fn decode(stream: &str, entry: &str, fields: &[(String, String)]) -> Option<ServerSseMessage> {
    let payload = fields.iter().find(|(k, _)| k == "e").map(|(_, v)| v)?;
    if payload.is_empty() {
        return None; // a gap
    }
    let stored: Stored = serde_json::from_str(payload).ok()?;
    let retry = stored.r.map(Duration::from_millis);
    let mut event = match stored.m {
        Some(m) => ServerSseMessage::from_message(serde_json::from_value(m).ok()?),
        None => ServerSseMessage::retry(retry?),
    };
    event.event_id = Some(event_id(stream, entry));
    event.retry = retry;
    Some(event)
}

#[cfg(test)]
#[path = "events_tests.rs"]
mod tests;
