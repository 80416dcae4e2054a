//! An upstream MCP server's question to a 2026-07-28 caller, in the execute pipeline. The
//! upstream layer holds the call open and hands back the question
//! ([`crate::upstream::held`]); here the caller gets it as the surface's pending reply
//! (MCP's `input_required`) with a single-use ticket from approval's store
//! ([`super::approval::Tickets::issue_held`]), bound as an approval is (user, key,
//! arguments hash, session handle) and naming the held call. The caller's retry carries
//! the ticket and the answer: after validation it resumes that call ([`resume`]) on
//! whichever replica holds it, and never starts another.
//!
//! A retry that resumes skips approval, the rate limits and the result cache: the
//! ticket was issued to a call that passed them, and the result depends on the answer
//! (so it is never cached). A ticket that is unknown, spent, an approval's, or bound to
//! another call is refused and spent.

use mcc_catalog::Tool;
use rmcp::model::ElicitRequestParams;
use serde_json::{Map, Value};

use super::Shared;
use super::approval::{Binding, HeldTicket, Issued, TicketError};
use super::executed::{Ask, Executed, HeldAnswer, SessionFailure, check_output, shape};
use crate::exec::ExecError;
use crate::upstream::UpstreamError;
use crate::upstream::held::{self, Asked};

/// What a call that may end with an upstream's question needs to ask it: the binding,
/// and the params the client answered in earlier rounds (a retry repeats only its
/// original arguments).
pub struct Bound {
    pub binding: Binding,
    pub answered: Option<Map<String, Value>>,
}

impl Bound {
    /// `given`: the params after the missing-params step; `original`: the request's own.
    pub fn new(
        binding: Binding,
        given: &Map<String, Value>,
        original: &Map<String, Value>,
    ) -> Self {
        let answered: Map<String, Value> = given
            .iter()
            .filter(|(name, _)| !original.contains_key(*name))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Self {
            binding,
            answered: (!answered.is_empty()).then_some(answered),
        }
    }
}

/// The refusal of a ticket that resumes nothing: `what` differs, or (`None`) it is
/// unknown, expired, already used, or not an upstream question's.
pub fn refused(key: &str, what: Option<&str>) -> String {
    match what {
        Some(what) => format!(
            "Execution refused: the upstream's question was asked in a call with {what} than \
             this call of '{key}'; call again to be asked anew"
        ),
        None => format!(
            "Execution refused: the ticket of the upstream's question for '{key}' is unknown, \
             expired or already used; call again to be asked anew"
        ),
    }
}

fn ticket_failure<P>(e: TicketError) -> Executed<P> {
    Executed::Session(SessionFailure {
        caller_error: matches!(e, TicketError::TooMany),
        message: e.to_string(),
    })
}

/// Resumes the held call `answer`'s ticket names, for the validated call `bound`.
pub async fn resume<A: Ask>(
    shared: &Shared,
    tool: &Tool,
    bound: Bound,
    answer: HeldAnswer,
    ask: &A,
) -> Executed<A::Pending> {
    let key = bound.binding.key.clone();
    let taken = shared
        .approvals
        .tickets
        .take_held(&answer.ticket, &bound.binding)
        .await;
    let HeldTicket { held, answered } = match taken {
        Ok(Ok(ticket)) => ticket,
        Ok(Err(what)) => {
            return Executed::Session(SessionFailure {
                message: refused(&key, what),
                caller_error: true,
            });
        }
        Err(e) => return ticket_failure(e),
    };
    let result = shared
        .engine
        .resume_upstream(tool, &held, answer.answer)
        .await;
    let bound = Bound {
        answered: answered.or(bound.answered),
        ..bound
    };
    match result {
        Ok(reply) => {
            let outcome = reply.outcome();
            if let Err(mismatch) = check_output(tool, &outcome) {
                tracing::warn!(tool = %key, error = %mismatch, "execute: result does not match the output schema");
                return Executed::BadOutput(mismatch);
            }
            let mut ran = shape(outcome, false, shared.response_max_size);
            ran.upstream = Some(reply);
            Executed::Ran(ran)
        }
        Err(e) => failed(shared, bound, e, ask).await,
    }
}

/// An upstream call that did not return a result: its question goes to the caller
/// (with a ticket), anything else ends the call.
pub async fn failed<A: Ask>(
    shared: &Shared,
    bound: Bound,
    e: ExecError,
    ask: &A,
) -> Executed<A::Pending> {
    match e {
        ExecError::Upstream {
            tool,
            source: UpstreamError::Asked { server, asked },
        } => asked_of(shared, bound, *asked, ask, (tool, server)).await,
        e => {
            tracing::error!(tool = %bound.binding.key, error = %e, "execute: could not run the tool");
            Executed::NotRun(e)
        }
    }
}

/// Issues the ticket and has the surface ask; dropping `asked` unkept (no ticket, no
/// surface to ask) answers the upstream `cancel`.
async fn asked_of<A: Ask>(
    shared: &Shared,
    bound: Bound,
    asked: Asked,
    ask: &A,
    (tool, server): (String, String),
) -> Executed<A::Pending> {
    let ticket = shared
        .approvals
        .tickets
        .issue_held(
            bound.binding,
            bound.answered,
            asked.held.clone(),
            held::QUESTION_TIMEOUT,
        )
        .await;
    let ticket: Issued = match ticket {
        Ok(t) => t,
        Err(e) => return ticket_failure(e),
    };
    let question: ElicitRequestParams = asked.question.clone();
    match ask.upstream_question(question, &ticket) {
        Some(pending) => {
            asked.keep();
            Executed::Pending(pending)
        }
        // Only callers who can be asked get held calls: not reached.
        None => Executed::NotRun(ExecError::Upstream {
            tool,
            source: UpstreamError::QuestionClosed { server },
        }),
    }
}
