//! From every `Tool` and `UserGrant` the operator sees to one catalog document and one
//! verdict per object. Pure: no I/O, so the reconcilers (which write each object's status)
//! and the publisher (which writes the document) agree by construction.
//!
//! Duplicate keys across namespaces are resolved deterministically: the oldest object
//! (creationTimestamp) wins, then the smaller `namespace/name`; the others are not Ready
//! with reason `DuplicateKey` naming the winner.

use std::collections::BTreeMap;
use std::sync::Arc;

use mcc_catalog::apikey::ApiKeyRecord;
use mcc_catalog::crd::{Tool, UserGrant};
use mcc_catalog::document::{CatalogDocument, CatalogTool, CatalogUser, ServiceAccountRef};
use mcc_catalog::key::union_groups;
use mcc_catalog::tool::User;

use crate::convert::{Invalid, catalog_tool};

/// `namespace/name` of an object.
pub fn object_key(ns: Option<&str>, name: Option<&str>) -> String {
    format!("{}/{}", ns.unwrap_or_default(), name.unwrap_or_default())
}

/// What the operator concludes about one object.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// In the catalog. `introspect`: an fn tool the gateway introspects on load;
    /// `renamed`: it sets no name, so introspection also names it (and its key may change).
    Ready { introspect: bool, renamed: bool },
    /// Excluded: a field breaks a rule.
    Invalid(Invalid),
    /// Excluded: another object holds the same key.
    Duplicate { winner: String },
}

/// A tool's verdict with the key and kind it would have.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolVerdict {
    pub key: Option<String>,
    pub kind: Option<&'static str>,
    pub verdict: Verdict,
}

/// The catalog and every object's verdict.
#[derive(Debug, Clone, Default)]
pub struct Assembly {
    pub document: CatalogDocument,
    /// By `namespace/name`.
    pub tools: BTreeMap<String, ToolVerdict>,
    /// By `namespace/name`.
    pub grants: BTreeMap<String, Verdict>,
}

/// Orders objects oldest first, then by `namespace/name`.
fn precedence<K: kube::Resource>(obj: &K) -> (Option<k8s_openapi::jiff::Timestamp>, String) {
    let meta = obj.meta();
    (
        meta.creation_timestamp.as_ref().map(|t| t.0),
        object_key(meta.namespace.as_deref(), meta.name.as_deref()),
    )
}

fn sorted<K: kube::Resource>(objs: &[Arc<K>]) -> Vec<&Arc<K>> {
    let mut v: Vec<&Arc<K>> = objs.iter().collect();
    // Objects without a creation time (never from the API server) sort last.
    v.sort_by_key(|o| {
        let (t, k) = precedence(o.as_ref());
        (t.is_none(), t, k)
    });
    v
}

fn kind_name(t: &CatalogTool) -> &'static str {
    match t.tool.kind {
        mcc_catalog::ToolKind::Exec { .. } => "exec",
        mcc_catalog::ToolKind::Curl { .. } => "curl",
        mcc_catalog::ToolKind::Fn { .. } => "fn",
    }
}

/// Builds the catalog from all tools and grants.
pub fn assemble(tools: &[Arc<Tool>], grants: &[Arc<UserGrant>]) -> Assembly {
    let mut out = Assembly::default();
    let mut winners: BTreeMap<String, String> = BTreeMap::new();
    for resource in sorted(tools) {
        let id = object_key(
            resource.metadata.namespace.as_deref(),
            resource.metadata.name.as_deref(),
        );
        let verdict = match catalog_tool(resource) {
            Err(e) => ToolVerdict {
                key: None,
                kind: None,
                verdict: Verdict::Invalid(e),
            },
            Ok(t) => {
                let key = t.tool.key.clone();
                let kind = Some(kind_name(&t));
                let verdict = match winners.get(&key) {
                    Some(winner) => Verdict::Duplicate {
                        winner: winner.clone(),
                    },
                    None => {
                        winners.insert(key.clone(), id.clone());
                        let (introspect, renamed) = (t.introspect, t.name_from_callable);
                        out.document.tools.push(t);
                        Verdict::Ready {
                            introspect,
                            renamed,
                        }
                    }
                };
                ToolVerdict {
                    key: Some(key),
                    kind,
                    verdict,
                }
            }
        };
        out.tools.insert(id, verdict);
    }
    let mut users: BTreeMap<String, CatalogUser> = BTreeMap::new();
    for grant in sorted(grants) {
        let id = object_key(
            grant.metadata.namespace.as_deref(),
            grant.metadata.name.as_deref(),
        );
        let verdict = match check_grant(grant) {
            Err(e) => Verdict::Invalid(e),
            Ok(()) => {
                merge_grant(&mut users, grant);
                Verdict::Ready {
                    introspect: false,
                    renamed: false,
                }
            }
        };
        out.grants.insert(id, verdict);
    }
    out.document.users = users.into_values().collect();
    out.document.normalize();
    out
}

/// What the schema cannot say about a grant: the catalog's own name rules.
fn check_grant(grant: &UserGrant) -> Result<(), Invalid> {
    let spec = &grant.spec;
    let bad = |field: String, message: String| Invalid { field, message };
    if spec.username.trim().is_empty() || spec.username.chars().any(char::is_whitespace) {
        return Err(bad(
            "username".into(),
            "must be non-empty without whitespace".into(),
        ));
    }
    for (i, g) in spec.groups.iter().enumerate() {
        if g.is_empty() || g.chars().any(|c| c.is_whitespace() || c == '.') {
            return Err(bad(
                format!("groups[{i}]"),
                format!(
                    "'{g}' must be non-empty without whitespace or dots: groups are parts of tool keys"
                ),
            ));
        }
    }
    Ok(())
}

/// Unions a grant into its user (oldest grant's email wins).
fn merge_grant(users: &mut BTreeMap<String, CatalogUser>, grant: &UserGrant) {
    let spec = &grant.spec;
    let namespace = grant.metadata.namespace.clone().unwrap_or_default();
    let entry = users
        .entry(spec.username.clone())
        .or_insert_with(|| CatalogUser {
            user: User {
                username: spec.username.clone(),
                ..Default::default()
            },
            ..Default::default()
        });
    if entry.user.email.is_none() {
        entry.user.email = spec.email.clone();
    }
    entry.user.groups = union_groups(&entry.user.groups, &spec.groups);
    entry.user.tools = union_groups(&entry.user.tools, &spec.tools);
    entry
        .service_accounts
        .extend(spec.service_accounts.iter().map(|sa| ServiceAccountRef {
            namespace: sa.namespace.clone().unwrap_or_else(|| namespace.clone()),
            name: sa.name.clone(),
        }));
    entry
        .oidc_subjects
        .extend(spec.oidc_subjects.iter().cloned());
    let wants_key = spec.api_key.as_ref().is_some_and(|k| k.enabled);
    if let (true, Some(issued)) = (
        wants_key,
        grant.status.as_ref().and_then(|s| s.api_key.as_ref()),
    ) {
        entry.api_keys.push(ApiKeyRecord {
            prefix: issued.prefix.clone(),
            sha256: issued.sha256.clone(),
            expires_at: issued.expires_at.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{Builder, GrantBuilder, TestGrant, TestTool, ToolBuilder};

    #[test]
    fn oldest_then_name_wins_a_duplicate_key() {
        let old = TestTool::exec("b", "zeta", "greet").created("2026-01-01T00:00:00Z");
        let young = TestTool::exec("a", "alpha", "greet").created("2026-02-01T00:00:00Z");
        let a = assemble(&[Arc::new(young), Arc::new(old)], &[]);
        assert_eq!(a.document.tools.len(), 1);
        assert_eq!(a.document.tools[0].namespace, "zeta");
        assert_eq!(
            a.tools["alpha/a"].verdict,
            Verdict::Duplicate {
                winner: "zeta/b".into()
            }
        );
        // Same age: namespace/name decides.
        let x = TestTool::exec("x", "ns2", "greet").created("2026-01-01T00:00:00Z");
        let y = TestTool::exec("y", "ns1", "greet").created("2026-01-01T00:00:00Z");
        let a = assemble(&[Arc::new(x), Arc::new(y)], &[]);
        assert_eq!(a.document.tools[0].resource, "y");
    }

    #[test]
    fn unnamed_fn_tools_are_named_by_the_gateway() {
        let mut t = TestTool::exec("t", "ns", "ignored");
        (t.spec.exec, t.spec.name) = (None, None);
        t.spec.func = Some("pkg.mod:build".into());
        let a = assemble(&[Arc::new(t)], &[]);
        let v = &a.tools["ns/t"];
        assert_eq!(v.key.as_deref(), Some("build"), "provisional key");
        assert_eq!(
            v.verdict,
            Verdict::Ready {
                introspect: true,
                renamed: true
            }
        );
        let (_, _, message) = crate::status::ready_reason(&v.verdict);
        assert!(message.contains("its key may differ"), "{message}");
    }

    #[test]
    fn invalid_tools_are_excluded_and_others_served() {
        let bad = TestTool::exec("bad", "ns", "x").with_exec("echo {{ oops ");
        let good = TestTool::exec("good", "ns", "y");
        let a = assemble(&[Arc::new(bad), Arc::new(good)], &[]);
        assert_eq!(a.document.tools.len(), 1);
        assert!(matches!(&a.tools["ns/bad"].verdict, Verdict::Invalid(e) if e.field == "exec"));
    }

    #[test]
    fn only_issued_keys_of_enabled_grants_are_published() {
        let issued = mcc_catalog::crd::ApiKeyStatus {
            secret_name: "g-api-key".into(),
            prefix: "0123456789ab".into(),
            sha256: "ff".repeat(32),
            expires_at: Some("2027-01-01T00:00:00Z".into()),
        };
        let mut g = TestGrant::new("g", "alice").api_key(Some(30));
        g.status = Some(mcc_catalog::crd::UserGrantStatus {
            api_key: Some(issued),
            ..Default::default()
        });
        g.spec.service_accounts = vec![mcc_catalog::crd::ServiceAccountBinding {
            namespace: None,
            name: "agent".into(),
        }];
        let a = assemble(&[], &[Arc::new(g.clone())]);
        let alice = &a.document.users[0];
        assert_eq!(alice.api_keys[0].prefix, "0123456789ab");
        assert_eq!(
            alice.api_keys[0].expires_at.as_deref(),
            Some("2027-01-01T00:00:00Z")
        );
        assert_eq!(
            alice.service_accounts[0].namespace, "ns",
            "defaults to the grant's"
        );
        // Disabled: the stale status is not published.
        g.spec.api_key = None;
        assert!(
            assemble(&[], &[Arc::new(g)]).document.users[0]
                .api_keys
                .is_empty()
        );
    }

    #[test]
    fn grants_union_by_username() {
        let g1 = TestGrant::new("g1", "alice")
            .groups(&["ops"])
            .created("2026-01-01T00:00:00Z");
        let mut g2 = TestGrant::new("g2", "alice")
            .groups(&["osint", "ops"])
            .created("2026-02-01T00:00:00Z");
        g2.spec.tools = vec!["public.x".into()];
        g2.spec.email = Some("a@example.com".into());
        let a = assemble(&[], &[Arc::new(g2), Arc::new(g1)]);
        let alice = &a.document.users[0];
        assert_eq!(alice.user.groups, ["ops", "osint"]);
        assert_eq!(alice.user.tools, ["public.x"]);
        assert_eq!(alice.user.email.as_deref(), Some("a@example.com"));
        let bad = TestGrant::new("g3", "bob").groups(&["a.b"]);
        let a = assemble(&[], &[Arc::new(bad)]);
        assert!(a.document.users.is_empty());
        assert!(matches!(&a.grants["ns/g3"], Verdict::Invalid(e) if e.field == "groups[0]"));
    }
}
