//! The platform team's tenancy rules as one pure value, [`Policy`]: which namespaces this
//! operator acts on, where UserGrants count, which namespaces may run Tools in the gateway's
//! shared local runtime, which groups each namespace may publish Tools under, and where
//! and with what the gateway may create a pod Tool's Pods ([`PodScope`], [`PodAllowance`]:
//! the rule is [`Policy::refused_pod_spec`]), and how many catalog bytes each namespace's
//! Tools may take ([`Policy::tool_budget`]).
//!
//! [`crate::assemble`] is the only caller of these rules, so the reconcilers (statuses)
//! and the publisher (the catalog) agree by construction. Parsing the settings that build
//! a policy is [`crate::settings`]'s job, not this module's.

use std::collections::{BTreeMap, BTreeSet};

use mcc_catalog::context::SessionAccess;
use mcc_catalog::document::PodSpec;

/// The groups one namespace may publish Tools under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Groups {
    /// Any group (`ns=*`).
    Any,
    /// Only these.
    Only(BTreeSet<String>),
}

/// What the operator applies to every object, settled at startup (only `watched` follows
/// the cluster, when the watch scope is a namespace label selector).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// The namespaces this operator acts on; `None`: all. Objects elsewhere are not
    /// looked at: no verdict, no status, no Event, nothing in the catalog.
    pub watched: Option<BTreeSet<String>>,
    /// Namespaces whose UserGrants count.
    pub trusted: BTreeSet<String>,
    /// Namespaces whose `runtime: local` Tools may run in the shared executor (all local
    /// tools share its uid, so tenants that do not trust each other must not share it).
    pub local_runtime: BTreeSet<String>,
    /// Namespace → the groups it may publish Tools under; `None`: any namespace may use
    /// any group (the single-tenant default). A namespace not listed may use none.
    pub groups: Option<BTreeMap<String, Groups>>,
    /// Where the gateway may create Pods for `runtime: pod` Tools (its RBAC scope).
    pub pod_namespaces: PodScope,
    /// Namespace (or `*`: every namespace without its own entry) → what its pod Tools may
    /// ask for beyond the defaults. A namespace's own entry replaces `*`'s, it does not
    /// add to it.
    pub pod_policy: BTreeMap<String, PodAllowance>,
    /// Namespace (or `*`: every namespace without its own entry) → the bytes its Tools
    /// may take in the catalog ([`Policy::tool_budget`]); no entry: no budget.
    pub tool_bytes: BTreeMap<String, u64>,
    /// Namespaces outside the trusted ones whose Tools may ask for every session
    /// variable (`sessionKeys: ["*"]`); see [`Policy::session_access`].
    pub session_all: BTreeSet<String>,
    /// Where `MCPServer`s may be declared (and so where the operator and the gateway read
    /// their header Secrets); see [`Policy::refused_upstream`].
    pub upstream_namespaces: PodScope,
    /// The egress allow-list of upstream URLs ([`mcc_catalog::upstream::url_allowed`]);
    /// empty: no upstream is allowed.
    pub upstream_urls: Vec<String>,
    /// Audiences of projected ServiceAccount tokens an MCPServer may ask for (checked at
    /// startup: never the API server's or the gateway's own).
    pub upstream_token_audiences: Vec<String>,
    /// Namespaces besides the trusted ones whose MCPServers may send every caller's
    /// identity to their upstream (`sessionContext.identity`); see
    /// [`Policy::may_send_identity`].
    pub upstream_identity: BTreeSet<String>,
    /// Namespaces whose every Tool and upstream tool is published with approval
    /// required ([`Policy::requires_approval`]).
    pub approval_namespaces: BTreeSet<String>,
}

/// Why an `MCPServer` is not discovered at all (the operator never connects to it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamRefusal {
    /// Its namespace may not declare upstreams.
    Namespace,
    /// Its URL is not on the egress allow-list.
    Url,
    /// It asks for a ServiceAccount token of an audience the platform team did not
    /// approve.
    TokenAudience(String),
}

/// The namespaces where the gateway may create Pods.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PodScope {
    /// The pod runtime is off: no namespace.
    #[default]
    Off,
    /// Every namespace (`*`).
    All,
    /// Only these.
    Only(BTreeSet<String>),
}

/// What one namespace's pod Tools may ask for beyond what is always allowed: the default
/// runtime image (no `image`), the `default` ServiceAccount, no node selector, no
/// tolerations and no ServiceAccount token. Read from JSON (`MCC_POD_POLICY`).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct PodAllowance {
    /// Image reference prefixes (`*`: any image). A prefix ending with `/`, `:` or `@`
    /// matches any reference that starts with it; any other prefix matches only at a
    /// boundary: the reference itself, a path below it (`/`), or a tag or digest of it,
    /// never a longer name (`team-a` does not match `team-ab/x`) or another port.
    pub images: Vec<String>,
    /// ServiceAccount names besides `default` (`*`: any).
    pub service_accounts: BTreeSet<String>,
    /// Node label key → the values allowed for it (`*` among them: any value).
    pub node_selector: BTreeMap<String, BTreeSet<String>>,
    /// Toleration keys allowed; `""` (a toleration without a key, which tolerates every
    /// taint) only when listed.
    pub tolerations: BTreeSet<String>,
    /// Whether a Tool may have its ServiceAccount's token mounted.
    pub automount_service_account_token: bool,
    /// Resource name → the most a pod Tool may request or limit it to (a quantity:
    /// `{"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"}`). A resource not listed is
    /// refused. Empty: [`DEFAULT_MAX_RESOURCES`].
    pub resources: BTreeMap<String, String>,
}

/// What a pod Tool may request or limit without a `resources` allowance: one CPU, 1 GiB
/// of memory and of ephemeral storage; no other resource (GPUs and the like must be
/// allowed by name).
pub const DEFAULT_MAX_RESOURCES: [(&str, &str); 3] = [
    ("cpu", "1"),
    ("memory", "1Gi"),
    ("ephemeral-storage", "1Gi"),
];

impl Policy {
    /// A single-tenant policy: every namespace watched, any group anywhere, and `trusted`
    /// both trusted for UserGrants and allowed the local runtime.
    pub fn single_tenant<'a>(trusted: impl IntoIterator<Item = &'a str>) -> Self {
        let trusted: BTreeSet<String> = trusted.into_iter().map(str::to_string).collect();
        Self {
            watched: None,
            local_runtime: trusted.clone(),
            trusted,
            groups: None,
            pod_namespaces: PodScope::Off,
            pod_policy: BTreeMap::new(),
            tool_bytes: BTreeMap::new(),
            session_all: BTreeSet::new(),
            upstream_namespaces: PodScope::Off,
            upstream_urls: Vec::new(),
            upstream_token_audiences: Vec::new(),
            upstream_identity: BTreeSet::new(),
            approval_namespaces: BTreeSet::new(),
        }
    }

    /// Whether the platform team requires approval of every call of the tools `namespace`
    /// publishes (stamped as `approval_required`; a Tool cannot opt out). The gateway
    /// decides each call with [`mcc_catalog::approval::required`].
    pub fn requires_approval(&self, namespace: &str) -> bool {
        self.approval_namespaces.contains(namespace)
    }

    /// Whether an `MCPServer` of `namespace` with `url` may be connected to: its
    /// namespace may declare upstreams and the URL is on the egress allow-list. Checked
    /// before any connection (the operator must not be made to reach arbitrary hosts) and
    /// again when the catalog is assembled.
    pub fn refused_upstream(&self, namespace: &str, url: &str) -> Option<UpstreamRefusal> {
        let namespace_ok = match &self.upstream_namespaces {
            PodScope::Off => false,
            PodScope::All => true,
            PodScope::Only(set) => set.contains(namespace),
        };
        if !namespace_ok {
            Some(UpstreamRefusal::Namespace)
        } else if !mcc_catalog::upstream::url_allowed(&self.upstream_urls, url) {
            Some(UpstreamRefusal::Url)
        } else {
            None
        }
    }

    /// Whether an MCPServer may ask for a projected token of `audience`.
    pub fn refused_token_audience(&self, audience: &str) -> Option<UpstreamRefusal> {
        (!self.upstream_token_audiences.iter().any(|a| a == audience))
            .then(|| UpstreamRefusal::TokenAudience(audience.to_string()))
    }

    /// Whether an MCPServer of `namespace` may send its upstream the caller's username
    /// and groups with every call (`sessionContext.identity`): in the trusted namespaces
    /// (whose authors may grant identities anyway) and where the platform team allows it
    /// (`upstream_identity`). A tenant's upstream is a standing server outside the
    /// platform's runtime that would learn who uses it, call by call; session variables,
    /// which the caller sets, follow the Tools' rule instead (those it names).
    pub fn may_send_identity(&self, namespace: &str) -> bool {
        self.trusted.contains(namespace) || self.upstream_identity.contains(namespace)
    }

    /// Whether this operator acts on objects of `namespace` at all.
    pub fn watches(&self, namespace: &str) -> bool {
        self.watched.as_ref().is_none_or(|w| w.contains(namespace))
    }

    /// Whether UserGrants of `namespace` count.
    pub fn trusts(&self, namespace: &str) -> bool {
        self.trusted.contains(namespace)
    }

    /// The session variables a Tool of `namespace` receives, from what it `declared`
    /// ([`SessionAccess::All`] for no declaration or `["*"]`): a trusted namespace's Tool
    /// keeps MCC's rule (all, unless it declares fewer); another namespace's gets what it
    /// lists, nothing when it lists nothing, and all only where the platform team allows
    /// it (`session_all`). `None`: it asked for all and may not.
    pub fn session_access(
        &self,
        namespace: &str,
        declared: Option<&[String]>,
        parsed: &SessionAccess,
    ) -> Option<SessionAccess> {
        if self.trusted.contains(namespace) {
            return Some(parsed.clone());
        }
        match declared {
            None => Some(SessionAccess::Keys(Vec::new())),
            Some(_) if parsed.is_all() => self
                .session_all
                .contains(namespace)
                .then_some(SessionAccess::All),
            Some(_) => Some(parsed.clone()),
        }
    }

    /// Whether `runtime: local` Tools of `namespace` may run in the shared executor.
    pub fn may_run_locally(&self, namespace: &str) -> bool {
        self.local_runtime.contains(namespace)
    }

    /// The first group of a Tool that `namespace` may not publish under, or `None` when
    /// all are allowed. A Tool without groups is open to everyone, as `public` is, so it
    /// needs `public`: the refusal is then `Some(GroupRefusal { group: None })`.
    pub fn refused_group(&self, namespace: &str, groups: &[String]) -> Option<GroupRefusal> {
        let allowed = self.groups.as_ref()?.get(namespace);
        let allows = |g: &str| match allowed {
            None => false,
            Some(Groups::Any) => true,
            Some(Groups::Only(set)) => set.contains(g),
        };
        if groups.is_empty() {
            return (!allows("public")).then_some(GroupRefusal { group: None });
        }
        groups.iter().find(|g| !allows(g)).map(|g| GroupRefusal {
            group: Some(g.clone()),
        })
    }
}

impl Policy {
    /// The catalog bytes `namespace`'s Tools may take together, with the entry that sets
    /// it (the namespace's own, else `*`'s); `None`: no budget. The rule that applies it
    /// is [`crate::assemble::tools`]' (the newest Tools over it are left out).
    pub fn tool_budget(&self, namespace: &str) -> Option<(&str, u64)> {
        self.tool_bytes
            .get_key_value(namespace)
            .or_else(|| self.tool_bytes.get_key_value("*"))
            .map(|(k, v)| (k.as_str(), *v))
    }
}

impl Policy {
    /// Whether the gateway may create Pods in `namespace` (so its pod Tools may run).
    pub fn may_run_pods(&self, namespace: &str) -> bool {
        match &self.pod_namespaces {
            PodScope::Off => false,
            PodScope::All => true,
            PodScope::Only(set) => set.contains(namespace),
        }
    }

    /// The pod policy entry that applies to `namespace`: its own, else `*`'s; with its
    /// name. `None`: only the defaults are allowed.
    pub fn pod_allowance(&self, namespace: &str) -> Option<(&str, &PodAllowance)> {
        self.pod_policy
            .get_key_value(namespace)
            .or_else(|| self.pod_policy.get_key_value("*"))
            .map(|(k, v)| (k.as_str(), v))
    }

    /// The first field of a pod Tool's `pod` that `namespace` may not use (fields in the
    /// order image, serviceAccountName, automountServiceAccountToken, nodeSelector,
    /// tolerations), or `None` when all are allowed. The one definition of the "no
    /// confused deputy" rule: the gateway creates Pods the Tool's author could not, so a
    /// Tool gets only what the platform team allowed its namespace.
    pub fn refused_pod_spec(&self, namespace: &str, pod: &PodSpec) -> Option<PodRefusal> {
        let entry = self.pod_allowance(namespace);
        let none = PodAllowance::default();
        let allow = entry.map_or(&none, |(_, a)| a);
        let refuse = |field: String, value: String, allowed: Vec<String>| PodRefusal {
            field,
            value,
            entry: entry.map(|(name, _)| name.to_string()),
            allowed,
        };
        if let Some(image) = &pod.image
            && !allow.images.iter().any(|p| image_matches(p, image))
        {
            return Some(refuse(
                "runtime.pod.image".into(),
                image.clone(),
                allow.images.clone(),
            ));
        }
        if let Some(sa) = &pod.service_account_name
            && sa != "default"
            && !any_or(&allow.service_accounts, sa)
        {
            return Some(refuse(
                "runtime.pod.serviceAccountName".into(),
                sa.clone(),
                allow.service_accounts.iter().cloned().collect(),
            ));
        }
        if pod.automount_service_account_token == Some(true)
            && !allow.automount_service_account_token
        {
            return Some(refuse(
                "runtime.pod.automountServiceAccountToken".into(),
                "true".into(),
                vec![],
            ));
        }
        for (key, value) in &pod.node_selector {
            let values = allow.node_selector.get(key);
            if !values.is_some_and(|vs| any_or(vs, value)) {
                return Some(refuse(
                    format!("runtime.pod.nodeSelector.{key}"),
                    value.clone(),
                    values
                        .map(|vs| vs.iter().cloned().collect())
                        .unwrap_or_default(),
                ));
            }
        }
        if let Some(refusal) = refused_resources(allow, pod.resources.as_ref()) {
            return Some(refuse(refusal.0, refusal.1, refusal.2));
        }
        for (i, toleration) in pod.tolerations.iter().enumerate() {
            // No key (or an empty one) with `Exists` tolerates every taint.
            let key = toleration
                .get("key")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default();
            if !allow.tolerations.contains(key) {
                return Some(refuse(
                    format!("runtime.pod.tolerations[{i}].key"),
                    key.to_string(),
                    allow.tolerations.iter().cloned().collect(),
                ));
            }
        }
        None
    }
}

/// The first resource request or limit of `resources` (a `ResourceRequirements` as JSON)
/// over what `allow` admits: (field, value, what is allowed).
fn refused_resources(
    allow: &PodAllowance,
    resources: Option<&serde_json::Value>,
) -> Option<(String, String, Vec<String>)> {
    let resources = resources?;
    let max: BTreeMap<&str, &str> = if allow.resources.is_empty() {
        DEFAULT_MAX_RESOURCES.into_iter().collect()
    } else {
        allow
            .resources
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    };
    let allowed = || max.iter().map(|(k, v)| format!("{k} <= {v}")).collect();
    if resources
        .get("claims")
        .and_then(serde_json::Value::as_array)
        .is_some_and(|c| !c.is_empty())
    {
        return Some((
            "runtime.pod.resources.claims".into(),
            "claims".into(),
            vec![],
        ));
    }
    for part in ["requests", "limits"] {
        let Some(asked) = resources.get(part).and_then(serde_json::Value::as_object) else {
            continue;
        };
        for (name, quantity) in asked {
            let field = format!("runtime.pod.resources.{part}.{name}");
            let value = match quantity {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let within = max.get(name.as_str()).is_some_and(|limit| {
                match (
                    crate::quantity::parse_json(quantity),
                    crate::quantity::parse(limit),
                ) {
                    (Some(asked), Some(limit)) => asked <= limit,
                    _ => false,
                }
            });
            if !within {
                return Some((field, value, allowed()));
            }
        }
    }
    None
}

/// `set` holds `value` or `*`.
fn any_or(set: &BTreeSet<String>, value: &str) -> bool {
    set.contains(value) || set.contains("*")
}

/// Whether the image reference `image` is allowed by the prefix `prefix` (see
/// [`PodAllowance::images`]).
pub fn image_matches(prefix: &str, image: &str) -> bool {
    if prefix == "*" {
        return true;
    }
    let Some(rest) = image.strip_prefix(prefix) else {
        return false;
    };
    prefix.ends_with(['/', ':', '@'])
        || rest.is_empty()
        || rest.starts_with(['/', '@'])
        // A tag (no `/` can follow), not a registry port (`host:5000/...`).
        || (rest.starts_with(':') && !rest.contains('/'))
}

/// A field of a pod Tool that its namespace may not use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRefusal {
    /// The spec field, e.g. `runtime.pod.image` or `runtime.pod.nodeSelector.pool`.
    pub field: String,
    /// The value asked for.
    pub value: String,
    /// The pod policy entry that applied (the namespace or `*`); `None`: no entry, only
    /// the defaults.
    pub entry: Option<String>,
    /// What that entry allows for this field.
    pub allowed: Vec<String>,
}

/// A group a namespace may not publish under; `group: None` means the Tool declares no
/// groups (open to everyone) and the namespace is not allowed `public`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRefusal {
    pub group: Option<String>,
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
