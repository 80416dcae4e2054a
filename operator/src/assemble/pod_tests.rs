//! The pod runtime's assembly rules: where pod Tools may run (`PodRuntimeNotAllowed`),
//! what their Pods may ask for (`PodSpecNotAllowed`), and fn tools in pods (declared,
//! never introspected).

use k8s_openapi::api::core::v1::Toleration;
use mcc_catalog::crd::ToolParam;
use mcc_catalog::document::Runtime;

use super::*;
use crate::fixtures::{TestTool, ToolBuilder, pod_test_policy};
use crate::policy::PodScope;
use crate::status::ready_reason;

fn tools_only(tools: Vec<Tool>, policy: &Policy) -> Assembly {
    let tools: Vec<Arc<Tool>> = tools.into_iter().map(Arc::new).collect();
    assemble(&tools, &[], policy)
}

fn served(a: &Assembly) -> Vec<String> {
    a.document
        .tools
        .iter()
        .map(|t| format!("{}/{}", t.namespace, t.resource))
        .collect()
}

/// The verdict of `id`, and its (reason, message).
fn refused(a: &Assembly, id: &str) -> (Verdict, &'static str, String) {
    let v = a.tools[id].verdict.clone();
    let (ready, reason, message) = ready_reason(&v);
    assert!(!ready, "{id}: {v:?}");
    (v, reason, message)
}

#[test]
fn a_pod_tool_within_the_scope_and_the_allowance_is_published_with_its_pod() {
    let t = TestTool::exec("t", "team-a", "build").pod(|p| {
        p.image = Some("example/builder:2".into());
        p.service_account_name = Some("runner".into());
        p.node_selector = [("pool".into(), "tools".into())].into();
        p.tolerations = vec![Toleration {
            key: Some("dedicated".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        }];
    });
    let default_image = TestTool::exec("d", "ns", "plain").pod(|_| {});
    let a = tools_only(vec![t, default_image], &pod_test_policy());
    assert_eq!(served(&a), ["team-a/t", "ns/d"], "by key: build, plain");
    assert_eq!(
        a.tools["team-a/t"].verdict,
        Verdict::Ready {
            introspect: false,
            renamed: false
        }
    );
    let Runtime::Pod(pod) = &a.document.tools[0].runtime else {
        panic!("published as a pod tool: {:?}", a.document.tools[0]);
    };
    assert_eq!(pod.image.as_deref(), Some("example/builder:2"));
    assert_eq!(pod.service_account_name.as_deref(), Some("runner"));
    assert_eq!(pod.tolerations[0]["key"], "dedicated");
    let Runtime::Pod(default) = &a.document.tools[1].runtime else {
        panic!("a pod tool");
    };
    assert_eq!(default.image, None, "the gateway's default runtime image");
}

#[test]
fn a_pod_tool_outside_the_pod_scope_is_left_out() {
    let mut policy = pod_test_policy(); // pods in ns and team-a
    let outside = TestTool::exec("t", "team-b", "build").in_pod();
    let local = TestTool::exec("l", "ns", "other");
    let a = tools_only(vec![outside.clone(), local.clone()], &policy);
    assert_eq!(served(&a), ["ns/l"]);
    let (v, reason, message) = refused(&a, "team-b/t");
    assert_eq!(
        v,
        Verdict::PodRuntimeNotAllowed {
            namespace: "team-b".into(),
            off: false
        }
    );
    assert_eq!(reason, "PodRuntimeNotAllowed");
    assert!(
        message.contains("namespace team-b") && message.contains("MCC_POD_NAMESPACES"),
        "{message}"
    );
    assert_eq!(a.tools["team-b/t"].key.as_deref(), Some("build"));
    // The pod runtime off: every pod Tool, the message says so.
    policy.pod_namespaces = PodScope::Off;
    let inside = TestTool::exec("t", "ns", "build").in_pod();
    let a = tools_only(vec![inside, local], &policy);
    assert_eq!(served(&a), ["ns/l"]);
    let (v, _, message) = refused(&a, "ns/t");
    assert!(matches!(v, Verdict::PodRuntimeNotAllowed { off: true, .. }));
    assert!(
        message.contains("the pod runtime is off") && message.contains("MCC_POD_NAMESPACES"),
        "{message}"
    );
    // Everywhere.
    policy.pod_namespaces = PodScope::All;
    let a = tools_only(vec![outside], &policy);
    assert_eq!(served(&a), ["team-b/t"]);
}

#[test]
fn pod_settings_not_allowed_are_refused_naming_the_field_value_and_setting() {
    let policy = pod_test_policy();
    let cases: Vec<(Tool, &str, &str)> = vec![
        (
            TestTool::exec("image", "ns", "a").pod(|p| p.image = Some("docker.io/evil:1".into())),
            "runtime.pod.image",
            "'docker.io/evil:1'",
        ),
        (
            TestTool::exec("prefix", "ns", "b").pod(|p| p.image = Some("example-evil/x:1".into())),
            "runtime.pod.image",
            "'example-evil/x:1'",
        ),
        (
            TestTool::exec("sa", "ns", "c").pod(|p| p.service_account_name = Some("admin".into())),
            "runtime.pod.serviceAccountName",
            "'admin'",
        ),
        (
            TestTool::exec("token", "ns", "d")
                .pod(|p| p.automount_service_account_token = Some(true)),
            "runtime.pod.automountServiceAccountToken",
            "'true'",
        ),
        (
            TestTool::exec("node", "ns", "e")
                .pod(|p| p.node_selector = [("pool".into(), "gpu".into())].into()),
            "runtime.pod.nodeSelector.pool",
            "'gpu'",
        ),
        (
            TestTool::exec("taint", "ns", "f").pod(|p| {
                p.tolerations = vec![Toleration {
                    key: Some("node-role.kubernetes.io/control-plane".into()),
                    ..Default::default()
                }]
            }),
            "runtime.pod.tolerations[0].key",
            "'node-role.kubernetes.io/control-plane'",
        ),
        (
            TestTool::exec("all-taints", "ns", "g").pod(|p| {
                p.tolerations = vec![Toleration {
                    operator: Some("Exists".into()),
                    ..Default::default()
                }]
            }),
            "runtime.pod.tolerations[0].key",
            "no key: tolerates every taint",
        ),
    ];
    let ok = TestTool::exec("ok", "ns", "ok").in_pod();
    let mut all: Vec<Tool> = cases.iter().map(|(t, _, _)| t.clone()).collect();
    all.push(ok);
    let a = tools_only(all, &policy);
    assert_eq!(served(&a), ["ns/ok"], "only the allowed one");
    for (t, field, value) in &cases {
        let id = format!("ns/{}", t.metadata.name.as_deref().unwrap());
        let (v, reason, message) = refused(&a, &id);
        let Verdict::PodSpecNotAllowed { namespace, refusal } = v else {
            panic!("{id}: {v:?}");
        };
        assert_eq!((namespace.as_str(), refusal.field.as_str()), ("ns", *field));
        assert_eq!(reason, "PodSpecNotAllowed");
        for needle in [&format!("spec.{field}"), *value, "MCC_POD_POLICY", "'*'"] {
            assert!(message.contains(needle), "{id}: {needle:?} in {message}");
        }
    }
    let (_, _, message) = refused(&a, "ns/image");
    assert!(
        message.contains("allows here: example/") && message.contains("leave the field out"),
        "{message}"
    );
}

#[test]
fn without_a_policy_entry_only_the_defaults_are_allowed() {
    let mut policy = pod_test_policy();
    policy.pod_policy.clear();
    let plain = TestTool::exec("plain", "team-a", "plain").pod(|p| {
        p.service_account_name = Some("default".into());
        p.automount_service_account_token = Some(false);
    });
    let image = TestTool::exec("image", "team-a", "image").in_pod();
    let a = tools_only(vec![plain, image], &policy);
    assert_eq!(served(&a), ["team-a/plain"]);
    let (_, reason, message) = refused(&a, "team-a/image");
    assert_eq!(reason, "PodSpecNotAllowed");
    assert!(
        message.contains("no entry for team-a or '*'") && message.contains("only the defaults"),
        "{message}"
    );
}

#[test]
fn pod_fn_tools_are_published_as_declared_never_introspected() {
    let policy = pod_test_policy();
    let declared = |t: Tool| {
        let mut t = t;
        t.spec.params = Some(vec![]);
        t.spec.return_type = Some("str".into());
        t
    };
    let none = declared(
        TestTool::exec("none", "ns", "x")
            .with_fn("tools.report:run")
            .in_pod(),
    );
    let mut one = declared(TestTool::exec("one", "ns", "x").with_fn("tools.report:build")).in_pod();
    one.spec.params = Some(vec![ToolParam {
        name: "target".into(),
        ..Default::default()
    }]);
    let mut no_type = declared(TestTool::exec("no-type", "ns", "x").with_fn("m:f1")).in_pod();
    no_type.spec.return_type = None;
    let mut no_params = declared(TestTool::exec("no-params", "ns", "x").with_fn("m:f2")).in_pod();
    no_params.spec.params = None;
    // The same undeclared tool running locally is introspected by the gateway.
    let local = TestTool::exec("local", "ns", "x").with_fn("m:f3");
    let a = tools_only(vec![none, one, no_type, no_params, local], &policy);
    assert_eq!(served(&a), ["ns/one", "ns/local", "ns/none"]);
    for id in ["ns/none", "ns/one"] {
        assert_eq!(
            a.tools[id].verdict,
            Verdict::Ready {
                introspect: false,
                renamed: false
            },
            "{id}"
        );
    }
    let run = a
        .document
        .tools
        .iter()
        .find(|t| t.resource == "none")
        .unwrap();
    assert!(!run.introspect && !run.name_from_callable, "{run:?}");
    assert_eq!(run.tool.key, "run", "named after the callable path");
    assert!(run.tool.params.is_empty(), "params: [] means no params");
    assert_eq!(run.tool.return_type.as_deref(), Some("str"));
    assert!(
        a.document
            .tools
            .iter()
            .any(|t| t.resource == "local" && t.introspect)
    );
    for (id, field, needle) in [
        ("ns/no-type", "returnType", "must declare its return type"),
        ("ns/no-params", "params", "params: [] when it takes none"),
    ] {
        let (v, reason, message) = refused(&a, id);
        assert!(
            matches!(&v, Verdict::Invalid(e) if e.field == field),
            "{v:?}"
        );
        assert_eq!(reason, "InvalidSpec");
        assert!(
            message.starts_with(&format!("spec.{field}: an fn tool with runtime: pod"))
                && message.contains(needle)
                && message.contains("cannot be introspected"),
            "{message}"
        );
    }
    // What the gateway reads: the document round-trips with introspection off.
    let json = serde_json::to_string(&a.document).unwrap();
    let back = mcc_catalog::document::decode(Some(&json), None).unwrap();
    assert!(
        back.tools
            .iter()
            .any(|t| t.resource == "none" && !t.introspect)
    );
}
