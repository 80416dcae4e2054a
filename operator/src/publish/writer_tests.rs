//! The sharded catalog write against the mocked API: the order of requests (shards, then
//! the index, then the old shards' deletion), the alternating slots, the way back to one
//! ConfigMap, a restart, and a deletion that fails.

use base64::Engine as _;
use mcc_catalog::document::{self, CatalogDocument, HASH_ANNOTATION};
use mcc_catalog::shards::{INDEX_KEY, PART_KEY, ShardIndex};
use serde_json::{Value, json};

use super::{CatalogPublisher, SHARD_OF_LABEL};
use crate::fixtures::{ApiServerVerifier, assert_apply, not_found};
use crate::metrics::Metrics;

const CMS: &str = "/api/v1/namespaces/mcc-system/configmaps";

fn path(name: &str) -> String {
    format!("{CMS}/{name}")
}

/// `tools` tools with 1,000 characters of poorly compressible description each:
/// 2,500 of them take 3 or 4 shards.
fn document(tools: usize, seed: u64) -> CatalogDocument {
    let mut state = seed | 1;
    let mut doc = CatalogDocument::default();
    for i in 0..tools {
        let text: String = (0..1000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                char::from(b'!' + (state % 90) as u8)
            })
            .collect();
        doc.tools.push(
            serde_json::from_value(json!({
                "tool": {"key": format!("t{i:05}"), "name": format!("t{i:05}"),
                         "kind": "exec", "command": "echo", "description": text},
                "namespace": "ns", "resource": format!("t{i}")}))
            .unwrap(),
        );
    }
    doc
}

fn part_of(body: &Value) -> Vec<u8> {
    let b64 = body["binaryData"][PART_KEY].as_str().expect("a part");
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap()
}

/// Answers a sharded publish: every shard the index will name, then the index. Returns the
/// index and the parts as written.
async fn expect_sharded(api: &mut ApiServerVerifier, slot: char) -> (ShardIndex, Vec<Vec<u8>>) {
    let mut parts = Vec::new();
    loop {
        let seen = api
            .expect_any_path("PATCH", |seen| (200, seen.body.clone()))
            .await;
        assert_apply(&seen);
        let name = seen.path.rsplit('/').next().unwrap().to_string();
        if name == "mcc-catalog" {
            let text = seen.body["data"][INDEX_KEY].as_str().expect("an index");
            assert!(
                seen.body["binaryData"].is_null() && seen.body["data"]["catalog.json"].is_null()
            );
            let index = ShardIndex::parse("mcc-system/mcc-catalog", text).unwrap();
            assert_eq!(
                seen.body["metadata"]["annotations"][HASH_ANNOTATION],
                index.hash.as_str()
            );
            return (index, parts);
        }
        assert_eq!(
            name,
            format!("mcc-catalog-shard-{slot}-{}", parts.len()),
            "in order"
        );
        assert_eq!(
            seen.body["metadata"]["labels"][SHARD_OF_LABEL],
            "mcc-catalog"
        );
        parts.push(part_of(&seen.body));
    }
}

#[tokio::test]
async fn shards_are_written_before_the_index_and_old_ones_deleted_after() {
    let (client, mut api) = ApiServerVerifier::new();
    let metrics = Metrics::default();
    let mut publisher = CatalogPublisher::new(client, "mcc-system", "mcc-catalog");
    let first = document(2500, 7);
    let (r, (index, parts)) = tokio::join!(
        publisher.publish(&first, &metrics),
        expect_sharded(&mut api, 'a')
    );
    assert!(r.unwrap());
    assert!(parts.len() >= 3, "{}", parts.len());
    assert_eq!(index.shards.len(), parts.len());
    for (n, part) in parts.iter().enumerate() {
        index.check(n, Some(part)).unwrap();
    }
    let text = index.join(&parts).unwrap();
    assert_eq!(document::decode(Some(&text), None).unwrap(), {
        let mut d = first.clone();
        d.normalize();
        d
    });
    assert_eq!(index.hash, document::encode(&first).unwrap().hash);
    let rendered = metrics.render();
    assert!(
        rendered.contains(&format!("mcc_operator_catalog_shards {}", parts.len())),
        "{rendered}"
    );

    // The next version goes into slot b; then slot a's shards are deleted.
    let second = document(2400, 11);
    let deletes = async {
        let (index, _) = expect_sharded(&mut api, 'b').await;
        for n in 0..parts.len() {
            api.expect(
                "DELETE",
                &path(&format!("mcc-catalog-shard-a-{n}")),
                200,
                json!({}),
            )
            .await;
        }
        index
    };
    let (r, index_b) = tokio::join!(publisher.publish(&second, &metrics), deletes);
    assert!(r.unwrap());

    // Back to one ConfigMap: the index is replaced by the document, slot b is deleted
    // (one shard already gone: fine), a failed deletion is retried at the next cycle.
    let small = document(3, 5);
    let answers = async {
        let seen = api.expect_echo("PATCH", &path("mcc-catalog")).await;
        assert!(
            seen.body["data"]["catalog.json"].is_string(),
            "{:#}",
            seen.body
        );
        assert!(seen.body["data"][INDEX_KEY].is_null());
        let names: Vec<String> = index_b.shards.iter().map(|s| s.name.clone()).collect();
        api.expect(
            "DELETE",
            &path(&names[0]),
            404,
            not_found("configmaps", &names[0]),
        )
        .await;
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "message": "etcd timeout", "reason": "Timeout", "code": 504});
        api.expect("DELETE", &path(&names[1]), 504, status).await;
        for name in &names[2..] {
            api.expect("DELETE", &path(name), 200, json!({})).await;
        }
        names[1].clone()
    };
    let (r, failed) = tokio::join!(publisher.publish(&small, &metrics), answers);
    assert!(r.unwrap());
    assert!(metrics.render().contains("mcc_operator_catalog_shards 0"));
    // Unchanged content: nothing written, the failed deletion retried.
    let failed = path(&failed);
    let (r, _) = tokio::join!(
        publisher.publish(&small, &metrics),
        api.expect("DELETE", &failed, 200, json!({}))
    );
    assert!(!r.unwrap());
    let (r, ()) = tokio::join!(publisher.publish(&small, &metrics), api.expect_nothing());
    assert!(!r.unwrap());
}

/// A restarted operator reads the index in place: the same catalog is not rewritten, and
/// the next one goes into the other slot and deletes the shards the old index named.
#[tokio::test]
async fn a_restart_reads_the_index_and_uses_the_other_slot() {
    let (client, mut api) = ApiServerVerifier::new();
    let metrics = Metrics::default();
    let doc = document(2500, 3);
    let encoded = document::encode(&doc).unwrap();
    let mcc_catalog::shards::Layout::Sharded { index, parts } = mcc_catalog::shards::layout(
        encoded,
        "mcc-catalog",
        mcc_catalog::shards::Slot::B,
        mcc_catalog::shards::MAX_SHARDS,
    )
    .unwrap() else {
        panic!("sharded")
    };
    let existing = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "mcc-catalog", "annotations": {HASH_ANNOTATION: index.hash}},
        "data": {INDEX_KEY: serde_json::to_string(&index).unwrap()}});
    let mut publisher = CatalogPublisher::new(client, "mcc-system", "mcc-catalog");
    let index_path = path("mcc-catalog");
    // The index, then each shard it names (the tools in place are read back).
    let answers = async {
        api.expect("GET", &index_path, 200, existing).await;
        for (shard, part) in index.shards.iter().zip(&parts) {
            let b64 = base64::engine::general_purpose::STANDARD.encode(part);
            api.expect(
                "GET",
                &path(&shard.name),
                200,
                json!({"apiVersion": "v1",
                "kind": "ConfigMap", "metadata": {"name": shard.name},
                "binaryData": {PART_KEY: b64}}),
            )
            .await;
        }
    };
    let (r, ()) = tokio::join!(publisher.load_last(), answers);
    r.unwrap();
    assert_eq!(publisher.last_tools.as_deref(), Some(&doc.tools[..]));
    let (r, ()) = tokio::join!(publisher.publish(&doc, &metrics), api.expect_nothing());
    assert!(!r.unwrap(), "the same catalog is not rewritten");

    let next = document(2500, 4);
    let answers = async {
        expect_sharded(&mut api, 'a').await;
        for shard in &index.shards {
            api.expect("DELETE", &path(&shard.name), 200, json!({}))
                .await;
        }
    };
    let (r, ()) = tokio::join!(publisher.publish(&next, &metrics), answers);
    assert!(r.unwrap());
}

/// A shard write that fails leaves the index in place (no request after the failure) and
/// the next cycle writes the whole set again.
#[tokio::test]
async fn a_failed_shard_write_leaves_the_index_alone() {
    let (client, mut api) = ApiServerVerifier::new();
    let metrics = Metrics::default();
    let mut publisher = CatalogPublisher::new(client, "mcc-system", "mcc-catalog");
    let doc = document(2500, 9);
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "message": "request entity too large", "reason": "RequestEntityTooLarge",
                        "code": 413});
    // The shards are written concurrently: answer each (shard 1 fails) until the publish
    // gives up, then whatever was still on its way; the index is never among them.
    let mut answer = |seen: &crate::fixtures::Seen| {
        assert_ne!(
            seen.path,
            path("mcc-catalog"),
            "the index after a failed shard"
        );
        if seen.path == path("mcc-catalog-shard-a-1") {
            (413, status.clone())
        } else {
            (200, seen.body.clone())
        }
    };
    let r = {
        let publish = publisher.publish(&doc, &metrics);
        tokio::pin!(publish);
        loop {
            tokio::select! {
                r = &mut publish => break r,
                _ = api.expect_any_path("PATCH", &mut answer) => {}
            }
        }
    };
    assert!(r.is_err());
    let late = std::time::Duration::from_millis(300);
    while tokio::time::timeout(late, api.expect_any_path("PATCH", &mut answer))
        .await
        .is_ok()
    {}
    let (r, _) = tokio::join!(
        publisher.publish(&doc, &metrics),
        expect_sharded(&mut api, 'a')
    );
    assert!(r.unwrap());
}

/// Shards are owned by the catalog ConfigMap (so `helm uninstall`, which deletes it,
/// takes them along): a catalog written before its uid was known is written again, owned.
#[tokio::test]
async fn shards_are_owned_by_the_catalog_configmap() {
    let (client, mut api) = ApiServerVerifier::new();
    let metrics = Metrics::default();
    let mut publisher = CatalogPublisher::new(client, "mcc-system", "mcc-catalog");
    let doc = document(2500, 3);
    // Answers a sharded publish with the index's uid; returns the shards' owner uids.
    async fn answer(api: &mut ApiServerVerifier) -> Vec<Value> {
        let mut owners = Vec::new();
        loop {
            let seen = api
                .expect_any_path("PATCH", |seen| {
                    let mut body = seen.body.clone();
                    body["metadata"]["uid"] = json!("catalog-uid-1");
                    (200, body)
                })
                .await;
            if seen.path.ends_with("/mcc-catalog") {
                return owners;
            }
            owners.push(seen.body["metadata"]["ownerReferences"][0]["uid"].clone());
        }
    }
    let (r, owners) = tokio::join!(publisher.publish(&doc, &metrics), answer(&mut api));
    assert!(r.unwrap());
    assert!(owners.iter().all(Value::is_null), "{owners:?}");
    // The same document again: rewritten (slot b), every shard owned by the catalog.
    let rewrite = async {
        let owners = answer(&mut api).await;
        for _ in 0..owners.len() {
            api.expect_any_path("DELETE", |_| (200, json!({}))).await;
        }
        owners
    };
    let (r, owners) = tokio::join!(publisher.publish(&doc, &metrics), rewrite);
    assert!(r.unwrap());
    assert!(
        !owners.is_empty() && owners.iter().all(|u| u == "catalog-uid-1"),
        "{owners:?}"
    );
    let (r, ()) = tokio::join!(publisher.publish(&doc, &metrics), api.expect_nothing());
    assert!(!r.unwrap(), "owned and unchanged: nothing to write");
}

/// The chart grants the shard names by name (`mcc.catalogShardNames`, a Helm copy of the
/// rule): every RBAC rule of the default install that names shards names exactly
/// [`mcc_catalog::shards::all_shard_names`] (e2e/golden/rbac.yaml is the rendered chart).
#[test]
fn the_charts_shard_names_are_the_writers() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../e2e/golden/rbac.yaml");
    let text = std::fs::read_to_string(path).expect("e2e/golden/rbac.yaml");
    let entries: Vec<Value> = serde_saphyr::from_str(&text).expect("the RBAC golden file");
    let want = mcc_catalog::shards::all_shard_names("mcc-catalog");
    let strings =
        |v: &Value| -> Vec<String> { serde_json::from_value(v.clone()).unwrap_or_default() };
    // (verbs, names) of each rule that names a shard.
    let granted: Vec<(String, Vec<String>)> = entries
        .iter()
        .flat_map(|e| e["rules"].as_array().cloned().unwrap_or_default())
        .map(|rule| {
            (
                strings(&rule["verbs"]).join(","),
                strings(&rule["resourceNames"]),
            )
        })
        .filter(|(_, names)| names.iter().any(|n| n.contains("-shard-")))
        .collect();
    for (_, names) in &granted {
        assert_eq!(names, &want);
    }
}
