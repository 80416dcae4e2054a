//! The watcher and a sharded catalog, against the mocked API: a version is swapped in only
//! when the index and every shard it names are present with matching hashes; a partial
//! or mismatched set keeps the last good catalog, is reported and read again; a newer
//! version replaces one waiting; the single-object form (an older operator's) still reads.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use http::Response;
use kube::client::Body;
use mcc_catalog::document::{DATA_KEY, GZIP_KEY, HASH_ANNOTATION};
use mcc_catalog::introspect::Introspector;
use mcc_catalog::kube_mock::ApiServer;
use mcc_catalog::shards::{INDEX_KEY, PART_KEY, ShardIndex, ShardRef, Slot, shard_name};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::{CatalogConfigMap, run};
use crate::catalog::LiveCatalog;

const CONFIGMAPS: &str = "/api/v1/namespaces/mcc/configmaps";

/// A document of `tools` exec tools and one user; its JSON and hash.
fn document(tools: &[&str]) -> (String, String) {
    let tools: Vec<Value> = tools
        .iter()
        .map(|k| {
            json!({"tool": {"key": k, "name": k, "kind": "exec", "command": "echo"},
                   "namespace": "t", "resource": k})
        })
        .collect();
    let text = json!({"format": 1, "tools": tools, "users": [{"user": {"username": "alice"}}]})
        .to_string();
    let hash = hex::encode(Sha256::digest(text.as_bytes()));
    (text, hash)
}

fn gzip(text: &str) -> Vec<u8> {
    mcc_catalog::shards::gzip(text.as_bytes())
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn config_map(name: &str, rv: &str, annotations: Value, data: Value, binary: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "mcc", "resourceVersion": rv,
                        "annotations": annotations},
           "data": data, "binaryData": binary})
}

/// A sharded version of `tools` in `slot`, cut into 3 parts: the index and the shards
/// (name → ConfigMap).
fn sharded(tools: &[&str], slot: Slot, rv: &str) -> (Value, BTreeMap<String, Value>, String) {
    let (text, hash) = document(tools);
    let gz = gzip(&text);
    let size = gz.len().div_ceil(3);
    let mut shards = BTreeMap::new();
    let mut refs = Vec::new();
    for (n, part) in gz.chunks(size).enumerate() {
        let name = shard_name("mcc-catalog", slot, n);
        let sha = hex::encode(Sha256::digest(part));
        refs.push(ShardRef {
            name: name.clone(),
            sha256: sha,
            bytes: part.len(),
        });
        let cm = config_map(
            &name,
            rv,
            json!({HASH_ANNOTATION: hash}),
            Value::Null,
            json!({PART_KEY: b64(part)}),
        );
        shards.insert(name, cm);
    }
    let index = ShardIndex {
        hash: hash.clone(),
        encoding: "gzip".into(),
        slot,
        shards: refs,
    };
    let index = config_map(
        "mcc-catalog",
        rv,
        json!({HASH_ANNOTATION: hash}),
        json!({INDEX_KEY: serde_json::to_string(&index).unwrap()}),
        Value::Null,
    );
    (index, shards, hash)
}

fn event(kind: &str, object: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap();
    line.push(b'\n');
    line
}

/// Plays the API server for one watcher: the list and watches of the index, GETs of
/// shards from `objects` (404 when absent). A watch with no `events` queued is held open
/// unanswered (like a quiet watch).
struct Fake {
    api: ApiServer,
    index: Value,
    objects: BTreeMap<String, Value>,
    events: Vec<Vec<u8>>,
    /// Watches waiting for an event.
    held: Vec<Box<dyn FnOnce(Vec<u8>) + Send>>,
}

impl Fake {
    /// Answers requests until a GET of a shard has been answered; returns its name. (The
    /// list and watches on the way are answered or held.)
    async fn next_get(&mut self) -> String {
        self.step(Duration::from_secs(5))
            .await
            .expect("a shard read within 5 s")
    }

    /// Answers requests for up to `wait`: the name of a shard read, `None` if none was.
    async fn step(&mut self, wait: Duration) -> Option<String> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let (request, send) =
                match tokio::time::timeout_at(deadline, self.api.0.next_request()).await {
                    Err(_) => return None,
                    Ok(next) => next.expect("the client is there"),
                };
            let path = request.uri().path().to_string();
            let query = request.uri().query().unwrap_or_default().to_string();
            let (status, body) = if path == CONFIGMAPS && !query.contains("watch=true") {
                let list = json!({"apiVersion": "v1", "kind": "ConfigMapList",
                                  "metadata": {"resourceVersion": "1"}, "items": [self.index]});
                (200, serde_json::to_vec(&list).unwrap())
            } else if path == CONFIGMAPS {
                if self.events.is_empty() {
                    self.held.push(Box::new(move |body| {
                        send.send_response(
                            Response::builder()
                                .status(200)
                                .body(Body::from(body))
                                .unwrap(),
                        )
                    }));
                    continue;
                }
                (200, self.events.remove(0))
            } else {
                let name = path.rsplit('/').next().unwrap().to_string();
                let reply = match self.objects.get(&name) {
                    Some(cm) => (200, serde_json::to_vec(cm).unwrap()),
                    None => (
                        404,
                        serde_json::to_vec(&json!({"kind": "Status", "apiVersion": "v1",
                        "status": "Failure", "reason": "NotFound", "code": 404,
                        "message": format!("configmaps \"{name}\" not found")}))
                        .unwrap(),
                    ),
                };
                send.send_response(
                    Response::builder()
                        .status(reply.0)
                        .body(Body::from(reply.1))
                        .unwrap(),
                );
                return Some(name);
            };
            send.send_response(
                Response::builder()
                    .status(status)
                    .body(Body::from(body))
                    .unwrap(),
            );
        }
    }

    /// The next `n` shard reads, sorted: a version's shards are read at once, in no
    /// particular order.
    async fn gets(&mut self, n: usize) -> Vec<String> {
        let mut names = Vec::new();
        for _ in 0..n {
            names.push(self.next_get().await);
        }
        names.sort();
        names
    }

    /// No shard is read within `wait` (the list and watches are served).
    async fn no_get(&mut self, wait: Duration) {
        if let Some(name) = self.step(wait).await {
            panic!("unexpected read of {name}");
        }
    }

    /// Serves (no shard read expected) until `done` holds.
    async fn until(&mut self, live: &LiveCatalog, what: &str, done: impl Fn(&LiveCatalog) -> bool) {
        for _ in 0..250 {
            if done(live) {
                return;
            }
            self.no_get(Duration::from_millis(20)).await;
        }
        panic!("timed out waiting for {what}: {:?}", live.status());
    }
}

impl Fake {
    /// Sends watch events: to a watch held open, else to the next watch.
    fn deliver(&mut self, body: Vec<u8>) {
        match self.held.pop() {
            Some(watch) => watch(body),
            None => self.events.push(body),
        }
    }
}

/// A watcher of `mcc/mcc-catalog` over a fake API serving `index` and `objects`.
fn start(
    index: Value,
    objects: BTreeMap<String, Value>,
) -> (
    Arc<LiveCatalog>,
    CancellationToken,
    tokio::task::JoinHandle<()>,
    Fake,
) {
    let (client, api) = ApiServer::new();
    let live = Arc::new(LiveCatalog::waiting("waiting".into()));
    let stop = CancellationToken::new();
    let source = CatalogConfigMap {
        namespace: "mcc".into(),
        name: "mcc-catalog".into(),
    };
    let task = tokio::spawn(run(
        live.clone(),
        client,
        source,
        Introspector::default(),
        stop.clone(),
        Arc::new(|_| {}),
    ));
    let fake = Fake {
        api,
        index,
        objects,
        events: Vec::new(),
        held: Vec::new(),
    };
    (live, stop, task, fake)
}

fn names(slot: char, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("mcc-catalog-shard-{slot}-{i}"))
        .collect()
}

fn error(live: &LiveCatalog) -> String {
    live.status().last_error.unwrap_or_default()
}

#[tokio::test]
async fn a_sharded_catalog_swaps_in_only_when_every_shard_matches() {
    let (index1, shards1, h1) = sharded(&["one", "two"], Slot::A, "1");
    let (live, stop, task, mut fake) = start(index1, shards1.clone());
    assert_eq!(fake.gets(3).await, names('a', 3), "every shard");
    fake.until(&live, "the first catalog", |l| l.status().generation == 1)
        .await;
    assert!(live.snapshot().tool("two").is_some());
    assert_eq!(live.status().hash.as_deref(), Some(h1.as_str()));
    assert!(live.status().last_error.is_none());

    // Version 2 while its shard b-1 still holds other bytes (a part of version 1).
    let (index2, shards2, h2) = sharded(&["three"], Slot::B, "2");
    fake.objects.extend(shards2.clone());
    let wrong = shards1["mcc-catalog-shard-a-1"]["binaryData"].clone();
    fake.objects.get_mut("mcc-catalog-shard-b-1").unwrap()["binaryData"] = wrong;
    fake.deliver(event("MODIFIED", &index2));
    // Every shard is read at once; the mismatching one is named.
    assert_eq!(fake.gets(3).await, names('b', 3));
    fake.until(&live, "the mismatch reported", |l| {
        error(l).contains("does not match")
    })
    .await;
    let e = error(&live);
    assert!(
        e.contains("mcc-catalog-shard-b-1") && e.contains(&h2),
        "{e}"
    );
    assert_eq!(live.status().generation, 1);
    assert!(
        live.snapshot().tool("one").is_some(),
        "the last good catalog stays"
    );
    assert!(
        live.snapshot().tool("three").is_none(),
        "nothing of version 2"
    );
    assert_eq!(live.status().hash.as_deref(), Some(h1.as_str()));

    // The shard is rewritten; the version is read again (after 1 s) and swapped in.
    fake.objects.extend(shards2);
    assert_eq!(fake.gets(3).await, names('b', 3));
    fake.until(&live, "version 2", |l| l.status().generation == 2)
        .await;
    assert!(live.snapshot().tool("three").is_some());
    assert!(live.snapshot().tool("one").is_none());
    assert_eq!(live.status().hash.as_deref(), Some(h2.as_str()));
    fake.until(&live, "the error cleared", |l| {
        l.status().last_error.is_none()
    })
    .await;
    stop.cancel();
    task.await.unwrap();
}

/// The old single-object form (gzip) reads; a deleted shard keeps it served and is
/// reported; a newer complete version replaces the one waiting to be read again.
#[tokio::test]
async fn a_missing_shard_keeps_the_last_good_catalog_until_a_newer_version() {
    let (text, h0) = document(&["old"]);
    let old = config_map(
        "mcc-catalog",
        "1",
        json!({HASH_ANNOTATION: h0}),
        Value::Null,
        json!({GZIP_KEY: b64(&gzip(&text))}),
    );
    let (live, stop, task, mut fake) = start(old, BTreeMap::new());
    fake.until(&live, "the single-object catalog", |l| {
        l.status().generation == 1
    })
    .await;
    assert!(live.snapshot().tool("old").is_some());

    let (index2, mut shards2, h2) = sharded(&["two"], Slot::A, "2");
    shards2.remove("mcc-catalog-shard-a-1");
    fake.objects.extend(shards2);
    fake.deliver(event("MODIFIED", &index2));
    // Every shard is asked for at once; the missing one is named.
    assert_eq!(fake.gets(3).await, names('a', 3));
    fake.until(&live, "the missing shard reported", |l| {
        error(l).contains("is missing")
    })
    .await;
    let e = error(&live);
    assert!(
        e.contains("mcc-catalog-shard-a-1") && e.contains(&h2),
        "{e}"
    );
    assert!(live.snapshot().tool("old").is_some());
    assert_eq!(live.status().generation, 1);

    let (index3, shards3, h3) = sharded(&["three"], Slot::B, "3");
    fake.objects.extend(shards3);
    fake.deliver(event("MODIFIED", &index3));
    assert_eq!(fake.gets(3).await, names('b', 3));
    fake.until(&live, "version 3", |l| l.status().generation == 2)
        .await;
    assert_eq!(live.status().hash.as_deref(), Some(h3.as_str()));
    assert!(live.status().last_error.is_none());
    fake.no_get(Duration::from_millis(1500)).await;
    stop.cancel();
    task.await.unwrap();
}

/// An index whose annotation and content disagree, or whose shards (each matching)
/// do not join to the document it names: reported, not retried, last good kept; a
/// single-object document (plain JSON) after it is served.
#[tokio::test]
async fn an_inconsistent_index_is_refused() {
    let (index1, shards1, _) = sharded(&["one"], Slot::A, "1");
    let (live, stop, task, mut fake) = start(index1.clone(), shards1.clone());
    fake.gets(3).await;
    fake.until(&live, "the first catalog", |l| l.status().generation == 1)
        .await;

    let mut relabeled = index1.clone();
    relabeled["metadata"]["annotations"][HASH_ANNOTATION] = json!("f".repeat(64));
    fake.deliver(event("MODIFIED", &relabeled));
    fake.until(&live, "the index refused", |l| {
        error(l).contains("hash annotation")
    })
    .await;
    fake.no_get(Duration::from_millis(300)).await;

    let text = index1["data"][INDEX_KEY].as_str().unwrap();
    let mut index: ShardIndex = serde_json::from_str(text).unwrap();
    index.hash = "e".repeat(64);
    let mut lying = index1.clone();
    lying["metadata"]["annotations"][HASH_ANNOTATION] = json!(index.hash);
    lying["data"][INDEX_KEY] = json!(serde_json::to_string(&index).unwrap());
    fake.deliver(event("MODIFIED", &lying));
    assert_eq!(fake.gets(3).await, names('a', 3));
    fake.until(&live, "the document refused", |l| {
        error(l).contains("do not hash")
    })
    .await;
    assert_eq!(live.status().generation, 1);
    fake.no_get(Duration::from_millis(1500)).await;

    let (text, h) = document(&["plain"]);
    let plain = config_map(
        "mcc-catalog",
        "4",
        json!({HASH_ANNOTATION: h}),
        json!({DATA_KEY: text}),
        Value::Null,
    );
    fake.deliver(event("MODIFIED", &plain));
    fake.until(&live, "the plain document", |l| l.status().generation == 2)
        .await;
    assert!(live.snapshot().tool("plain").is_some());
    assert!(live.status().last_error.is_none());
    stop.cancel();
    task.await.unwrap();
}
