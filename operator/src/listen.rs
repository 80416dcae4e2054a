//! The standing streams of `MCPServer` upstreams: for an upstream that speaks a legacy
//! protocol generation (the `initialize` handshake), one session per MCPServer whose GET
//! stream carries `notifications/tools/list_changed`; a notification asks the MCPServer
//! reconciler to discover again at once ([`Listeners::take_pending`]), besides its
//! schedule. A 2026-07-28 upstream has no standing stream, and one that does not announce
//! `tools.listChanged` would never use it: both stay schedule-only (the session is closed).
//!
//! Bounds: one session per MCPServer (only while it is served and was discovered once);
//! notifications are debounced ([`DEBOUNCE`] of quiet, at most [`DEBOUNCE_MAX`]) and turn
//! into at most one refresh per [`MIN_INTERVAL`]; a lost session is noticed by a `ping`
//! every [`PING_EVERY`] and reopened with backoff ([`RETRY_MIN`] doubling up to
//! [`RETRY_MAX`]), and a reopened stream refreshes once (a change may have been missed).
//! The session only listens: discovery itself stays the reconciler's, on a connection
//! of its own ([`crate::upstream::discover`]), so both paths share one set of bounds.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use kube::runtime::reflector::ObjectRef;
use mcc_catalog::crd::MCPServer;
use mcc_catalog::upstream::client;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use crate::metrics::Metrics;
use crate::upstream::{RefreshCause, spec_with_headers};

/// Quiet time after a notification before the refresh (more notifications restart it).
pub const DEBOUNCE: Duration = Duration::from_secs(1);
/// The longest a burst of notifications delays its refresh.
pub const DEBOUNCE_MAX: Duration = Duration::from_secs(5);
/// At most one notification-driven refresh per upstream this often.
pub const MIN_INTERVAL: Duration = Duration::from_secs(10);
/// How often an open session is checked with a `ping`.
pub const PING_EVERY: Duration = Duration::from_secs(30);
const PING_TIMEOUT: Duration = Duration::from_secs(10);
/// The first reconnect after a lost session or a failed connect; doubled per failure.
pub const RETRY_MIN: Duration = Duration::from_secs(5);
pub const RETRY_MAX: Duration = Duration::from_secs(300);
/// Reconcile requests queued at most (more are dropped: the schedule catches up).
const TRIGGER_QUEUE: usize = 1024;

/// Where an MCPServer's standing stream is, as its status shows it (`listChanged`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamState {
    /// Opening the session.
    Connecting,
    /// The stream is open: `list_changed` refreshes at once.
    Listening,
    /// The session was lost or could not be opened; retrying with backoff.
    Reconnecting,
    /// A 2026-07-28 upstream (no standing stream), or one that does not announce
    /// `tools.listChanged`: refreshed on the schedule only.
    ScheduleOnly,
}

impl StreamState {
    pub fn as_str(self) -> &'static str {
        match self {
            StreamState::Connecting => "Connecting",
            StreamState::Listening => "Listening",
            StreamState::Reconnecting => "Reconnecting",
            StreamState::ScheduleOnly => "ScheduleOnly",
        }
    }
}

/// What the stream task and the reconciler share about one MCPServer.
#[derive(Debug)]
struct Shared {
    state: StreamState,
    /// A refresh the stream asked for and the reconciler has not run yet.
    pending: Option<RefreshCause>,
}

struct Entry {
    url: String,
    generation: Option<i64>,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        // Aborting drops the session: rmcp closes it (DELETE) in the background.
        self.task.abort();
    }
}

/// The standing streams, by `namespace/name`, and the queue of reconciles they ask for.
pub struct Listeners {
    entries: Mutex<BTreeMap<String, Entry>>,
    triggers: mpsc::Sender<ObjectRef<MCPServer>>,
}

/// The reconcile requests of [`Listeners`], for `Controller::reconcile_on`.
pub type Triggers = futures::stream::BoxStream<'static, ObjectRef<MCPServer>>;

impl Listeners {
    /// No streams yet, and the stream of reconcile requests they will send.
    pub fn new() -> (Self, Triggers) {
        let (tx, rx) = mpsc::channel(TRIGGER_QUEUE);
        let triggers =
            futures::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|obj| (obj, rx)) },
            );
        (
            Self {
                entries: Mutex::new(BTreeMap::new()),
                triggers: tx,
            },
            Box::pin(triggers),
        )
    }

    /// Keeps a stream for `server` (`id`: `namespace/name`): a running one for the same
    /// URL and generation stays, anything else is replaced.
    pub fn ensure(&self, id: &str, server: &MCPServer, client: &Client, metrics: &Arc<Metrics>) {
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        let current = entries.get(id).is_some_and(|e| {
            e.url == server.spec.url
                && e.generation == server.metadata.generation
                && !e.task.is_finished()
        });
        if current {
            return;
        }
        let shared = Arc::new(Mutex::new(Shared {
            state: StreamState::Connecting,
            pending: None,
        }));
        let task = tokio::spawn(listen(
            client.clone(),
            server.clone(),
            shared.clone(),
            self.triggers.clone(),
            metrics.clone(),
        ));
        entries.insert(
            id.to_string(),
            Entry {
                url: server.spec.url.clone(),
                generation: server.metadata.generation,
                shared,
                task,
            },
        );
    }

    /// Closes the stream of `id` (refused, or gone).
    pub fn stop(&self, id: &str) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.remove(id);
        }
    }

    /// Closes the streams of MCPServers not in `live`.
    pub fn retain(&self, live: &std::collections::BTreeSet<String>) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.retain(|id, _| live.contains(id));
        }
    }

    /// The refresh `id`'s stream asked for, if any (taken: asked once, run once).
    pub fn take_pending(&self, id: &str) -> Option<RefreshCause> {
        let entries = self.entries.lock().ok()?;
        let mut shared = entries.get(id)?.shared.lock().ok()?;
        shared.pending.take()
    }

    /// Where `id`'s stream is (`None`: no stream, e.g. never discovered).
    pub fn state(&self, id: &str) -> Option<StreamState> {
        let entries = self.entries.lock().ok()?;
        let shared = entries.get(id)?.shared.lock().ok()?;
        Some(shared.state)
    }

    /// Open streams, for tests and metrics.
    pub fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Sets the state and asks for a reconcile (which writes it on the status), optionally
/// with a refresh.
fn report(
    shared: &Mutex<Shared>,
    triggers: &mpsc::Sender<ObjectRef<MCPServer>>,
    server: &MCPServer,
    state: StreamState,
    refresh: Option<RefreshCause>,
) {
    let changed = match shared.lock() {
        Ok(mut s) => {
            let changed = s.state != state || refresh.is_some();
            s.state = state;
            if refresh.is_some() {
                s.pending = refresh;
            }
            changed
        }
        Err(_) => false,
    };
    if changed {
        // A full queue drops the request: the scheduled refresh still comes.
        let _ = triggers.try_send(ObjectRef::from_obj(server));
    }
}

/// One MCPServer's stream, until aborted.
async fn listen(
    client: Client,
    server: MCPServer,
    shared: Arc<Mutex<Shared>>,
    triggers: mpsc::Sender<ObjectRef<MCPServer>>,
    metrics: Arc<Metrics>,
) {
    let mut backoff = RETRY_MIN;
    let mut opened_before = false;
    let mut last_refresh: Option<Instant> = None;
    loop {
        let notified = Arc::new(Notify::new());
        let session = match spec_with_headers(&client, &server).await {
            Ok(spec) => client::connect(&spec, notified.clone())
                .await
                .map_err(|e| e.public()),
            Err(e) => Err(e.public()),
        };
        let session = match session {
            Ok(s) => s,
            Err(error) => {
                tracing::debug!(mcpserver = %server_id(&server), %error, "cannot open the upstream's standing stream; retrying");
                report(&shared, &triggers, &server, StreamState::Reconnecting, None);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(RETRY_MAX);
                continue;
            }
        };
        if !client::announces_list_changed(&session) {
            session.cancellation_token().cancel();
            report(&shared, &triggers, &server, StreamState::ScheduleOnly, None);
            return;
        }
        backoff = RETRY_MIN;
        // A stream opened again may have missed a change: refresh once.
        let reopened = opened_before.then_some(RefreshCause::StreamReopened);
        opened_before = true;
        report(
            &shared,
            &triggers,
            &server,
            StreamState::Listening,
            reopened,
        );
        loop {
            tokio::select! {
                _ = notified.notified() => {
                    metrics.list_changed();
                    debounce(&notified).await;
                    if let Some(last) = last_refresh {
                        tokio::time::sleep_until(last + MIN_INTERVAL).await;
                    }
                    last_refresh = Some(Instant::now());
                    report(&shared, &triggers, &server, StreamState::Listening, Some(RefreshCause::ListChanged));
                }
                _ = tokio::time::sleep(PING_EVERY) => {
                    if let Err(e) = client::ping(&session, PING_TIMEOUT).await {
                        tracing::info!(mcpserver = %server_id(&server), error = %e.public(), "the upstream's standing stream was lost; reopening");
                        break;
                    }
                }
            }
        }
        session.cancellation_token().cancel();
        report(&shared, &triggers, &server, StreamState::Reconnecting, None);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(RETRY_MAX);
    }
}

/// Waits until no notification came for [`DEBOUNCE`], or [`DEBOUNCE_MAX`] passed.
async fn debounce(notified: &Notify) {
    let until = Instant::now() + DEBOUNCE_MAX;
    loop {
        let quiet = Instant::now() + DEBOUNCE;
        tokio::select! {
            _ = notified.notified() => {}
            _ = tokio::time::sleep_until(quiet.min(until)) => return,
        }
        if Instant::now() >= until {
            return;
        }
    }
}

fn server_id(server: &MCPServer) -> String {
    crate::assemble::object_key(
        server.metadata.namespace.as_deref(),
        server.metadata.name.as_deref(),
    )
}

#[cfg(test)]
#[path = "listen_tests.rs"]
pub(crate) mod tests;
