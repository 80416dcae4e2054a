//! Where audit events go, each sink a bounded queue drained by its own background task:
//! stdout (one JSON line per event) and a Redis stream (`XADD <key> MAXLEN ~ <n> * event
//! <json>`, plus `XTRIM <key> MINID ~ <now - age>` with an age bound, one pipeline per
//! batch). A write that fails is counted as dropped (`write_error`) and logged at most
//! once per interval; it never reaches the call that produced the event.
//!
//! The stdout writer lets events gather for [`GATHER`] after each write, so a busy
//! gateway wakes its thread once per window rather than once per call; [`Queue::flush`]
//! (at shutdown) cuts the window short and waits until what was queued is written.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::redis_conn::Conn;
use tokio::sync::mpsc;

use crate::metrics::Metrics;

/// Events written to a sink in one go at most.
const BATCH: usize = 256;

/// The field of a stream entry that holds the event's JSON (the reader's too).
pub const STREAM_FIELD: &str = "event";

/// How long one Redis write may take before its batch counts as failed.
pub const REDIS_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the stdout writer waits after a write before it takes the next batch.
pub const GATHER: Duration = Duration::from_millis(5);

/// A sink's queue: the sending end and the sink's name (`stdout`, `redis`, …).
pub struct Queue {
    pub name: &'static str,
    tx: mpsc::Sender<Arc<str>>,
    /// Events queued and events finished (written or dropped) by the sink's own writer;
    /// `None` for a [`channel`] whose receiver is someone else's.
    progress: Option<Arc<Progress>>,
}

#[derive(Default)]
struct Progress {
    queued: AtomicU64,
    finished: AtomicU64,
    /// The writer's thread, woken early by a flush (stdout only).
    thread: OnceLock<std::thread::Thread>,
}

impl Progress {
    fn finish(&self, n: u64) {
        self.finished.fetch_add(n, Ordering::Release);
    }
}

impl Queue {
    /// Queues a JSON line; `false` when the queue is full or its writer is gone.
    pub fn offer(&self, line: Arc<str>) -> bool {
        let queued = self.tx.try_send(line).is_ok();
        if let (true, Some(p)) = (queued, &self.progress) {
            p.queued.fetch_add(1, Ordering::Release);
        }
        queued
    }

    /// Waits, at most `within`, until every event queued so far is written (or counted
    /// as dropped); `false` if some were still waiting.
    pub async fn flush(&self, within: Duration) -> bool {
        let Some(p) = &self.progress else {
            return true;
        };
        let target = p.queued.load(Ordering::Acquire);
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if p.finished.load(Ordering::Acquire) >= target {
                return true;
            }
            if let Some(thread) = p.thread.get() {
                thread.unpark();
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Logs at most once per interval.
#[derive(Default)]
pub struct Throttle(Mutex<Option<Instant>>);

impl Throttle {
    pub fn ready(&self) -> bool {
        let mut last = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let ready = last.is_none_or(|t| t.elapsed() > Duration::from_secs(10));
        if ready {
            *last = Some(Instant::now());
        }
        ready
    }
}

/// A sink whose events a test (or an embedding program) receives itself.
pub fn channel(name: &'static str, capacity: usize) -> (Queue, mpsc::Receiver<Arc<str>>) {
    let (tx, rx) = mpsc::channel(capacity);
    let queue = Queue {
        name,
        tx,
        progress: None,
    };
    (queue, rx)
}

/// A queue whose writer (the caller's task or thread) reports what it finished.
fn tracked(
    name: &'static str,
    capacity: usize,
) -> (Queue, mpsc::Receiver<Arc<str>>, Arc<Progress>) {
    let (tx, rx) = mpsc::channel(capacity);
    let progress = Arc::new(Progress::default());
    let queue = Queue {
        name,
        tx,
        progress: Some(progress.clone()),
    };
    (queue, rx, progress)
}

/// Takes what is queued, up to [`BATCH`], waiting only for the first.
async fn next_batch(rx: &mut mpsc::Receiver<Arc<str>>) -> Option<Vec<Arc<str>>> {
    let first = rx.recv().await?;
    let mut batch = vec![first];
    while batch.len() < BATCH {
        match rx.try_recv() {
            Ok(line) => batch.push(line),
            Err(_) => break,
        }
    }
    Some(batch)
}

/// JSON lines on the process's stdout.
pub fn stdout(capacity: usize, metrics: Metrics) -> Queue {
    writer("stdout", std::io::stdout(), capacity, metrics)
}

/// JSON lines on any blocking writer (stdout, or a test's buffer), written by a thread
/// of its own so a stalled writer never holds up the async runtime.
pub fn writer<W>(name: &'static str, mut out: W, capacity: usize, metrics: Metrics) -> Queue
where
    W: std::io::Write + Send + 'static,
{
    let (queue, mut rx, progress) = tracked(name, capacity);
    let writer_progress = progress.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("audit-{name}"))
        .spawn(move || {
        let progress = writer_progress;
        let warned = Throttle::default();
        while let Some(first) = rx.blocking_recv() {
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(line) => batch.push(line),
                    Err(_) => break,
                }
            }
            let mut text = String::new();
            for line in &batch {
                text.push_str(line);
                text.push('\n');
            }
            let n = batch.len() as u64;
            let written = out.write_all(text.as_bytes()).and_then(|()| out.flush());
            match written {
                Ok(()) => metrics.audit_written(name, n),
                Err(e) => {
                    metrics.audit_dropped(name, "write_error", n);
                    if warned.ready() {
                        tracing::warn!(sink = name, error = %e, "audit: events not written (counted in mcc_audit_events_dropped_total)");
                    }
                }
            }
            progress.finish(n);
            // Let the next events gather (a flush unparks it early).
            std::thread::park_timeout(GATHER);
        }
    });
    if let Ok(handle) = &spawned {
        let _ = progress.thread.set(handle.thread().clone());
    }
    if let Err(e) = spawned {
        tracing::error!(sink = name, error = %e, "audit: cannot start the sink's writer; its events are counted as dropped");
    }
    queue
}

/// The stream and its bounds.
#[derive(Debug, Clone)]
pub struct StreamSettings {
    pub key: String,
    /// `MAXLEN ~`.
    pub max_len: u64,
    /// `MINID ~` of now minus this.
    pub max_age: Option<Duration>,
}

/// The Redis stream sink.
pub fn redis_stream(
    settings: StreamSettings,
    conn: Conn,
    capacity: usize,
    metrics: Metrics,
) -> Queue {
    let (queue, mut rx, progress) = tracked("redis", capacity);
    tokio::spawn(async move {
        let warned = Throttle::default();
        while let Some(batch) = next_batch(&mut rx).await {
            let n = batch.len() as u64;
            let mut pipe = redis::pipe();
            for line in &batch {
                pipe.cmd("XADD")
                    .arg(&settings.key)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(settings.max_len)
                    .arg("*")
                    .arg(STREAM_FIELD)
                    .arg(line.as_ref())
                    .ignore();
            }
            if let Some(age) = settings.max_age {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                let min_id = now.saturating_sub(age).as_millis();
                pipe.cmd("XTRIM")
                    .arg(&settings.key)
                    .arg("MINID")
                    .arg("~")
                    .arg(min_id.to_string())
                    .ignore();
            }
            let mut conn = conn.clone();
            let result =
                tokio::time::timeout(REDIS_TIMEOUT, pipe.query_async::<()>(&mut conn)).await;
            match result {
                Ok(Ok(())) => metrics.audit_written("redis", n),
                Ok(Err(e)) => failed(&metrics, &warned, n, &e.to_string()),
                Err(_) => failed(&metrics, &warned, n, "no answer within 2 s"),
            }
            progress.finish(n);
        }
    });
    queue
}

fn failed(metrics: &Metrics, warned: &Throttle, n: u64, error: &str) {
    metrics.audit_dropped("redis", "write_error", n);
    if warned.ready() {
        tracing::warn!(
            error,
            events = n,
            "audit: events not written to the Redis stream (counted in mcc_audit_events_dropped_total)"
        );
    }
}
