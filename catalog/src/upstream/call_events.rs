//! What an upstream sends about one call in flight, from whoever reads the upstream
//! (rmcp's client handler, or a direct call reading its own response stream) to the
//! gateway's relay: the call's progress, coalesced, and its questions, one at a time,
//! with the one rule for asking one.

use std::time::Duration;

use rmcp::model::{
    ElicitRequestParams, ElicitResult, ElicitationAction, ProgressNotificationParam,
};
use tokio::sync::{mpsc, oneshot, watch};

/// The longest an upstream's question waits for the caller's answer (the call's own
/// timeout may end it sooner).
pub const QUESTION_TIMEOUT: Duration = Duration::from_secs(300);

/// A question an upstream asked during a call, and where its answer goes.
pub type Question = (ElicitRequestParams, oneshot::Sender<ElicitResult>);

/// The sending half of [`CallEvents`]: what the upstream sends about one call.
pub struct EventSenders {
    pub progress: watch::Sender<Option<ProgressNotificationParam>>,
    pub questions: mpsc::Sender<Question>,
}

/// A call's event channels: questions one at a time, progress coalesced.
pub fn call_events() -> (EventSenders, CallEvents) {
    let (progress, progress_rx) = watch::channel(None);
    let (questions, questions_rx) = mpsc::channel(1);
    let senders = EventSenders {
        progress,
        questions,
    };
    let events = CallEvents {
        progress: progress_rx,
        questions: questions_rx,
    };
    (senders, events)
}

/// What a call in flight receives from its upstream.
pub struct CallEvents {
    /// The newest progress (a burst is coalesced: the reader takes the latest).
    pub progress: watch::Receiver<Option<ProgressNotificationParam>>,
    /// Questions, one at a time (a second while one is open is declined).
    pub questions: mpsc::Receiver<Question>,
}

/// Relays `question` to the call behind `questions` and waits for the answer; declines
/// one asked while the call has one open, or not answered in [`QUESTION_TIMEOUT`].
pub async fn ask(
    questions: &mpsc::Sender<Question>,
    question: ElicitRequestParams,
) -> ElicitResult {
    let (tx, rx) = oneshot::channel();
    if questions.try_send((question, tx)).is_err() {
        return decline();
    }
    match tokio::time::timeout(QUESTION_TIMEOUT, rx).await {
        Ok(Ok(answer)) => answer,
        _ => decline(),
    }
}

/// The answer to a question nobody can answer.
pub fn decline() -> ElicitResult {
    ElicitResult::new(ElicitationAction::Decline)
}
