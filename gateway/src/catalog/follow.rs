//! Work that follows a catalog change without holding it up: [`Latest`] runs a blocking
//! job for the newest value submitted, one job at a time, skipping values superseded
//! while a job ran. The watchers use it twice: to build tools (introspection may take
//! up to its timeout) while user and key changes keep applying, and to rebuild the
//! search index (an embedding run) after each swap instead of before the next one.
//!
//! Running one job at a time on the newest value keeps the order of swaps: an older
//! catalog's search index never replaces a newer one's, and an older document's tools
//! are never installed after a newer document's.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::Catalog;

/// Called (on a blocking thread) with each newly installed catalog, e.g. to rebuild the
/// search index. Never delays the next swap; it should return quickly too (the search
/// index computes embeddings on its own thread), or the next catalog's keyword index
/// waits for it.
pub type OnReload = Arc<dyn Fn(&Arc<Catalog>) + Send + Sync>;

/// A serial worker over the newest submitted value. Cheap to clone.
pub struct Latest<T> {
    slot: Arc<Mutex<Option<T>>>,
    wake: Arc<Notify>,
}

impl<T> Clone for Latest<T> {
    fn clone(&self) -> Self {
        Self {
            slot: self.slot.clone(),
            wake: self.wake.clone(),
        }
    }
}

impl<T: Send + 'static> Latest<T> {
    /// Starts the worker on the current Tokio runtime; it stops when `stop` fires (a
    /// job already running finishes on its blocking thread).
    pub fn spawn(stop: CancellationToken, job: impl Fn(T) + Send + Sync + 'static) -> Self {
        let latest = Self {
            slot: Arc::new(Mutex::new(None)),
            wake: Arc::new(Notify::new()),
        };
        let (slot, wake) = (latest.slot.clone(), latest.wake.clone());
        let job = Arc::new(job);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = wake.notified() => {}
                }
                let Some(value) = slot.lock().unwrap_or_else(|p| p.into_inner()).take() else {
                    continue;
                };
                let job = job.clone();
                if let Err(e) = tokio::task::spawn_blocking(move || job(value)).await {
                    tracing::error!(error = %e, "catalog follow-up job failed");
                }
            }
        });
        latest
    }

    /// Hands the worker a value; one it has not started yet is replaced. Never waits.
    pub fn submit(&self, value: T) {
        *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
        // A stored permit wakes the worker even if it is busy now.
        self.wake.notify_one();
    }
}

/// The search follower of a watcher: `on_reload` for the newest installed snapshot.
pub fn follower(stop: CancellationToken, on_reload: OnReload) -> Latest<Arc<Catalog>> {
    Latest::spawn(stop, move |catalog: Arc<Catalog>| on_reload(&catalog))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[tokio::test]
    async fn a_busy_job_never_blocks_submit_and_only_the_newest_waiting_value_runs() {
        let (started_tx, started) = mpsc::channel::<u32>();
        let (release, release_rx) = mpsc::channel::<()>();
        let release_rx = Mutex::new(release_rx);
        let stop = CancellationToken::new();
        let worker = Latest::spawn(stop.clone(), move |v: u32| {
            started_tx.send(v).unwrap();
            release_rx.lock().unwrap().recv().unwrap();
        });
        worker.submit(1);
        let first = tokio::task::spawn_blocking(move || {
            let v = started.recv_timeout(Duration::from_secs(5)).unwrap();
            (v, started)
        });
        let (v, started) = first.await.unwrap();
        assert_eq!(v, 1);
        // The job is blocked: submitting returns at once, and 2 is superseded by 3.
        worker.submit(2);
        worker.submit(3);
        release.send(()).unwrap();
        let next = tokio::task::spawn_blocking(move || {
            let v = started.recv_timeout(Duration::from_secs(5)).unwrap();
            (v, started)
        });
        let (v, started) = next.await.unwrap();
        assert_eq!(v, 3, "the newest value, 2 skipped");
        release.send(()).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(started.try_recv().is_err(), "nothing else ran");
        stop.cancel();
    }
}
