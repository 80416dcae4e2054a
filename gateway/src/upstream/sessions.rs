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

#[derive(Default)]
pub(super) struct Sessions {
    shared: tokio::sync::Mutex<Option<Arc<Session>>>,
    by_thread: Mutex<HashMap<ThreadId, Arc<Session>>>,
}

/// Whether this thread runs a single-threaded runtime (a connection thread of the HTTP
/// server, or a current-thread test runtime): its calls get a session of their own.
fn on_local_thread() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread)
}

fn live(session: &Arc<Session>) -> bool {
    !session.is_transport_closed()
}

impl Sessions {
    /// The shared session; `connect` opens it on first use and after a loss.
    pub async fn shared(
        &self,
        connect: impl AsyncFnOnce() -> Result<Session, ConnectError>,
    ) -> Result<Arc<Session>, ConnectError> {
        let mut slot = self.shared.lock().await;
        if let Some(s) = slot.as_ref().filter(|s| live(s)) {
            return Ok(s.clone());
        }
        let session = Arc::new(connect().await?);
        *slot = Some(session.clone());
        Ok(session)
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
        let thread = std::thread::current().id();
        if let Some(s) = self.threads().get(&thread).filter(|s| live(s)) {
            return Ok(s.clone());
        }
        let session = Arc::new(connect().await?);
        // Two first calls on one thread may both have connected: the first kept wins.
        let kept = {
            let mut threads = self.threads();
            match threads.get(&thread).filter(|s| live(s)) {
                Some(kept) => kept.clone(),
                None => {
                    threads.insert(thread, session.clone());
                    return Ok(session);
                }
            }
        };
        session.cancellation_token().cancel();
        Ok(kept)
    }

    /// Forgets `session` wherever it is kept (it failed): the next call connects again.
    pub async fn forget(&self, session: &Arc<Session>) {
        self.threads().retain(|_, s| !Arc::ptr_eq(s, session));
        let mut slot = self.shared.lock().await;
        if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, session)) {
            *slot = None;
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
    /// a call holding the shared slot is connecting: it keeps its new session.
    pub fn close_now(&self) {
        if let Ok(mut slot) = self.shared.try_lock()
            && let Some(session) = slot.take()
        {
            session.cancellation_token().cancel();
        }
        self.close_threads();
    }

    fn close_threads(&self) {
        for (_, session) in self.threads().drain() {
            session.cancellation_token().cancel();
        }
    }

    fn threads(&self) -> std::sync::MutexGuard<'_, HashMap<ThreadId, Arc<Session>>> {
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
            self.threads().get(&std::thread::current().id()).cloned()
        }
    }
}
