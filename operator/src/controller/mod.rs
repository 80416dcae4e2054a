//! The reconcilers of `Tool` ([`tool`]), `UserGrant` ([`grant`]) and `MCPServer`
//! ([`mcpserver`]), in the kube-rs `controller-rs` style: `reconcile(obj, ctx) -> Result<Action>` plus an
//! `error_policy`, sharing one [`Context`].

use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::Store;
use mcc_catalog::crd::{MCPServer, Tool, UserGrant};
use tokio::sync::Notify;

use crate::metrics::Metrics;
use crate::policy::Policy;
use crate::{Error, Result};

pub mod grant;
pub mod mcpserver;
pub mod tool;

#[cfg(test)]
mod pod_tests;
#[cfg(test)]
mod tests;

/// Shared handles of both reconcilers and the publisher.
pub struct Context {
    /// The Kubernetes client.
    pub client: Client,
    /// Every Tool the Tool controller's watch has seen.
    pub tools: Store<Tool>,
    /// Every UserGrant the UserGrant controller's watch has seen.
    pub grants: Store<UserGrant>,
    /// Publishes Kubernetes Events about the objects.
    pub recorder: Recorder,
    /// Reconcile counts, errors and durations.
    pub metrics: Arc<Metrics>,
    /// Wakes the publisher after a change (it debounces).
    pub publish: Arc<Notify>,
    /// Why the last catalog could not be published (e.g. too large); shown on every Tool.
    pub catalog_error: Arc<RwLock<Option<String>>>,
    /// The platform team's tenancy policy, as settled at startup.
    pub policy: Policy,
    /// With a namespace label selector as watch scope: the Namespaces it matches.
    pub namespaces: Option<Store<Namespace>>,
    /// Every MCPServer the MCPServer controller's watch has seen (empty without one).
    pub servers: Store<MCPServer>,
    /// What was discovered of each MCPServer.
    pub discoveries: crate::upstream::Discoveries,
    /// The standing streams of legacy-generation MCPServers (`list_changed`).
    pub listeners: crate::listen::Listeners,
}

/// How often an unchanged object is looked at again.
pub const RESYNC: Duration = Duration::from_secs(600);
/// Back-off after a failed reconcile.
pub const RETRY: Duration = Duration::from_secs(15);

impl Context {
    /// A context over the given stores, with a fresh Event recorder.
    pub fn new(
        client: Client,
        tools: Store<Tool>,
        grants: Store<UserGrant>,
        metrics: Arc<Metrics>,
        policy: Policy,
        namespaces: Option<Store<Namespace>>,
    ) -> Self {
        let reporter = Reporter {
            controller: "mcc-operator".into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            tools,
            grants,
            metrics,
            publish: Arc::new(Notify::new()),
            catalog_error: Arc::new(RwLock::new(None)),
            policy,
            namespaces,
            servers: kube::runtime::reflector::store().0,
            discoveries: Default::default(),
            // Without `with_listeners` nobody reads the streams' reconcile requests.
            listeners: crate::listen::Listeners::new().0,
        }
    }

    /// The same context with `listeners`, whose requests feed the MCPServer controller.
    pub fn with_listeners(mut self, listeners: crate::listen::Listeners) -> Self {
        self.listeners = listeners;
        self
    }

    /// The same context over the MCPServer controller's cache.
    pub fn with_servers(mut self, servers: Store<MCPServer>) -> Self {
        self.servers = servers;
        self
    }

    /// The policy now: with a label selector as watch scope, `watched` holds the
    /// Namespaces that match (waiting for their first list, so that nothing is judged
    /// out of scope merely because the Namespaces were not seen yet).
    pub async fn current_policy(&self) -> Result<Policy> {
        let mut policy = self.policy.clone();
        if let Some(store) = &self.namespaces {
            store
                .wait_until_ready()
                .await
                .map_err(|_| Error::StoreClosed)?;
            policy.watched = Some(
                store
                    .state()
                    .iter()
                    .filter_map(|n| n.metadata.name.clone())
                    .collect(),
            );
        }
        Ok(policy)
    }

    /// The publisher's current failure, if any.
    pub fn catalog_error(&self) -> Option<String> {
        self.catalog_error.read().ok().and_then(|e| e.clone())
    }

    /// Publishes a Warning Event about `obj` (failures are logged, never fatal).
    pub async fn warn<K: kube::Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        reason: &str,
        note: &str,
    ) {
        let event = Event {
            type_: EventType::Warning,
            reason: reason.into(),
            note: Some(note.chars().take(1000).collect()),
            action: "Validate".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &obj.object_ref(&())).await {
            tracing::warn!(error = %e, "cannot publish event");
        }
    }
}
