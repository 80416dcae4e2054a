//! Reconcilers against a mocked API server: every request is asserted (method, path,
//! server-side apply parameters, body), and "no write" is asserted as "no request".

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use base64::Engine as _;
use mcc_catalog::apikey::{hash_key, prefix_of};
use mcc_catalog::crd::{Tool, ToolParam, UserGrant};
use serde_json::{Value, json};

use super::{grant, tool};
use crate::fixtures::{
    ApiServerVerifier, Builder, GrantBuilder, Seen, TestGrant, TestTool, ToolBuilder, assert_apply,
    context, context_with, not_found, test_policy,
};
use crate::policy::{Groups, Policy};

pub(super) const TOOL_STATUS: &str = "/apis/mcc.dev/v1alpha1/namespaces/ns/tools/t/status";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/ns/events";

/// The object as the API server returns it after a status apply.
pub(super) fn with_status<K: serde::Serialize>(obj: &K) -> impl FnOnce(&Seen) -> (u16, Value) {
    let mut value = serde_json::to_value(obj).unwrap();
    move |seen| {
        value["status"] = seen.body["status"].clone();
        (200, value)
    }
}

pub(super) fn ready(body: &Value) -> (&str, &str, &str) {
    let c = &body["status"]["conditions"][0];
    assert_eq!(c["type"], "Ready");
    (
        c["status"].as_str().unwrap(),
        c["reason"].as_str().unwrap(),
        c["message"].as_str().unwrap(),
    )
}

/// Runs a reconcile while the verifier answers.
async fn reconcile_tool(obj: Tool, all: &[Tool], script: impl AsyncFnOnce(ApiServerVerifier)) {
    reconcile_tool_under(test_policy(), obj, all, script).await
}

/// [`reconcile_tool`] under `policy`.
pub(super) async fn reconcile_tool_under(
    policy: Policy,
    obj: Tool,
    all: &[Tool],
    script: impl AsyncFnOnce(ApiServerVerifier),
) {
    let (client, verifier) = ApiServerVerifier::new();
    let ctx = context_with(client, all, &[], policy);
    let (result, ()) = tokio::join!(tool::reconcile(Arc::new(obj), ctx), script(verifier));
    result.unwrap();
}

#[tokio::test]
async fn valid_tool_gets_ready_status_by_server_side_apply() {
    let t = TestTool::exec("t", "ns", "greet");
    let t2 = t.clone();
    reconcile_tool(t.clone(), &[t], async move |mut api| {
        let seen = api
            .expect_with("PATCH", TOOL_STATUS, with_status(&t2))
            .await;
        assert_apply(&seen);
        assert_eq!(seen.body["apiVersion"], "mcc.dev/v1alpha1");
        assert_eq!(seen.body["kind"], "Tool");
        assert_eq!(seen.body["status"]["key"], "greet");
        assert_eq!(seen.body["status"]["toolKind"], "exec");
        assert_eq!(seen.body["status"]["observedGeneration"], 1);
        assert_eq!(ready(&seen.body), ("True", "Published", "in the catalog"));
        api.expect_nothing().await;
    })
    .await;
}

#[tokio::test]
async fn unchanged_status_is_not_written_again() {
    let t = TestTool::exec("t", "ns", "greet");
    // First reconcile: learn the status the operator writes.
    let (client, mut api) = ApiServerVerifier::new();
    let ctx = context(client, std::slice::from_ref(&t), &[]);
    let t2 = t.clone();
    let server = tokio::spawn(async move {
        api.expect_with("PATCH", TOOL_STATUS, with_status(&t2))
            .await
    });
    tool::reconcile(Arc::new(t.clone()), ctx).await.unwrap();
    let written: Tool = {
        let seen = server.await.unwrap();
        let mut v = serde_json::to_value(&t).unwrap();
        v["status"] = seen.body["status"].clone();
        serde_json::from_value(v).unwrap()
    };
    reconcile_tool(written.clone(), &[written], async |mut api| {
        api.expect_nothing().await
    })
    .await;
}

#[tokio::test]
async fn invalid_tool_is_not_ready_and_gets_one_event() {
    let t = TestTool::exec("t", "ns", "x").with_exec("echo {{ broken ");
    let t2 = t.clone();
    reconcile_tool(t.clone(), &[t], async move |mut api| {
        let seen = api
            .expect_with("PATCH", TOOL_STATUS, with_status(&t2))
            .await;
        let (status, reason, message) = ready(&seen.body);
        assert_eq!((status, reason), ("False", "InvalidSpec"));
        assert!(
            message.starts_with("spec.exec: template does not compile"),
            "{message}"
        );
        assert!(seen.body["status"].get("key").is_none());
        let event = api.expect_echo("POST", EVENTS).await;
        assert_eq!(event.body["type"], "Warning");
        assert_eq!(event.body["reason"], "InvalidSpec");
        assert_eq!(event.body["regarding"]["name"], "t");
        assert!(event.body["note"].as_str().unwrap().contains("spec.exec"));
        api.expect_nothing().await;
    })
    .await;
}

#[tokio::test]
async fn a_key_owned_by_another_namespace_is_refused_naming_the_owner() {
    let winner = TestTool::exec("first", "other", "greet").created("2026-01-01T00:00:00Z");
    let t = TestTool::exec("t", "ns", "greet").created("2026-03-01T00:00:00Z");
    let t2 = t.clone();
    reconcile_tool(t.clone(), &[winner, t], async move |mut api| {
        let seen = api
            .expect_with("PATCH", TOOL_STATUS, with_status(&t2))
            .await;
        let (status, reason, message) = ready(&seen.body);
        assert_eq!((status, reason), ("False", "KeyOwnedByOtherNamespace"));
        assert!(message.contains("Tool other/first"), "{message}");
        assert_eq!(seen.body["status"]["key"], "greet");
        let event = api.expect_echo("POST", EVENTS).await;
        assert_eq!(event.body["reason"], "KeyOwnedByOtherNamespace");
        api.expect_nothing().await;
    })
    .await;
    // Same namespace: the existing tie-break, reason DuplicateKey.
    let winner = TestTool::exec("first", "ns", "greet").created("2026-01-01T00:00:00Z");
    let t = TestTool::exec("t", "ns", "greet").created("2026-03-01T00:00:00Z");
    let t2 = t.clone();
    reconcile_tool(t.clone(), &[winner, t], async move |mut api| {
        let seen = api
            .expect_with("PATCH", TOOL_STATUS, with_status(&t2))
            .await;
        assert_eq!(ready(&seen.body).1, "DuplicateKey");
        api.expect_echo("POST", EVENTS).await;
    })
    .await;
}

/// A refused Tool: its status says why, with one Event, and a second reconcile of the
/// object as written changes nothing and sends nothing.
pub(super) async fn refused_once(
    t: Tool,
    policy: Policy,
    want_reason: &str,
    want_in_message: &str,
) {
    let (client, mut api) = ApiServerVerifier::new();
    let ctx = context_with(client, std::slice::from_ref(&t), &[], policy.clone());
    let t2 = t.clone();
    let (want_reason2, want_in_message2) = (want_reason.to_string(), want_in_message.to_string());
    let server = tokio::spawn(async move {
        let seen = api
            .expect_with("PATCH", TOOL_STATUS, with_status(&t2))
            .await;
        let (status, reason, message) = ready(&seen.body);
        assert_eq!((status, reason), ("False", want_reason2.as_str()));
        assert!(message.contains(&want_in_message2), "{message}");
        let event = api.expect_echo("POST", EVENTS).await;
        assert_eq!(event.body["type"], "Warning");
        assert_eq!(event.body["reason"], want_reason2.as_str());
        api.expect_nothing().await;
        seen
    });
    tool::reconcile(Arc::new(t.clone()), ctx).await.unwrap();
    let seen = server.await.unwrap();
    let mut written = serde_json::to_value(&t).unwrap();
    written["status"] = seen.body["status"].clone();
    let written: Tool = serde_json::from_value(written).unwrap();
    let (client, mut api) = ApiServerVerifier::new();
    let ctx = context_with(client, std::slice::from_ref(&written), &[], policy);
    let (r, ()) = tokio::join!(
        tool::reconcile(Arc::new(written), ctx),
        api.expect_nothing()
    );
    r.unwrap();
}

#[tokio::test]
async fn a_group_the_namespace_is_not_allowed_is_refused() {
    let mut policy = test_policy();
    policy.groups = Some(BTreeMap::from([(
        "ns".to_string(),
        Groups::Only(BTreeSet::from(["reports".to_string()])),
    )]));
    let t = TestTool::exec("t", "ns", "deploy").with_groups(&["reports", "admin"]);
    refused_once(t, policy, "GroupNotAllowed", "group 'admin'").await;
}

#[tokio::test]
async fn a_local_tool_of_a_namespace_not_allowed_the_local_runtime_is_refused() {
    let mut policy = test_policy();
    policy.local_runtime.remove("ns");
    let t = TestTool::exec("t", "ns", "greet");
    refused_once(
        t,
        policy,
        "LocalRuntimeNotAllowed",
        "MCC_LOCAL_RUNTIME_NAMESPACES); use runtime: pod",
    )
    .await;
}

#[tokio::test]
async fn objects_outside_the_watch_scope_are_left_alone() {
    let mut policy = test_policy();
    policy.watched = Some(BTreeSet::from(["mcc-system".to_string()]));
    // Invalid and with an API key to mint: in scope, both would cause requests.
    let t = TestTool::exec("t", "ns", "x").with_exec("echo {{ broken ");
    let g = TestGrant::new("g", "alice").api_key(None);
    let (client, mut api) = ApiServerVerifier::new();
    let ctx = context_with(
        client,
        std::slice::from_ref(&t),
        std::slice::from_ref(&g),
        policy,
    );
    let (r1, r2, ()) = tokio::join!(
        tool::reconcile(Arc::new(t), ctx.clone()),
        grant::reconcile(Arc::new(g), ctx),
        api.expect_nothing()
    );
    r1.unwrap();
    r2.unwrap();
}

#[tokio::test]
async fn fn_tool_without_params_says_the_gateway_introspects_it() {
    let mut t = TestTool::exec("t", "ns", "report");
    t.spec.exec = None;
    t.spec.func = Some("tools.report:run".into());
    let t2 = t.clone();
    reconcile_tool(t.clone(), &[t.clone()], async move |mut api| {
        let seen = api
            .expect_with("PATCH", TOOL_STATUS, with_status(&t2))
            .await;
        let (status, _, message) = ready(&seen.body);
        assert_eq!(status, "True");
        assert!(message.contains("gateway introspects"), "{message}");
    })
    .await;
    // Declared params and return type: nothing to introspect.
    t.spec.params = Some(vec![ToolParam {
        name: "target".into(),
        ..Default::default()
    }]);
    t.spec.return_type = Some("str".into());
    let t2 = t.clone();
    reconcile_tool(t.clone(), &[t], async move |mut api| {
        let seen = api
            .expect_with("PATCH", TOOL_STATUS, with_status(&t2))
            .await;
        assert_eq!(ready(&seen.body).2, "in the catalog");
    })
    .await;
}

const SECRET: &str = "/api/v1/namespaces/ns/secrets/g-api-key";
const GRANT_STATUS: &str = "/apis/mcc.dev/v1alpha1/namespaces/ns/usergrants/g/status";

async fn reconcile_grant(obj: UserGrant, script: impl AsyncFnOnce(ApiServerVerifier)) {
    let (client, verifier) = ApiServerVerifier::new();
    let ctx = context(client, &[], std::slice::from_ref(&obj));
    let (result, ()) = tokio::join!(grant::reconcile(Arc::new(obj), ctx), script(verifier));
    result.unwrap();
}

#[tokio::test]
async fn api_key_is_minted_into_an_owned_secret_and_only_its_hash_published() {
    let g = TestGrant::new("g", "alice").api_key(Some(30));
    let g2 = g.clone();
    reconcile_grant(g, async move |mut api| {
        api.expect("GET", SECRET, 404, not_found("secrets", "g-api-key"))
            .await;
        let secret = api.expect_echo("PATCH", SECRET).await;
        assert_apply(&secret);
        let owner = &secret.body["metadata"]["ownerReferences"][0];
        assert_eq!(
            (
                owner["kind"].as_str(),
                owner["uid"].as_str(),
                owner["controller"].as_bool()
            ),
            (Some("UserGrant"), Some("uid-g"), Some(true))
        );
        let raw = base64::engine::general_purpose::STANDARD
            .decode(secret.body["data"]["apiKey"].as_str().unwrap())
            .unwrap();
        let raw = String::from_utf8(raw).unwrap();
        let prefix = prefix_of(&raw).expect("mcc_<12 hex>_<secret>").to_string();
        assert!(secret.body["metadata"]["annotations"]["mcc.dev/expires-at"].is_string());

        let status = api
            .expect_with("PATCH", GRANT_STATUS, with_status(&g2))
            .await;
        assert_apply(&status);
        let key = &status.body["status"]["apiKey"];
        assert_eq!(key["secretName"], "g-api-key");
        assert_eq!(key["prefix"], prefix.as_str());
        assert_eq!(key["sha256"], hash_key(&raw).as_str());
        assert!(
            !status.body.to_string().contains(&raw),
            "the raw key never leaves the Secret"
        );
        assert_eq!(ready(&status.body).0, "True");
    })
    .await;
}

#[tokio::test]
async fn an_existing_key_is_kept_and_a_disabled_one_revoked() {
    let g = TestGrant::new("g", "alice").api_key(None);
    let raw = mcc_catalog::apikey::format_key(&[1; 6], &[2; 32]);
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "g-api-key", "namespace": "ns",
            "ownerReferences": [{"apiVersion": "mcc.dev/v1alpha1", "kind": "UserGrant", "name": "g", "uid": "uid-g", "controller": true}]},
        "data": {"apiKey": base64::engine::general_purpose::STANDARD.encode(&raw)}
    });
    let g2 = g.clone();
    let raw2 = raw.clone();
    reconcile_grant(g.clone(), async move |mut api| {
        api.expect("GET", SECRET, 200, secret).await;
        let status = api
            .expect_with("PATCH", GRANT_STATUS, with_status(&g2))
            .await;
        assert_eq!(
            status.body["status"]["apiKey"]["sha256"],
            hash_key(&raw2).as_str()
        );
        api.expect_nothing().await;
    })
    .await;

    // The grant no longer asks for a key: the Secret is deleted, the record dropped.
    let mut g = g;
    g.spec.api_key = None;
    g.status = Some(mcc_catalog::crd::UserGrantStatus {
        api_key: Some(mcc_catalog::crd::ApiKeyStatus {
            secret_name: "g-api-key".into(),
            prefix: "010101010101".into(),
            sha256: hash_key(&raw),
            expires_at: None,
        }),
        ..Default::default()
    });
    let g2 = g.clone();
    reconcile_grant(g, async move |mut api| {
        api.expect(
            "DELETE",
            SECRET,
            200,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        )
        .await;
        let status = api
            .expect_with("PATCH", GRANT_STATUS, with_status(&g2))
            .await;
        assert!(status.body["status"].get("apiKey").is_none());
    })
    .await;
}

#[tokio::test]
async fn a_foreign_secret_is_not_overwritten_and_the_status_says_so() {
    let g = TestGrant::new("g", "alice").api_key(None);
    let g2 = g.clone();
    reconcile_grant(g, async move |mut api| {
        api.expect(
            "GET",
            SECRET,
            200,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "g-api-key", "namespace": "ns"}}),
        )
        .await;
        let status = api.expect_with("PATCH", GRANT_STATUS, with_status(&g2)).await;
        let (ready, reason, message) = ready(&status.body);
        assert_eq!((ready, reason), ("False", "ApiKeyNotIssued"));
        assert!(message.contains("is not owned by this grant"), "{message}");
        let event = api.expect_echo("POST", EVENTS).await;
        assert_eq!(event.body["reason"], "ApiKeyNotIssued");
        api.expect_nothing().await;
    })
    .await;
}

#[tokio::test]
async fn a_grant_outside_the_trusted_namespaces_mints_nothing_and_says_so_once() {
    const STATUS: &str = "/apis/mcc.dev/v1alpha1/namespaces/team-a/usergrants/g/status";
    const TEAM_EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/team-a/events";
    let mut g = TestGrant::new("g", "admin")
        .in_namespace("team-a")
        .groups(&["admin"])
        .api_key(None);
    g.spec.service_accounts = vec![mcc_catalog::crd::ServiceAccountBinding {
        namespace: Some("kube-system".into()),
        name: "default".into(),
    }];
    let g2 = g.clone();
    let (client, mut api) = ApiServerVerifier::new();
    let ctx = context(client, &[], std::slice::from_ref(&g));
    let server = tokio::spawn(async move {
        // No Secret is read or written: the first request is the status.
        let status = api.expect_with("PATCH", STATUS, with_status(&g2)).await;
        let (ready, reason, message) = ready(&status.body);
        assert_eq!((ready, reason), ("False", "UntrustedNamespace"));
        assert!(message.contains("namespace team-a"), "{message}");
        assert!(status.body["status"].get("apiKey").is_none());
        let event = api.expect_echo("POST", TEAM_EVENTS).await;
        assert_eq!(event.body["reason"], "UntrustedNamespace");
        api.expect_nothing().await;
        status
    });
    grant::reconcile(Arc::new(g.clone()), ctx.clone())
        .await
        .unwrap();
    let status = server.await.unwrap();
    // The catalog gets nothing from it.
    let doc = crate::assemble::assemble(&[], &ctx.grants.state(), &test_policy()).document;
    assert!(doc.users.is_empty());
    // Reconciled again as written: no request, no second Event.
    let mut v = serde_json::to_value(&g).unwrap();
    v["status"] = status.body["status"].clone();
    let written: UserGrant = serde_json::from_value(v).unwrap();
    reconcile_grant(written, async |mut api| api.expect_nothing().await).await;
}

#[tokio::test]
async fn a_key_whose_prefix_another_grant_has_is_refused_at_reconcile() {
    let raw = mcc_catalog::apikey::format_key(&[1; 6], &[2; 32]);
    let prefix = prefix_of(&raw).unwrap().to_string();
    // An older grant already publishes a key with this prefix.
    let holder = TestGrant::new("holder", "bob")
        .api_key(None)
        .issued(&prefix)
        .created("2025-01-01T00:00:00Z");
    let g = TestGrant::new("g", "alice").api_key(None);
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "g-api-key", "namespace": "ns",
            "ownerReferences": [{"apiVersion": "mcc.dev/v1alpha1", "kind": "UserGrant", "name": "g", "uid": "uid-g", "controller": true}]},
        "data": {"apiKey": base64::engine::general_purpose::STANDARD.encode(&raw)}
    });
    let (client, mut api) = ApiServerVerifier::new();
    let ctx = context(client, &[], &[holder, g.clone()]);
    let g2 = g.clone();
    let prefix2 = prefix.clone();
    let (result, ()) = tokio::join!(grant::reconcile(Arc::new(g), ctx), async move {
        api.expect("GET", SECRET, 200, secret).await;
        let status = api
            .expect_with("PATCH", GRANT_STATUS, with_status(&g2))
            .await;
        let (ready, reason, message) = ready(&status.body);
        assert_eq!((ready, reason), ("False", "DuplicateApiKeyPrefix"));
        assert!(
            message.contains(&prefix2) && message.contains("ns/holder"),
            "{message}"
        );
        // The status records the key the Secret holds; the catalog leaves it out.
        assert_eq!(status.body["status"]["apiKey"]["prefix"], prefix2.as_str());
        let event = api.expect_echo("POST", EVENTS).await;
        assert_eq!(event.body["reason"], "DuplicateApiKeyPrefix");
        api.expect_nothing().await;
    });
    result.unwrap();
}
