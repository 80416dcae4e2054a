//! Pod Tools through the Tool reconciler, against the mocked API server: the status the
//! operator writes (and its one Event) for a pod Tool allowed, outside the pod runtime's
//! namespaces, asking for Pod settings its namespace may not use, and an fn tool in a
//! pod that does not declare its signature.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Toleration;

use super::tests::{TOOL_STATUS, ready, reconcile_tool_under, refused_once, with_status};
use crate::fixtures::{TestTool, ToolBuilder, assert_apply, pod_test_policy, test_policy};

#[tokio::test]
async fn an_allowed_pod_tool_is_ready() {
    let t = TestTool::exec("t", "ns", "build").pod(|p| {
        p.image = Some("example/builder:1".into());
        p.service_account_name = Some("runner".into());
    });
    let t2 = t.clone();
    reconcile_tool_under(pod_test_policy(), t.clone(), &[t], async move |mut api| {
        let seen = api
            .expect_with("PATCH", TOOL_STATUS, with_status(&t2))
            .await;
        assert_apply(&seen);
        assert_eq!(ready(&seen.body), ("True", "Published", "in the catalog"));
        assert_eq!(seen.body["status"]["key"], "build");
        api.expect_nothing().await;
    })
    .await;
}

#[tokio::test]
async fn a_pod_tool_outside_the_pod_runtime_namespaces_is_refused() {
    // The pod runtime off (the default).
    let t = TestTool::exec("t", "ns", "build").in_pod();
    refused_once(
        t.clone(),
        test_policy(),
        "PodRuntimeNotAllowed",
        "the pod runtime is off",
    )
    .await;
    // On, elsewhere only.
    let mut policy = pod_test_policy();
    policy.pod_namespaces = crate::policy::PodScope::Only(BTreeSet::from(["team-a".into()]));
    refused_once(
        t,
        policy,
        "PodRuntimeNotAllowed",
        "may not create Pods in namespace ns (operator setting MCC_POD_NAMESPACES",
    )
    .await;
}

#[tokio::test]
async fn pod_settings_the_namespace_is_not_allowed_are_refused() {
    let t = || TestTool::exec("t", "ns", "build");
    let cases = [
        (
            t().pod(|p| p.image = Some("registry.other/x:1".into())),
            "spec.runtime.pod.image 'registry.other/x:1' is not allowed",
        ),
        (
            t().pod(|p| p.service_account_name = Some("cluster-admin".into())),
            "spec.runtime.pod.serviceAccountName 'cluster-admin'",
        ),
        (
            t().pod(|p| p.node_selector = [("pool".into(), "gpu".into())].into()),
            "spec.runtime.pod.nodeSelector.pool 'gpu'",
        ),
        (
            t().pod(|p| {
                p.tolerations = vec![Toleration {
                    key: Some("gpu".into()),
                    ..Default::default()
                }]
            }),
            "spec.runtime.pod.tolerations[0].key 'gpu'",
        ),
        (
            t().pod(|p| p.automount_service_account_token = Some(true)),
            "spec.runtime.pod.automountServiceAccountToken 'true'",
        ),
    ];
    for (tool, message) in cases {
        refused_once(tool, pod_test_policy(), "PodSpecNotAllowed", message).await;
    }
}

#[tokio::test]
async fn a_pod_fn_tool_must_declare_its_return_type_and_params() {
    let mut t = TestTool::exec("t", "ns", "x")
        .with_fn("tools.report:run")
        .in_pod();
    t.spec.params = Some(vec![]);
    refused_once(
        t.clone(),
        pod_test_policy(),
        "InvalidSpec",
        "spec.returnType: an fn tool with runtime: pod must declare its return type",
    )
    .await;
    (t.spec.params, t.spec.return_type) = (None, Some("dict".into()));
    refused_once(
        t.clone(),
        pod_test_policy(),
        "InvalidSpec",
        "spec.params: an fn tool with runtime: pod must declare its params (params: [] when it takes none)",
    )
    .await;
    // Both declared (`params: []`: no params): in the catalog, nothing to introspect.
    t.spec.params = Some(vec![]);
    let t2 = t.clone();
    reconcile_tool_under(pod_test_policy(), t.clone(), &[t], async move |mut api| {
        let seen = api
            .expect_with("PATCH", TOOL_STATUS, with_status(&t2))
            .await;
        assert_eq!(ready(&seen.body), ("True", "Published", "in the catalog"));
        assert_eq!(seen.body["status"]["key"], "run");
    })
    .await;
}
