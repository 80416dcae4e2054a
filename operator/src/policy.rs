//! The platform team's tenancy rules as one pure value, [`Policy`]: which namespaces this
//! operator acts on, where UserGrants count, which namespaces may run Tools in the gateway's
//! shared local runtime, and which groups each namespace may publish Tools under.
//!
//! [`crate::assemble`] is the only caller of these rules, so the reconcilers (statuses)
//! and the publisher (the catalog) agree by construction. Parsing the settings that build
//! a policy is [`crate::settings`]'s job, not this module's.

use std::collections::{BTreeMap, BTreeSet};

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
}

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
        }
    }

    /// Whether this operator acts on objects of `namespace` at all.
    pub fn watches(&self, namespace: &str) -> bool {
        self.watched.as_ref().is_none_or(|w| w.contains(namespace))
    }

    /// Whether UserGrants of `namespace` count.
    pub fn trusts(&self, namespace: &str) -> bool {
        self.trusted.contains(namespace)
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

/// A group a namespace may not publish under; `group: None` means the Tool declares no
/// groups (open to everyone) and the namespace is not allowed `public`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRefusal {
    pub group: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn groups_are_any_when_unset_and_listed_otherwise() {
        let mut p = Policy::single_tenant(["mcc-system"]);
        assert_eq!(p.refused_group("anywhere", &s(&["admin"])), None);
        p.groups = Some(BTreeMap::from([
            ("mcc-system".to_string(), Groups::Any),
            (
                "team-a".to_string(),
                Groups::Only(["team-a".to_string()].into()),
            ),
        ]));
        assert_eq!(p.refused_group("mcc-system", &s(&["admin", "ops"])), None);
        assert_eq!(p.refused_group("team-a", &s(&["team-a"])), None);
        assert_eq!(
            p.refused_group("team-a", &s(&["team-a", "admin"])),
            Some(GroupRefusal {
                group: Some("admin".into())
            })
        );
        assert_eq!(
            p.refused_group("team-a", &[]),
            Some(GroupRefusal { group: None }),
            "no groups = open to everyone = needs public"
        );
        assert!(
            p.refused_group("unlisted", &s(&["x"])).is_some(),
            "a namespace not listed may use no group"
        );
    }

    #[test]
    fn scope_trust_and_local_runtime() {
        let mut p = Policy::single_tenant(["mcc-system"]);
        assert!(p.watches("anything"));
        assert!(p.trusts("mcc-system") && !p.trusts("team-a"));
        assert!(p.may_run_locally("mcc-system") && !p.may_run_locally("team-a"));
        p.watched = Some(["mcc-system".to_string()].into());
        assert!(p.watches("mcc-system") && !p.watches("team-a"));
    }
}
