//! `notifications/progress` for an `execute` call whose request carries a
//! `progressToken` (both protocol generations).
//!
//! The first notification goes out as the call starts (progress 0): besides telling the
//! client the call is under way, it makes rmcp answer a 2026-07-28 request with an SSE
//! stream even when JSON responses are configured (`server.json_response`), since a
//! message precedes the result. Then one every [`EVERY`] until the call ends: `progress`
//! is the seconds elapsed (it only grows, as the protocol asks), the message says so.
//! A call that ends first sends nothing more; the notifier stops with the call (it is
//! dropped with the request's future, cancellation included).
//!
//! A tool may report its own progress ([`mcc_executor::progress`]: lines appended to
//! the file named by `MCC_PROGRESS_FILE`, in-process and executor runtimes); each new
//! report is sent at once, its message and counts in the message and its fraction as
//! progress/total (`total` = elapsed / fraction). Reports reach the runtime through a
//! task-local sink set around the call ([`Notifier::scope`]).

use std::time::{Duration, Instant};

use mcc_executor::progress::{self, Report, Sink};
use rmcp::RoleServer;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::RequestContext;

/// How often a running call reports.
pub const EVERY: Duration = Duration::from_secs(2);

/// Sends a call's progress until dropped.
pub struct Notifier {
    task: tokio::task::JoinHandle<()>,
    /// Where the run puts its tool's own reports (set around the call: [`Notifier::scope`]).
    sink: Sink,
}

impl Drop for Notifier {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Notifier {
    /// Runs `call` with its tool's progress reports going to this notifier.
    pub async fn scope<F: std::future::Future>(&self, call: F) -> F::Output {
        progress::SINK.scope(self.sink.clone(), call).await
    }
}

/// The notification for a call `elapsed` into it, after `last` (what was sent before),
/// with the tool's newest `report`: `progress` is the seconds elapsed and always grows;
/// with a fraction reported, `total` is the time it points to, so that progress/total is
/// the tool's fraction.
fn note(
    key: &str,
    elapsed: f64,
    last: Option<f64>,
    report: Option<&Report>,
) -> (f64, Option<f64>, String) {
    let progress = (elapsed * 10.0).floor() / 10.0;
    let progress = match last {
        Some(last) if progress <= last => last + 0.001,
        _ => progress,
    };
    let total = report
        .and_then(Report::fraction)
        .filter(|f| *f > 0.0)
        .map(|f| (progress / f).max(progress));
    let counts = report.map(|r| match r.total {
        Some(t) => format!("{}/{}", r.done, t),
        None => r.done.to_string(),
    });
    let message = match (report.and_then(|r| r.message.as_deref()), counts) {
        (Some(m), Some(c)) => format!("execute {key}: {m} ({c})"),
        (None, Some(c)) => format!("execute {key}: {c}"),
        _ if elapsed < 0.5 => format!("execute {key}: started"),
        _ => format!("execute {key}: running for {elapsed:.0} s"),
    };
    (progress, total, message)
}

/// Starts notifying when the request asked for progress (`_meta.progressToken`).
pub fn start(ctx: &RequestContext<RoleServer>, key: &str) -> Option<Notifier> {
    let token = ctx.meta.get_progress_token()?;
    let peer = ctx.peer.clone();
    let key = crate::telemetry::spans::bounded(key).to_string();
    let started = Instant::now();
    let (sink, mut reports) = tokio::sync::watch::channel(None::<Report>);
    let task = tokio::spawn(async move {
        let mut ticks = tokio::time::interval(EVERY);
        let mut last = None;
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                Ok(()) = reports.changed() => {}
            }
            let report = reports.borrow_and_update().clone();
            let (progress, total, message) =
                note(&key, started.elapsed().as_secs_f64(), last, report.as_ref());
            last = Some(progress);
            let mut note =
                ProgressNotificationParam::new(token.clone(), progress).with_message(message);
            note.total = total;
            if peer.notify_progress(note).await.is_err() {
                return; // the request's stream is gone
            }
        }
    });
    Some(Notifier { task, sink })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_grows_and_total_carries_the_tools_fraction() {
        let (p, t, m) = note("k", 0.0, None, None);
        assert_eq!((p, t, m.as_str()), (0.0, None, "execute k: started"));
        let (p2, _, m) = note("k", 2.04, Some(p), None);
        assert_eq!((p2, m.as_str()), (2.0, "execute k: running for 2 s"));
        // A report arriving within the same tenth of a second still grows progress.
        let (p3, _, _) = note("k", 2.04, Some(p2), None);
        assert!(p3 > p2);
        let report = Report {
            done: 1.0,
            total: Some(4.0),
            message: Some("copying".into()),
        };
        let (p, t, m) = note("k", 3.0, Some(p3), Some(&report));
        assert_eq!(
            (p, t, m.as_str()),
            (3.0, Some(12.0), "execute k: copying (1/4)")
        );
        let counted = Report {
            done: 7.0,
            total: None,
            message: None,
        };
        let (_, t, m) = note("k", 4.0, Some(p), Some(&counted));
        assert_eq!((t, m.as_str()), (None, "execute k: 7"));
    }
}
