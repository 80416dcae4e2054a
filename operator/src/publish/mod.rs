//! Publishing the catalog: the ConfigMap `mcc-catalog` (by default, in the operator's
//! namespace) holding the [`mcc_catalog::document`] of every ready tool and every user, or,
//! when the compressed document does not fit one object, the index of the shard
//! ConfigMaps that hold it ([`writer`]: the write order that keeps the swap atomic).
//!
//! The publisher wakes when a reconcile says something changed (and on a resync tick, so
//! deletes are noticed: a deleted object leaves the watch cache without a reconcile),
//! waits a short debounce so a burst of changes makes one write, assembles the document
//! from the watch caches, and writes it by server-side apply only when its content hash
//! differs from the last one written (read back from the ConfigMap at start). A document
//! too large even for every shard is written with its users, grants and keys but the
//! tools of the last catalog written ([`CatalogPublisher::publish_or_hold`]), so
//! revocations still land; why is logged, shown on every Tool's status and in the metric
//! `mcc_operator_catalog_tools_held`. The per-namespace budgets keep this from happening
//! when the platform team sets them (see [`crate::assemble::tools`]). When an object's status
//! no longer matches the assembly (another object changed its verdict), the publisher asks
//! for a reconcile of every object of that kind.

mod writer;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc;
use mcc_catalog::document::DocumentError;

use crate::assemble::{Assembly, Servers, assemble_all, object_key};
use crate::controller::Context;
use crate::controller::tool::expected_ready;
use crate::status::{API_KEY_NOT_ISSUED, ready_reason, ready_state};
use crate::{Error, Result};

pub use writer::{CatalogPublisher, Published, SHARD_OF_LABEL};

#[cfg(test)]
mod hold_tests;
#[cfg(test)]
mod writer_tests;

/// Where and how often to publish.
#[derive(Debug, Clone)]
pub struct PublishSettings {
    pub namespace: String,
    pub name: String,
    /// Wait this long after a wake-up before assembling, to coalesce bursts.
    pub debounce: Duration,
    /// Assemble at least this often (notices deletes).
    pub resync: Duration,
}

/// Whether some Tool's status disagrees with the assembly (then every Tool is
/// reconciled again: a delete or a new object can change another object's verdict).
pub fn statuses_disagree(
    assembly: &Assembly,
    tools: &[Arc<mcc_catalog::crd::Tool>],
    catalog_error: Option<&str>,
) -> bool {
    tools.iter().any(|t| {
        let id = object_key(t.metadata.namespace.as_deref(), t.metadata.name.as_deref());
        let Some(verdict) = assembly.tools.get(&id) else {
            return false;
        };
        let (ready, reason, message) = expected_ready(verdict, catalog_error);
        let conditions = t
            .status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or(&[]);
        let want = (
            if ready { "True" } else { "False" },
            reason,
            message.as_str(),
        );
        ready_state(conditions) != Some(want)
    })
}

/// Whether some UserGrant's status disagrees with the assembly (a key prefix freed by a
/// deleted grant, a namespace entering the scope). A key that could not be issued is the
/// grant reconciler's own finding, retried on its own schedule, not a disagreement.
pub fn grant_statuses_disagree(
    assembly: &Assembly,
    grants: &[Arc<mcc_catalog::crd::UserGrant>],
) -> bool {
    grants.iter().any(|g| {
        let id = object_key(g.metadata.namespace.as_deref(), g.metadata.name.as_deref());
        let Some(verdict) = assembly.grants.get(&id) else {
            return false;
        };
        let (ready, reason, message) = ready_reason(verdict);
        let conditions = g
            .status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or(&[]);
        match ready_state(conditions) {
            Some((_, API_KEY_NOT_ISSUED, _)) => false,
            now => {
                now != Some((
                    if ready { "True" } else { "False" },
                    reason,
                    message.as_str(),
                ))
            }
        }
    })
}

/// How many Tools and UserGrants the assembly leaves not Ready, by kind and reason.
pub fn not_ready(assembly: &Assembly) -> BTreeMap<(&'static str, &'static str), i64> {
    let tools = assembly.tools.values().map(|v| ("tool", &v.verdict));
    let grants = assembly.grants.values().map(|v| ("usergrant", v));
    let mut counts = BTreeMap::new();
    for (kind, verdict) in tools.chain(grants) {
        let (ready, reason, _) = ready_reason(verdict);
        if !ready {
            *counts.entry((kind, reason)).or_insert(0) += 1;
        }
    }
    counts
}

/// MCPServers by state (`Published`, `Unreachable`, or why not served) and the tools
/// each published MCPServer contributes, for the metrics.
pub fn server_counts(
    assembly: &Assembly,
    discoveries: &BTreeMap<String, crate::upstream::Discovery>,
) -> (BTreeMap<&'static str, i64>, BTreeMap<String, i64>) {
    let mut states = BTreeMap::new();
    let mut tools = BTreeMap::new();
    for (id, v) in &assembly.servers {
        let state = match &v.verdict {
            crate::assemble::Verdict::Ready { .. } => {
                tools.insert(id.clone(), v.tools as i64);
                if discoveries.get(id).is_some_and(|d| !d.available) {
                    "Unreachable"
                } else {
                    "Published"
                }
            }
            other => ready_reason(other).1,
        };
        *states.entry(state).or_insert(0) += 1;
    }
    (states, tools)
}

/// Asks the controllers to reconcile every object of a kind again.
#[derive(Clone)]
pub struct ReconcileAll {
    pub tools: mpsc::Sender<()>,
    pub grants: mpsc::Sender<()>,
}

impl ReconcileAll {
    /// The senders, and the receivers for `Controller::reconcile_all_on` (tools, grants).
    pub fn channels() -> (Self, mpsc::Receiver<()>, mpsc::Receiver<()>) {
        let (tools, tools_rx) = mpsc::channel(1);
        let (grants, grants_rx) = mpsc::channel(1);
        (Self { tools, grants }, tools_rx, grants_rx)
    }

    /// Every Tool. (A full channel means a reconcile-all is already pending.)
    pub fn tools(&mut self) {
        let _ = self.tools.try_send(());
    }

    /// Every UserGrant.
    pub fn grants(&mut self) {
        let _ = self.grants.try_send(());
    }
}

/// One publish cycle: assemble, write if changed, record failures, and ask for a
/// reconcile of every Tool (or UserGrant) when statuses need to follow.
pub async fn cycle(
    ctx: &Context,
    publisher: &mut CatalogPublisher,
    reconcile_all: &mut ReconcileAll,
) -> Result<bool> {
    let policy = ctx.current_policy().await?;
    // Deleted MCPServers: their discoveries and standing streams go (once the watch
    // has listed them, so that nothing is dropped merely because it was not seen yet).
    if let Some(Ok(())) = futures::FutureExt::now_or_never(ctx.servers.wait_until_ready()) {
        crate::controller::mcpserver::forget_deleted(ctx);
    }
    let tools = ctx.tools.state();
    let grants = ctx.grants.state();
    let servers = ctx.servers.state();
    let discoveries = ctx
        .discoveries
        .read()
        .map(|d| d.clone())
        .unwrap_or_default();
    let assembly = assemble_all(
        &tools,
        &grants,
        Servers {
            resources: &servers,
            discoveries: &discoveries,
        },
        &policy,
    );
    ctx.metrics.set_not_ready(&not_ready(&assembly));
    let (states, server_tools) = server_counts(&assembly, &discoveries);
    ctx.metrics.set_mcpservers(&states, &server_tools);
    let result = publisher
        .publish_or_hold(&assembly.document, &ctx.metrics)
        .await;
    let failure = match &result {
        Ok(Published {
            held: Some(why), ..
        }) => Some(format!(
            "{why}; users, grants and API keys are still published, with the tools of the last catalog that fit (this Tool as it was then, if it was in it)"
        )),
        Err(Error::Document(e @ DocumentError::TooLarge { .. })) => Some(e.to_string()),
        _ => None,
    };
    if (result.is_ok() || failure.is_some())
        && let Ok(mut slot) = ctx.catalog_error.write()
    {
        *slot = failure.clone();
    }
    if statuses_disagree(&assembly, &tools, failure.as_deref()) {
        reconcile_all.tools();
    }
    if grant_statuses_disagree(&assembly, &grants) {
        reconcile_all.grants();
    }
    result.map(|p| p.written)
}

/// Runs the publisher until the stores close.
pub async fn run(
    ctx: Arc<Context>,
    mut publisher: CatalogPublisher,
    mut reconcile_all: ReconcileAll,
    settings: PublishSettings,
) -> Result<()> {
    ctx.tools
        .wait_until_ready()
        .await
        .map_err(|_| Error::StoreClosed)?;
    ctx.grants
        .wait_until_ready()
        .await
        .map_err(|_| Error::StoreClosed)?;
    // Also waits for the Namespaces of a label-selector scope: a catalog assembled before
    // they are known would leave every tool and user out.
    let policy = ctx.current_policy().await?;
    if let Some(watched) = &policy.watched {
        // (A watch list is checked at startup; a selector only now.)
        for ns in policy.trusted.iter().filter(|ns| !watched.contains(*ns)) {
            tracing::warn!(namespace = %ns, "a trusted namespace is outside the watch scope: its UserGrants are not seen");
        }
    }
    publisher.load_last().await?;
    loop {
        if let Err(e) = cycle(&ctx, &mut publisher, &mut reconcile_all).await {
            tracing::error!(error = %e, "cannot publish the catalog");
            ctx.metrics.error("publisher", &e);
        }
        tokio::select! {
            _ = ctx.publish.notified() => {}
            _ = tokio::time::sleep(settings.resync) => {}
        }
        tokio::time::sleep(settings.debounce).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{
        ApiServerVerifier, GrantBuilder, TestGrant, TestTool, assert_apply, context, not_found,
    };
    use crate::metrics::Metrics;
    use mcc_catalog::document::{
        self, CatalogDocument, FORMAT_ANNOTATION, HASH_ANNOTATION, decode,
    };
    use serde_json::{Value, json};

    const CM: &str = "/api/v1/namespaces/mcc-system/configmaps/mcc-catalog";

    fn stored_document(body: &Value) -> CatalogDocument {
        use base64::Engine as _;
        let json = body["data"][document::DATA_KEY].as_str();
        let gz = body["binaryData"][document::GZIP_KEY]
            .as_str()
            .map(|b| base64::engine::general_purpose::STANDARD.decode(b).unwrap());
        decode(json, gz.as_deref()).unwrap()
    }

    #[tokio::test]
    async fn publishes_once_per_content_and_again_on_change() {
        let (client, mut api) = ApiServerVerifier::new();
        let tools = vec![TestTool::exec("a", "ns", "greet")];
        let ctx = context(client.clone(), &tools, &[TestGrant::new("g", "alice")]);
        let mut publisher = CatalogPublisher::new(client, "mcc-system", "mcc-catalog");
        let (mut tx, _rx, _) = ReconcileAll::channels();
        let (result, seen) = tokio::join!(
            cycle(&ctx, &mut publisher, &mut tx),
            api.expect_echo("PATCH", CM)
        );
        assert!(result.unwrap());
        assert_apply(&seen);
        let doc = stored_document(&seen.body);
        assert_eq!(doc.tools[0].tool.key, "greet");
        assert_eq!(doc.users[0].user.username, "alice");
        let hash = seen.body["metadata"]["annotations"][HASH_ANNOTATION]
            .as_str()
            .unwrap();
        assert_eq!(hash, document::encode(&doc).unwrap().hash);
        assert_eq!(seen.body["metadata"]["annotations"][FORMAT_ANNOTATION], "1");
        assert!(
            !ctx.metrics
                .render()
                .contains("mcc_operator_objects_not_ready{"),
            "nothing refused yet"
        );

        // Same content: no request at all.
        let (result, ()) = tokio::join!(cycle(&ctx, &mut publisher, &mut tx), api.expect_nothing());
        assert!(!result.unwrap());

        // A changed catalog is written again.
        let mut doc2 = doc.clone();
        doc2.tools.clear();
        let (result, seen) = tokio::join!(
            publisher.publish(&doc2, &ctx.metrics),
            api.expect_echo("PATCH", CM)
        );
        assert!(result.unwrap());
        assert!(stored_document(&seen.body).tools.is_empty());
    }

    #[tokio::test]
    async fn refusals_are_counted_by_reason_and_their_statuses_asked_for() {
        let (client, mut api) = ApiServerVerifier::new();
        let tools = vec![
            TestTool::exec("ok", "ns", "ok"),
            TestTool::exec("a", "team-a", "a"),
            TestTool::exec("b", "team-a", "b"),
        ];
        let grants = [
            TestGrant::new("g", "alice"),
            TestGrant::new("g", "mallory").in_namespace("team-a"),
        ];
        let ctx = context(client.clone(), &tools, &grants);
        let mut publisher = CatalogPublisher::new(client, "mcc-system", "mcc-catalog");
        let (mut tx, mut tools_rx, mut grants_rx) = ReconcileAll::channels();
        let (result, seen) = tokio::join!(
            cycle(&ctx, &mut publisher, &mut tx),
            api.expect_echo("PATCH", CM)
        );
        result.unwrap();
        let doc = stored_document(&seen.body);
        assert_eq!(doc.tools.len(), 1);
        assert_eq!(doc.users.len(), 1);
        let text = ctx.metrics.render();
        for line in [
            "mcc_operator_objects_not_ready{kind=\"tool\",reason=\"LocalRuntimeNotAllowed\"} 2",
            "mcc_operator_objects_not_ready{kind=\"usergrant\",reason=\"UntrustedNamespace\"} 1",
        ] {
            assert!(text.contains(line), "{text}");
        }
        assert!(
            !text.contains("mallory") && !text.contains("team-a"),
            "counts only"
        );
        // None of these objects has a status yet: both kinds are reconciled again.
        assert!(tools_rx.try_recv().is_ok());
        assert!(grants_rx.try_recv().is_ok());
    }

    /// The ConfigMap a gateway reads: an allowed pod Tool with its Pod, a pod fn tool
    /// declared (no introspection); refused pod Tools absent and counted by reason.
    #[tokio::test]
    async fn pod_tools_are_published_with_their_pod_and_refusals_counted() {
        use crate::fixtures::{ToolBuilder, context_with, pod_test_policy};
        use mcc_catalog::document::Runtime;
        let (client, mut api) = ApiServerVerifier::new();
        let mut fn_tool = TestTool::exec("f", "ns", "x")
            .with_fn("tools.report:run")
            .pod(|p| p.image = Some("example/report:1".into()));
        (fn_tool.spec.params, fn_tool.spec.return_type) = (Some(vec![]), Some("str".into()));
        let tools = vec![
            TestTool::exec("ok", "ns", "ok").in_pod(),
            fn_tool,
            TestTool::exec("out", "team-b", "out").in_pod(),
            TestTool::exec("img", "ns", "img").pod(|p| p.image = Some("evil/x".into())),
        ];
        let ctx = context_with(client.clone(), &tools, &[], pod_test_policy());
        let mut publisher = CatalogPublisher::new(client, "mcc-system", "mcc-catalog");
        let (mut tx, _tools_rx, _grants_rx) = ReconcileAll::channels();
        let (result, seen) = tokio::join!(
            cycle(&ctx, &mut publisher, &mut tx),
            api.expect_echo("PATCH", CM)
        );
        result.unwrap();
        let doc = stored_document(&seen.body);
        let served: Vec<(&str, Option<&str>, bool)> = doc
            .tools
            .iter()
            .map(|t| match &t.runtime {
                Runtime::Pod(p) => (t.tool.key.as_str(), p.image.as_deref(), t.introspect),
                Runtime::Local => panic!("{} runs locally", t.tool.key),
            })
            .collect();
        assert_eq!(
            served,
            [
                ("ok", Some("example/tool:1"), false),
                ("run", Some("example/report:1"), false)
            ]
        );
        let text = ctx.metrics.render();
        for line in [
            "mcc_operator_objects_not_ready{kind=\"tool\",reason=\"PodRuntimeNotAllowed\"} 1",
            "mcc_operator_objects_not_ready{kind=\"tool\",reason=\"PodSpecNotAllowed\"} 1",
        ] {
            assert!(text.contains(line), "{text}");
        }
    }

    #[tokio::test]
    async fn a_restart_does_not_rewrite_the_same_catalog() {
        let (client, mut api) = ApiServerVerifier::new();
        let doc = CatalogDocument::default();
        let hash = document::encode(&doc).unwrap().hash;
        let metrics = Metrics::default();
        let mut publisher = CatalogPublisher::new(client, "mcc-system", "mcc-catalog");
        let existing = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "mcc-catalog", "annotations": {HASH_ANNOTATION: hash}}});
        let (r, _) = tokio::join!(publisher.load_last(), api.expect("GET", CM, 200, existing));
        r.unwrap();
        let (r, ()) = tokio::join!(publisher.publish(&doc, &metrics), api.expect_nothing());
        assert!(!r.unwrap());

        // No ConfigMap yet: the first publish writes.
        let mut publisher = CatalogPublisher::new(
            publisher.api.clone().into_client(),
            "mcc-system",
            "mcc-catalog",
        );
        let (r, _) = tokio::join!(
            publisher.load_last(),
            api.expect("GET", CM, 404, not_found("configmaps", "mcc-catalog"))
        );
        r.unwrap();
        let (r, _) = tokio::join!(
            publisher.publish(&doc, &metrics),
            api.expect_echo("PATCH", CM)
        );
        assert!(r.unwrap());
    }

    #[tokio::test]
    async fn large_catalogs_are_compressed_and_too_large_ones_reported() {
        let many: Vec<_> = (0..1500)
            .map(|i| {
                let mut t = TestTool::exec(&format!("t{i}"), "ns", &format!("tool{i}"));
                t.spec.description = Some("describes the tool at some length. ".repeat(8));
                t
            })
            .collect();
        let (client, mut api) = ApiServerVerifier::new();
        let ctx = context(client.clone(), &many, &[]);
        let mut publisher = CatalogPublisher::new(client, "mcc-system", "mcc-catalog");
        let (mut tx, mut rx, _) = ReconcileAll::channels();
        let (r, seen) = tokio::join!(
            cycle(&ctx, &mut publisher, &mut tx),
            api.expect_echo("PATCH", CM)
        );
        r.unwrap();
        assert!(seen.body["data"].is_null());
        assert_eq!(stored_document(&seen.body).tools.len(), 1500);
        // (These Tools have no status yet, so a reconcile of all was asked for.)
        assert!(rx.try_recv().is_ok());

        // Incompressible content beyond the limit (one shard here, to keep the test
        // small): the users (unchanged here) are published with the last tools, so
        // nothing is written; every Tool told why.
        publisher.max_shards = 1;
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let huge: Vec<_> = (0..1100)
            .map(|i| {
                let mut t = TestTool::exec(&format!("t{i}"), "ns", &format!("tool{i}"));
                t.spec.description = Some(
                    (0..1000)
                        .map(|_| {
                            state ^= state << 13;
                            state ^= state >> 7;
                            state ^= state << 17;
                            char::from(b'!' + (state % 90) as u8)
                        })
                        .collect(),
                );
                t
            })
            .collect();
        let ctx = context(publisher.api.clone().into_client(), &huge, &[]);
        let (r, ()) = tokio::join!(cycle(&ctx, &mut publisher, &mut tx), api.expect_nothing());
        assert!(
            !r.unwrap(),
            "the catalog in place already holds these users"
        );
        let why = ctx.catalog_error().expect("the failure is recorded");
        assert!(why.contains("too large"), "{why}");
        assert!(rx.try_recv().is_ok(), "every Tool is reconciled to show it");
    }
}
