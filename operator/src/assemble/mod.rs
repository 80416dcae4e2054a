//! From every `Tool` and `UserGrant` the operator sees, and the platform team's
//! [`Policy`], to one catalog document and one verdict per object. Pure: no I/O, so the
//! reconcilers (which write each object's status) and the publisher (which writes the
//! document) agree by construction. Every inclusion or exclusion is decided here, once:
//!
//! - [`tools`]: a Tool is served when it is valid, its namespace may publish under its
//!   groups and may use its runtime (the local runtime; or the pod runtime, with only
//!   the pod settings allowed there), it fits its namespace's budget of catalog bytes
//!   (the oldest Tools first), and its namespace owns its key (see there for what "owns"
//!   means);
//! - [`upstreams`]: an MCPServer's tools are served when its namespace may declare
//!   upstreams at its URL, it is valid, allowed its groups, discovered, and its tools fit
//!   the namespace's budget (after the Tools, which come first for keys and budget);
//! - [`grants`]: a UserGrant counts only in a trusted namespace; an API key whose prefix an
//!   older grant's key already has is left out.
//!
//! Tools (and upstream tools) of the namespaces in [`Policy::approval_namespaces`] are
//! published with `approval_required` (see `mcc_catalog::approval`).
//!
//! Objects outside the watched namespaces get no verdict at all: the operator does not
//! act on them (another install may).

use std::collections::BTreeMap;
use std::sync::Arc;

use mcc_catalog::crd::{Tool, UserGrant};
use mcc_catalog::document::CatalogDocument;

use crate::convert::Invalid;
use crate::policy::{PodRefusal, Policy};

pub mod grants;
pub mod tools;
pub mod upstreams;

pub use upstreams::{ServerVerdict, Servers};

#[cfg(test)]
mod approval_tests;
#[cfg(test)]
mod budget_tests;
#[cfg(test)]
mod pod_tests;
#[cfg(test)]
mod session_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod upstream_tests;

/// `namespace/name` of an object.
pub fn object_key(ns: Option<&str>, name: Option<&str>) -> String {
    format!("{}/{}", ns.unwrap_or_default(), name.unwrap_or_default())
}

/// The reason of every Tool's `Ready=False` while the catalog cannot be published
/// (assembly keeps such Tools' last published state).
pub const CATALOG_NOT_PUBLISHED: &str = "CatalogNotPublished";

/// What the operator concludes about one object.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// In the catalog. `introspect`: an fn tool the gateway introspects on load;
    /// `renamed`: it sets no name, so introspection also names it (and its key may change).
    Ready { introspect: bool, renamed: bool },
    /// Excluded: a field breaks a rule.
    Invalid(Invalid),
    /// Excluded: an older Tool of the same namespace serves the same key.
    Duplicate { winner: String },
    /// Excluded: the key belongs to another namespace; `owner` is the Tool serving it.
    KeyOwnedByOtherNamespace { owner: String },
    /// Excluded: the namespace may not publish under this group (`None`: the Tool has no
    /// groups, so it is open to everyone, and the namespace may not use `public`).
    GroupNotAllowed {
        namespace: String,
        group: Option<String>,
    },
    /// Excluded: a Tool outside the trusted namespaces asks for every session variable
    /// (`sessionKeys: ["*"]`) where the platform team did not allow it.
    SessionKeysNotAllowed { namespace: String },
    /// Excluded: a `runtime: local` Tool of a namespace not allowed the shared executor.
    LocalRuntimeNotAllowed { namespace: String },
    /// Excluded: a `runtime: pod` Tool of a namespace where the gateway may not create
    /// Pods (`off`: the pod runtime is off everywhere).
    PodRuntimeNotAllowed { namespace: String, off: bool },
    /// Excluded: a `runtime: pod` Tool asks for something its namespace is not allowed
    /// (an image, ServiceAccount, token, node selector or toleration).
    PodSpecNotAllowed {
        namespace: String,
        refusal: Box<PodRefusal>,
    },
    /// Excluded: the namespace's Tools take more catalog bytes than its budget (`total`
    /// over `budget`, set by the policy entry `entry`), and this Tool (`size` bytes) is
    /// among its newest, which are left out until the rest fits.
    NamespaceBudgetExceeded {
        namespace: String,
        entry: String,
        budget: u64,
        total: u64,
        size: u64,
    },
    /// Excluded (an MCPServer): its namespace may not declare upstreams, or its URL is
    /// not on the egress allow-list. The operator does not connect to it.
    UpstreamNotAllowed {
        namespace: String,
        refusal: crate::policy::UpstreamRefusal,
    },
    /// Excluded (an MCPServer): it would send every caller's identity to its upstream
    /// (`sessionContext.identity`) where the platform team did not allow it.
    IdentityNotAllowed { namespace: String },
    /// Excluded (an MCPServer): no discovery of its current URL has succeeded yet
    /// (`error`: why the last attempt failed; `None`: none ended yet).
    NotDiscovered { error: Option<String> },
    /// A UserGrant outside the trusted namespaces: contributes nothing.
    UntrustedNamespace { namespace: String },
    /// A UserGrant served without its API key: the older grant `holder` has a key with
    /// the same prefix.
    DuplicateApiKeyPrefix { prefix: String, holder: String },
}

/// A tool's verdict with the key and kind it would have.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolVerdict {
    pub key: Option<String>,
    pub kind: Option<&'static str>,
    pub verdict: Verdict,
}

/// The catalog and the verdict of every watched object.
#[derive(Debug, Clone, Default)]
pub struct Assembly {
    pub document: CatalogDocument,
    /// By `namespace/name`.
    pub tools: BTreeMap<String, ToolVerdict>,
    /// By `namespace/name`.
    pub grants: BTreeMap<String, Verdict>,
    /// MCPServers, by `namespace/name`.
    pub servers: BTreeMap<String, ServerVerdict>,
}

/// Builds the catalog from all tools and grants under `policy` (no upstreams).
pub fn assemble(tools: &[Arc<Tool>], grants: &[Arc<UserGrant>], policy: &Policy) -> Assembly {
    let none = BTreeMap::new();
    let servers = Servers {
        resources: &[],
        discoveries: &none,
    };
    assemble_all(tools, grants, servers, policy)
}

/// Builds the catalog from all tools, grants and upstreams under `policy`. Tools first:
/// a Tool's verdict never depends on an MCPServer.
pub fn assemble_all(
    tools: &[Arc<Tool>],
    grants: &[Arc<UserGrant>],
    servers: Servers<'_>,
    policy: &Policy,
) -> Assembly {
    let mut out = Assembly::default();
    tools::assemble(&mut out, tools, policy);
    upstreams::assemble(&mut out, servers, policy);
    grants::assemble(&mut out, grants, policy);
    out.document.normalize();
    out
}

/// Orders objects oldest first, then by `namespace/name`.
fn precedence<K: kube::Resource>(obj: &K) -> (Option<k8s_openapi::jiff::Timestamp>, String) {
    let meta = obj.meta();
    (
        meta.creation_timestamp.as_ref().map(|t| t.0),
        object_key(meta.namespace.as_deref(), meta.name.as_deref()),
    )
}

/// The watched objects, oldest first, each with its `namespace/name` and namespace.
fn watched<'a, K: kube::Resource>(
    objs: &'a [Arc<K>],
    policy: &Policy,
) -> Vec<(String, String, &'a Arc<K>)> {
    let mut v: Vec<&Arc<K>> = objs
        .iter()
        .filter(|o| policy.watches(o.meta().namespace.as_deref().unwrap_or_default()))
        .collect();
    // Objects without a creation time (never from the API server) sort last.
    v.sort_by_key(|o| {
        let (t, k) = precedence(o.as_ref());
        (t.is_none(), t, k)
    });
    v.into_iter()
        .map(|o| {
            let meta = o.meta();
            (
                object_key(meta.namespace.as_deref(), meta.name.as_deref()),
                meta.namespace.clone().unwrap_or_default(),
                o,
            )
        })
        .collect()
}
