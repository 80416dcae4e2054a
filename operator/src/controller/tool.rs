//! The `Tool` reconciler: computes the object's verdict from every Tool and the tenancy
//! policy (so key ownership resolves the same way everywhere), writes its status, raises a
//! Warning Event when it turns not Ready, and wakes the publisher. A Tool outside the
//! watched namespaces is left alone.

use std::sync::Arc;

use kube::api::Api;
use kube::runtime::controller::Action;
use mcc_catalog::crd::{Tool, ToolStatus};

use super::{Context, RESYNC, RETRY};
use crate::assemble::{ToolVerdict, assemble, object_key};
use crate::policy::Policy;
use crate::status::{
    CATALOG_NOT_PUBLISHED, apply_status, ready_condition, ready_reason, ready_state,
};
use crate::{Error, Result};

/// The `Ready` condition's content for a tool: its verdict, unless the catalog itself
/// could not be published.
pub fn expected_ready(
    verdict: &ToolVerdict,
    catalog_error: Option<&str>,
) -> (bool, &'static str, String) {
    match (ready_reason(&verdict.verdict), catalog_error) {
        ((true, _, _), Some(e)) => (false, CATALOG_NOT_PUBLISHED, e.to_string()),
        (r, _) => r,
    }
}

/// The status a tool should have.
pub fn desired_status(
    tool: &Tool,
    verdict: &ToolVerdict,
    catalog_error: Option<&str>,
) -> ToolStatus {
    let (ready, reason, message) = expected_ready(verdict, catalog_error);
    let previous = tool
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or(&[]);
    ToolStatus {
        key: verdict.key.clone(),
        tool_kind: verdict.kind.map(str::to_string),
        conditions: vec![ready_condition(
            ready,
            reason,
            message,
            tool.metadata.generation,
            previous,
        )],
        observed_generation: tool.metadata.generation,
    }
}

/// The verdict of `tool` among everything in the store; `None` when it is outside the
/// watched namespaces.
fn verdict_of(tool: &Arc<Tool>, ctx: &Context, policy: &Policy) -> Option<ToolVerdict> {
    let id = object_key(
        tool.metadata.namespace.as_deref(),
        tool.metadata.name.as_deref(),
    );
    let mut all = ctx.tools.state();
    // The store may lag the trigger by an event; use the object we were given.
    all.retain(|t| object_key(t.metadata.namespace.as_deref(), t.metadata.name.as_deref()) != id);
    all.push(tool.clone());
    assemble(&all, &[], policy).tools.remove(&id)
}

/// Reconciles one Tool.
pub async fn reconcile(tool: Arc<Tool>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile("tool");
    ctx.tools
        .wait_until_ready()
        .await
        .map_err(|_| Error::StoreClosed)?;
    let policy = ctx.current_policy().await?;
    let Some(verdict) = verdict_of(&tool, &ctx, &policy) else {
        // Not ours: another install (or none) reconciles this namespace.
        return Ok(Action::await_change());
    };
    let status = desired_status(&tool, &verdict, ctx.catalog_error().as_deref());
    let previous = tool.status.clone().unwrap_or_default();
    if status != previous {
        let ns = tool.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<Tool> = Api::namespaced(ctx.client.clone(), ns);
        apply_status(tool.as_ref(), &api, &status).await?;
    }
    let now = ready_state(&status.conditions);
    if now != ready_state(&previous.conditions)
        && let Some(("False", reason, message)) = now
    {
        ctx.warn(tool.as_ref(), reason, message).await;
    }
    ctx.publish.notify_one();
    Ok(Action::requeue(RESYNC))
}

/// Logs and counts a failure, and retries later.
pub fn error_policy(tool: Arc<Tool>, error: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(tool = %object_key(tool.metadata.namespace.as_deref(), tool.metadata.name.as_deref()), %error, "reconcile failed");
    ctx.metrics.error("tool", error);
    Action::requeue(RETRY)
}
