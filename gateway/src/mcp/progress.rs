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

use std::time::{Duration, Instant};

use rmcp::RoleServer;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::RequestContext;

/// How often a running call reports.
pub const EVERY: Duration = Duration::from_secs(2);

/// Sends a call's progress until dropped.
pub struct Notifier {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Notifier {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts notifying when the request asked for progress (`_meta.progressToken`).
pub fn start(ctx: &RequestContext<RoleServer>, key: &str) -> Option<Notifier> {
    let token = ctx.meta.get_progress_token()?;
    let peer = ctx.peer.clone();
    let key = crate::telemetry::spans::bounded(key).to_string();
    let started = Instant::now();
    let task = tokio::spawn(async move {
        let mut ticks = tokio::time::interval(EVERY);
        loop {
            ticks.tick().await;
            let elapsed = started.elapsed().as_secs_f64();
            let message = match elapsed < 0.5 {
                true => format!("execute {key}: started"),
                false => format!("execute {key}: running for {elapsed:.0} s"),
            };
            let note = ProgressNotificationParam::new(token.clone(), elapsed.floor())
                .with_message(message);
            if peer.notify_progress(note).await.is_err() {
                return; // the request's stream is gone
            }
        }
    });
    Some(Notifier { task })
}
