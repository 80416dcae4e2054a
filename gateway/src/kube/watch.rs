//! Kubernetes mode's catalog source: the operator's ConfigMap, watched with kube-runtime
//! (list, then watch, re-listing with backoff after errors). Each new version (by its
//! `mcc.dev/catalog-hash` annotation) is read — the document itself, or the index of a
//! sharded catalog and every shard it names ([`super::shards`], all or nothing) — and
//! decoded, and its users and API keys swapped in at once; its tools are then built by a
//! serial worker ([`crate::catalog::follow::Latest`]: introspection runs Python, up to its
//! timeout) and installed, and the search index follows on its own worker. So a revoked
//! key or a deleted grant stops working on the next request after the watch event,
//! whatever the tools are doing; requests already running finish on the old snapshot. A
//! document that cannot be decoded, a shard missing or not matching its index, a deleted
//! ConfigMap or a broken watch keeps the last good catalog and puts a reason in
//! `/readyz`; a version whose shards could not be read is read again (1 s, doubling up to
//! 30 s) until it can be, or a newer one arrives.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use mcc_catalog::document::{CatalogTool, HASH_ANNOTATION};
use mcc_catalog::introspect::Introspector;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::shards;
use crate::catalog::follow::{Latest, follower};
use crate::catalog::published;
use crate::catalog::{LiveCatalog, OnReload, Part};

/// Which ConfigMap holds the catalog.
#[derive(Debug, Clone)]
pub struct CatalogConfigMap {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for CatalogConfigMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The tools of one document version for the tool builder: the entries, the document's
/// hash, and how many tool entries could not even be read.
type ToolJob = (Vec<CatalogTool>, Option<String>, usize);

/// First wait before a version whose shards could not be read is read again.
const RETRY_FIRST: Duration = Duration::from_secs(1);
/// Longest wait between two reads of such a version.
const RETRY_MAX: Duration = Duration::from_secs(30);

/// A version that could not be read yet, and when to try again.
struct Retry {
    cm: ConfigMap,
    wait: Duration,
    at: Instant,
}

/// Watches the ConfigMap and installs each new catalog until `stop` fires.
pub async fn run(
    live: Arc<LiveCatalog>,
    client: Client,
    source: CatalogConfigMap,
    introspector: Introspector,
    stop: CancellationToken,
    on_reload: OnReload,
) {
    let search = follower(stop.clone(), on_reload);
    let builder = {
        let (live, label) = (live.clone(), source.to_string());
        Latest::spawn(stop.clone(), move |(tools, hash, unreadable): ToolJob| {
            let (catalog, excluded) = published::tools(&label, tools, &introspector);
            live.install_tools(catalog, excluded.len() + unreadable, hash);
            search.submit(live.snapshot());
        })
    };
    let api: Api<ConfigMap> = Api::namespaced(client, &source.namespace);
    let stream = watcher::watch_object(api.clone(), &source.name).default_backoff();
    let mut stream = std::pin::pin!(stream);
    // The hash of the last document decoded and handed on (its tools may still be
    // building): a resync or re-list of it changes nothing.
    let mut applied: Option<String> = None;
    let mut retry: Option<Retry> = None;
    loop {
        let retry_at = retry.as_ref().map(|r| r.at);
        let item = tokio::select! {
            _ = stop.cancelled() => return,
            item = stream.next() => item,
            _ = sleep_until(retry_at) => {
                let Retry { cm, wait, .. } = retry.take().expect("a retry is pending");
                let version = Version { api: &api, source: &source, builder: &builder };
                if !version.apply(&live, cm.clone(), &mut applied).await {
                    retry = Some(Retry::after(cm, (wait * 2).min(RETRY_MAX)));
                }
                continue;
            }
        };
        match item {
            None => return,
            Some(Err(e)) => {
                // `/readyz` is unauthenticated: the API's own text goes to the log only.
                let detail = format!("watching ConfigMap {source}: {e}");
                let public = format!(
                    "watching ConfigMap {source}: {}",
                    super::errors::watch_reason(&e)
                );
                live.record_error(Part::Source, &detail, public);
            }
            Some(Ok(None)) => {
                let message = format!(
                    "ConfigMap {source} not found (has the operator published the catalog?)"
                );
                live.record_error(Part::Source, &message, message.clone());
            }
            Some(Ok(Some(cm))) => {
                // A newer version replaces one waiting to be read again.
                retry = None;
                let version = Version {
                    api: &api,
                    source: &source,
                    builder: &builder,
                };
                if !version.apply(&live, cm.clone(), &mut applied).await {
                    retry = Some(Retry::after(cm, RETRY_FIRST));
                }
            }
        }
    }
}

impl Retry {
    fn after(cm: ConfigMap, wait: Duration) -> Self {
        Self {
            cm,
            wait,
            at: Instant::now() + wait,
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What reading one version needs.
struct Version<'a> {
    api: &'a Api<ConfigMap>,
    source: &'a CatalogConfigMap,
    builder: &'a Latest<ToolJob>,
}

impl Version<'_> {
    /// Reads and decodes one version of the ConfigMap, swaps its users in and hands its
    /// tools to the builder, unless it is the version last applied. `false`: its shards
    /// could not be read (yet): read it again later.
    async fn apply(
        &self,
        live: &Arc<LiveCatalog>,
        cm: ConfigMap,
        applied: &mut Option<String>,
    ) -> bool {
        let hash = cm.annotations().get(HASH_ANNOTATION).cloned();
        if hash.is_some() && *applied == hash {
            // A resync or a re-list after an error: same content, nothing to rebuild.
            live.clear_error(Part::Source);
            return true;
        }
        let label = self.source.to_string();
        let fetched = match shards::fetch(self.api, &label, cm).await {
            Ok(fetched) => fetched,
            Err(e) => {
                let public = e.to_string();
                live.record_error(Part::Source, &e.detail(), public);
                return !e.worth_retrying();
            }
        };
        // Joining and gunzipping shards, decoding (JSON of up to tens of MB) and building
        // the users: off the async runtime.
        let decoded = tokio::task::spawn_blocking(move || {
            let (json, gzip) = fetched.text().map_err(|e| e.to_string())?;
            published::decode(&label, json.as_deref(), gzip.as_deref())
                .map(|d| {
                    let mut users = published::users(&label, &d.doc.users);
                    users.excluded_api_keys += d.skipped_api_keys;
                    (users, d.doc.tools, d.skipped_tools.len(), d.doc.upstreams)
                })
                .map_err(|e| e.to_string())
        })
        .await;
        match decoded {
            Ok(Ok((users, tools, unreadable, upstreams))) => {
                live.install_users(users);
                // Where MCPServer tools' calls go: installed before the tools that use it.
                if let Some(u) = live.upstreams() {
                    u.set_published(upstreams);
                }
                live.clear_error(Part::Source);
                self.builder.submit((tools, hash.clone(), unreadable));
                *applied = hash;
            }
            Ok(Err(message)) => {
                live.record_error(Part::Source, &message, message.clone());
            }
            Err(e) => tracing::error!(error = %e, "catalog decode task failed"),
        }
        true
    }
}

#[cfg(test)]
#[path = "watch_shard_tests.rs"]
mod shard_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use mcc_catalog::document::DATA_KEY;
    use mcc_catalog::kube_mock::ApiServer;
    use serde_json::{Value, json};
    use std::time::Duration;

    const CONFIGMAPS: &str = "/api/v1/namespaces/mcc/configmaps";

    fn config_map(hash: &str, tools: &[&str]) -> Value {
        let tools: Vec<Value> = tools
            .iter()
            .map(|k| {
                json!({"tool": {"key": k, "name": k, "kind": "exec", "command": "echo"},
                            "namespace": "t", "resource": k})
            })
            .collect();
        let doc = json!({"format": 1, "tools": tools, "users": [{"user": {"username": "alice"}}]});
        config_map_of(hash, doc)
    }

    fn config_map_of(hash: &str, doc: Value) -> Value {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "mcc-catalog", "namespace": "mcc", "resourceVersion": hash,
                         "annotations": {HASH_ANNOTATION: hash}},
            "data": {DATA_KEY: doc.to_string()}
        })
    }

    fn list(items: Vec<Value>) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMapList",
               "metadata": {"resourceVersion": "10"}, "items": items})
    }

    fn event(kind: &str, object: Value) -> Vec<u8> {
        let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap();
        line.push(b'\n');
        line
    }

    async fn until(live: &LiveCatalog, what: &str, done: impl Fn(&LiveCatalog) -> bool) {
        for _ in 0..200 {
            if done(live) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("timed out waiting for {what}: {:?}", live.status());
    }

    #[tokio::test]
    async fn lists_then_watches_and_swaps_catalogs() {
        let (client, mut api) = ApiServer::new();
        let live = Arc::new(LiveCatalog::waiting("waiting".into()));
        let stop = CancellationToken::new();
        let rebuilt = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = rebuilt.clone();
        let on_reload: OnReload = Arc::new(move |_| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
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
            on_reload,
        ));

        let seen = api
            .expect(
                "GET",
                CONFIGMAPS,
                200,
                list(vec![config_map("h1", &["one"])]),
            )
            .await;
        assert!(
            seen.query
                .contains("fieldSelector=metadata.name%3Dmcc-catalog"),
            "{}",
            seen.query
        );
        assert!(!seen.query.contains("watch=true"), "{}", seen.query);
        until(&live, "the first catalog", |l| l.status().generation == 1).await;
        let first = live.snapshot();
        assert!(first.tool("one").is_some());
        assert_eq!(live.directory().current().users()[0].username, "alice");
        assert_eq!(live.status().hash.as_deref(), Some("h1"));

        // The watch: an unchanged version (no rebuild), then a new one, then a bad one.
        let mut body = event("MODIFIED", config_map("h1", &["one"]));
        body.extend(event("MODIFIED", config_map("h2", &["two"])));
        let mut bad = config_map("h3", &[]);
        bad["data"][DATA_KEY] = json!("{not json");
        body.extend(event("MODIFIED", bad));
        let seen = api.expect_raw("GET", CONFIGMAPS, 200, body).await;
        assert!(
            seen.query.contains("watch=true") && seen.query.contains("resourceVersion=10"),
            "{}",
            seen.query
        );
        until(&live, "h2's tools and the bad document's error", |l| {
            l.status().last_error.is_some() && l.status().generation == 2
        })
        .await;
        let status = live.status();
        assert_eq!(status.generation, 2, "h1 was not rebuilt, h2 was installed");
        assert_eq!(status.hash.as_deref(), Some("h2"));
        let error = status.last_error.unwrap();
        assert!(
            error.contains("mcc/mcc-catalog") && error.contains("not valid JSON"),
            "{error}"
        );
        assert!(
            live.snapshot().tool("two").is_some(),
            "the last good catalog stays"
        );
        assert!(
            first.tool("one").is_some(),
            "a snapshot held by a request is unchanged"
        );
        until(&live, "search to follow h2", |_| {
            rebuilt.load(std::sync::atomic::Ordering::SeqCst) == 2
        })
        .await;
        stop.cancel();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn a_missing_configmap_is_reported_not_fatal() {
        let (client, mut api) = ApiServer::new();
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
        api.expect("GET", CONFIGMAPS, 200, list(vec![])).await;
        until(&live, "the not-found error", |l| {
            l.status()
                .last_error
                .is_some_and(|e| e.contains("not found"))
        })
        .await;
        assert_eq!(live.status().generation, 0, "still not ready");
        stop.cancel();
        task.await.unwrap();
    }

    /// A fn tool that cannot be introspected in every version; a key revoked in h2 while
    /// h2's tools are still being introspected (a module that hangs on import) and the
    /// search index is stuck on h1: the key stops working at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_revoked_key_stops_working_while_tools_and_search_are_busy() {
        let modules = tempfile::tempdir().unwrap();
        std::fs::write(
            modules.path().join("hangs.py"),
            "import time\ntime.sleep(30)\n",
        )
        .unwrap();
        let raw = mcc_catalog::apikey::format_key(&[0x12; 6], &[7; 32]);
        let record = mcc_catalog::apikey::ApiKeyRecord::of(&raw, None).unwrap();
        let fn_tool = |key: &str, path: &str| {
            json!({"tool": {"key": key, "name": key, "kind": "fn", "path": path,
                            "cwd": modules.path()},
                   "namespace": "t", "resource": key, "introspect": true})
        };
        let exec_tool = json!({"tool": {"key": "one", "name": "one", "kind": "exec", "command": "echo"},
                               "namespace": "t", "resource": "one"});
        let h1 = json!({"format": 1,
            "tools": [exec_tool.clone(), fn_tool("broken", "nowhere:f")],
            "users": [{"user": {"username": "alice"}, "apiKeys": [record]}]});
        let h2 = json!({"format": 1,
            "tools": [exec_tool, fn_tool("broken", "nowhere:f"), fn_tool("slow", "hangs:f")],
            "users": [{"user": {"username": "alice"}}]});

        let (client, mut api) = ApiServer::new();
        let live = Arc::new(LiveCatalog::waiting("waiting".into()));
        let stop = CancellationToken::new();
        // The search index rebuild blocks until the test releases it.
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let gate = std::sync::Mutex::new(gate);
        let rebuilds = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = rebuilds.clone();
        let on_reload: OnReload = Arc::new(move |_| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = gate.lock().unwrap().recv();
        });
        let introspector = Introspector {
            timeout: Duration::from_secs(3),
            ..Introspector::default()
        };
        let source = CatalogConfigMap {
            namespace: "mcc".into(),
            name: "mcc-catalog".into(),
        };
        let task = tokio::spawn(run(
            live.clone(),
            client,
            source,
            introspector,
            stop.clone(),
            on_reload,
        ));
        api.expect("GET", CONFIGMAPS, 200, list(vec![config_map_of("h1", h1)]))
            .await;
        until(&live, "h1", |l| l.status().generation == 1).await;
        let status = live.status();
        assert_eq!((status.tools, status.excluded_tools), (1, 1), "{status:?}");
        assert!(status.last_error.is_none(), "an exclusion is not an error");
        assert!(live.directory().current().key("121212121212").is_some());
        until(&live, "search to start on h1", |_| {
            rebuilds.load(std::sync::atomic::Ordering::SeqCst) == 1
        })
        .await;

        let started = std::time::Instant::now();
        api.expect_raw(
            "GET",
            CONFIGMAPS,
            200,
            event("MODIFIED", config_map_of("h2", h2)),
        )
        .await;
        until(&live, "the revocation", |l| {
            l.directory().current().key("121212121212").is_none()
        })
        .await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "the users swap waited {:?}",
            started.elapsed()
        );
        assert_eq!(
            live.status().generation,
            1,
            "h2's tools are still being built"
        );
        assert!(
            live.snapshot().tool("one").is_some(),
            "h1's tools still served"
        );

        // h2's tools arrive once the hanging module has timed out, search still stuck.
        for _ in 0..300 {
            if live.status().generation == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let status = live.status();
        assert_eq!(status.generation, 2, "{status:?}");
        assert_eq!((status.tools, status.excluded_tools), (1, 2), "{status:?}");
        assert_eq!(status.hash.as_deref(), Some("h2"));
        assert_eq!(rebuilds.load(std::sync::atomic::Ordering::SeqCst), 1);
        release.send(()).unwrap();
        until(&live, "search to follow h2", |_| {
            rebuilds.load(std::sync::atomic::Ordering::SeqCst) == 2
        })
        .await;
        release.send(()).unwrap();
        stop.cancel();
        task.await.unwrap();
    }
}
