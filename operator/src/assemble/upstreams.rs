//! Which `MCPServer`s' tools are served, and why the others are not (pure; part of
//! [`super::assemble_all`], after the Tools, so that Tools come first for keys and
//! budget).
//!
//! An MCPServer is served when its namespace may declare upstreams and its URL is on the
//! egress allow-list ([`Policy::refused_upstream`]; `UpstreamNotAllowed`), its spec is
//! valid (`InvalidSpec`), it sends the caller's identity only where allowed
//! ([`Policy::may_send_identity`]; `IdentityNotAllowed`), its namespace may publish under
//! its groups (the same group
//! allow-list as Tools: a tenant cannot publish into `admin` or `public` through an
//! upstream; `GroupNotAllowed`), it was discovered at its current URL at least once
//! (`NotDiscovered`), and its tools fit its namespace's budget together with the
//! namespace's served Tools and older MCPServers (`NamespaceBudgetExceeded`: the whole
//! MCPServer is left out, never a part of its tools). Its listing is converted by
//! [`mcc_catalog::upstream::convert`], the rule file mode uses; a tool whose key a Tool
//! or an older MCPServer's tool already serves is left out (listed with the reason on
//! the MCPServer's status). An upstream that failed its last discovery keeps its last
//! good tools, published with `available: false` (calls fail at once as unavailable).

use std::collections::BTreeMap;
use std::sync::Arc;

use mcc_catalog::context::SessionAccess;
use mcc_catalog::crd::MCPServer;
use mcc_catalog::document::{CatalogTool, Runtime};
use mcc_catalog::upstream::{self, HeaderRef, PublishedUpstream, Refused};

use super::{Assembly, Verdict, watched};
use crate::policy::Policy;
use crate::upstream::{Discovery, spec_of};

/// The MCPServers and what was discovered of each (`namespace/name` → discovery).
#[derive(Clone, Copy)]
pub struct Servers<'a> {
    pub resources: &'a [Arc<MCPServer>],
    pub discoveries: &'a BTreeMap<String, Discovery>,
}

/// What the operator concludes about one MCPServer.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerVerdict {
    pub verdict: Verdict,
    /// Tools in the catalog.
    pub tools: usize,
    /// Left out by `include`/`exclude`.
    pub filtered: usize,
    /// Refused tools and why (conversion, or a key already served).
    pub refused: Vec<Refused>,
}

impl ServerVerdict {
    fn refused(verdict: Verdict) -> Self {
        Self {
            verdict,
            tools: 0,
            filtered: 0,
            refused: Vec::new(),
        }
    }
}

/// Adds the served upstreams' tools to `out.document` and a verdict for every watched
/// MCPServer.
pub(super) fn assemble(out: &mut Assembly, servers: Servers<'_>, policy: &Policy) {
    let mut held: BTreeMap<String, String> = out
        .document
        .tools
        .iter()
        .map(|t| {
            (
                t.tool.key.clone(),
                format!("Tool {}/{}", t.namespace, t.resource),
            )
        })
        .collect();
    let mut spent: BTreeMap<String, u64> = BTreeMap::new();
    for t in &out.document.tools {
        *spent.entry(t.namespace.clone()).or_default() += size(t);
    }
    for (id, namespace, resource) in watched(servers.resources, policy) {
        let verdict = admit(
            out,
            resource,
            &namespace,
            servers.discoveries.get(&id),
            policy,
            &mut held,
            &mut spent,
        );
        out.servers.insert(id, verdict);
    }
}

/// A catalog entry's bytes, as the budget counts them (see [`super::tools`]).
fn size(t: &CatalogTool) -> u64 {
    serde_json::to_vec(t).map_or(0, |v| v.len()) as u64
}

fn admit(
    out: &mut Assembly,
    resource: &MCPServer,
    namespace: &str,
    discovery: Option<&Discovery>,
    policy: &Policy,
    held: &mut BTreeMap<String, String>,
    spent: &mut BTreeMap<String, u64>,
) -> ServerVerdict {
    let audience = resource
        .spec
        .service_account_token
        .as_ref()
        .map(|t| t.audience.as_str());
    if let Some(refusal) = policy
        .refused_upstream(namespace, &resource.spec.url)
        .or_else(|| audience.and_then(|a| policy.refused_token_audience(a)))
    {
        return ServerVerdict::refused(Verdict::UpstreamNotAllowed {
            namespace: namespace.to_string(),
            refusal,
        });
    }
    let spec = match spec_of(resource, BTreeMap::new()) {
        Ok(s) => s,
        Err(e) => return ServerVerdict::refused(Verdict::Invalid(e)),
    };
    if spec.session_context.identity && !policy.may_send_identity(namespace) {
        return ServerVerdict::refused(Verdict::IdentityNotAllowed {
            namespace: namespace.to_string(),
        });
    }
    if let Some(refusal) = policy.refused_group(namespace, &spec.groups) {
        return ServerVerdict::refused(Verdict::GroupNotAllowed {
            namespace: namespace.to_string(),
            group: refusal.group,
        });
    }
    let Some(discovery) = discovery.filter(|d| d.url == spec.url && d.listed_ok) else {
        return ServerVerdict::refused(Verdict::NotDiscovered {
            error: discovery.and_then(|d| d.last_error.clone()),
        });
    };
    let converted = upstream::convert(&spec, &discovery.listed);
    let mut refused = converted.refused;
    let resource_name = resource.metadata.name.clone().unwrap_or_default();
    let mut entries = Vec::new();
    for mut tool in converted.tools {
        tool.approval_required |= policy.requires_approval(namespace);
        if let Some(holder) = held.get(&tool.key) {
            refused.push(Refused {
                name: tool.name.clone(),
                reason: format!("its key '{}' is already served by {holder}", tool.key),
            });
            continue;
        }
        entries.push(CatalogTool {
            tool,
            namespace: namespace.to_string(),
            resource: resource_name.clone(),
            env_from: Vec::new(),
            env_value_from: Vec::new(),
            runtime: Runtime::Local,
            introspect: false,
            name_from_callable: false,
            // The variables its sessionContext names, and no other: the gateway assembles
            // a call's context from these, and sends the upstream only what is declared.
            session: SessionAccess::Keys(spec.session_context.variables.clone()),
        });
    }
    let bytes: u64 = entries.iter().map(size).sum();
    if let Some((entry, budget)) = policy.tool_budget(namespace) {
        let used = spent.get(namespace).copied().unwrap_or(0);
        if used + bytes > budget {
            return ServerVerdict::refused(Verdict::NamespaceBudgetExceeded {
                namespace: namespace.to_string(),
                entry: entry.to_string(),
                budget,
                total: used + bytes,
                size: bytes,
            });
        }
    }
    *spent.entry(namespace.to_string()).or_default() += bytes;
    let id = format!("MCPServer {}", spec.name);
    for e in &entries {
        held.insert(e.tool.key.clone(), id.clone());
    }
    let tools = entries.len();
    out.document.tools.extend(entries);
    out.document.upstreams.push(PublishedUpstream {
        server: spec.name.clone(),
        namespace: namespace.to_string(),
        url: spec.url.clone(),
        headers: resource
            .spec
            .headers
            .iter()
            .map(|h| HeaderRef {
                name: h.name.clone(),
                secret: h.secret_key_ref.name.clone(),
                key: h.secret_key_ref.key.clone(),
            })
            .collect(),
        // Checked by `spec_of` above: never an error here.
        ca: crate::upstream::ca_ref(resource).ok().flatten(),
        token_audience: audience.map(str::to_string),
        session_context: spec.session_context.clone(),
        timeout: spec.timeout,
        max_concurrency: spec.max_concurrency,
        available: discovery.available,
        reason: discovery.last_error.clone(),
    });
    ServerVerdict {
        verdict: Verdict::Ready {
            introspect: false,
            renamed: false,
        },
        tools,
        filtered: converted.filtered,
        refused,
    }
}
