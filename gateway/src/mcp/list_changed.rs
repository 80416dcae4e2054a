//! `notifications/resources/list_changed` to legacy sessions when the catalog changes
//! what they may list.
//!
//! Each legacy session registers as its client sends `notifications/initialized`, with
//! the caller of that request. A watcher follows the live catalog; when a new catalog is
//! installed it compares, per session, the tool keys that caller may see
//! ([`crate::calls::view`], the rule of `resources/list`) with those it saw before, and
//! notifies only the sessions whose list changed: a session learns nothing of tools it
//! may not see, not even that they changed. rmcp sends the notification on the
//! session's standalone stream (`GET /mcp`); it is also kept for resumption
//! ([`super::events`]).
//!
//! Sessions whose transport closed are dropped at each look; at most
//! [`MAX_WATCHED`] sessions are watched per replica. Each replica watches the copies of
//! sessions it holds. `tools/list` never changes (MCC's seven tools): no
//! `tools/list_changed` is sent.

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcc_catalog::User;
use rmcp::Peer;
use rmcp::RoleServer;
use tokio_util::sync::CancellationToken;

use crate::calls::view;
use crate::catalog::{Catalog, LiveCatalog};

/// Sessions watched per replica at most (past it, new sessions get no notification).
pub const MAX_WATCHED: usize = 100_000;
/// How often the watcher looks for a new catalog.
const LOOK_EVERY: Duration = Duration::from_millis(250);
/// How long one notification may wait for a session's channel.
const SEND_TIMEOUT: Duration = Duration::from_secs(1);

struct Watched {
    peer: Peer<RoleServer>,
    user: Option<User>,
    /// The visible tool keys, hashed, as of the last catalog looked at.
    seen: u64,
}

/// The legacy sessions of this replica that hear of resource list changes. Cheap to clone.
#[derive(Clone)]
pub struct ListChanged {
    watched: Arc<Mutex<Vec<Watched>>>,
    catalog: Arc<LiveCatalog>,
}

fn visible_hash(catalog: &Catalog, user: Option<&User>) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for tool in view::visible_tools(catalog, user, &[]) {
        tool.key.hash(&mut hasher);
    }
    hasher.finish()
}

impl ListChanged {
    /// Watches `catalog` until `stop`.
    pub fn start(catalog: Arc<LiveCatalog>, stop: CancellationToken) -> Self {
        let this = Self {
            watched: Arc::default(),
            catalog,
        };
        let watcher = this.clone();
        tokio::spawn(async move {
            let mut last = watcher.catalog.snapshot();
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(LOOK_EVERY) => {}
                }
                let now = watcher.catalog.snapshot();
                if !Arc::ptr_eq(&now, &last) {
                    watcher.announce(&now).await;
                    last = now;
                }
            }
        });
        this
    }

    fn watched(&self) -> std::sync::MutexGuard<'_, Vec<Watched>> {
        self.watched.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Watches a legacy session of `user` from now on.
    pub fn register(&self, peer: Peer<RoleServer>, user: Option<User>) {
        let seen = visible_hash(&self.catalog.snapshot(), user.as_ref());
        let mut watched = self.watched();
        watched.retain(|w| !w.peer.is_transport_closed());
        if watched.len() >= MAX_WATCHED {
            tracing::warn!(
                max = MAX_WATCHED,
                "too many legacy sessions to send resource list changes to; this one gets none"
            );
            return;
        }
        watched.push(Watched { peer, user, seen });
    }

    /// Notifies the sessions whose visible list `catalog` changed.
    async fn announce(&self, catalog: &Catalog) {
        let changed: Vec<Peer<RoleServer>> = {
            let mut watched = self.watched();
            watched.retain(|w| !w.peer.is_transport_closed());
            watched
                .iter_mut()
                .filter_map(|w| {
                    let now = visible_hash(catalog, w.user.as_ref());
                    (std::mem::replace(&mut w.seen, now) != now).then(|| w.peer.clone())
                })
                .collect()
        };
        for peer in changed {
            match tokio::time::timeout(SEND_TIMEOUT, peer.notify_resource_list_changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!(error = %e, "resource list change not sent"),
                Err(_) => tracing::debug!("resource list change not sent: the session is busy"),
            }
        }
    }

    /// Sessions watched now (tests, metrics).
    pub fn len(&self) -> usize {
        self.watched().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
