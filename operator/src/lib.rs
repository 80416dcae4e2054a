//! The MCC operator: reconciles `Tool` and `UserGrant` resources into the one catalog
//! document that gateways load.
//!
//! - [`convert`]: `Tool` resource ⇄ catalog tool (through the file loader's rules);
//! - [`manifests`]: MCC YAML files → manifests (`mcc-operator convert`);
//! - [`crdgen`]: the CRD YAML in `crds/`;
//! - [`settings`]: the tenancy flags, parsed and validated at startup, into a [`policy::Policy`]
//!   (watch scope, trusted namespaces, local-runtime namespaces, namespace → groups);
//! - [`assemble`]: all objects and the policy → the catalog document and one verdict per
//!   object (pure; every inclusion or exclusion is decided there);
//! - [`controller`]: the reconcilers of the three kinds and their shared
//!   [`controller::Context`];
//! - [`upstream`]: discovery of `MCPServer` upstreams (their tools join the catalog);
//!   [`listen`]: their standing streams (`notifications/tools/list_changed`);
//! - [`status`], [`apikey`], [`publish`], [`leader`], [`metrics`]: status writes, API-key
//!   Secrets, the catalog ConfigMap, the leader Lease, Prometheus metrics;
//! - [`runner`]: the controllers and the publisher wired together.

pub mod apikey;
pub mod assemble;
pub mod controller;
pub mod convert;
pub mod crdgen;
pub mod leader;
pub mod listen;
pub mod manifests;
pub mod metrics;
pub mod policy;
pub mod publish;
pub mod quantity;
pub mod runner;
pub mod settings;
pub mod status;
pub mod upstream;

#[cfg(test)]
pub mod fixtures;

/// Everything a reconcile or publish can fail on. Variants double as metric labels.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[source] kube::Error),
    #[error("catalog document: {0}")]
    Document(#[from] mcc_catalog::document::DocumentError),
    #[error("API key of UserGrant {grant}: {message}")]
    ApiKey { grant: String, message: String },
    #[error("the watch caches are gone (the controller is shutting down)")]
    StoreClosed,
}

impl Error {
    /// A short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Document(_) => "document",
            Error::ApiKey { .. } => "api_key",
            Error::StoreClosed => "store_closed",
        }
    }
}

/// The operator's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
