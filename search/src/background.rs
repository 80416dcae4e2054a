//! The thread that computes tool embeddings off every other path: startup, the catalog
//! watchers and searches never wait for it. [`Worker`] runs one job at a time on the
//! newest value handed to it; a value handed over while a job runs replaces any value
//! still waiting (the newest catalog is the only one worth embedding).
//!
//! What a job does (the semantic build, the swap) belongs to [`super::service`]; this
//! file owns only the thread, the slot and when the thread ends (when its owner is
//! dropped, or when `run` says so).

use std::sync::{Arc, Condvar, Mutex, Once};

struct Slot<J> {
    job: Option<J>,
    running: bool,
    closed: bool,
}

struct State<J> {
    slot: Mutex<Slot<J>>,
    wake: Condvar,
}

/// A serial worker thread over the newest submitted job. The thread starts with the
/// first [`Worker::submit`] and ends when the worker is dropped.
pub struct Worker<J> {
    state: Arc<State<J>>,
    started: Once,
}

impl<J: Send + 'static> Default for Worker<J> {
    fn default() -> Self {
        Self {
            state: Arc::new(State {
                slot: Mutex::new(Slot {
                    job: None,
                    running: false,
                    closed: false,
                }),
                wake: Condvar::new(),
            }),
            started: Once::new(),
        }
    }
}

impl<J: Send + 'static> Worker<J> {
    /// Hands `job` to the thread (replacing a job it has not started); never waits. The
    /// first call starts the thread, which calls `run` for each job until `run` returns
    /// false (its owner is gone) or the worker is dropped.
    pub fn submit(&self, job: J, run: impl FnMut(J) -> bool + Send + 'static) {
        self.started.call_once(|| {
            let state = self.state.clone();
            let spawned = std::thread::Builder::new()
                .name("mcc-search-embed".into())
                .spawn(move || work(&state, run));
            if let Err(e) = spawned {
                tracing::error!(error = %e, "search: cannot start the embedding thread");
            }
        });
        let mut slot = self.lock();
        slot.job = Some(job);
        drop(slot);
        self.state.wake.notify_one();
    }

    /// A job is waiting or running.
    pub fn pending(&self) -> bool {
        let slot = self.lock();
        slot.job.is_some() || slot.running
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slot<J>> {
        self.state.slot.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl<J> Drop for Worker<J> {
    fn drop(&mut self) {
        let mut slot = self.state.slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.closed = true;
        slot.job = None;
        drop(slot);
        self.state.wake.notify_all();
    }
}

fn work<J>(state: &State<J>, mut run: impl FnMut(J) -> bool) {
    loop {
        let job = {
            let mut slot = state.slot.lock().unwrap_or_else(|p| p.into_inner());
            slot.running = false;
            loop {
                if slot.closed {
                    return;
                }
                if let Some(job) = slot.job.take() {
                    slot.running = true;
                    break job;
                }
                slot = state.wake.wait(slot).unwrap_or_else(|p| p.into_inner());
            }
        };
        if !run(job) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn runs_the_newest_job_one_at_a_time_and_stops_when_dropped() {
        let (started_tx, started) = mpsc::channel::<u32>();
        let (release, release_rx) = mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        let worker = Worker::default();
        let run = {
            let release_rx = release_rx.clone();
            move |v: u32| {
                started_tx.send(v).unwrap();
                release_rx.lock().unwrap().recv().is_ok()
            }
        };
        worker.submit(1, run.clone());
        assert_eq!(started.recv_timeout(Duration::from_secs(5)).unwrap(), 1);
        assert!(worker.pending());
        // Job 1 is held: 2 waits and is replaced by 3.
        worker.submit(2, run.clone());
        worker.submit(3, run);
        release.send(()).unwrap();
        assert_eq!(started.recv_timeout(Duration::from_secs(5)).unwrap(), 3);
        release.send(()).unwrap();
        drop(worker);
        assert!(
            started.recv_timeout(Duration::from_secs(1)).is_err(),
            "2 never ran and nothing else did"
        );
    }
}
