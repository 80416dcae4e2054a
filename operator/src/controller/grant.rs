//! The `UserGrant` reconciler: judges the grant (scope, trust, validity: [`crate::assemble`]),
//! issues, rotates or revokes its API key ([`crate::apikey`]) — never for a grant outside
//! the trusted namespaces — checks the key's prefix against every other grant's, writes its
//! status, raises a Warning Event when it turns not Ready, and wakes the publisher.

use std::sync::Arc;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::controller::Action;
use mcc_catalog::crd::{ApiKeyStatus, UserGrant, UserGrantStatus};

use super::{Context, RESYNC, RETRY};
use crate::apikey;
use crate::assemble::{Verdict, assemble, object_key};
use crate::policy::Policy;
use crate::status::{API_KEY_NOT_ISSUED, apply_status, ready_condition, ready_reason, ready_state};
use crate::{Error, Result};

/// Reconciles one UserGrant.
pub async fn reconcile(grant: Arc<UserGrant>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile("usergrant");
    let policy = ctx.current_policy().await?;
    let id = object_key(
        grant.metadata.namespace.as_deref(),
        grant.metadata.name.as_deref(),
    );
    // The grant on its own: in scope, trusted, valid?
    let Some(alone) = assemble(&[], std::slice::from_ref(&grant), &policy)
        .grants
        .remove(&id)
    else {
        // Not ours: another install (or none) reconciles this namespace.
        return Ok(Action::await_change());
    };
    let wants_key = grant.spec.api_key.as_ref().is_some_and(|k| k.enabled);
    let previous = grant.status.clone().unwrap_or_default();
    let mut requeue = RESYNC;
    // A key that cannot be issued (e.g. a foreign Secret in the way) is the user's to fix:
    // it shows in the status and an Event; the grant itself is still served.
    let mut key_problem = None;
    let api_key = match &alone {
        // Nothing is minted for an untrusted grant, and nothing deleted either: a key
        // issued while the namespace was trusted comes back unchanged if it is trusted
        // again, instead of a configuration slip rotating every key.
        Verdict::UntrustedNamespace { .. } => previous.api_key.clone(),
        Verdict::Ready { .. } if wants_key => {
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
        }
        _ => {
            if let Some(old) = &previous.api_key {
                apikey::revoke(&grant, &ctx.client, &old.secret_name).await?;
            }
            None
        }
    };
    let verdict = match alone {
        // Among every grant, with the key it now has: is its prefix free?
        Verdict::Ready { .. } => among_all(&grant, &id, api_key.clone(), &ctx, &policy),
        other => other,
    };
    let (ready, reason, message) = match key_problem {
        Some(problem) => (false, API_KEY_NOT_ISSUED, problem),
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

/// The verdict of `grant`, with `api_key` as its issued key, among every grant in the
/// store (the publisher assembles the same objects once the status is written).
fn among_all(
    grant: &UserGrant,
    id: &str,
    api_key: Option<ApiKeyStatus>,
    ctx: &Context,
    policy: &Policy,
) -> Verdict {
    let mut this = grant.clone();
    this.status.get_or_insert_with(Default::default).api_key = api_key;
    let mut all = ctx.grants.state();
    all.retain(|g| object_key(g.metadata.namespace.as_deref(), g.metadata.name.as_deref()) != id);
    all.push(Arc::new(this));
    assemble(&[], &all, policy)
        .grants
        .remove(id)
        .unwrap_or(Verdict::Ready {
            introspect: false,
            renamed: false,
        })
}

/// Logs and counts a failure, and retries later.
pub fn error_policy(grant: Arc<UserGrant>, error: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(grant = %object_key(grant.metadata.namespace.as_deref(), grant.metadata.name.as_deref()), %error, "reconcile failed");
    ctx.metrics.error("usergrant", error);
    Action::requeue(RETRY)
}
