//! The execute pipeline, top to bottom: look up → authorize → ask for missing params
//! ([`Ask`]; MCP asks the client, REST never does) → validate → approval, when the tool
//! or the platform requires it ([`Ask::approve`], [`super::approval`]; before the rate
//! limits and the result cache, so a cached result never skips it) → rate limits →
//! assemble context → run → check the result against the tool's output schema, if it declares one
//! → shape the result (the response size limit) → write back (fn tools) → one audit
//! event and the call metrics, whatever the outcome.
//!
//! A request that is cancelled ([`ExecRequest::cancel`]) stops wherever it is: the step
//! in progress is dropped, which kills the tool's process group (or deletes its Pod;
//! the engine's rule), and the call is recorded as `cancelled` like any other outcome.
//!
//! [`execute`] returns an [`Executed`]: which step ended the call and with what. MCP
//! renders it as MCC's texts (`mcp::execute`), REST as status codes and JSON
//! (`rest`). Every rule is `mcc_catalog`'s; every run is the engine's (its
//! concurrency limiter included).

use std::time::Instant;

use mcc_catalog::Tool;
use mcc_catalog::annotations::OutputMismatch;
use mcc_catalog::context::{self, SessionAccess};
use mcc_catalog::params::ValidationError;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::approval::{ApprovalRequest, Binding, Decision, Refusal, TicketError};
use super::held::{Bound, HeldAnswer};
use super::{CallCtx, Shared};
use crate::audit::AuditEvent;
use crate::exec::{Call, ExecError, Outcome};
use crate::ratelimit::RateLimited;
use crate::session::Scope;

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

/// Runs one execute call for `call`'s caller and records it (audit event, metrics, log),
/// in an `execute` span, whichever surface asked.
#[tracing::instrument(
    name = "execute",
    target = "mcc_trace",
    skip_all,
    fields(
        mcc.tool = crate::telemetry::spans::bounded(request.key),
        mcc.user = call.caller.username(),
        mcc.outcome = tracing::field::Empty,
    )
)]
pub async fn execute<A: Ask>(
    shared: &Shared,
    call: &CallCtx,
    request: ExecRequest<'_>,
    ask: &A,
) -> Executed<A::Pending> {
    let started = Instant::now();
    let key = request.key;
    let mut event = AuditEvent::new("execute", &call.caller);
    event.set_tool(key);
    let cancel = request.cancel.clone().unwrap_or_default();
    // Losing the race drops `run`, and with it the run in progress (the engine kills the
    // process group or deletes the Pod on drop): nothing outlives the cancelled request.
    let executed = tokio::select! {
        biased;
        () = cancel.cancelled() => Executed::Aborted,
        executed = run(shared, call, &request, ask, &mut event) => executed,
    };
    let label = executed.label();
    tracing::Span::current().record("mcc.outcome", label);
    match &executed {
        Executed::Ran(ran) => {
            event.exit_code = Some(ran.exit_code());
            event.cached = ran.cached;
            event.bytes_out = ran.text.as_ref().map_or(0, |t| t.len() as u64);
        }
        Executed::RateLimited(refused) => event.reason = Some(refused.to_string()),
        Executed::Aborted => event.reason = Some(ABORTED_REASON.into()),
        Executed::BadOutput(mismatch) => event.reason = Some(mismatch.to_string()),
        Executed::NotApproved(refusal) => event.reason = Some(refusal.message.clone()),
        _ => {}
    }
    event.finish(label, started.elapsed());
    shared.audit.record(&event);
    shared.metrics.tool_call(key, label, started.elapsed());
    tracing::info!(
        user = call.caller.username(),
        tool = crate::telemetry::spans::bounded(key),
        outcome = label,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "execute completed"
    );
    executed
}

/// Records a call whose arguments did not even parse (`invalid`), as for any other call.
pub fn record_unparsed(shared: &Shared, call: &CallCtx, kind: &str, key: Option<&str>) {
    let mut event = AuditEvent::new(kind, &call.caller);
    if let Some(key) = key {
        event.set_tool(key);
    }
    event.finish("invalid", std::time::Duration::ZERO);
    shared.audit.record(&event);
}

async fn run<A: Ask>(
    shared: &Shared,
    call: &CallCtx,
    request: &ExecRequest<'_>,
    ask: &A,
    event: &mut AuditEvent,
) -> Executed<A::Pending> {
    let key = request.key;
    let catalog = shared.catalog.snapshot();
    let Some(tool) = catalog.tool(key) else {
        tracing::warn!(
            tool = crate::telemetry::spans::bounded(key),
            "execute: unknown tool"
        );
        return Executed::Unknown;
    };
    let user = call.caller.user.as_ref();
    if !tool.allows(user) {
        tracing::warn!(
            user = call.caller.username(),
            tool = key,
            "execute: access denied"
        );
        return Executed::Unauthorized;
    }

    let given = match ask.missing_params(tool, key, request.params.clone()).await {
        Asked::Proceed(p) => p,
        Asked::Cancelled => return Executed::Cancelled,
        Asked::Pending(p) => return Executed::Pending(p),
    };
    let params = match mcc_catalog::params::validate(tool, &given) {
        Ok(p) => p,
        Err(e) => return Executed::Invalid(e),
    };
    shared.audit.note_params(event, tool, &params);
    // An upstream tool's call may end with the upstream's question to the caller.
    let held = matches!(tool.kind, mcc_catalog::ToolKind::Mcp { .. }).then(|| {
        let chosen = crate::audit::chosen_params(tool, &params);
        Bound::new(binding(call, request, &chosen), &given, &request.params)
    });
    if let Some(answer) = ask.upstream_answer() {
        let Some(bound) = held else {
            return Executed::Session(SessionFailure {
                message: super::held::refused(key, None),
                caller_error: true,
            });
        };
        return super::held::resume(shared, tool, bound, answer, ask).await;
    }
    if mcc_catalog::approval::required(tool, &shared.approvals.policy) {
        let chosen = crate::audit::chosen_params(tool, &params);
        let approval = ApprovalRequest {
            key,
            binding: binding(call, request, &chosen),
            arguments: &chosen,
            tickets: &shared.approvals.tickets,
        };
        event.params_hash = Some(approval.binding.arguments.clone());
        // No decision is recorded when the ticket store failed: nobody was asked.
        let (decision, stop) = match ask.approve(&approval).await {
            Approval::Approved => (Some(Decision::Approved), None),
            Approval::Refused(refusal) => {
                (Some(refusal.decision), Some(Executed::NotApproved(refusal)))
            }
            Approval::Pending(p) => (Some(Decision::Asked), Some(Executed::Pending(p))),
            Approval::Failed(e) => {
                let failure = SessionFailure {
                    message: e.to_string(),
                    caller_error: matches!(e, TicketError::TooMany),
                };
                (None, Some(Executed::Session(failure)))
            }
        };
        event.approval = decision.map(|d| d.as_str().to_string());
        if let Some(stop) = stop {
            return stop;
        }
    }
    // Before the result cache: a cached result is a call too.
    if let Err(refused) = shared
        .rate_limits
        .check(user, call.caller.username(), tool)
        .await
    {
        return Executed::RateLimited(refused);
    }

    let scope = match shared.scope(call, request.session).await {
        Ok(s) => s,
        Err(failure) => return Executed::Session(failure),
    };
    let stored = match shared.sessions.vars(&scope).await {
        Ok(v) => v,
        Err(e) => return Executed::Session(shared.session_failure("vars", e)),
    };
    // Another tenant's Tool sees only the variables it declared (the operator decides;
    // every other tool sees them all, as in MCC).
    let access = catalog
        .refs(key)
        .map_or(&SessionAccess::All, |r| &r.session);
    let mut context = context::assemble(user, &access.visible(&stored));
    let dropped = context::fit_env(&mut context);
    if !dropped.is_empty() {
        tracing::warn!(
            tool = key,
            ?dropped,
            "execute: session variables left out of the context: it would not fit one environment string"
        );
    }
    // What the tool is given: its write-back is applied as changes against this.
    let given = context.clone();

    // Boxed: the engine's future (every runtime's) is large, and inline it would grow
    // every frame above it.
    let execution = match Box::pin(shared.engine.execute(Call {
        tool,
        refs: catalog.refs(key),
        params,
        context,
        caller: call.caller.username(),
    }))
    .await
    {
        Ok(x) => x,
        Err(e) => {
            if let Some(bound) = held {
                return super::held::failed(shared, bound, e, ask).await;
            }
            tracing::error!(tool = key, error = %e, "execute: could not run the tool");
            return Executed::NotRun(e);
        }
    };

    // As in MCC: only a run that happened (not a cache hit) and succeeded writes back.
    if let (Outcome::Success(_), Some(left)) = (&execution.outcome, &execution.write_back)
        && tool.kind.is_fn()
        && !execution.cached
    {
        write_back(shared, call, &scope, (key, access), &given, left).await;
    }
    let outcome = parse_shell_json(tool, execution.outcome);
    if let Err(mismatch) = check_output(tool, &outcome) {
        tracing::warn!(tool = key, error = %mismatch, "execute: result does not match the output schema");
        return Executed::BadOutput(mismatch);
    }
    let mut ran = shape(outcome, execution.cached, shared.response_max_size);
    ran.upstream = execution.upstream;
    Executed::Ran(ran)
}

/// What a confirmation (or an upstream question's ticket) of this call is bound to:
/// the user, the key, the hash of the arguments the caller chose, the session handle.
fn binding(call: &CallCtx, request: &ExecRequest<'_>, chosen: &Map<String, Value>) -> Binding {
    Binding {
        user: call.caller.username().to_string(),
        key: request.key.to_string(),
        arguments: crate::exec::cache::canonical_hash(chosen),
        session: request.session.map(str::to_string),
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

/// Applies what an fn tool changed in its context (keys set, changed or deleted against
/// `given`, the context it received) to the scope's variables, atomically; variables it
/// did not touch keep what concurrent calls stored meanwhile. Invalid keys, or a result
/// over the session limits, reject the whole write-back (logged; the stored variables
/// stay as they were); the tool's result is returned either way. Changes to variables
/// the tool's session access does not admit are left out (logged).
async fn write_back(
    shared: &Shared,
    call: &CallCtx,
    scope: &Scope,
    (key, access): (&str, &SessionAccess),
    given: &Map<String, Value>,
    left: &Map<String, Value>,
) {
    match context::write_back_diff(given, left) {
        Ok(changes) => {
            let (changes, refused) = changes.within(access);
            if !refused.is_empty() {
                tracing::warn!(
                    user = call.caller.username(),
                    tool = key,
                    ?refused,
                    "execute: write-back to session variables the tool did not declare (sessionKeys) left out"
                );
            }
            if let Err(e) = shared.sessions.apply(scope, &changes).await {
                let message = shared.store_failure("write_back", e);
                tracing::warn!(
                    user = call.caller.username(),
                    tool = key,
                    error = %message,
                    "execute: context write-back not applied; session vars unchanged"
                );
            }
        }
        Err(e) => tracing::warn!(
            user = call.caller.username(),
            tool = key,
            "execute: rejected context write-back ({e}); no session vars written"
        ),
    }
}

#[cfg(test)]
#[path = "execute_tests.rs"]
mod tests;
