//! The assembly rules, object by object: validity, key ownership, tenancy, API keys.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::fixtures::{Builder, GrantBuilder, TestGrant, TestTool, ToolBuilder, test_policy};
use crate::policy::Groups;

fn arcs<K>(objs: Vec<K>) -> Vec<Arc<K>> {
    objs.into_iter().map(Arc::new).collect()
}

fn tools_only(tools: Vec<Tool>, policy: &Policy) -> Assembly {
    assemble(&arcs(tools), &[], policy)
}

fn served(a: &Assembly) -> Vec<(String, String)> {
    a.document
        .tools
        .iter()
        .map(|t| {
            (
                t.tool.key.clone(),
                format!("{}/{}", t.namespace, t.resource),
            )
        })
        .collect()
}

/// Every namespace of these tests may run locally.
fn open_policy() -> Policy {
    let mut p = test_policy();
    p.local_runtime
        .extend(["alpha", "zeta", "ns1", "ns2", "team-a", "team-b"].map(String::from));
    p
}

#[test]
fn within_a_namespace_the_oldest_then_the_name_wins() {
    let old = TestTool::exec("b", "ns", "greet").created("2026-01-01T00:00:00Z");
    let young = TestTool::exec("a", "ns", "greet").created("2026-02-01T00:00:00Z");
    let a = tools_only(vec![young, old], &open_policy());
    assert_eq!(served(&a), [("greet".into(), "ns/b".into())]);
    assert_eq!(
        a.tools["ns/a"].verdict,
        Verdict::Duplicate {
            winner: "ns/b".into()
        }
    );
    // Same age: the name decides.
    let x = TestTool::exec("x", "ns", "greet");
    let y = TestTool::exec("y", "ns", "greet");
    let a = tools_only(vec![y, x], &open_policy());
    assert_eq!(a.document.tools[0].resource, "x");
}

#[test]
fn an_unserved_key_goes_to_the_oldest_namespace_and_others_are_told_who_owns_it() {
    let old = TestTool::exec("b", "zeta", "greet").created("2026-01-01T00:00:00Z");
    let young = TestTool::exec("a", "alpha", "greet").created("2026-02-01T00:00:00Z");
    let a = tools_only(vec![young, old], &open_policy());
    assert_eq!(served(&a), [("greet".into(), "zeta/b".into())]);
    let loser = &a.tools["alpha/a"];
    assert_eq!(
        loser.verdict,
        Verdict::KeyOwnedByOtherNamespace {
            owner: "zeta/b".into()
        }
    );
    assert_eq!(loser.key.as_deref(), Some("greet"));
    let (ready, reason, message) = crate::status::ready_reason(&loser.verdict);
    assert!(!ready);
    assert_eq!(reason, "KeyOwnedByOtherNamespace");
    assert!(
        message.contains("namespace zeta") && message.contains("zeta/b"),
        "{message}"
    );
}

#[test]
fn a_served_key_is_never_taken_by_another_namespace() {
    // team-a serves `greet`; team-b's Tool is older but was broken until now.
    let serving = TestTool::exec("mine", "team-a", "greet")
        .created("2026-03-01T00:00:00Z")
        .serving();
    let dormant = TestTool::exec("squat", "team-b", "greet").created("2026-01-01T00:00:00Z");
    let a = tools_only(vec![dormant.clone(), serving.clone()], &open_policy());
    assert_eq!(served(&a), [("greet".into(), "team-a/mine".into())]);
    assert_eq!(
        a.tools["team-b/squat"].verdict,
        Verdict::KeyOwnedByOtherNamespace {
            owner: "team-a/mine".into()
        }
    );
    // A catalog that could not be published (too large) does not release the key.
    let mut stalled = serving.clone();
    let c = &mut stalled.status.as_mut().unwrap().conditions[0];
    (c.status, c.reason) = ("False".into(), "CatalogNotPublished".into());
    let a = tools_only(vec![dormant.clone(), stalled], &open_policy());
    assert_eq!(served(&a), [("greet".into(), "team-a/mine".into())]);
    // Once team-a's Tool is gone (or no longer eligible), the key is free again.
    let mut broken = serving.with_exec("echo {{ oops ");
    broken.metadata.generation = Some(2);
    let a = tools_only(vec![dormant, broken], &open_policy());
    assert_eq!(served(&a), [("greet".into(), "team-b/squat".into())]);
}

#[test]
fn groups_are_limited_per_namespace() {
    let mut policy = open_policy();
    policy.groups = Some(BTreeMap::from([
        ("mcc-system".to_string(), Groups::Any),
        (
            "team-a".to_string(),
            Groups::Only(BTreeSet::from(["team-a".to_string()])),
        ),
        (
            "team-b".to_string(),
            Groups::Only(BTreeSet::from(["team-b".to_string(), "ops".to_string()])),
        ),
    ]));
    let ok = TestTool::exec("ok", "team-a", "report").with_groups(&["team-a"]);
    // Older than team-b's, but team-a may not use `ops`: it owns nothing.
    let admin = TestTool::exec("admin", "team-a", "deploy")
        .with_groups(&["ops"])
        .created("2025-01-01T00:00:00Z");
    let open = TestTool::exec("open", "team-a", "hello");
    let b_ops = TestTool::exec("deploy", "team-b", "deploy").with_groups(&["ops"]);
    let unlisted = TestTool::exec("x", "ns", "x").with_groups(&["team-a"]);
    let a = tools_only(vec![ok, admin, open, b_ops, unlisted], &policy);
    assert_eq!(
        served(&a),
        [
            ("ops.deploy".into(), "team-b/deploy".into()),
            ("team-a.report".into(), "team-a/ok".into())
        ]
    );
    assert_eq!(
        a.tools["team-a/admin"].verdict,
        Verdict::GroupNotAllowed {
            namespace: "team-a".into(),
            group: Some("ops".into())
        }
    );
    let (_, reason, message) = crate::status::ready_reason(&a.tools["team-a/admin"].verdict);
    assert_eq!(reason, "GroupNotAllowed");
    assert!(
        message.contains("'ops'") && message.contains("namespace team-a"),
        "{message}"
    );
    assert_eq!(
        a.tools["team-a/open"].verdict,
        Verdict::GroupNotAllowed {
            namespace: "team-a".into(),
            group: None
        },
        "no groups = open to everyone: needs `public`"
    );
    assert!(matches!(
        a.tools["ns/x"].verdict,
        Verdict::GroupNotAllowed { .. }
    ));
}

#[test]
fn only_allowed_namespaces_run_tools_locally() {
    // Local runtime: ns, other; pods in ns and team-a.
    let policy = crate::fixtures::pod_test_policy();
    let local = TestTool::exec("local", "team-a", "local");
    let pod = TestTool::exec("pod", "team-a", "pod").in_pod();
    let trusted = TestTool::exec("t", "ns", "t");
    let a = tools_only(vec![local, pod, trusted], &policy);
    assert_eq!(
        served(&a),
        [
            ("pod".into(), "team-a/pod".into()),
            ("t".into(), "ns/t".into())
        ]
    );
    let v = &a.tools["team-a/local"];
    assert_eq!(
        v.verdict,
        Verdict::LocalRuntimeNotAllowed {
            namespace: "team-a".into()
        }
    );
    assert_eq!((v.key.as_deref(), v.kind), (Some("local"), Some("exec")));
    let (_, reason, message) = crate::status::ready_reason(&v.verdict);
    assert_eq!(reason, "LocalRuntimeNotAllowed");
    assert!(
        message.contains("MCC_LOCAL_RUNTIME_NAMESPACES")
            && message.contains("use runtime: pod")
            && message.contains("MCC_POD_NAMESPACES")
            && !message.contains("not available"),
        "{message}"
    );
}

#[test]
fn objects_outside_the_watch_scope_get_no_verdict_and_stay_out() {
    let mut policy = open_policy();
    policy.watched = Some(BTreeSet::from(["ns".to_string()]));
    let mine = TestTool::exec("a", "ns", "a");
    // Older, same key, in a namespace another install reconciles: not a competitor.
    let theirs = TestTool::exec("b", "team-b", "a").created("2025-01-01T00:00:00Z");
    let grant = TestGrant::new("g", "alice");
    let foreign = TestGrant::new("g", "bob").in_namespace("team-b");
    let a = assemble(
        &arcs(vec![mine, theirs]),
        &arcs(vec![grant, foreign]),
        &policy,
    );
    assert_eq!(served(&a), [("a".into(), "ns/a".into())]);
    assert!(!a.tools.contains_key("team-b/b"));
    assert!(!a.grants.contains_key("team-b/g"));
    assert_eq!(a.document.users.len(), 1);
}

#[test]
fn grants_count_only_in_trusted_namespaces() {
    let mut intruder = TestGrant::new("g", "admin")
        .in_namespace("team-a")
        .groups(&["admin"])
        .api_key(None)
        .issued("0123456789ab");
    intruder.spec.service_accounts = vec![mcc_catalog::crd::ServiceAccountBinding {
        namespace: Some("mcc-system".into()),
        name: "mcc-gateway".into(),
    }];
    let real = TestGrant::new("admin", "admin").groups(&["ops"]);
    let a = assemble(&[], &arcs(vec![intruder, real]), &test_policy());
    assert_eq!(
        a.grants["team-a/g"],
        Verdict::UntrustedNamespace {
            namespace: "team-a".into()
        }
    );
    let admin = &a.document.users[0];
    assert_eq!(admin.user.groups, ["ops"], "no group added");
    assert!(admin.service_accounts.is_empty() && admin.api_keys.is_empty());
    // Alone, it makes no user at all.
    let alone = TestGrant::new("g", "mallory").in_namespace("team-a");
    let a = assemble(&[], &arcs(vec![alone]), &test_policy());
    assert!(a.document.users.is_empty());
    let (ready, reason, message) = crate::status::ready_reason(&a.grants["team-a/g"]);
    assert_eq!((ready, reason), (false, "UntrustedNamespace"));
    assert!(message.contains("no user"), "{message}");
}

#[test]
fn a_duplicate_api_key_prefix_is_published_once() {
    let first = TestGrant::new("first", "alice")
        .api_key(None)
        .issued("0123456789ab")
        .created("2026-01-01T00:00:00Z");
    let second = TestGrant::new("second", "bob")
        .groups(&["ops"])
        .api_key(None)
        .issued("0123456789ab")
        .created("2026-02-01T00:00:00Z");
    let a = assemble(&[], &arcs(vec![second, first]), &test_policy());
    let keys: Vec<(&str, usize)> = a
        .document
        .users
        .iter()
        .map(|u| (u.user.username.as_str(), u.api_keys.len()))
        .collect();
    assert_eq!(keys, [("alice", 1), ("bob", 0)], "bob is served, keyless");
    assert_eq!(a.document.users[1].user.groups, ["ops"]);
    assert_eq!(
        a.grants["ns/second"],
        Verdict::DuplicateApiKeyPrefix {
            prefix: "0123456789ab".into(),
            holder: "ns/first".into()
        }
    );
    assert!(matches!(a.grants["ns/first"], Verdict::Ready { .. }));
    // The gateway accepts the document (it would refuse two records with one prefix).
    let encoded = mcc_catalog::document::encode(&a.document).unwrap();
    let text = match encoded.payload {
        mcc_catalog::document::Payload::Json(t) => t,
        _ => unreachable!("small"),
    };
    mcc_catalog::document::decode(Some(&text), None).unwrap();
}

#[test]
fn unnamed_fn_tools_are_named_by_the_gateway() {
    let mut t = TestTool::exec("t", "ns", "ignored");
    (t.spec.exec, t.spec.name) = (None, None);
    t.spec.func = Some("pkg.mod:build".into());
    let a = tools_only(vec![t], &test_policy());
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
    let a = tools_only(vec![bad, good], &test_policy());
    assert_eq!(a.document.tools.len(), 1);
    assert!(matches!(&a.tools["ns/bad"].verdict, Verdict::Invalid(e) if e.field == "exec"));
}

#[test]
fn only_issued_keys_of_enabled_grants_are_published() {
    let mut g = TestGrant::new("g", "alice").api_key(Some(30));
    g.status = Some(mcc_catalog::crd::UserGrantStatus {
        api_key: Some(mcc_catalog::crd::ApiKeyStatus {
            secret_name: "g-api-key".into(),
            prefix: "0123456789ab".into(),
            sha256: "ff".repeat(32),
            expires_at: Some("2027-01-01T00:00:00Z".into()),
        }),
        ..Default::default()
    });
    g.spec.service_accounts = vec![mcc_catalog::crd::ServiceAccountBinding {
        namespace: None,
        name: "agent".into(),
    }];
    let a = assemble(&[], &arcs(vec![g.clone()]), &test_policy());
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
    let a = assemble(&[], &arcs(vec![g]), &test_policy());
    assert!(a.document.users[0].api_keys.is_empty());
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
    let a = assemble(&[], &arcs(vec![g2, g1]), &test_policy());
    let alice = &a.document.users[0];
    assert_eq!(alice.user.groups, ["ops", "osint"]);
    assert_eq!(alice.user.tools, ["public.x"]);
    assert_eq!(alice.user.email.as_deref(), Some("a@example.com"));
    let bad = TestGrant::new("g3", "bob").groups(&["a.b"]);
    let a = assemble(&[], &arcs(vec![bad]), &test_policy());
    assert!(a.document.users.is_empty());
    assert!(matches!(&a.grants["ns/g3"], Verdict::Invalid(e) if e.field == "groups[0]"));
}

#[test]
fn oidc_subjects_are_published_with_their_issuer_and_old_plain_subjects_still_read() {
    use mcc_catalog::users::OidcSubject;
    let mut g = TestGrant::new("g", "alice");
    g.spec.oidc_subjects = vec![
        serde_json::json!({"issuer": "https://idp.example.com/", "subject": "00u1"}),
        serde_json::json!("legacy-sub"),
    ];
    let a = assemble(&[], &arcs(vec![g]), &test_policy());
    assert!(matches!(a.grants["ns/g"], Verdict::Ready { .. }));
    let mut subjects = a.document.users[0].oidc_subjects.clone();
    subjects.sort();
    assert_eq!(
        subjects,
        [
            OidcSubject {
                issuer: None,
                subject: "legacy-sub".into()
            },
            OidcSubject {
                issuer: Some("https://idp.example.com/".into()),
                subject: "00u1".into()
            },
        ]
    );
    // A malformed entry is the grant's own problem, named by index; no user is made.
    let mut bad = TestGrant::new("g2", "bob");
    bad.spec.oidc_subjects = vec![serde_json::json!("ok"), serde_json::json!({"sub": "x"})];
    let a = assemble(&[], &arcs(vec![bad]), &test_policy());
    assert!(a.document.users.is_empty());
    assert!(matches!(&a.grants["ns/g2"], Verdict::Invalid(e) if e.field == "oidcSubjects[1]"));
}
