//! The `execute` tool: its arguments, and the rendering of the shared pipeline's outcome
//! ([`crate::calls::execute`]) as MCC's texts and MCP results. The pipeline asks the
//! client for missing params through [`super::ask::McpAsk`]; everything else (lookup,
//! RBAC, validation, rate limits, context, run, write-back, audit) is the pipeline's.
//!
//! The call is cancelled with its request: rmcp cancels the request's token (`ctx.ct`)
//! on the client's `notifications/cancelled` (relayed from other replicas by
//! [`super::relay`]), on a closed stream it issued no resumable event ids on, and when
//! the session or the server ends; see docs/execution.md#cancellation.
//!
//! A legacy session that set a log level hears of its calls ([`super::logging`]); a
//! request with a `progressToken` gets progress notifications ([`super::progress`]).

use std::time::Instant;

use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, InputResponses};
use rmcp::service::RequestContext;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::ask::McpAsk;
use super::logging::CallLog;
use super::{CallCtx, Shared};
use crate::calls::execute as pipeline;
use crate::calls::executed::{ExecRequest, Executed, Ran};
use crate::calls::text;
use crate::exec::Outcome;

/// Kept here for the callers that knew it here (the `mcc` CLI).
pub use crate::calls::executed::parse_shell_json;

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
    state: Option<&str>,
    log: &CallLog,
) -> CallToolResponse {
    let started = Instant::now();
    let progress = super::progress::start(ctx, &args.key);
    let key = crate::telemetry::spans::bounded(&args.key);
    log.info(format!("execute {key} started")).await;
    let params = args.params.unwrap_or_default();
    if log.debugging() {
        let names: Vec<&str> = params.keys().map(String::as_str).collect();
        // Only legacy sessions log: without a handle, the call uses the MCP session's.
        let session = if args.session.is_some() {
            "a handle"
        } else {
            "this MCP session"
        };
        log.debug(format!(
            "execute {key}: params [{}], session {session}",
            names.join(", ")
        ))
        .await;
    }
    let request = ExecRequest {
        key: &args.key,
        params,
        session: args.session.as_deref(),
        cancel: Some(ctx.ct.clone()),
    };
    let ask = McpAsk {
        ctx,
        answers,
        state,
        tickets: &shared.approvals.tickets,
    };
    // An upstream tool's questions go to this caller ([`crate::upstream::relay`]). The
    // pipeline's future is large; boxed, the frames that poll it stay small (an unoptimized
    // build would otherwise overflow a worker thread's 2 MiB stack).
    let run = crate::upstream::relay::Caller::of(ctx)
        .scope(Box::pin(pipeline::execute(shared, call, request, &ask)));
    let executed = match &progress {
        Some(progress) => progress.scope(run).await,
        None => run.await,
    };
    if let Executed::Ran(ran) = &executed {
        log.debug(format!(
            "execute {key}: exit code {}, {} bytes{}{}",
            ran.exit_code(),
            ran.text.as_ref().map_or(0, String::len),
            if ran.cached { ", cached" } else { "" },
            if ran.truncated { ", truncated" } else { "" },
        ))
        .await;
    }
    let elapsed = started.elapsed().as_millis();
    log.info(format!(
        "execute {key} finished in {elapsed} ms ({})",
        executed.label()
    ))
    .await;
    render(&args.key, executed, shared.response_max_size)
}

/// MCC's texts for each way a call ends.
fn render(
    key: &str,
    executed: Executed<rmcp::model::InputRequiredResult>,
    limit: usize,
) -> CallToolResponse {
    match executed {
        Executed::Unknown => notice(text::unknown_tool(key)),
        Executed::Unauthorized => notice(text::UNAUTHORIZED),
        Executed::Cancelled => notice(text::CANCELLED),
        Executed::NotApproved(refusal) => failure(refusal.message),
        // rmcp drops the response of a cancelled request: this is for the record only.
        Executed::Aborted => failure(text::ABORTED),
        Executed::Pending(r) => r.into(),
        Executed::Invalid(e) => notice(text::validation_error(key, &e)),
        Executed::RateLimited(refused) => failure(refused.to_string()),
        Executed::Session(f) => failure(f.message),
        Executed::NotRun(e) => failure(format!("Error calling tool 'execute': {e}")),
        Executed::BadOutput(e) => failure(text::bad_output(key, &e)),
        Executed::Ran(ran) => shape(ran, limit).into(),
    }
}

/// The reply of an upstream MCP server's tool as the upstream sent it (content blocks,
/// structured content, `isError`) when it fits the response limit; else its text, cut.
fn shape_upstream(ran: Ran, limit: usize) -> CallToolResult {
    let reply = ran.upstream.as_ref().expect("an upstream reply");
    if let Some(result) = reply.to_mcp(limit) {
        return result;
    }
    let text = ran.text.unwrap_or_default();
    if reply.is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    }
}

/// The tool result as the client sees it: a string as is, `null` as no content, an
/// object as compact JSON text plus structured content, anything else (lists, numbers,
/// the failure triple) as compact JSON text; cut at the response limit.
fn shape(ran: Ran, limit: usize) -> CallToolResult {
    if ran.upstream.is_some() {
        return shape_upstream(ran, limit);
    }
    let Some(text) = ran.text else {
        return CallToolResult::success(vec![]);
    };
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    if let Outcome::Success(Value::Object(obj)) = ran.outcome
        && !ran.truncated
    {
        result.structured_content = Some(Value::Object(obj));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text_of(r: &CallToolResult) -> Vec<String> {
        r.content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect()
    }

    fn shaped(outcome: Outcome, limit: usize) -> CallToolResult {
        shape(crate::calls::executed::shape(outcome, false, limit), limit)
    }

    #[test]
    fn shapes_results_like_the_reference() {
        let r = shaped(Outcome::Success(json!("hello\n")), 100);
        assert_eq!(text_of(&r), vec!["hello\n"]);
        assert!(r.structured_content.is_none());
        let r = shaped(Outcome::Success(json!({"a": 1, "b": [1, 2]})), 100);
        assert_eq!(text_of(&r), vec!["{\"a\":1,\"b\":[1,2]}"]);
        assert_eq!(r.structured_content, Some(json!({"a": 1, "b": [1, 2]})));
        assert!(
            shaped(Outcome::Success(Value::Null), 100)
                .content
                .is_empty()
        );
        let fail = Outcome::Failure {
            code: 3,
            stdout: "out\n".into(),
            stderr: "err\n".into(),
        };
        let r = shaped(fail, 100);
        assert_eq!(text_of(&r), vec!["[3,\"out\\n\",\"err\\n\"]"]);
        assert_eq!(r.is_error, Some(false));
    }

    #[test]
    fn large_results_are_cut() {
        let r = shaped(Outcome::Success(json!("x".repeat(1000))), 100);
        let t = &text_of(&r)[0];
        assert!(t.len() <= 100 && t.ends_with(text::TRUNCATED), "{t}");
        let big = json!({"a": "x".repeat(1000)});
        assert!(
            shaped(Outcome::Success(big), 100)
                .structured_content
                .is_none()
        );
    }
}
