//! An upstream's rmcp client sessions: the shared one (discovery, `list_changed`, and
//! calls made off the HTTP server's threads) and one per connection thread for calls.
//!
//! The HTTP server serves each connection to its end on one thread of a pool of
//! single-threaded runtimes ([`crate::http`]). The shared session is connected where
//! discovery runs, on the main runtime: a call through it hands its request to rmcp's
//! worker there and waits for the answer to come back, two wake-ups of a parked thread
//! per call (about a fifth of the gateway's CPU for a proxied call, measured). A call on a
//! pool thread uses a session of that thread's own instead, connected on first use, so
//! the call, rmcp's worker and the connection to the upstream stay on one thread. The
//! upstream sees at most one session per pool thread (one per CPU) beside the shared one.
//! A `command:` upstream keeps one session: each session there is a process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use super::connect::{ConnectError, Session};

/// One session, connected by whoever finds it missing; the others wait for that.
type Slot = tokio::sync::Mutex<Option<Arc<Session>>>;

#[derive(Default)]
pub(super) struct Sessions {
    shared: Slot,
    by_thread: Mutex<HashMap<ThreadId, Arc<Slot>>>,
}

/// Whether this thread runs a single-threaded runtime (a connection thread of the HTTP
/// server, or a current-thread test runtime): its calls get a session of their own.
fn on_local_thread() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread)
}

/// The session in `slot`, connected by `connect` when there is none or it is closed. One
/// connect at a time per slot: a burst of first calls opens one session, not one each.
async fn open_in(
    slot: &Slot,
    connect: impl AsyncFnOnce() -> Result<Session, ConnectError>,
) -> Result<Arc<Session>, ConnectError> {
    let mut slot = slot.lock().await;
    if let Some(s) = slot.as_ref().filter(|s| !s.is_transport_closed()) {
        return Ok(s.clone());
    }
    let session = Arc::new(connect().await?);
    *slot = Some(session.clone());
    Ok(session)
}

/// Empties `slot` now, closing its session, unless a call is connecting it (that call
/// keeps its new session).
fn close_in(slot: &Slot) {
    if let Ok(mut slot) = slot.try_lock()
        && let Some(session) = slot.take()
    {
        session.cancellation_token().cancel();
    }
}

impl Sessions {
    /// The shared session; `connect` opens it on first use and after a loss.
    pub async fn shared(
        &self,
        connect: impl AsyncFnOnce() -> Result<Session, ConnectError>,
    ) -> Result<Arc<Session>, ConnectError> {
        open_in(&self.shared, connect).await
    }

    /// The session for a call: this thread's own when `per_thread` and the thread runs
    /// a single-threaded runtime, else the shared one.
    pub async fn for_call(
        &self,
        per_thread: bool,
        connect: impl AsyncFnOnce() -> Result<Session, ConnectError>,
    ) -> Result<Arc<Session>, ConnectError> {
        if !(per_thread && on_local_thread()) {
            return self.shared(connect).await;
        }
        let slot = self
            .threads()
            .entry(std::thread::current().id())
            .or_default()
            .clone();
        open_in(&slot, connect).await
    }

    /// Forgets `session` wherever it is kept (it failed): the next call connects again.
    pub async fn forget(&self, session: &Arc<Session>) {
        let slots: Vec<Arc<Slot>> = self.threads().values().cloned().collect();
        for slot in slots.iter().map(|s| &**s).chain([&self.shared]) {
            let mut slot = slot.lock().await;
            if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, session)) {
                *slot = None;
            }
        }
    }

    /// Forgets the shared session (its listing failed).
    pub async fn forget_shared(&self) {
        *self.shared.lock().await = None;
    }

    /// Closes every session (the upstream is removed).
    pub async fn close(&self) {
        if let Some(session) = self.shared.lock().await.take() {
            session.cancellation_token().cancel();
        }
        self.close_threads();
    }

    /// Closes every session now (the upstream is removed, or went away and came back);
    /// a call connecting a session keeps its new one.
    pub fn close_now(&self) {
        close_in(&self.shared);
        self.close_threads();
    }

    fn close_threads(&self) {
        for (_, slot) in self.threads().drain() {
            close_in(&slot);
        }
    }

    fn threads(&self) -> std::sync::MutexGuard<'_, HashMap<ThreadId, Arc<Slot>>> {
        self.by_thread.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::ServiceExt;
    use rmcp::transport::async_rw::AsyncRwTransport;

    /// A real rmcp session to an in-process server over a pipe; `opened` counts them.
    async fn open(opened: &std::sync::atomic::AtomicUsize) -> Result<Session, ConnectError> {
        struct Quiet;
        impl rmcp::ServerHandler for Quiet {}
        opened.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let (client, server) = tokio::io::duplex(64 * 1024);
        tokio::spawn(async move {
            let (r, w) = tokio::io::split(server);
            if let Ok(s) = Quiet.serve(AsyncRwTransport::new_server(r, w)).await {
                let _ = s.waiting().await;
            }
        });
        let (r, w) = tokio::io::split(client);
        let handler = super::super::connect::Handler::new(Arc::default());
        Ok(handler
            .serve(AsyncRwTransport::new_client(r, w))
            .await
            .expect("the in-process server answers"))
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_single_threaded_runtimes_calls_get_a_session_of_their_own() {
        let (sessions, opened) = (Sessions::default(), Default::default());
        let shared = sessions.shared(async || open(&opened).await).await.unwrap();
        let mine = sessions.for_call(true, async || open(&opened).await).await;
        let mine = mine.unwrap();
        assert!(
            !Arc::ptr_eq(&shared, &mine),
            "the call got the shared session"
        );
        let again = sessions.for_call(true, async || open(&opened).await).await;
        assert!(
            Arc::ptr_eq(&mine, &again.unwrap()),
            "not kept for the thread"
        );
        // A stdio server's calls share its one session (one process).
        let stdio = sessions.for_call(false, async || open(&opened).await).await;
        assert!(Arc::ptr_eq(&shared, &stdio.unwrap()));
        assert_eq!(opened.load(std::sync::atomic::Ordering::SeqCst), 2);

        // A failed session is forgotten: the next call connects again.
        sessions.forget(&mine).await;
        let next = sessions.for_call(true, async || open(&opened).await).await;
        assert!(!Arc::ptr_eq(&mine, &next.unwrap()));
        assert_eq!(opened.load(std::sync::atomic::Ordering::SeqCst), 3);

        // Closing ends them all.
        let (shared, mine) = (sessions.session_of_shared().await, sessions.mine());
        sessions.close_now();
        for s in [shared, mine] {
            let s = s.expect("kept before closing");
            tokio::time::timeout(std::time::Duration::from_secs(5), async {
                while !s.is_transport_closed() {
                    tokio::task::yield_now().await;
                }
            })
            .await
            .expect("closed");
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_burst_of_first_calls_on_a_thread_opens_one_session() {
        let (sessions, opened) = (Sessions::default(), Default::default());
        let calls = (0..8).map(|_| sessions.for_call(true, async || open(&opened).await));
        let got = futures::future::join_all(calls).await;
        let first = got[0].as_ref().unwrap();
        assert!(got.iter().all(|s| Arc::ptr_eq(first, s.as_ref().unwrap())));
        assert_eq!(opened.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_multi_threaded_runtimes_calls_share_one_session() {
        let (sessions, opened) = (Sessions::default(), Default::default());
        let a = sessions.for_call(true, async || open(&opened).await).await;
        let b = sessions.for_call(true, async || open(&opened).await).await;
        assert!(Arc::ptr_eq(&a.unwrap(), &b.unwrap()));
        assert_eq!(opened.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    impl Sessions {
        async fn session_of_shared(&self) -> Option<Arc<Session>> {
            self.shared.lock().await.clone()
        }
        fn mine(&self) -> Option<Arc<Session>> {
            let slot = self.threads().get(&std::thread::current().id())?.clone();
            slot.try_lock().ok()?.clone()
        }
    }
}
