//! Kubernetes mode's catalog source: the operator's ConfigMap, watched with kube-runtime
//! (list, then watch, re-listing with backoff after errors). Each new version (by its
//! `mcc.dev/catalog-hash` annotation) is decoded and built into a snapshot by
//! [`crate::published`] on a blocking thread (introspection runs Python) and installed
//! atomically; requests already running finish on the old snapshot. A bad document, a
//! deleted ConfigMap or a broken watch keeps the last good catalog and puts the error in
//! `/readyz`.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use mcc_catalog::document::{DATA_KEY, GZIP_KEY, HASH_ANNOTATION};
use mcc_catalog::introspect::Introspector;
use tokio_util::sync::CancellationToken;

use crate::catalog::{LiveCatalog, OnReload};
use crate::published;

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

/// Watches the ConfigMap and installs each new catalog until `stop` fires.
pub async fn run(
    live: Arc<LiveCatalog>,
    client: Client,
    source: CatalogConfigMap,
    introspector: Introspector,
    stop: CancellationToken,
    on_reload: OnReload,
) {
    let api: Api<ConfigMap> = Api::namespaced(client, &source.namespace);
    let stream = watcher::watch_object(api, &source.name).default_backoff();
    let mut stream = std::pin::pin!(stream);
    loop {
        let item = tokio::select! {
            _ = stop.cancelled() => return,
            item = stream.next() => item,
        };
        match item {
            None => return,
            Some(Err(e)) => live.record_error(format!("watching ConfigMap {source}: {e}")),
            Some(Ok(None)) => live.record_error(format!(
                "ConfigMap {source} not found (has the operator published the catalog?)"
            )),
            Some(Ok(Some(cm))) => {
                apply(&live, &source, cm, &introspector, &on_reload).await;
            }
        }
    }
}

/// Builds and installs one version of the ConfigMap, unless it is the one being served.
async fn apply(
    live: &Arc<LiveCatalog>,
    source: &CatalogConfigMap,
    cm: ConfigMap,
    introspector: &Introspector,
    on_reload: &OnReload,
) {
    let hash = cm.annotations().get(HASH_ANNOTATION).cloned();
    if hash.is_some() && live.status().hash == hash && live.status().generation > 0 {
        // A resync or a re-list after an error: same content, nothing to rebuild.
        live.clear_error();
        return;
    }
    let json = cm.data.as_ref().and_then(|d| d.get(DATA_KEY)).cloned();
    let gzip = cm
        .binary_data
        .as_ref()
        .and_then(|d| d.get(GZIP_KEY))
        .map(|b| b.0.clone());
    let (live, label) = (live.clone(), source.to_string());
    let (introspector, on_reload) = (introspector.clone(), on_reload.clone());
    let built = tokio::task::spawn_blocking(move || {
        match published::build(&label, json.as_deref(), gzip.as_deref(), &introspector) {
            Ok((catalog, directory)) => {
                live.install(catalog, directory, hash);
                on_reload(&live.snapshot());
            }
            Err(e) => live.record_error(e.to_string()),
        }
    })
    .await;
    if let Err(e) = built {
        tracing::error!(error = %e, "catalog build task failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        until(&live, "the bad document's error", |l| {
            l.status().last_error.is_some()
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
        assert_eq!(rebuilt.load(std::sync::atomic::Ordering::SeqCst), 2);
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
}
