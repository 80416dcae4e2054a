//! What an upstream sends about a call while it runs, relayed to the call's caller:
//! its `notifications/progress` (as progress of the caller's own token, through the
//! call's progress notifier, [`crate::mcp::progress`]) and its `elicitation/create`
//! (as the gateway's own question to the caller's session). The routing from a shared
//! upstream session to one call is the client's ([`super::connect::Calls`]); this module
//! owns what reaches the caller and its bounds:
//!
//! - progress: at most one relayed per [`PROGRESS_EVERY`] (the newest wins), message cut
//!   to [`MAX_MESSAGE`] bytes; dropped when the caller asked for no progress;
//! - questions: one at a time per call, form mode only, message and schema bounded
//!   ([`MAX_MESSAGE`], [`MAX_SCHEMA`]), answered within [`QUESTION_TIMEOUT`] (and the
//!   call's timeout); declined for a caller who cannot be asked within this request: a
//!   REST caller, a legacy session without form elicitation, and a 2026-07-28 caller
//!   (it answers questions only in a retry of its request, while the upstream's
//!   question waits inside this one).

use std::future::Future;
use std::time::Duration;

use mcc_executor::progress::{Report, current_sink};
use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ProtocolVersion};
use rmcp::service::{ElicitationMode, Peer, RequestContext};
use tokio::time::Instant;

use super::connect::{CallEvents, decline};

/// The shortest interval between two relayed progress notifications of one call.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(100);
/// The longest relayed message (progress or question), in bytes.
pub const MAX_MESSAGE: usize = 1024;
/// The largest question schema relayed (serialized JSON), in bytes.
pub const MAX_SCHEMA: usize = 16 * 1024;
/// How long a caller may take to answer a relayed question.
pub const QUESTION_TIMEOUT: Duration = super::connect::QUESTION_TIMEOUT;

/// The MCP caller of the current `execute`, set around its pipeline.
#[derive(Clone)]
pub struct Caller {
    peer: Peer<RoleServer>,
    /// A 2026-07-28 caller: cannot be asked within its request.
    stateless: bool,
}

tokio::task_local! {
    static CALLER: Caller;
}

impl Caller {
    pub fn of(ctx: &RequestContext<RoleServer>) -> Self {
        Self {
            peer: ctx.peer.clone(),
            stateless: ctx
                .protocol_version()
                .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28),
        }
    }

    /// Runs `call` with this caller as the one upstream questions go to.
    pub async fn scope<F: Future>(self, call: F) -> F::Output {
        CALLER.scope(self, call).await
    }

    /// Asks the caller `question`, or declines when it cannot be asked here.
    async fn ask(&self, question: ElicitRequestParams) -> ElicitResult {
        if self.stateless
            || !self
                .peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form)
        {
            return decline();
        }
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = question
        else {
            return decline(); // URL mode is not relayed
        };
        let schema_size = serde_json::to_string(&requested_schema).map_or(usize::MAX, |s| s.len());
        if message.len() > MAX_MESSAGE || schema_size > MAX_SCHEMA {
            tracing::warn!(
                message_bytes = message.len(),
                schema_bytes = schema_size,
                "upstream question too large to relay; declined"
            );
            return decline();
        }
        let question = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema,
        };
        match self
            .peer
            .create_elicitation_with_timeout(question, Some(QUESTION_TIMEOUT))
            .await
        {
            Ok(answer) => answer,
            Err(e) => {
                tracing::warn!(error = %e, "relayed upstream question failed; cancelled");
                ElicitResult::new(ElicitationAction::Cancel)
            }
        }
    }
}

/// Waits for `response` while relaying `events` to the current caller (its progress
/// sink, its session for questions). Questions are answered in this task: the caller's
/// request's own, so the question travels on that request's stream.
pub async fn drive<F: Future>(response: F, mut events: CallEvents) -> F::Output {
    let sink = current_sink();
    let caller = CALLER.try_with(Caller::clone).ok();
    tokio::pin!(response);
    let mut next_progress = Instant::now();
    let mut progress_open = sink.is_some();
    let mut questions_open = true;
    loop {
        let throttled = Instant::now() < next_progress;
        tokio::select! {
            out = &mut response => return out,
            _ = tokio::time::sleep_until(next_progress), if progress_open && throttled => {}
            changed = events.progress.changed(), if progress_open && !throttled => {
                if changed.is_err() {
                    progress_open = false;
                    continue;
                }
                let note = events.progress.borrow_and_update().clone();
                if let (Some(sink), Some(note)) = (&sink, note) {
                    sink.send_replace(Some(report(note)));
                    next_progress = Instant::now() + PROGRESS_EVERY;
                }
            }
            question = events.questions.recv(), if questions_open => {
                let Some((question, answer)) = question else {
                    questions_open = false;
                    continue;
                };
                let reply = match &caller {
                    Some(caller) => caller.ask(question).await,
                    None => decline(),
                };
                let _ = answer.send(reply);
            }
        }
    }
}

/// An upstream's progress as a tool's own report: its counts, its message (cut).
fn report(note: rmcp::model::ProgressNotificationParam) -> Report {
    Report {
        done: note.progress,
        total: note.total,
        message: note.message.map(|m| cut(&m, MAX_MESSAGE)),
    }
}

fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_cut_on_a_char_boundary() {
        assert_eq!(cut("abc", 5), "abc");
        assert_eq!(cut("aé", 2), "a");
        let note = rmcp::model::ProgressNotificationParam::new(
            rmcp::model::ProgressToken(rmcp::model::NumberOrString::Number(1)),
            2.0,
        )
        .with_message("x".repeat(5000));
        let r = report(note);
        assert_eq!(r.message.unwrap().len(), MAX_MESSAGE);
        assert_eq!(r.done, 2.0);
    }
}
