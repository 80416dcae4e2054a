//! Per-caller caps on what stays open in this replica: legacy MCP sessions
//! (`connections.max_legacy_sessions_per_caller`) and SSE streams
//! (`connections.max_sse_streams_per_caller`). A tower layer on `/mcp`, after
//! authentication (the caller is the [`Identity`]'s username; anonymous callers share
//! one count).
//!
//! - A session is counted when a response hands out an `Mcp-Session-Id` the request did
//!   not carry, and forgotten when it is closed (DELETE) or has expired in the session
//!   manager (checked when the caller reaches the cap). The initialize that would go over
//!   the cap is undone (its session closed) and answered 429.
//! - A stream is counted while an SSE response body is open. A GET stream beyond the
//!   cap is refused with 429; a POST answered as a stream counts but is never refused (it
//!   ends with its call, which the concurrency limiter and timeouts bound).
//!
//! It does not limit connections or requests (the HTTP server's timeouts and the
//! concurrency limiter do).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use futures::future::BoxFuture;
use http_body_util::BodyExt;

use crate::auth::Identity;
use crate::mcp::jsonrpc::{INVALID_REQUEST, error_response};

/// What the caps ask of the session manager.
pub trait SessionLiveness: Send + Sync {
    /// Whether the session still exists (not closed, not expired).
    fn is_live(&self, id: &str) -> BoxFuture<'_, bool>;
    /// Closes the session.
    fn close(&self, id: &str) -> BoxFuture<'_, ()>;
}

impl<M> SessionLiveness for M
where
    M: rmcp::transport::streamable_http_server::session::SessionManager,
{
    fn is_live(&self, id: &str) -> BoxFuture<'_, bool> {
        let id: Arc<str> = Arc::from(id);
        Box::pin(async move { self.has_session(&id).await.unwrap_or(false) })
    }

    fn close(&self, id: &str) -> BoxFuture<'_, ()> {
        let id: Arc<str> = Arc::from(id);
        Box::pin(async move {
            let _ = self.close_session(&id).await;
        })
    }
}

/// The caps and what they count. Cheap to clone.
#[derive(Clone)]
pub struct CallerCaps {
    inner: Arc<Inner>,
}

struct Inner {
    max_sessions: usize,
    max_streams: usize,
    sessions: Mutex<HashMap<String, HashSet<String>>>,
    streams: Mutex<HashMap<String, usize>>,
    manager: Arc<dyn SessionLiveness>,
}

impl CallerCaps {
    pub fn new(max_sessions: usize, max_streams: usize, manager: Arc<dyn SessionLiveness>) -> Self {
        Self {
            inner: Arc::new(Inner {
                max_sessions,
                max_streams,
                sessions: Mutex::default(),
                streams: Mutex::default(),
                manager,
            }),
        }
    }

    /// Takes a stream slot for `caller`, or `None` at the cap (when `enforce`).
    fn open_stream(&self, caller: &str, enforce: bool) -> Option<StreamGuard> {
        let mut streams = self.inner.streams.lock().unwrap_or_else(|p| p.into_inner());
        let n = streams.entry(caller.to_string()).or_insert(0);
        if enforce && *n >= self.inner.max_streams {
            return None;
        }
        *n += 1;
        Some(StreamGuard {
            caps: self.clone(),
            caller: caller.to_string(),
        })
    }

    /// Live sessions of `caller` after forgetting those the manager no longer has.
    async fn live_sessions(&self, caller: &str) -> usize {
        let known: Vec<String> = {
            let sessions = self
                .inner
                .sessions
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            sessions
                .get(caller)
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default()
        };
        let mut dead = Vec::new();
        for id in &known {
            if !self.inner.manager.is_live(id).await {
                dead.push(id);
            }
        }
        let mut sessions = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let set = sessions.entry(caller.to_string()).or_default();
        for id in dead {
            set.remove(id);
        }
        let n = set.len();
        if n == 0 {
            sessions.remove(caller);
        }
        n
    }

    fn forget_session(&self, id: &str) {
        let mut sessions = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        sessions.retain(|_, set| {
            set.remove(id);
            !set.is_empty()
        });
    }
}

/// Releases a stream slot when the SSE body ends or is dropped.
struct StreamGuard {
    caps: CallerCaps,
    caller: String,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let mut streams = self
            .caps
            .inner
            .streams
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(n) = streams.get_mut(&self.caller) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                streams.remove(&self.caller);
            }
        }
    }
}

fn is_sse(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

fn session_id(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn too_many(what: &str, limit: usize, setting: &str) -> Response {
    error_response(
        StatusCode::TOO_MANY_REQUESTS,
        INVALID_REQUEST,
        format!(
            "Too many open {what} for this caller: the limit is {limit} ({setting}); \
             close one and retry"
        ),
    )
}

/// The middleware (see the module doc).
pub async fn enforce(State(caps): State<CallerCaps>, request: Request, next: Next) -> Response {
    let caller = request
        .extensions()
        .get::<Identity>()
        .map(|i| i.username().to_string())
        .unwrap_or_default();
    let asked_session = session_id(request.headers());
    let method = request.method().clone();
    let pre_stream = if method == Method::GET {
        match caps.open_stream(&caller, true) {
            Some(g) => Some(g),
            None => {
                return too_many(
                    "SSE streams",
                    caps.inner.max_streams,
                    "connections.max_sse_streams_per_caller",
                );
            }
        }
    } else {
        None
    };
    if method == Method::DELETE
        && let Some(id) = &asked_session
    {
        caps.forget_session(id);
    }
    let response = next.run(request).await;
    let new_session = session_id(response.headers()).filter(|_| asked_session.is_none());
    if let Some(id) = new_session {
        if caps.live_sessions(&caller).await >= caps.inner.max_sessions {
            caps.inner.manager.close(&id).await;
            return too_many(
                "legacy MCP sessions",
                caps.inner.max_sessions,
                "connections.max_legacy_sessions_per_caller",
            );
        }
        let mut sessions = caps
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        sessions.entry(caller.clone()).or_default().insert(id);
    }
    if !is_sse(&response) {
        return response;
    }
    let guard = match pre_stream {
        Some(g) => g,
        None => match caps.open_stream(&caller, false) {
            Some(g) => g,
            None => return response,
        },
    };
    // The body holds the slot while it is open: released when it ends or is dropped.
    let (parts, body) = response.into_parts();
    let body = body.map_frame(move |frame| {
        let _held = &guard;
        frame
    });
    Response::from_parts(parts, Body::new(body))
}
