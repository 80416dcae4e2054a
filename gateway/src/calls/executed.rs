//! What the execute pipeline ([`super::execute`]) takes and hands back, shared by the
//! surfaces and by the pipeline's own steps: the request ([`ExecRequest`]), the surface's
//! part ([`Ask`]: asking the client for missing params, an approval, an upstream's
//! question), which step ended a call and how ([`Executed`]), and how a result is checked
//! and shaped for either surface ([`check_output`], [`parse_shell_json`], [`shape`]).

use mcc_catalog::Tool;
use mcc_catalog::annotations::OutputMismatch;
use mcc_catalog::params::ValidationError;
use rmcp::model::ElicitResult;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::approval::{ApprovalRequest, Refusal, TicketError};
use crate::exec::{ExecError, Outcome};
use crate::ratelimit::RateLimited;

/// One execute call as a surface received it.
#[derive(Debug, Clone)]
pub struct ExecRequest<'a> {
    /// The tool key the caller asked for.
    pub key: &'a str,
    /// The caller's params (before questions, validation and overrides).
    pub params: Map<String, Value>,
    /// A session handle from `new_session`; `None`: the MCP session, else the caller's
    /// default bucket.
    pub session: Option<&'a str>,
    /// Cancelled when the client no longer wants the result (MCP: the request's token,
    /// see docs/execution.md#cancellation); `None`: the call runs to its end.
    pub cancel: Option<CancellationToken>,
}

/// The audit `reason` of a call whose request was cancelled while it was under way.
pub const ABORTED_REASON: &str = "the request was cancelled before the call finished";

/// What to do after checking for missing parameters.
pub enum Asked<P> {
    /// Go on with these params (possibly completed by the client's answer).
    Proceed(Map<String, Value>),
    /// The client declined or cancelled.
    Cancelled,
    /// The surface answers with this and the client retries (MCP's `input_required`).
    Pending(P),
}

/// How a surface gets missing required params from its client.
#[async_trait::async_trait]
pub trait Ask: Send + Sync {
    /// What the surface replies with while it waits for an answer.
    type Pending: Send;
    /// `params` completed by the client, or why the call stops here.
    async fn missing_params(
        &self,
        tool: &Tool,
        key: &str,
        params: Map<String, Value>,
    ) -> Asked<Self::Pending>;

    /// Has the person approve this call (validated; it needs approval): asks now and
    /// waits, asks and replies with `Pending` (the client answers in a retry), or reads
    /// the answer the retry carries ([`ApprovalRequest::settle`]).
    async fn approve(&self, request: &ApprovalRequest<'_>) -> Approval<Self::Pending>;

    /// The answer to an upstream's question this request carries (a 2026-07-28 retry
    /// echoing its ticket, [`super::held`]): the held call resumes instead of a new one.
    fn upstream_answer(&self) -> Option<HeldAnswer> {
        None
    }

    /// The reply asking the caller an upstream's question under `ticket`; `None`: this
    /// surface cannot ask (the upstream hears `cancel`).
    fn upstream_question(
        &self,
        _question: rmcp::model::ElicitRequestParams,
        _ticket: &super::approval::Issued,
    ) -> Option<Self::Pending> {
        None
    }
}

/// What became of an approval a call needed.
pub enum Approval<P> {
    Approved,
    Refused(Refusal),
    /// The surface answers with this and the client retries with the answer.
    Pending(P),
    /// The ticket store failed or refused.
    Failed(TicketError),
}

/// How an execute call ended: the step that ended it and what it found.
#[derive(Debug)]
pub enum Executed<P> {
    /// No tool has this key.
    Unknown,
    /// The tool exists and the caller may not run it.
    Unauthorized,
    /// The client declined to give missing params.
    Cancelled,
    /// The call needs approval and did not get it (declined, or refused: the text says
    /// why).
    NotApproved(Refusal),
    /// The request was cancelled before the call finished ([`ExecRequest::cancel`]):
    /// whatever ran was killed.
    Aborted,
    /// Waiting for the client's answer (the surface's own reply).
    Pending(P),
    /// The params are wrong; each problem names its param.
    Invalid(ValidationError),
    /// Refused by the rate limits (or they could not be checked).
    RateLimited(RateLimited),
    /// The session scope or its variables could not be had.
    Session(SessionFailure),
    /// The tool could not be run at all (including: no execution slot, [`ExecError::Busy`]).
    NotRun(ExecError),
    /// The tool succeeded with a result its output schema does not admit (the path says
    /// where): a tool error, as MCP asks of a server that declares an output schema.
    BadOutput(OutputMismatch),
    /// The tool ran (or its result came from the cache).
    Ran(Ran),
}

/// A session-store refusal or failure, as text (see [`Shared::session_failure`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFailure {
    pub message: String,
    /// The caller's mistake (an unknown, malformed or foreign handle), not an outage.
    pub caller_error: bool,
}

/// A tool's result, shaped for sending back.
#[derive(Debug, Clone, PartialEq)]
pub struct Ran {
    /// What the tool produced (shell output that parses as JSON parsed, as MCC does).
    pub outcome: Outcome,
    pub cached: bool,
    /// The result text, cut at `server.response_max_size`; `None` for a `null` result.
    pub text: Option<String>,
    /// Whether `text` was cut (it then ends with [`super::text::TRUNCATED`]).
    pub truncated: bool,
    /// An upstream MCP server's tool: its result as it came ([`crate::upstream::reply`]).
    pub upstream: Option<crate::upstream::UpstreamReply>,
}

impl Ran {
    /// The tool's exit code (0 for a success).
    pub fn exit_code(&self) -> i32 {
        match &self.outcome {
            Outcome::Success(_) => 0,
            Outcome::Failure { code, .. } => *code,
        }
    }
}

impl<P> Executed<P> {
    /// The outcome label of audit events, metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Executed::Unknown => "unknown",
            Executed::Unauthorized => "unauthorized",
            Executed::Cancelled | Executed::Aborted => "cancelled",
            Executed::NotApproved(_) => "not_approved",
            Executed::Pending(_) => "input_required",
            Executed::Invalid(_) => "invalid",
            Executed::RateLimited(_) => "rate_limited",
            Executed::Session(_) | Executed::NotRun(_) | Executed::BadOutput(_) => "error",
            Executed::Ran(r) if r.outcome.is_success() => "success",
            Executed::Ran(_) => "failure",
        }
    }
}

/// A successful result of a tool with an output schema must match it (checked on the
/// whole value, before the response limit cuts its text). Failures are reported as they
/// are: the schema describes what the tool returns, not how it fails.
pub fn check_output(tool: &Tool, outcome: &Outcome) -> Result<(), OutputMismatch> {
    match (&tool.output_schema, outcome) {
        (Some(schema), Outcome::Success(value)) => {
            mcc_catalog::annotations::validate_output(schema, value)
        }
        _ => Ok(()),
    }
}

/// As MCC does, text printed by a shell (an exec or curl tool's stdout, or a transform's
/// output) that parses as JSON is returned as that JSON value: `echo 5` gives the number
/// 5, a JSON object on stdout becomes structured content. An fn tool's string result
/// stays a string.
pub fn parse_shell_json(tool: &Tool, outcome: Outcome) -> Outcome {
    let from_shell = tool.kind.command().is_some() || tool.transform.is_some();
    match outcome {
        Outcome::Success(Value::String(text)) if from_shell => {
            match serde_json::from_str::<Value>(&text) {
                Ok(parsed) => Outcome::Success(parsed),
                Err(_) => Outcome::Success(Value::String(text)),
            }
        }
        other => other,
    }
}

/// The result as both surfaces send it: a `null` result has no text; anything else is
/// its client text ([`Outcome::to_text`]: a string as is, other values and the failure
/// triple as compact JSON), cut at `limit` bytes by the engine's rule.
pub fn shape(outcome: Outcome, cached: bool, limit: usize) -> Ran {
    if let Outcome::Success(Value::Null) = outcome {
        return Ran {
            outcome,
            cached,
            text: None,
            truncated: false,
            upstream: None,
        };
    }
    let full = outcome.to_text();
    let full_len = full.len();
    let text = crate::exec::result::limit(full, limit);
    let truncated = text.len() != full_len;
    Ran {
        outcome,
        cached,
        text: Some(text),
        truncated,
        upstream: None,
    }
}

/// A retry's answer to an upstream's question: the ticket it echoes (empty when it
/// echoes none) and the answer.
#[derive(Debug, Clone)]
pub struct HeldAnswer {
    pub ticket: String,
    pub answer: ElicitResult,
}

#[cfg(test)]
#[path = "executed_tests.rs"]
mod tests;
