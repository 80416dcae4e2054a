//! One restore at a time per legacy session on this replica. rmcp checks whether it holds
//! the session a request names, and if not restores it from the Redis registry
//! ([`crate::mcp::legacy_sessions`]). Two requests of one session that both find it missing —
//! a client's call and its reconnecting `GET` stream, which both move here when the
//! replica that served them stops — can interleave so that the second restores a session
//! the first has just restored, and rmcp answers it `500`. A request for a session this
//! replica does not hold waits here behind the others of that session until each has its
//! response: by then the session is in memory (or known to be gone), so rmcp's own check
//! sees it. Requests for sessions held here, and those without a session, pass straight
//! through.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::caller_caps::SessionLiveness;

/// The sessions being restored here, each with the lock its requests queue on. Cheap to
/// clone.
#[derive(Clone)]
pub struct RestoreGate {
    sessions: Arc<dyn SessionLiveness>,
    restoring: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl RestoreGate {
    pub fn new(sessions: Arc<dyn SessionLiveness>) -> Self {
        Self {
            sessions,
            restoring: Arc::default(),
        }
    }

    fn restoring(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<tokio::sync::Mutex<()>>>> {
        self.restoring.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The middleware (see the module doc). Inside authentication and the owner check: only
/// the session's owner gets this far with its id.
pub async fn serialize(State(gate): State<RestoreGate>, request: Request, next: Next) -> Response {
    let Some(id) = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
    else {
        return next.run(request).await;
    };
    if gate.sessions.is_live(&id).await {
        return next.run(request).await;
    }
    let lock = gate.restoring().entry(id.clone()).or_default().clone();
    let turn = Turn { gate, id, lock };
    let _held = turn.lock.lock().await;
    next.run(request).await
}

/// A request's place in its session's queue; the last one out (or given up: a client
/// gone while waiting) removes the entry.
struct Turn {
    gate: RestoreGate,
    id: String,
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut restoring = self.gate.restoring();
        // The map holds one reference and each waiting request one.
        if Arc::strong_count(&self.lock) == 2 {
            restoring.remove(&self.id);
        }
    }
}
