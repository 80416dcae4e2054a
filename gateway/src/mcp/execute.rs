//! The `execute` tool, top to bottom: look up → authorize → ask for missing params →
//! validate → rate limits → assemble context → run → shape the result → write back (fn
//! tools) → limit the size → one audit event, whatever the outcome. Every rule is
//! `mcc_catalog`'s; every run is the engine's.

use std::time::Instant;

use mcc_catalog::context;
use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, InputResponses};
use rmcp::service::RequestContext;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::ask::{self, Asked};
use super::text;
use super::{CallCtx, Shared};
use crate::audit::AuditEvent;
use crate::exec::{Call, Outcome};
use crate::session::Scope;

/// The arguments of `execute`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecuteArgs {
    pub key: String,
    #[serde(default)]
    pub params: Option<Map<String, Value>>,
    #[serde(default)]
    pub session: Option<String>,
}

/// A normal (non-error) text result, as the reference returns its notices.
fn notice(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(text.into())]).into()
}

fn failure(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(text.into())]).into()
}

pub async fn execute(
    shared: &Shared,
    call: &CallCtx,
    args: ExecuteArgs,
    ctx: &RequestContext<RoleServer>,
    answers: Option<&InputResponses>,
) -> CallToolResponse {
    let started = Instant::now();
    let key = args.key.as_str();
    let mut event = AuditEvent::new("execute", &call.caller);
    event.set_tool(key);
    let (outcome_label, response) = run(shared, call, &args, ctx, answers, &mut event).await;
    event.finish(outcome_label, started.elapsed());
    shared.audit.record(&event);
    shared
        .metrics
        .tool_call(key, outcome_label, started.elapsed());
    tracing::info!(
        user = call.caller.username(),
        tool = key,
        outcome = outcome_label,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "execute completed"
    );
    response
}

async fn run(
    shared: &Shared,
    call: &CallCtx,
    args: &ExecuteArgs,
    ctx: &RequestContext<RoleServer>,
    answers: Option<&InputResponses>,
    event: &mut AuditEvent,
) -> (&'static str, CallToolResponse) {
    let key = args.key.as_str();
    let catalog = shared.catalog.snapshot();
    let Some(tool) = catalog.tool(key) else {
        tracing::warn!(tool = key, "execute: unknown tool");
        return ("unknown", notice(text::unknown_tool(key)));
    };
    let user = call.caller.user.as_ref();
    if !tool.allows(user) {
        tracing::warn!(
            user = call.caller.username(),
            tool = key,
            "execute: access denied"
        );
        return ("unauthorized", notice(text::UNAUTHORIZED));
    }

    let given = args.params.clone().unwrap_or_default();
    let given = match ask::missing_params(tool, key, given, ctx, answers).await {
        Asked::Proceed(p) => p,
        Asked::Cancelled => return ("cancelled", notice(text::CANCELLED)),
        Asked::InputRequired(r) => return ("input_required", r.into()),
    };
    let params = match mcc_catalog::params::validate(tool, &given) {
        Ok(p) => p,
        Err(e) => return ("invalid", notice(text::validation_error(key, &e))),
    };
    shared.audit.note_params(event, tool, &params);
    // Before the result cache: a cached result is a call too.
    if let Err(refused) = shared
        .rate_limits
        .check(user, call.caller.username(), tool)
        .await
    {
        event.reason = Some(refused.to_string());
        return ("rate_limited", failure(refused.to_string()));
    }

    let scope = match shared.scope(call, args.session.as_deref()).await {
        Ok(s) => s,
        Err(message) => return ("error", failure(message)),
    };
    let stored = match shared.sessions.vars(&scope).await {
        Ok(v) => v,
        Err(e) => return ("error", failure(shared.store_failure("vars", e))),
    };
    let mut context = context::assemble(user, &stored);
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

    let execution = match shared
        .engine
        .execute(Call {
            tool,
            refs: catalog.refs(key),
            params,
            context,
            caller: call.caller.username(),
        })
        .await
    {
        Ok(x) => x,
        Err(e) => {
            tracing::error!(tool = key, error = %e, "execute: could not run the tool");
            return (
                "error",
                failure(format!("Error calling tool 'execute': {e}")),
            );
        }
    };

    let (label, exit_code) = match &execution.outcome {
        Outcome::Success(_) => ("success", 0),
        Outcome::Failure { code, .. } => ("failure", *code),
    };
    event.exit_code = Some(exit_code);
    event.cached = execution.cached;
    // As in MCC: only a run that happened (not a cache hit) and succeeded writes back.
    if let (Outcome::Success(_), Some(left)) = (&execution.outcome, &execution.write_back)
        && tool.kind.is_fn()
        && !execution.cached
    {
        write_back(shared, call, &scope, key, &given, left).await;
    }
    let outcome = parse_shell_json(tool, execution.outcome);
    let result = shape(&outcome, shared.response_max_size);
    event.bytes_out = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.len() as u64))
        .sum();
    (label, result.into())
}

/// As MCC does, text printed by a shell (an exec or curl tool's stdout, or a transform's
/// output) that parses as JSON is returned as that JSON value: `echo 5` gives the number
/// 5, a JSON object on stdout becomes structured content. An fn tool's string result
/// stays a string.
pub fn parse_shell_json(tool: &mcc_catalog::Tool, outcome: Outcome) -> Outcome {
    let from_shell = !tool.kind.is_fn() || tool.transform.is_some();
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

/// Applies what an fn tool changed in its context (keys set, changed or deleted against
/// `given`, the context it received) to the scope's variables, atomically; variables it
/// did not touch keep what concurrent calls stored meanwhile. Invalid keys, or a result
/// over the session limits, reject the whole write-back (logged; the stored variables
/// stay as they were); the tool's result is returned either way.
async fn write_back(
    shared: &Shared,
    call: &CallCtx,
    scope: &Scope,
    key: &str,
    given: &Map<String, Value>,
    left: &Map<String, Value>,
) {
    match context::write_back_diff(given, left) {
        Ok(changes) => {
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

/// The tool result as the client sees it: a string as is, `null` as no content, an
/// object as compact JSON text plus structured content, anything else (lists, numbers,
/// the failure triple) as compact JSON text; cut at the response limit.
fn shape(outcome: &Outcome, limit: usize) -> CallToolResult {
    if let Outcome::Success(Value::Null) = outcome {
        return CallToolResult::success(vec![]);
    }
    let full = outcome.to_text();
    let full_len = full.len();
    let text = text::limit_response(full, limit);
    let mut result = CallToolResult::success(vec![ContentBlock::text(text.clone())]);
    if let Outcome::Success(Value::Object(obj)) = outcome
        && text.len() == full_len
    {
        result.structured_content = Some(Value::Object(obj.clone()));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shell_output_that_is_json_becomes_json() {
        let exec: mcc_catalog::Tool = serde_json::from_value(
            json!({"key": "t", "name": "t", "kind": "exec", "command": "echo"}),
        )
        .unwrap();
        let mut func = exec.clone();
        func.kind = mcc_catalog::ToolKind::Fn {
            path: "m:f".into(),
            python: None,
        };
        let out = |t: &mcc_catalog::Tool, v: Value| parse_shell_json(t, Outcome::Success(v));
        assert_eq!(out(&exec, json!("5\n")), Outcome::Success(json!(5)));
        assert_eq!(
            out(&exec, json!("{\"a\": 1}")),
            Outcome::Success(json!({"a": 1}))
        );
        assert_eq!(
            out(&exec, json!("hello\n")),
            Outcome::Success(json!("hello\n"))
        );
        assert_eq!(
            out(&func, json!("{\"a\": 1}")),
            Outcome::Success(json!("{\"a\": 1}"))
        );
        func.transform = Some("cat".into());
        assert_eq!(out(&func, json!("[1]")), Outcome::Success(json!([1])));
    }

    fn text_of(r: &CallToolResult) -> Vec<String> {
        r.content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect()
    }

    #[test]
    fn shapes_results_like_the_reference() {
        let r = shape(&Outcome::Success(json!("hello\n")), 100);
        assert_eq!(text_of(&r), vec!["hello\n"]);
        assert!(r.structured_content.is_none());
        let r = shape(&Outcome::Success(json!({"a": 1, "b": [1, 2]})), 100);
        assert_eq!(text_of(&r), vec!["{\"a\":1,\"b\":[1,2]}"]);
        assert_eq!(r.structured_content, Some(json!({"a": 1, "b": [1, 2]})));
        assert!(
            shape(&Outcome::Success(Value::Null), 100)
                .content
                .is_empty()
        );
        let fail = Outcome::Failure {
            code: 3,
            stdout: "out\n".into(),
            stderr: "err\n".into(),
        };
        assert_eq!(
            text_of(&shape(&fail, 100)),
            vec!["[3,\"out\\n\",\"err\\n\"]"]
        );
        assert_eq!(shape(&fail, 100).is_error, Some(false));
    }

    #[test]
    fn large_results_are_cut() {
        let r = shape(&Outcome::Success(json!("x".repeat(1000))), 100);
        let t = &text_of(&r)[0];
        assert!(t.len() <= 100 && t.ends_with(text::TRUNCATED), "{t}");
    }
}
