//! Who each legacy MCP session (`Mcp-Session-Id`) belongs to, and the tower layer that
//! answers another caller's use of it as an unknown session.
//!
//! A session id is a bearer of nothing by itself: the caller still authenticates on every
//! request. But the id names a stream of server-to-client messages (questions the server
//! asks, progress) and a session that DELETE ends, so a caller who learnt another's id
//! (a log, a proxy, a shared machine) could read that stream or end that session. The
//! session is bound to the user who opened it: the `initialize` that hands out an id
//! records its user, and a request carrying the id from any other user — or an id with no
//! owner on record — gets rmcp's own `404 Session not found`, so nothing tells a session
//! that exists from one that does not.
//!
//! Owners live where the sessions do: in this replica's memory, and with a Redis session
//! registry also in Redis under `<prefix>:mcp-session-owner:<id>` (the session TTL,
//! renewed as the session is used on another replica), so any replica can check any
//! session. Each replica keeps the owners it has seen: a request on the replica that
//! serves its session costs no Redis round trip.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::jsonrpc::{INTERNAL_ERROR, error_response};
use crate::auth::Identity;

/// Owners one replica remembers at most; past it, expired ones go first, then any (a
/// forgotten owner is read again from Redis; without Redis, that session is lost, which
/// takes this many live sessions).
const MAX_REMEMBERED: usize = 100_000;

/// The owners of legacy MCP sessions. Cheap to clone.
#[derive(Clone)]
pub struct SessionOwners {
    inner: Arc<Inner>,
}

struct Inner {
    remembered: Mutex<HashMap<String, Owner>>,
    redis: Option<(crate::redis_conn::Conn, String)>,
    ttl: Duration,
}

struct Owner {
    username: String,
    expires: Instant,
}

/// What is known of a session id's owner.
enum Lookup {
    Owner(String),
    Unknown,
    /// Redis did not answer: the owner cannot be checked.
    Unavailable(String),
}

impl SessionOwners {
    /// Owners kept in memory, and in Redis (`conn`, keys under `prefix`) when given; an
    /// owner not used for `ttl` is forgotten (the session's own idle lifetime).
    pub fn new(redis: Option<crate::redis_conn::Conn>, prefix: &str, ttl: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                remembered: Mutex::default(),
                redis: redis.map(|conn| (conn, prefix.to_string())),
                ttl,
            }),
        }
    }

    fn remembered(&self) -> std::sync::MutexGuard<'_, HashMap<String, Owner>> {
        self.inner
            .remembered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn remember(&self, id: &str, username: &str) {
        let now = Instant::now();
        let mut map = self.remembered();
        if map.len() >= MAX_REMEMBERED && !map.contains_key(id) {
            map.retain(|_, o| o.expires > now);
            if map.len() >= MAX_REMEMBERED
                && let Some(any) = map.keys().next().cloned()
            {
                map.remove(&any);
            }
        }
        map.insert(
            id.to_string(),
            Owner {
                username: username.to_string(),
                expires: now + self.inner.ttl,
            },
        );
    }

    /// Records `username` as the owner of the new session `id`.
    pub async fn record(&self, id: &str, username: &str) {
        self.remember(id, username);
        if let Some((conn, prefix)) = &self.inner.redis {
            let written: redis::RedisResult<()> = redis::cmd("SET")
                .arg(super::legacy_sessions::owner_key(prefix, id))
                .arg(username)
                .arg("EX")
                .arg(self.inner.ttl.as_secs().max(1))
                .query_async(&mut conn.clone())
                .await;
            if let Err(e) = written {
                // Its registry entry could not be written either: other replicas will
                // answer 404 and the client opens a new session.
                tracing::warn!(error = %e, "cannot record the owner of a legacy MCP session");
            }
        }
    }

    async fn lookup(&self, id: &str) -> Lookup {
        {
            let now = Instant::now();
            let mut map = self.remembered();
            if let Some(owner) = map.get_mut(id).filter(|o| o.expires > now) {
                owner.expires = now + self.inner.ttl;
                return Lookup::Owner(owner.username.clone());
            }
        }
        let Some((conn, prefix)) = &self.inner.redis else {
            return Lookup::Unknown;
        };
        let key = super::legacy_sessions::owner_key(prefix, id);
        let read: redis::RedisResult<Option<String>> = redis::pipe()
            .cmd("GET")
            .arg(&key)
            .cmd("EXPIRE")
            .arg(&key)
            .arg(self.inner.ttl.as_secs().max(1))
            .ignore()
            .query_async::<(Option<String>,)>(&mut conn.clone())
            .await
            .map(|(owner,)| owner);
        match read {
            Ok(Some(username)) => {
                self.remember(id, &username);
                Lookup::Owner(username)
            }
            Ok(None) => Lookup::Unknown,
            Err(e) => Lookup::Unavailable(e.to_string()),
        }
    }

    /// Forgets the ended session `id`.
    pub async fn forget(&self, id: &str) {
        self.remembered().remove(id);
        if let Some((conn, prefix)) = &self.inner.redis {
            let _: redis::RedisResult<()> = redis::cmd("DEL")
                .arg(super::legacy_sessions::owner_key(prefix, id))
                .query_async(&mut conn.clone())
                .await;
        }
    }
}

fn session_id(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers.get("mcp-session-id").and_then(|v| v.to_str().ok())
}

/// rmcp's answer to an unknown session, word for word: a session of another caller must
/// look exactly like one that does not exist.
fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response()
}

/// The layer (see the module doc); after authentication.
pub async fn enforce(
    State(owners): State<SessionOwners>,
    request: Request,
    next: Next,
) -> Response {
    let caller = request
        .extensions()
        .get::<Identity>()
        .map(|i| i.username().to_string())
        .unwrap_or_default();
    let asked = session_id(request.headers()).map(str::to_string);
    if let Some(id) = &asked {
        match owners.lookup(id).await {
            Lookup::Owner(owner) if owner == caller => {}
            Lookup::Owner(_) => {
                tracing::info!(
                    user = crate::telemetry::spans::cut(&caller, 256),
                    "a legacy MCP session id of another caller was refused"
                );
                return not_found();
            }
            Lookup::Unknown => return not_found(),
            Lookup::Unavailable(e) => {
                return error_response(
                    StatusCode::SERVICE_UNAVAILABLE,
                    INTERNAL_ERROR,
                    format!("the session registry (Redis) is unavailable: {e}"),
                );
            }
        }
    }
    let ending = request.method() == Method::DELETE;
    let response = next.run(request).await;
    match asked {
        None => {
            if let Some(id) = session_id(response.headers()) {
                owners.record(id, &caller).await;
            }
        }
        Some(id) if ending && response.status().is_success() => owners.forget(&id).await,
        Some(_) => {}
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_owner_is_remembered_renewed_and_forgotten() {
        let owners = SessionOwners::new(None, "t", Duration::from_secs(60));
        assert!(matches!(owners.lookup("s1").await, Lookup::Unknown));
        owners.record("s1", "alice").await;
        assert!(matches!(owners.lookup("s1").await, Lookup::Owner(o) if o == "alice"));
        owners.forget("s1").await;
        assert!(matches!(owners.lookup("s1").await, Lookup::Unknown));
    }

    #[tokio::test]
    async fn an_idle_owner_expires_and_the_map_is_bounded() {
        let owners = SessionOwners::new(None, "t", Duration::from_millis(20));
        owners.record("s1", "alice").await;
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert!(matches!(owners.lookup("s1").await, Lookup::Unknown));
        for i in 0..MAX_REMEMBERED + 10 {
            owners.remember(&format!("s{i}"), "bob");
        }
        assert!(owners.remembered().len() <= MAX_REMEMBERED);
    }
}
