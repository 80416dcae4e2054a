//! Which Tools are served, and why the others are not (pure; part of
//! [`super::assemble`]).
//!
//! A Tool is *eligible* when it is valid (`InvalidSpec` otherwise), its namespace may
//! publish under each of its groups (`GroupNotAllowed`), and its namespace may use its
//! runtime: for `runtime: local`, the gateway's shared local runtime
//! (`LocalRuntimeNotAllowed`); for `runtime: pod`, the gateway may create Pods there
//! (`PodRuntimeNotAllowed`) and the Pod asks only for what the platform team allowed the
//! namespace ([`Policy::refused_pod_spec`]; `PodSpecNotAllowed`), it asks for every
//! session variable only where allowed ([`Policy::session_access`];
//! `SessionKeysNotAllowed`), and it fits its
//! namespace's budget ([`Policy::tool_budget`]; `NamespaceBudgetExceeded`): a namespace's
//! admitted Tools count their bytes in the catalog document (their JSON entry), oldest
//! first (creationTimestamp, then name); from the first Tool that would pass the budget
//! on, that Tool and every newer one of the namespace are left out, so a namespace over
//! budget loses its newest Tools, never the ones already relied on, and never another
//! namespace's. Eligible Tools then compete for their key:
//!
//! - **The namespace that owns a key** is the namespace whose Tool serves it now (its
//!   status says `Ready` with this key). A Tool of another namespace cannot take a served
//!   key — not a newer one, and not an older one that was broken or refused until now and
//!   has just become eligible (which would otherwise let a tenant park a dormant Tool and
//!   take over a key once others rely on it). A key nobody serves goes to the namespace of
//!   the oldest eligible Tool (creationTimestamp, then `namespace/name`). Eligible Tools of
//!   other namespaces are `KeyOwnedByOtherNamespace`, naming the Tool that serves the key.
//! - **Within the owning namespace**, the oldest eligible Tool (then the smaller
//!   `namespace/name`) serves the key; the others are `DuplicateKey`.
//!
//! An fn Tool without a `name` is named by each gateway after introspection, so its final
//! key may differ from the provisional one decided here; the gateway leaves out a renamed
//! tool whose key collides.

use std::collections::BTreeMap;
use std::sync::Arc;

use mcc_catalog::crd::Tool;
use mcc_catalog::document::{CatalogTool, Runtime};

use super::{Assembly, CATALOG_NOT_PUBLISHED, ToolVerdict, Verdict, watched};
use crate::convert::catalog_tool;
use crate::policy::{PodScope, Policy};

/// `exec`, `curl`, `fn` or `mcp` (an upstream MCP server's tool).
pub fn kind_name(t: &CatalogTool) -> &'static str {
    match t.tool.kind {
        mcc_catalog::ToolKind::Exec { .. } => "exec",
        mcc_catalog::ToolKind::Curl { .. } => "curl",
        mcc_catalog::ToolKind::Fn { .. } => "fn",
        mcc_catalog::ToolKind::Mcp { .. } => "mcp",
    }
}

struct Eligible<'a> {
    id: String,
    namespace: String,
    resource: &'a Tool,
    tool: CatalogTool,
}

/// Adds the served tools to `out.document` and a verdict for every watched Tool.
pub(super) fn assemble(out: &mut Assembly, tools: &[Arc<Tool>], policy: &Policy) {
    // Oldest first, so "the first one seen" is always the oldest.
    let mut eligible = Vec::new();
    for (id, namespace, resource) in watched(tools, policy) {
        match admit(resource, &namespace, policy) {
            Ok(tool) => eligible.push(Eligible {
                id,
                namespace,
                resource,
                tool,
            }),
            Err(refused) => {
                out.tools.insert(id, refused);
            }
        }
    }
    let eligible = within_budget(out, eligible, policy);
    let server = servers(&eligible);
    for e in eligible {
        let key = e.tool.tool.key.clone();
        let kind = Some(kind_name(&e.tool));
        // Every eligible key has a server, so the fallback is never taken.
        let (winner, owner_ns) = server
            .get(&key)
            .map(|(id, ns)| (id.as_str(), ns.as_str()))
            .unwrap_or((e.id.as_str(), e.namespace.as_str()));
        let verdict = if winner == e.id {
            let verdict = Verdict::Ready {
                introspect: e.tool.introspect,
                renamed: e.tool.name_from_callable,
            };
            out.document.tools.push(e.tool);
            verdict
        } else if owner_ns == e.namespace {
            Verdict::Duplicate {
                winner: winner.to_string(),
            }
        } else {
            Verdict::KeyOwnedByOtherNamespace {
                owner: winner.to_string(),
            }
        };
        out.tools.insert(
            e.id,
            ToolVerdict {
                key: Some(key),
                kind,
                verdict,
            },
        );
    }
}

/// One Tool on its own: valid, and allowed its groups and its runtime.
fn admit(resource: &Tool, namespace: &str, policy: &Policy) -> Result<CatalogTool, ToolVerdict> {
    let mut tool = catalog_tool(resource).map_err(|e| ToolVerdict {
        key: None,
        kind: None,
        verdict: Verdict::Invalid(e),
    })?;
    tool.tool.approval_required |= policy.requires_approval(namespace);
    let declared = resource.spec.session_keys.as_deref();
    let access = policy.session_access(namespace, declared, &tool.session);
    if let Some(access) = &access {
        tool.session = access.clone();
    }
    let refuse = |verdict| ToolVerdict {
        key: Some(tool.tool.key.clone()),
        kind: Some(kind_name(&tool)),
        verdict,
    };
    if let Some(refusal) = policy.refused_group(namespace, &tool.tool.groups) {
        return Err(refuse(Verdict::GroupNotAllowed {
            namespace: namespace.to_string(),
            group: refusal.group,
        }));
    }
    let namespace = namespace.to_string();
    if access.is_none() {
        return Err(refuse(Verdict::SessionKeysNotAllowed { namespace }));
    }
    match &tool.runtime {
        Runtime::Local if !policy.may_run_locally(&namespace) => {
            Err(refuse(Verdict::LocalRuntimeNotAllowed { namespace }))
        }
        Runtime::Local => Ok(tool),
        Runtime::Pod(_) if !policy.may_run_pods(&namespace) => {
            Err(refuse(Verdict::PodRuntimeNotAllowed {
                off: policy.pod_namespaces == PodScope::Off,
                namespace,
            }))
        }
        Runtime::Pod(pod) => match policy.refused_pod_spec(&namespace, pod) {
            Some(refusal) => Err(refuse(Verdict::PodSpecNotAllowed {
                namespace,
                refusal: Box::new(refusal),
            })),
            None => Ok(tool),
        },
    }
}

/// The eligible Tools that fit their namespace's budget; the others get
/// `NamespaceBudgetExceeded`. `eligible` is oldest first.
fn within_budget<'a>(
    out: &mut Assembly,
    eligible: Vec<Eligible<'a>>,
    policy: &Policy,
) -> Vec<Eligible<'a>> {
    if policy.tool_bytes.is_empty() {
        return eligible;
    }
    // Its entry in the document, as the catalog's size is counted (before compression,
    // which depends on the other tools).
    let size = |e: &Eligible<'_>| serde_json::to_vec(&e.tool).map_or(0, |v| v.len()) as u64;
    let sized: Vec<(u64, Eligible<'a>)> = eligible.into_iter().map(|e| (size(&e), e)).collect();
    let mut totals: BTreeMap<&str, u64> = BTreeMap::new();
    for (bytes, e) in &sized {
        *totals.entry(e.namespace.as_str()).or_default() += bytes;
    }
    let totals: BTreeMap<String, u64> = totals
        .into_iter()
        .map(|(ns, t)| (ns.to_string(), t))
        .collect();
    let mut spent: BTreeMap<String, Option<u64>> = BTreeMap::new();
    let mut kept = Vec::new();
    for (bytes, e) in sized {
        let Some((entry, budget)) = policy.tool_budget(&e.namespace) else {
            kept.push(e);
            continue;
        };
        // `None`: the budget is spent; every newer Tool of the namespace is left out.
        let used = spent.entry(e.namespace.clone()).or_insert(Some(0));
        match used.map(|u| u + bytes).filter(|u| *u <= budget) {
            Some(u) => {
                *used = Some(u);
                kept.push(e);
            }
            None => {
                *used = None;
                out.tools.insert(
                    e.id,
                    ToolVerdict {
                        key: Some(e.tool.tool.key.clone()),
                        kind: Some(kind_name(&e.tool)),
                        verdict: Verdict::NamespaceBudgetExceeded {
                            total: totals[&e.namespace],
                            namespace: e.namespace,
                            entry: entry.to_string(),
                            budget,
                            size: bytes,
                        },
                    },
                );
            }
        }
    }
    kept
}

/// Whether the Tool's status says it serves `key` now. A catalog that could not be
/// published (too large) turns every Tool not Ready; that must not release its key.
fn serves_now(resource: &Tool, key: &str) -> bool {
    let Some(status) = &resource.status else {
        return false;
    };
    status.key.as_deref() == Some(key)
        && status.conditions.iter().any(|c| {
            c.type_ == "Ready" && (c.status == "True" || c.reason == CATALOG_NOT_PUBLISHED)
        })
}

/// Key → (the Tool that serves it, its namespace): the owning namespace is the first
/// (oldest) namespace serving the key now, else the oldest eligible Tool's; within it, the
/// oldest eligible Tool serves.
fn servers(eligible: &[Eligible<'_>]) -> BTreeMap<String, (String, String)> {
    let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
    let holding = eligible
        .iter()
        .filter(|e| serves_now(e.resource, &e.tool.tool.key));
    for e in holding.chain(eligible) {
        owner
            .entry(e.tool.tool.key.as_str())
            .or_insert(e.namespace.as_str());
    }
    let mut server = BTreeMap::new();
    for e in eligible {
        let key = e.tool.tool.key.as_str();
        if owner.get(key) == Some(&e.namespace.as_str()) && !server.contains_key(key) {
            server.insert(key.to_string(), (e.id.clone(), e.namespace.clone()));
        }
    }
    server
}
