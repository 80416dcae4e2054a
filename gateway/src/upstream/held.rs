//! Upstream calls of 2026-07-28 callers, held open across the caller's requests. Such a
//! caller is asked only with an `input_required` result and answers in a *new* request
//! that repeats the call, while the upstream's question waits inside the first one. So
//! the call runs detached from the request that started it ([`Held::start`]): when the
//! upstream asks, the request ends with the question ([`Asked`], which the execute
//! pipeline turns into `input_required` with a single-use ticket naming the call,
//! [`HeldRef`]), and the call stays open in this replica's table until the retry's
//! answer resumes it ([`Held::resume`]) — here, or through Redis from another replica
//! ([`super::held_remote`]). Owns the table and its bounds:
//!
//! - at most [`MAX_HELD`] questions held open at once per replica (one more is
//!   declined, as one the caller cannot be asked);
//! - a question is answered within [`QUESTION_TIMEOUT`] (and the call's own timeout,
//!   which bounds the whole held call), else the upstream hears `cancel` and, when it
//!   does not end the call within [`ABANDON_GRACE`], `notifications/cancelled`;
//! - an answer reaches the upstream once: a question whose call ends, or whose caller
//!   cannot be given its ticket, is answered `cancel` ([`AnswerSlot`]);
//! - a request waiting for a held call that is cancelled cancels the call (as for any
//!   upstream call); progress reaches the request that waits for the call now.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcc_executor::progress::{Sink, current_sink};
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::connect::decline;
use super::{UpstreamError, UpstreamReply};

/// Questions held open at once on one replica.
pub const MAX_HELD: usize = 256;
/// How long a held question waits for the caller's answer: within the client side's
/// own bound ([`super::connect::QUESTION_TIMEOUT`]), so the upstream hears `cancel`
/// from here rather than a `decline` from there.
pub const QUESTION_TIMEOUT: Duration =
    super::connect::QUESTION_TIMEOUT.saturating_sub(Duration::from_secs(2));
/// How long an upstream that heard `cancel` for an abandoned question may take to end
/// its call before the request is cancelled.
pub const ABANDON_GRACE: Duration = Duration::from_secs(10);

/// Where a held call lives: the replica holding it and its id there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldRef {
    pub replica: String,
    pub call: String,
}

/// Where one answer for the upstream goes; sent at most once. Dropped unanswered, it
/// answers `cancel`: the question's call ended, or its caller will never answer.
pub struct AnswerSlot(Option<oneshot::Sender<ElicitResult>>);

impl AnswerSlot {
    pub fn new(to: oneshot::Sender<ElicitResult>) -> Self {
        Self(Some(to))
    }

    /// Sends `answer`; `false` when nobody waits for it any more.
    pub fn answer(mut self, answer: ElicitResult) -> bool {
        self.0.take().is_some_and(|to| to.send(answer).is_ok())
    }
}

impl Drop for AnswerSlot {
    fn drop(&mut self) {
        if let Some(to) = self.0.take() {
            let _ = to.send(ElicitResult::new(ElicitationAction::Cancel));
        }
    }
}

/// What a held call tells whoever waits for it.
pub enum Step {
    /// The upstream asks (a relayable form question); the answer goes to the slot.
    Asked(ElicitRequestParams, AnswerSlot),
    /// The call ended.
    Done(Result<UpstreamReply, UpstreamError>),
}

/// The waiting side of one held call.
struct Waiting {
    steps: mpsc::Receiver<Step>,
    sink: SharedSink,
    cancel: CancellationToken,
}

/// The progress sink of the request waiting for a held call now, if it wants progress.
type SharedSink = Arc<Mutex<Option<Sink>>>;

/// A held call whose question waits for its caller's answer.
struct Entry {
    answer: AnswerSlot,
    waiting: Waiting,
}

/// An upstream's question to a 2026-07-28 caller, its call held open. Dropped before
/// [`Asked::keep`] (no ticket could be issued), the question is answered `cancel`.
pub struct Asked {
    pub question: ElicitRequestParams,
    pub held: HeldRef,
    parked: Option<Parked>,
}

impl Asked {
    /// A question of a call held on another replica (its holder keeps it).
    pub fn remote(question: ElicitRequestParams, held: HeldRef) -> Self {
        Self {
            question,
            held,
            parked: None,
        }
    }

    /// The caller has a ticket for the question: it stays open for the answer.
    pub fn keep(mut self) -> (ElicitRequestParams, HeldRef) {
        if let Some(parked) = self.parked.as_mut() {
            parked.kept = true;
        }
        (self.question.clone(), self.held.clone())
    }
}

impl std::fmt::Debug for Asked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asked").field("held", &self.held).finish()
    }
}

/// Takes a parked question out of the table when its [`Asked`] is dropped unkept.
struct Parked {
    held: Held,
    call: String,
    kept: bool,
}

impl Drop for Parked {
    fn drop(&mut self) {
        if !self.kept {
            self.held.forget(&self.call);
        }
    }
}

/// This replica's held calls. Cheap to clone.
#[derive(Clone)]
pub struct Held {
    inner: Arc<Inner>,
}

struct Inner {
    /// This replica's id in [`HeldRef`]s (random per process).
    replica: String,
    entries: Mutex<HashMap<String, Entry>>,
    question_timeout: Duration,
}

impl Default for Held {
    fn default() -> Self {
        Self::with_question_timeout(QUESTION_TIMEOUT)
    }
}

impl Held {
    pub fn with_question_timeout(question_timeout: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                replica: new_id(),
                entries: Mutex::new(HashMap::new()),
                question_timeout,
            }),
        }
    }

    pub fn replica(&self) -> &str {
        &self.inner.replica
    }

    /// Questions held open now.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.inner.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn forget(&self, call: &str) {
        let entry = self.entries().remove(call);
        drop(entry); // outside the lock: its slot answers `cancel`
    }

    /// Runs `call` (an upstream call of `server`, bounded by its own timeout) detached
    /// from this request, and waits for its result or its first question.
    pub async fn start<F>(&self, server: &str, call: F) -> Result<UpstreamReply, UpstreamError>
    where
        F: Future<Output = Result<UpstreamReply, UpstreamError>> + Send + 'static,
    {
        let id = new_id();
        let (steps, steps_rx) = mpsc::channel(1);
        let sink: SharedSink = Arc::new(Mutex::new(current_sink()));
        let cancel = CancellationToken::new();
        let holder = Holder {
            held: self.clone(),
            call: id.clone(),
            steps: steps.clone(),
            sink: sink.clone(),
        };
        let (token, forget) = (cancel.clone(), Forget(self.clone(), id.clone()));
        tokio::spawn(async move {
            let _forget = forget;
            tokio::select! {
                () = token.cancelled() => {}
                result = HOLDER.scope(holder, call) => {
                    let _ = steps.send(Step::Done(result)).await;
                }
            }
        });
        let waiting = Waiting {
            steps: steps_rx,
            sink,
            cancel,
        };
        self.wait(server, id, waiting).await
    }

    /// Answers the question of held call `call` and waits for what follows: its result or
    /// its next question. The question must be open on this replica.
    pub async fn resume(
        &self,
        server: &str,
        call: &str,
        answer: ElicitResult,
    ) -> Result<UpstreamReply, UpstreamError> {
        let closed = || UpstreamError::QuestionClosed {
            server: server.into(),
        };
        let Some(entry) = self.entries().remove(call) else {
            return Err(closed());
        };
        *entry.waiting.sink.lock().unwrap_or_else(|e| e.into_inner()) = current_sink();
        let waiting = entry.waiting;
        if !entry.answer.answer(answer) {
            return Err(closed());
        }
        self.wait(server, call.to_string(), waiting).await
    }

    /// Waits for the held call's next step; a question is parked in the table and
    /// returned as [`UpstreamError::Asked`]. Dropped while waiting (the request was
    /// cancelled), it cancels the call.
    async fn wait(
        &self,
        server: &str,
        call: String,
        mut waiting: Waiting,
    ) -> Result<UpstreamReply, UpstreamError> {
        let mut armed = CancelOnDrop(Some(waiting.cancel.clone()));
        loop {
            match waiting.steps.recv().await {
                Some(Step::Done(result)) => {
                    armed.0 = None;
                    return result;
                }
                Some(Step::Asked(question, answer)) => {
                    *waiting.sink.lock().unwrap_or_else(|e| e.into_inner()) = None;
                    let mut entries = self.entries();
                    if entries.len() >= MAX_HELD {
                        drop(entries);
                        tracing::warn!(
                            upstream = server,
                            max = MAX_HELD,
                            "too many upstream questions held open; declined"
                        );
                        answer.answer(decline());
                        continue;
                    }
                    entries.insert(call.clone(), Entry { answer, waiting });
                    drop(entries);
                    armed.0 = None;
                    let asked = Asked {
                        question,
                        held: HeldRef {
                            replica: self.inner.replica.clone(),
                            call: call.clone(),
                        },
                        parked: Some(Parked {
                            held: self.clone(),
                            call,
                            kept: false,
                        }),
                    };
                    return Err(UpstreamError::Asked {
                        server: server.into(),
                        asked: Box::new(asked),
                    });
                }
                None => {
                    // The call's task ended without a word: it was cancelled.
                    armed.0 = None;
                    return Err(UpstreamError::QuestionClosed {
                        server: server.into(),
                    });
                }
            }
        }
    }
}

/// Removes a held call's entry when its task ends, however it ends.
struct Forget(Held, String);

impl Drop for Forget {
    fn drop(&mut self) {
        self.0.forget(&self.1);
    }
}

struct CancelOnDrop(Option<CancellationToken>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(token) = self.0.take() {
            token.cancel();
        }
    }
}

tokio::task_local! {
    static HOLDER: Holder;
}

/// The held call the current task runs, if any (set by [`Held::start`]).
pub fn holder() -> Option<Holder> {
    HOLDER.try_with(Holder::clone).ok()
}

/// The running side of one held call: where its questions and progress go.
#[derive(Clone)]
pub struct Holder {
    held: Held,
    call: String,
    steps: mpsc::Sender<Step>,
    sink: SharedSink,
}

impl Holder {
    /// The progress sink of the request waiting for the call now.
    pub fn sink(&self) -> Option<Sink> {
        self.sink.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Hands `question` (already bounded for relaying by the caller) to whoever waits
    /// for the call and waits for the answer. `true` with the answer: the question was
    /// abandoned (not answered in time; the answer is `cancel`).
    pub async fn ask(&self, question: ElicitRequestParams) -> (ElicitResult, bool) {
        let (to, answer) = oneshot::channel();
        if self
            .steps
            .send(Step::Asked(question, AnswerSlot::new(to)))
            .await
            .is_err()
        {
            return (decline(), false);
        }
        match tokio::time::timeout(self.held.inner.question_timeout, answer).await {
            Ok(Ok(answer)) => (answer, false),
            Ok(Err(_)) => (ElicitResult::new(ElicitationAction::Cancel), true),
            Err(_) => {
                tracing::info!(
                    "an upstream question was not answered in time; the upstream hears cancel"
                );
                self.held.forget(&self.call);
                (ElicitResult::new(ElicitationAction::Cancel), true)
            }
        }
    }
}

/// 128 random bits in hex (a replica's or a held call's id).
pub(super) fn new_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // Unique within the process is what matters; the ticket is the secret.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        bytes[..8].copy_from_slice(&n.to_le_bytes());
    }
    hex::encode(bytes)
}

#[cfg(test)]
#[path = "held_tests.rs"]
mod tests;
