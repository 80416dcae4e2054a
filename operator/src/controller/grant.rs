//! The `UserGrant` reconciler: validates the grant, issues, rotates or revokes its API key
//! ([`crate::apikey`]), writes its status, raises a Warning Event when it turns invalid,
//! and wakes the publisher.

use std::sync::Arc;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::controller::Action;
use mcc_catalog::crd::{UserGrant, UserGrantStatus};

use super::{Context, RESYNC, RETRY};
use crate::apikey;
use crate::assemble::{Verdict, assemble, object_key};
use crate::status::{apply_status, ready_condition, ready_reason, ready_state};
use crate::{Error, Result};

/// Reconciles one UserGrant.
pub async fn reconcile(grant: Arc<UserGrant>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile("usergrant");
    let id = object_key(
        grant.metadata.namespace.as_deref(),
        grant.metadata.name.as_deref(),
    );
    let verdict = assemble(&[], std::slice::from_ref(&grant))
        .grants
        .remove(&id)
        .unwrap_or(Verdict::Ready {
            introspect: false,
            renamed: false,
        });
    let wants_key = grant.spec.api_key.as_ref().is_some_and(|k| k.enabled);
    let previous = grant.status.clone().unwrap_or_default();
    let mut requeue = RESYNC;
    // A key that cannot be issued (e.g. a foreign Secret in the way) is the user's to fix:
    // it shows in the status and an Event; the grant itself is still served.
    let mut key_problem = None;
    let api_key = if wants_key && matches!(verdict, Verdict::Ready { .. }) {
        match apikey::ensure(&grant, &ctx.client, k8s_openapi::jiff::Timestamp::now()).await {
            Ok((issued, left)) => {
                if let Some(left) = left {
                    requeue = requeue.min(left + Duration::from_secs(1));
                }
                Some(issued)
            }
            Err(Error::ApiKey { message, .. }) => {
                key_problem = Some(format!("served without an API key: {message}"));
                requeue = RETRY;
                None
            }
            Err(e) => return Err(e),
        }
    } else {
        if let Some(old) = &previous.api_key {
            apikey::revoke(&grant, &ctx.client, &old.secret_name).await?;
        }
        None
    };
    let (ready, reason, message) = match key_problem {
        Some(problem) => (false, "ApiKeyNotIssued", problem),
        None => ready_reason(&verdict),
    };
    let status = UserGrantStatus {
        conditions: vec![ready_condition(
            ready,
            reason,
            message,
            grant.metadata.generation,
            &previous.conditions,
        )],
        observed_generation: grant.metadata.generation,
        api_key,
    };
    if status != previous {
        let ns = grant.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<UserGrant> = Api::namespaced(ctx.client.clone(), ns);
        apply_status(grant.as_ref(), &api, &status).await?;
    }
    let now = ready_state(&status.conditions);
    if now != ready_state(&previous.conditions)
        && let Some(("False", reason, message)) = now
    {
        ctx.warn(grant.as_ref(), reason, message).await;
    }
    ctx.publish.notify_one();
    Ok(Action::requeue(requeue))
}

/// Logs and counts a failure, and retries later.
pub fn error_policy(grant: Arc<UserGrant>, error: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(grant = %object_key(grant.metadata.namespace.as_deref(), grant.metadata.name.as_deref()), %error, "reconcile failed");
    ctx.metrics.error("usergrant", error);
    Action::requeue(RETRY)
}
