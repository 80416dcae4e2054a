//! One hostile namespace floods the catalog: revocations and key rotations still land
//! (the document too large is published with the last tools), and a budget on that
//! namespace brings the catalog back within its limit.

use mcc_catalog::crd::Tool;
use mcc_catalog::document::{self, CatalogDocument, decode};
use serde_json::Value;

use super::*;
use crate::fixtures::{
    ApiServerVerifier, GrantBuilder, TestGrant, TestTool, context, context_with, test_policy,
};

const CM: &str = "/api/v1/namespaces/mcc-system/configmaps/mcc-catalog";

fn stored_document(body: &Value) -> CatalogDocument {
    use base64::Engine as _;
    let json = body["data"][document::DATA_KEY].as_str();
    let gz = body["binaryData"][document::GZIP_KEY]
        .as_str()
        .map(|b| base64::engine::general_purpose::STANDARD.decode(b).unwrap());
    decode(json, gz.as_deref()).unwrap()
}

/// `n` Tools of namespace `other` with 1,000 incompressible characters of description
/// each: far more than one shard holds.
fn flood(n: usize) -> Vec<Tool> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|i| {
            let mut t = TestTool::exec(&format!("h{i:04}"), "other", &format!("spam{i}"));
            t.spec.description = Some(
                (0..1000)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        char::from(b'!' + (state % 90) as u8)
                    })
                    .collect(),
            );
            t
        })
        .collect()
}

/// (username, API-key prefixes) of a document.
fn users(doc: &CatalogDocument) -> Vec<(String, Vec<String>)> {
    doc.users
        .iter()
        .map(|u| {
            let keys = u.api_keys.iter().map(|k| k.prefix.clone()).collect();
            (u.user.username.clone(), keys)
        })
        .collect()
}

fn keys(doc: &CatalogDocument) -> Vec<&str> {
    doc.tools.iter().map(|t| t.tool.key.as_str()).collect()
}

#[tokio::test]
async fn a_hostile_namespace_cannot_stop_a_revocation() {
    let (client, mut api) = ApiServerVerifier::new();
    let ours = vec![TestTool::exec("greet", "ns", "greet")];
    let alice = TestGrant::new("alice", "alice")
        .api_key(None)
        .issued("aaaaaaaaaaaa");
    let bob = TestGrant::new("bob", "bob")
        .api_key(None)
        .issued("bbbbbbbbbbbb");
    let ctx = context(client.clone(), &ours, &[alice, bob]);
    let mut publisher = CatalogPublisher::new(client, "mcc-system", "mcc-catalog");
    // One shard holds the catalog here (16 in production), to keep the test small.
    publisher.max_shards = 1;
    let (mut tx, mut tools_rx, _grants_rx) = ReconcileAll::channels();
    let (r, seen) = tokio::join!(
        cycle(&ctx, &mut publisher, &mut tx),
        api.expect_echo("PATCH", CM)
    );
    assert!(r.unwrap());
    let first = stored_document(&seen.body);
    assert_eq!(
        users(&first),
        [
            ("alice".to_string(), vec!["aaaaaaaaaaaa".to_string()]),
            ("bob".to_string(), vec!["bbbbbbbbbbbb".to_string()])
        ]
    );
    let _ = tools_rx.try_recv();

    // Namespace `other` floods the catalog; meanwhile bob's grant is deleted and alice's
    // key rotated (its Secret deleted, a new key issued).
    let mut tools = ours.clone();
    tools.extend(flood(1100));
    let alice = TestGrant::new("alice", "alice")
        .api_key(None)
        .issued("cccccccccccc");
    let client = publisher.api.clone().into_client();
    let ctx = context(client.clone(), &tools, std::slice::from_ref(&alice));
    let (r, seen) = tokio::join!(
        cycle(&ctx, &mut publisher, &mut tx),
        api.expect_echo("PATCH", CM)
    );
    assert!(r.unwrap(), "the users are written");
    let held = stored_document(&seen.body);
    assert_eq!(
        users(&held),
        [("alice".to_string(), vec!["cccccccccccc".to_string()])],
        "bob is gone and alice's old key with him"
    );
    assert_eq!(keys(&held), ["greet"], "the tools of the last catalog");
    let why = ctx.catalog_error().expect("reported on every Tool");
    assert!(
        why.contains("too large") && why.contains("API keys are still published"),
        "{why}"
    );
    assert!(tools_rx.try_recv().is_ok(), "every Tool is told");
    let text = ctx.metrics.render();
    assert!(text.contains("mcc_operator_catalog_tools_held 1"), "{text}");
    // Nothing changed: nothing is written again.
    let (r, ()) = tokio::join!(cycle(&ctx, &mut publisher, &mut tx), api.expect_nothing());
    assert!(!r.unwrap());

    // The platform team sets a budget on `other`: its oldest Tools are served again with
    // everything else, its newest left out, and the catalog is whole again.
    let mut policy = test_policy();
    policy.tool_bytes = [("other".to_string(), 100_000)].into();
    let ctx = context_with(client, &tools, &[alice], policy);
    let (r, seen) = tokio::join!(
        cycle(&ctx, &mut publisher, &mut tx),
        api.expect_echo("PATCH", CM)
    );
    assert!(r.unwrap());
    let whole = stored_document(&seen.body);
    let from_other = whole
        .tools
        .iter()
        .filter(|t| t.namespace == "other")
        .count();
    assert!((50..100).contains(&from_other), "{from_other}");
    assert!(keys(&whole).contains(&"greet"));
    assert!(
        whole.tools.iter().any(|t| t.resource == "h0000"),
        "the oldest stay"
    );
    assert!(
        !whole.tools.iter().any(|t| t.resource == "h1099"),
        "the newest go"
    );
    assert_eq!(users(&whole).len(), 1);
    assert_eq!(ctx.catalog_error(), None);
    assert!(ctx.metrics.render().contains(
        "mcc_operator_objects_not_ready{kind=\"tool\",reason=\"NamespaceBudgetExceeded\"}"
    ));
    assert!(
        ctx.metrics
            .render()
            .contains("mcc_operator_catalog_tools_held 0")
    );
}

/// After a restart the tools in place are read back, so a catalog too large still
/// publishes its users; only a catalog that cannot be read back fails as a whole.
#[tokio::test]
async fn after_a_restart_the_tools_in_place_are_the_ones_held() {
    let (client, mut api) = ApiServerVerifier::new();
    let mut doc = CatalogDocument::default();
    let ctx = context(
        client.clone(),
        &[TestTool::exec("greet", "ns", "greet")],
        &[],
    );
    let assembled = crate::assemble::assemble(&ctx.tools.state(), &[], &test_policy());
    doc.tools = assembled.document.tools;
    let encoded = document::encode(&doc).unwrap();
    let mcc_catalog::document::Payload::Json(text) = encoded.payload else {
        panic!("small")
    };
    let existing = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "mcc-catalog", "annotations": {document::HASH_ANNOTATION: encoded.hash}},
        "data": {document::DATA_KEY: text}});
    let mut publisher = CatalogPublisher::new(client.clone(), "mcc-system", "mcc-catalog");
    publisher.max_shards = 1;
    let (r, _) = tokio::join!(publisher.load_last(), api.expect("GET", CM, 200, existing));
    r.unwrap();
    let mut tools = vec![TestTool::exec("greet", "ns", "greet")];
    tools.extend(flood(1100));
    let ctx = context(client, &tools, &[TestGrant::new("g", "carol")]);
    let (mut tx, _t, _g) = ReconcileAll::channels();
    let (r, seen) = tokio::join!(
        cycle(&ctx, &mut publisher, &mut tx),
        api.expect_echo("PATCH", CM)
    );
    assert!(r.unwrap());
    let held = stored_document(&seen.body);
    assert_eq!(keys(&held), ["greet"]);
    assert_eq!(users(&held), [("carol".to_string(), vec![])]);
}
