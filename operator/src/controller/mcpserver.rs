//! The `MCPServer` reconciler: discovers the upstream when due (its spec changed, or
//! `refreshSeconds` passed since the last attempt; after a failure sooner, with backoff),
//! records what it listed, computes the object's verdict from everything
//! ([`crate::assemble::assemble_all`], as the publisher does), writes the status, wakes
//! the publisher and requeues itself for the next refresh.
//!
//! A refused MCPServer (namespace or URL not allowed, invalid, groups not allowed) is
//! never connected to. An upstream that fails keeps its last good tools, published as
//! unavailable; one upstream's discovery never waits on another's (the controller runs
//! reconciles of different objects concurrently, each bounded by the client's timeout).

use std::sync::Arc;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::controller::Action;
use mcc_catalog::crd::{MCPServer, MCPServerStatus};
use mcc_catalog::upstream::MAX_NAME;

use super::{Context, RETRY};
use crate::assemble::{ServerVerdict, Servers, Verdict, assemble_all, object_key};
use crate::listen::StreamState;
use crate::status::{apply_status, ready_condition, ready_reason, ready_state};
use crate::upstream::{Discovery, RefreshCause, discover, record};
use crate::{Error, Result};

/// The first retry after a failed discovery; doubled per failure up to the refresh.
const RETRY_MIN: Duration = Duration::from_secs(5);
/// Refusal reasons listed on the status (the count is complete).
const LISTED_REFUSALS: usize = 10;

/// The status an MCPServer should have for its verdict and discovery.
pub fn desired_status(
    server: &MCPServer,
    verdict: &ServerVerdict,
    discovery: Option<&Discovery>,
    stream: Option<StreamState>,
) -> MCPServerStatus {
    let (ready, reason, message) = match (&verdict.verdict, discovery) {
        (Verdict::Ready { .. }, Some(d)) if !d.available => (
            false,
            "Unreachable",
            format!(
                "the last discovery failed: {}; its last good {} tools stay in the catalog, marked unavailable (calls fail at once) until it answers again",
                d.last_error.as_deref().unwrap_or("unknown error"),
                verdict.tools
            ),
        ),
        (Verdict::Ready { .. }, _) => (
            true,
            "Published",
            format!("{} tools in the catalog", verdict.tools),
        ),
        (other, _) => ready_reason(other),
    };
    let previous = server
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or(&[]);
    let published = matches!(verdict.verdict, Verdict::Ready { .. });
    MCPServerStatus {
        conditions: vec![ready_condition(
            ready,
            reason,
            message,
            server.metadata.generation,
            previous,
        )],
        tools: published.then_some(verdict.tools as u32),
        refused_tools: published.then_some(verdict.refused.len() as u32),
        refused_reasons: verdict
            .refused
            .iter()
            .take(LISTED_REFUSALS)
            .map(|r| {
                format!(
                    "{}: {}",
                    r.name.chars().take(MAX_NAME).collect::<String>(),
                    r.reason
                )
            })
            .collect(),
        filtered_tools: published.then_some(verdict.filtered as u32),
        last_error: discovery.and_then(|d| d.last_error.clone()),
        last_refresh: discovery.and_then(|d| d.last_refresh.clone()),
        last_refresh_reason: discovery
            .and_then(|d| d.refreshed_by)
            .map(|c| c.as_str().to_string()),
        list_changed: stream.filter(|_| published).map(|s| s.as_str().to_string()),
        observed_generation: server.metadata.generation,
    }
}

/// Whether a discovery is due now, else how long until it is.
pub fn due(server: &MCPServer, previous: Option<&Discovery>) -> Option<Duration> {
    let refresh = Duration::from_secs(
        server
            .spec
            .refresh_seconds
            .unwrap_or(mcc_catalog::upstream::DEFAULT_REFRESH),
    );
    let p = previous?;
    if p.url != server.spec.url || p.generation != server.metadata.generation {
        return None;
    }
    let wait = if p.available {
        refresh
    } else {
        (RETRY_MIN * 2u32.saturating_pow(p.failures.saturating_sub(1).min(16))).min(refresh)
    };
    wait.checked_sub(p.attempted.elapsed())
        .filter(|left| !left.is_zero())
}

/// The verdict of `server` among everything the context holds.
fn verdict_of(
    server: &Arc<MCPServer>,
    ctx: &Context,
    policy: &crate::policy::Policy,
) -> Option<ServerVerdict> {
    let id = object_key(
        server.metadata.namespace.as_deref(),
        server.metadata.name.as_deref(),
    );
    let mut all = ctx.servers.state();
    // The store may lag the trigger by an event; use the object we were given.
    all.retain(|s| object_key(s.metadata.namespace.as_deref(), s.metadata.name.as_deref()) != id);
    all.push(server.clone());
    let discoveries = ctx
        .discoveries
        .read()
        .map(|d| d.clone())
        .unwrap_or_default();
    let tools = ctx.tools.state();
    assemble_all(
        &tools,
        &[],
        Servers {
            resources: &all,
            discoveries: &discoveries,
        },
        policy,
    )
    .servers
    .remove(&id)
}

/// Reconciles one MCPServer.
pub async fn reconcile(server: Arc<MCPServer>, ctx: Arc<Context>) -> Result<Action> {
    let _timer = ctx.metrics.reconcile("mcpserver");
    ctx.tools
        .wait_until_ready()
        .await
        .map_err(|_| Error::StoreClosed)?;
    let policy = ctx.current_policy().await?;
    let ns = server.metadata.namespace.clone().unwrap_or_default();
    if !policy.watches(&ns) {
        return Ok(Action::await_change());
    }
    let id = object_key(Some(&ns), server.metadata.name.as_deref());
    let Some(before) = verdict_of(&server, &ctx, &policy) else {
        return Ok(Action::await_change());
    };
    // Refused before any connection: not allowed, invalid, identity or groups not
    // allowed.
    let connectable = !matches!(
        before.verdict,
        Verdict::UpstreamNotAllowed { .. }
            | Verdict::Invalid(_)
            | Verdict::IdentityNotAllowed { .. }
            | Verdict::GroupNotAllowed { .. }
    );
    let previous = ctx
        .discoveries
        .read()
        .ok()
        .and_then(|d| d.get(&id).cloned());
    let mut next = None;
    if connectable {
        // The standing stream's request first (a notification means the upstream is up
        // and changed, whatever the schedule or backoff says).
        let cause = match (
            ctx.listeners.take_pending(&id),
            due(&server, previous.as_ref()),
        ) {
            (Some(asked), _) => Some(asked),
            (None, None) => Some(RefreshCause::of_due(&server, previous.as_ref())),
            (None, Some(left)) => {
                next = Some(left);
                None
            }
        };
        if let Some(cause) = cause {
            let started = std::time::Instant::now();
            let result = discover(&ctx.client, &server).await;
            ctx.metrics.refreshed(
                cause.as_str(),
                started.elapsed().as_secs_f64(),
                result.as_ref().err().map(|e| e.kind()),
            );
            if let Err(e) = &result {
                tracing::warn!(mcpserver = %id, error = %e, cause = cause.as_str(), "upstream discovery failed; keeping its last good tools");
            }
            let found = record(previous.as_ref(), &server, result, cause);
            // Listen for list_changed once the upstream answered at least once.
            if found.available {
                ctx.listeners
                    .ensure(&id, &server, &ctx.client, &ctx.metrics);
            }
            if let Ok(mut d) = ctx.discoveries.write() {
                d.insert(id.clone(), found);
            }
        }
    } else {
        ctx.listeners.stop(&id);
        if let Ok(mut d) = ctx.discoveries.write() {
            d.remove(&id);
        }
    }
    let verdict = verdict_of(&server, &ctx, &policy).unwrap_or(before);
    let discovery = ctx
        .discoveries
        .read()
        .ok()
        .and_then(|d| d.get(&id).cloned());
    let status = desired_status(
        &server,
        &verdict,
        discovery.as_ref(),
        ctx.listeners.state(&id),
    );
    let old = server.status.clone().unwrap_or_default();
    if status != old {
        let api: Api<MCPServer> = Api::namespaced(ctx.client.clone(), &ns);
        apply_status(server.as_ref(), &api, &status).await?;
    }
    let now = ready_state(&status.conditions);
    if now != ready_state(&old.conditions)
        && let Some(("False", reason, message)) = now
    {
        ctx.warn(server.as_ref(), reason, message).await;
    }
    ctx.publish.notify_one();
    let next = match next {
        Some(left) => left,
        None if !connectable => super::RESYNC,
        None => due(&server, discovery.as_ref()).unwrap_or(RETRY_MIN),
    };
    Ok(Action::requeue(next))
}

/// Logs and counts a failure, and retries later.
pub fn error_policy(server: Arc<MCPServer>, error: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(mcpserver = %object_key(server.metadata.namespace.as_deref(), server.metadata.name.as_deref()), %error, "reconcile failed");
    ctx.metrics.error("mcpserver", error);
    Action::requeue(RETRY)
}

/// Forgets the discoveries of MCPServers that are gone.
pub fn forget_deleted(ctx: &Context) {
    let live: std::collections::BTreeSet<String> = ctx
        .servers
        .state()
        .iter()
        .map(|s| object_key(s.metadata.namespace.as_deref(), s.metadata.name.as_deref()))
        .collect();
    ctx.listeners.retain(&live);
    if let Ok(mut d) = ctx.discoveries.write() {
        d.retain(|id, _| live.contains(id));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use mcc_catalog::crd::MCPServerSpec;
    use mcc_catalog::upstream::Refused;

    use super::*;

    fn server(refresh: Option<u64>) -> MCPServer {
        let mut s = MCPServer::new(
            "ev",
            MCPServerSpec {
                url: "http://mcp.internal/mcp".into(),
                refresh_seconds: refresh,
                ..Default::default()
            },
        );
        s.metadata.namespace = Some("team-a".into());
        s.metadata.generation = Some(2);
        s
    }

    fn discovery(available: bool, failures: u32) -> Discovery {
        Discovery {
            url: "http://mcp.internal/mcp".into(),
            generation: Some(2),
            listed: vec![],
            available,
            last_error: (!available).then(|| "the connection failed".into()),
            last_refresh: Some("2026-12-07T01:00:00Z".into()),
            refreshed_by: Some(RefreshCause::Schedule),
            listed_ok: true,
            attempted: Instant::now(),
            failures,
        }
    }

    fn ready(tools: usize) -> ServerVerdict {
        ServerVerdict {
            verdict: Verdict::Ready {
                introspect: false,
                renamed: false,
            },
            tools,
            filtered: 1,
            refused: vec![Refused {
                name: "bad".into(),
                reason: "its input schema's root is not \"type\": \"object\"".into(),
            }],
        }
    }

    #[test]
    fn status_says_ready_with_counts_or_unreachable_with_the_last_good_tools() {
        let s = server(None);
        let up = desired_status(
            &s,
            &ready(3),
            Some(&discovery(true, 0)),
            Some(StreamState::Listening),
        );
        assert_eq!(up.last_refresh_reason.as_deref(), Some("Schedule"));
        assert_eq!(up.list_changed.as_deref(), Some("Listening"));
        let c = &up.conditions[0];
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "Published")
        );
        assert_eq!(c.message, "3 tools in the catalog");
        assert_eq!(
            (up.tools, up.filtered_tools, up.refused_tools),
            (Some(3), Some(1), Some(1))
        );
        assert_eq!(
            up.refused_reasons,
            ["bad: its input schema's root is not \"type\": \"object\""]
        );
        assert_eq!(up.last_refresh.as_deref(), Some("2026-12-07T01:00:00Z"));
        assert_eq!(up.observed_generation, Some(2));

        let down = desired_status(&s, &ready(3), Some(&discovery(false, 1)), None);
        let c = &down.conditions[0];
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "Unreachable")
        );
        assert!(
            c.message
                .contains("last good 3 tools stay in the catalog, marked unavailable"),
            "{}",
            c.message
        );
        assert_eq!(down.last_error.as_deref(), Some("the connection failed"));
        assert_eq!(down.tools, Some(3));
    }

    #[test]
    fn discovery_is_due_on_a_new_spec_after_refresh_and_sooner_after_failures() {
        let s = server(Some(60));
        assert_eq!(due(&s, None), None, "never discovered");
        let left = due(&s, Some(&discovery(true, 0))).unwrap();
        assert!(left > Duration::from_secs(59) && left <= Duration::from_secs(60));
        let left = due(&s, Some(&discovery(false, 1))).unwrap();
        assert!(left <= RETRY_MIN, "first retry after {left:?}");
        let left = due(&s, Some(&discovery(false, 3))).unwrap();
        assert!(
            left > RETRY_MIN * 3 && left <= RETRY_MIN * 4,
            "backs off: {left:?}"
        );
        let left = due(&s, Some(&discovery(false, 30))).unwrap();
        assert!(
            left <= Duration::from_secs(60),
            "never past the refresh: {left:?}"
        );
        let mut moved = discovery(true, 0);
        moved.url = "http://mcp.internal/other".into();
        assert_eq!(
            due(&s, Some(&moved)),
            None,
            "a new URL is discovered at once"
        );
        let mut old = discovery(true, 0);
        old.generation = Some(1);
        assert_eq!(
            due(&s, Some(&old)),
            None,
            "a changed spec is discovered at once"
        );
    }
}
