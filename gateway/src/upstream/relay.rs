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
//!   call's timeout). A legacy caller is asked within its request; a 2026-07-28 caller
//!   that declared elicitation answers in a retry of its request, so its call runs
//!   held ([`super::held`]) and its questions go through that; declined for a caller
//!   who cannot be asked: a REST caller, and a session of either generation without
//!   elicitation.

use std::future::Future;
use std::time::Duration;

use mcc_executor::progress::{Report, current_sink};
use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction, ProtocolVersion};
use rmcp::service::{ElicitationMode, Peer, RequestContext};
use tokio::time::Instant;

use super::connect::{CallEvents, decline};
use super::held;

/// The shortest interval between two relayed progress notifications of one call.
pub const PROGRESS_EVERY: Duration = Duration::from_millis(100);
/// The longest relayed message (progress or question), in bytes.
pub const MAX_MESSAGE: usize = 1024;
/// The largest question schema relayed (serialized JSON), in bytes.
pub const MAX_SCHEMA: usize = 16 * 1024;
/// How long a caller may take to answer a relayed question.
pub const QUESTION_TIMEOUT: Duration = super::connect::QUESTION_TIMEOUT;
/// The key of an upstream's question in an `input_required` result, and of its answer
/// in the retry's `inputResponses`.
pub const INPUT_KEY: &str = "upstream";

/// The MCP caller of the current `execute`, set around its pipeline.
#[derive(Clone)]
pub struct Caller {
    peer: Peer<RoleServer>,
    /// A 2026-07-28 caller: cannot be asked within its request.
    stateless: bool,
    /// A 2026-07-28 caller that declared elicitation: its upstream calls run held, and
    /// it is asked in its reply ([`super::held`]).
    holdable: bool,
}

tokio::task_local! {
    static CALLER: Caller;
}

impl Caller {
    pub fn of(ctx: &RequestContext<RoleServer>) -> Self {
        let stateless = ctx
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        let declared = ctx
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        Self {
            peer: ctx.peer.clone(),
            stateless,
            holdable: stateless && declared,
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
        let Some(question) = relayable(question) else {
            return decline();
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

/// Whether the current `execute`'s caller is a 2026-07-28 caller who can be asked in
/// its reply: its upstream calls run held ([`super::held`]).
pub fn holdable() -> bool {
    CALLER.try_with(|c| c.holdable).unwrap_or(false)
}

/// `question` as it may be relayed: form mode (URL mode is not relayed), message and
/// schema within [`MAX_MESSAGE`] and [`MAX_SCHEMA`], the upstream's `_meta` left out.
/// `None`: it is declined.
pub fn relayable(question: ElicitRequestParams) -> Option<ElicitRequestParams> {
    let ElicitRequestParams::FormElicitationParams {
        message,
        requested_schema,
        ..
    } = question
    else {
        return None;
    };
    let schema_size = serde_json::to_string(&requested_schema).map_or(usize::MAX, |s| s.len());
    if message.len() > MAX_MESSAGE || schema_size > MAX_SCHEMA {
        tracing::warn!(
            message_bytes = message.len(),
            schema_bytes = schema_size,
            "upstream question too large to relay; declined"
        );
        return None;
    }
    Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    })
}

/// Waits for `response` while relaying `events` to the current caller (its progress
/// sink, its session for questions). Questions are answered in this task: the caller's
/// request's own, so the question travels on that request's stream. In a held call
/// ([`held::Holder`]) they go to whichever request waits for the call, and progress to
/// that request's sink. `None`: a held call's question was abandoned and the upstream
/// did not end the call within [`held::ABANDON_GRACE`] of hearing `cancel`; the caller
/// drops the request (the upstream hears `notifications/cancelled`).
pub async fn drive<F: Future>(response: F, mut events: CallEvents) -> Option<F::Output> {
    let holder = held::holder();
    let own_sink = current_sink();
    let caller = CALLER.try_with(Caller::clone).ok();
    tokio::pin!(response);
    let mut next_progress = Instant::now();
    let mut progress_open = own_sink.is_some() || holder.is_some();
    let mut questions_open = true;
    let mut give_up: Option<Instant> = None;
    loop {
        let throttled = Instant::now() < next_progress;
        tokio::select! {
            out = &mut response => return Some(out),
            _ = tokio::time::sleep_until(give_up.unwrap_or(next_progress)), if give_up.is_some() => {
                return None;
            }
            _ = tokio::time::sleep_until(next_progress), if progress_open && throttled => {}
            changed = events.progress.changed(), if progress_open && !throttled => {
                if changed.is_err() {
                    progress_open = false;
                    continue;
                }
                let note = events.progress.borrow_and_update().clone();
                let sink = match &holder {
                    Some(holder) => holder.sink(),
                    None => own_sink.clone(),
                };
                if let (Some(sink), Some(note)) = (sink, note) {
                    sink.send_replace(Some(report(note)));
                    next_progress = Instant::now() + PROGRESS_EVERY;
                }
            }
            question = events.questions.recv(), if questions_open => {
                let Some((question, answer)) = question else {
                    questions_open = false;
                    continue;
                };
                // Dropped unanswered (the call ends meanwhile): the upstream hears cancel.
                let answer = held::AnswerSlot::new(answer);
                let reply = match (&holder, &caller) {
                    (Some(holder), _) => match relayable(question) {
                        Some(question) => {
                            let (reply, abandoned) = holder.ask(question).await;
                            if abandoned {
                                give_up = Some(Instant::now() + held::ABANDON_GRACE);
                            }
                            reply
                        }
                        None => decline(),
                    },
                    (None, Some(caller)) => caller.ask(question).await,
                    (None, None) => decline(),
                };
                answer.answer(reply);
            }
        }
    }
}

/// An upstream's progress as a tool's own report: its counts, its message (cut).
pub(super) fn report(note: rmcp::model::ProgressNotificationParam) -> Report {
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
