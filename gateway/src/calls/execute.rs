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

use mcc_catalog::context::{self, SessionAccess};
use serde_json::{Map, Value};

use super::approval::{ApprovalRequest, Binding, Decision, TicketError};
use super::executed::{
    ABORTED_REASON, Approval, Ask, Asked, ExecRequest, Executed, SessionFailure, check_output,
    parse_shell_json, shape,
};
use super::held::Bound;
use super::{CallCtx, Shared};
use crate::audit::AuditEvent;
use crate::exec::{Call, Outcome};
use crate::session::Scope;

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
