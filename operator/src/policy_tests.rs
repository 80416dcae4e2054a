//! The policy's rules, one test per rule.

use super::*;
use serde_json::json;

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

fn pod(v: serde_json::Value) -> PodSpec {
    serde_json::from_value(v).unwrap()
}

fn field(p: &Policy, ns: &str, spec: serde_json::Value) -> Option<String> {
    p.refused_pod_spec(ns, &pod(spec)).map(|r| r.field)
}

#[test]
fn pod_resources_stay_within_the_allowance() {
    let mut p = Policy::single_tenant(["mcc-system"]);
    p.pod_namespaces = PodScope::All;
    let r = |res: serde_json::Value| json!({ "resources": res });
    // Without an allowance: one CPU, 1 GiB of memory and ephemeral storage.
    assert_eq!(
        field(
            &p,
            "a",
            r(json!({"limits": {"cpu": "1", "memory": "512Mi"}}))
        ),
        None
    );
    assert_eq!(
        field(&p, "a", r(json!({"requests": {"cpu": "500m"}}))),
        None
    );
    assert_eq!(
        field(&p, "a", r(json!({"limits": {"cpu": "64"}}))).as_deref(),
        Some("runtime.pod.resources.limits.cpu")
    );
    assert_eq!(
        field(&p, "a", r(json!({"requests": {"memory": "2Gi"}}))).as_deref(),
        Some("runtime.pod.resources.requests.memory")
    );
    assert_eq!(
        field(&p, "a", r(json!({"limits": {"nvidia.com/gpu": "1"}}))).as_deref(),
        Some("runtime.pod.resources.limits.nvidia.com/gpu")
    );
    assert_eq!(
        field(&p, "a", r(json!({"limits": {"cpu": "a lot"}}))).as_deref(),
        Some("runtime.pod.resources.limits.cpu")
    );
    assert_eq!(
        field(&p, "a", r(json!({"claims": [{"name": "gpu"}]}))).as_deref(),
        Some("runtime.pod.resources.claims")
    );
    // A namespace's allowance replaces the defaults.
    p.pod_policy.insert(
        "gpu-team".into(),
        PodAllowance {
            resources: BTreeMap::from([
                ("cpu".into(), "8".into()),
                ("memory".into(), "32Gi".into()),
                ("nvidia.com/gpu".into(), "2".into()),
            ]),
            ..Default::default()
        },
    );
    let big = r(json!({"limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": 2}}));
    assert_eq!(field(&p, "gpu-team", big.clone()), None);
    assert!(field(&p, "a", big).is_some());
    let refusal = p
        .refused_pod_spec("a", &pod(r(json!({"limits": {"memory": "2Gi"}}))))
        .unwrap();
    assert_eq!(refusal.value, "2Gi");
    assert!(
        refusal.allowed.contains(&"memory <= 1Gi".to_string()),
        "{refusal:?}"
    );
}

fn pod_policy() -> Policy {
    let mut p = Policy::single_tenant(["mcc-system"]);
    p.pod_namespaces = PodScope::Only(["team-a".into(), "team-b".into()].into());
    p.pod_policy = BTreeMap::from([
        (
            "*".to_string(),
            PodAllowance {
                images: vec!["registry.example.com/shared/".into()],
                ..Default::default()
            },
        ),
        (
            "team-a".to_string(),
            PodAllowance {
                images: vec!["registry.example.com/team-a".into()],
                service_accounts: ["runner".into()].into(),
                node_selector: BTreeMap::from([
                    ("pool".into(), ["tools".into()].into()),
                    ("zone".into(), ["*".into()].into()),
                ]),
                tolerations: ["dedicated".into()].into(),
                automount_service_account_token: true,
                resources: BTreeMap::new(),
            },
        ),
    ]);
    p
}

#[test]
fn the_pod_scope_is_off_all_or_listed() {
    let mut p = Policy::single_tenant(["mcc-system"]);
    assert!(!p.may_run_pods("mcc-system"), "off by default");
    p.pod_namespaces = PodScope::All;
    assert!(p.may_run_pods("anything"));
    p.pod_namespaces = PodScope::Only(["team-a".into()].into());
    assert!(p.may_run_pods("team-a") && !p.may_run_pods("team-b"));
}

#[test]
fn the_defaults_are_always_allowed() {
    let p = Policy::single_tenant(["mcc-system"]); // no pod policy at all
    for spec in [
        json!({}),
        json!({"serviceAccountName": "default"}),
        json!({"automountServiceAccountToken": false}),
        json!({"resources": {"limits": {"memory": "1Gi"}}}),
    ] {
        assert_eq!(field(&p, "team-a", spec.clone()), None, "{spec}");
    }
    for (spec, want) in [
        (json!({"image": "busybox"}), "runtime.pod.image"),
        (
            json!({"serviceAccountName": "admin"}),
            "runtime.pod.serviceAccountName",
        ),
        (
            json!({"automountServiceAccountToken": true}),
            "runtime.pod.automountServiceAccountToken",
        ),
        (
            json!({"nodeSelector": {"pool": "gpu"}}),
            "runtime.pod.nodeSelector.pool",
        ),
        (
            json!({"tolerations": [{"operator": "Exists"}]}),
            "runtime.pod.tolerations[0].key",
        ),
    ] {
        let r = p.refused_pod_spec("team-a", &pod(spec)).unwrap();
        assert_eq!((r.field.as_str(), r.entry.as_deref()), (want, None));
    }
}

#[test]
fn a_namespace_entry_replaces_the_star_entry() {
    let p = pod_policy();
    let shared = json!({"image": "registry.example.com/shared/tool:1"});
    assert_eq!(field(&p, "team-b", shared.clone()), None, "from *");
    let r = p.refused_pod_spec("team-a", &pod(shared)).unwrap();
    assert_eq!(
        (r.field.as_str(), r.entry.as_deref(), r.allowed),
        (
            "runtime.pod.image",
            Some("team-a"),
            vec!["registry.example.com/team-a".to_string()]
        ),
        "team-a's own entry applies, not *'s"
    );
    assert_eq!(
        p.pod_allowance("team-b").map(|(e, _)| e),
        Some("*"),
        "no entry of its own"
    );
}

#[test]
fn image_prefixes_match_at_a_boundary() {
    for (prefix, image, ok) in [
        (
            "registry.example.com/team-a/",
            "registry.example.com/team-a/x:1",
            true,
        ),
        (
            "registry.example.com/team-a",
            "registry.example.com/team-a/x:1",
            true,
        ),
        (
            "registry.example.com/team-a",
            "registry.example.com/team-a",
            true,
        ),
        (
            "registry.example.com/team-a",
            "registry.example.com/team-a:2",
            true,
        ),
        (
            "registry.example.com/team-a",
            "registry.example.com/team-a@sha256:ab",
            true,
        ),
        (
            "registry.example.com/team-a",
            "registry.example.com/team-ab/x",
            false,
        ),
        (
            "registry.example.com",
            "registry.example.com:5000/evil/x",
            false,
        ),
        (
            "registry.example.com",
            "registry.example.com.evil.io/x",
            false,
        ),
        (
            "registry.example.com/tool:",
            "registry.example.com/tool:3",
            true,
        ),
        (
            "registry.example.com/team-a/",
            "docker.io/registry.example.com/team-a/x",
            false,
        ),
        ("*", "anything/at:all", true),
    ] {
        assert_eq!(image_matches(prefix, image), ok, "{prefix} vs {image}");
    }
}

#[test]
fn each_pod_field_is_checked_against_the_entry() {
    let p = pod_policy();
    let allowed = json!({
        "image": "registry.example.com/team-a/tool:1",
        "serviceAccountName": "runner",
        "automountServiceAccountToken": true,
        "nodeSelector": {"pool": "tools", "zone": "eu-1"},
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    });
    assert_eq!(field(&p, "team-a", allowed.clone()), None);
    let with = |k: &str, v: serde_json::Value| {
        let mut s = allowed.clone();
        s[k] = v;
        field(&p, "team-a", s)
    };
    assert_eq!(
        with("image", json!("registry.example.com/team-ab/tool:1")).as_deref(),
        Some("runtime.pod.image")
    );
    assert_eq!(
        with("serviceAccountName", json!("admin")).as_deref(),
        Some("runtime.pod.serviceAccountName")
    );
    assert_eq!(
        with("nodeSelector", json!({"pool": "gpu"})).as_deref(),
        Some("runtime.pod.nodeSelector.pool")
    );
    assert_eq!(
        with("nodeSelector", json!({"kubernetes.io/hostname": "n1"})).as_deref(),
        Some("runtime.pod.nodeSelector.kubernetes.io/hostname")
    );
    assert_eq!(
        with(
            "tolerations",
            json!([{"key": "dedicated"}, {"key": "node-role.kubernetes.io/control-plane"}])
        )
        .as_deref(),
        Some("runtime.pod.tolerations[1].key")
    );
    let r = p
        .refused_pod_spec(
            "team-a",
            &pod(json!({"tolerations": [{"operator": "Exists"}]})),
        )
        .unwrap();
    assert_eq!(
        r.value, "",
        "no key: tolerates everything, refused unless \"\" is listed"
    );
    // Outside team-a (entry *), the token is not allowed.
    assert_eq!(
        field(&p, "team-b", json!({"automountServiceAccountToken": true})).as_deref(),
        Some("runtime.pod.automountServiceAccountToken")
    );
}
