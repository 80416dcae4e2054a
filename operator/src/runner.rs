//! Wiring of a leading operator: the Tool and UserGrant controllers over shared watch
//! caches, one [`Context`], the catalog publisher and, when the watch scope is a namespace
//! label selector, a watch of the matching Namespaces. `main` adds leader election, the
//! metrics server and signal handling around [`run`].
//!
//! The watches of Tools and UserGrants are cluster-wide; the watch scope is applied by
//! [`crate::assemble`] (objects outside it get no verdict), so every path that acts on an
//! object — status, Event, API key, catalog — leaves them alone. API-key Secrets are
//! watched in the trusted namespaces only (the only place keys are minted).

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::core::Selector;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client};
use mcc_catalog::crd::{MCPServer, Tool, UserGrant};

use crate::Result;
use crate::apikey::MANAGED_LABEL;
use crate::controller::{self, Context};
use crate::metrics::Metrics;
use crate::policy::Policy;
use crate::publish::{self, CatalogPublisher, PublishSettings, ReconcileAll};

/// Everything [`run`] needs besides the client and the metrics.
#[derive(Debug, Clone)]
pub struct RunSettings {
    pub publish: PublishSettings,
    /// The tenancy policy (for a selector scope, `watched` is filled from the Namespaces).
    pub policy: Policy,
    /// Watch only namespaces with these labels.
    pub watch_selector: Option<Selector>,
}

/// Runs both controllers and the publisher until one of them stops.
pub async fn run(client: Client, metrics: Arc<Metrics>, settings: RunSettings) -> Result<()> {
    let (reconcile_all, tools_rx, grants_rx) = ReconcileAll::channels();
    let tools = Controller::new(Api::<Tool>::all(client.clone()), watcher::Config::default())
        .reconcile_all_on(tools_rx);
    let managed = format!("{}={}", MANAGED_LABEL.0, MANAGED_LABEL.1);
    let mut grants = Controller::new(
        Api::<UserGrant>::all(client.clone()),
        watcher::Config::default(),
    )
    .reconcile_all_on(grants_rx);
    // API keys are minted for trusted grants only, so their Secrets exist only in the
    // trusted namespaces: the operator watches (and writes) Secrets there alone, and needs
    // no cluster-wide access to Secrets.
    for ns in &settings.policy.trusted {
        grants = grants.owns(
            Api::<Secret>::namespaced(client.clone(), ns),
            watcher::Config::default().labels(&managed),
        );
    }
    // An upstream's `notifications/tools/list_changed` asks for a reconcile of its
    // MCPServer (crate::listen).
    let (listeners, list_changed) = crate::listen::Listeners::new();
    let servers = Controller::new(
        Api::<MCPServer>::all(client.clone()),
        watcher::Config::default(),
    )
    .reconcile_on(list_changed);
    let (namespaces, namespace_loop) = match &settings.watch_selector {
        Some(selector) => {
            let (store, watch) = watch_namespaces(&client, selector, reconcile_all.clone());
            (Some(store), watch.boxed())
        }
        None => (None, futures::future::pending::<()>().boxed()),
    };
    let ctx = Arc::new(
        Context::new(
            client.clone(),
            tools.store(),
            grants.store(),
            metrics,
            settings.policy,
            namespaces,
        )
        .with_servers(servers.store())
        .with_listeners(listeners),
    );
    let publisher =
        CatalogPublisher::new(client, &settings.publish.namespace, &settings.publish.name);
    let tool_loop = tools
        .run(
            controller::tool::reconcile,
            controller::tool::error_policy,
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));
    let grant_loop = grants
        .run(
            controller::grant::reconcile,
            controller::grant::error_policy,
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));
    let server_loop = servers
        .run(
            controller::mcpserver::reconcile,
            controller::mcpserver::error_policy,
            ctx.clone(),
        )
        .for_each(|_| futures::future::ready(()));
    tokio::select! {
        _ = tool_loop => Ok(()),
        _ = server_loop => Ok(()),
        _ = grant_loop => Ok(()),
        _ = namespace_loop => Ok(()),
        r = publish::run(ctx, publisher, reconcile_all, settings.publish) => r,
    }
}

/// A cache of the Namespaces matching `selector`, and the future that keeps it current.
/// A Namespace that starts matching brings its objects into scope, so every Tool and
/// UserGrant is reconciled again (objects leaving the scope are simply no longer acted on).
fn watch_namespaces(
    client: &Client,
    selector: &Selector,
    mut reconcile_all: ReconcileAll,
) -> (Store<Namespace>, impl Future<Output = ()> + Send + 'static) {
    let (store, writer) = reflector::store();
    let stream = reflector::reflector(
        writer,
        watcher(
            Api::<Namespace>::all(client.clone()),
            watcher::Config::default().labels_from(selector),
        ),
    )
    .default_backoff()
    .touched_objects();
    let watch = stream.for_each(move |event| {
        match event {
            Ok(_) => {
                reconcile_all.tools();
                reconcile_all.grants();
            }
            Err(e) => tracing::warn!(error = %e, "cannot watch the Namespaces of the watch scope"),
        }
        futures::future::ready(())
    });
    (store, watch)
}

/// Default publish timing: debounce bursts, and look again every 5 s for deletes.
pub fn settings(namespace: &str, configmap: &str, debounce: Duration) -> PublishSettings {
    PublishSettings {
        namespace: namespace.to_string(),
        name: configmap.to_string(),
        debounce,
        resync: Duration::from_secs(5),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::{Value, json};

    use super::*;
    use crate::fixtures::{
        Builder, GrantBuilder, TestGrant, TestTool, ToolBuilder, not_found, test_policy,
    };

    fn reply(send: tower_test::mock::SendResponse<Response<Body>>, status: u16, body: &Value) {
        send.send_response(
            Response::builder()
                .status(status)
                .body(Body::from(serde_json::to_vec(body).unwrap()))
                .unwrap(),
        );
    }

    fn list(kind: &str, items: Vec<Value>) -> Value {
        json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "1"}, "items": items})
    }

    /// The whole operator against a scripted API server: watches list the objects (and
    /// stay open), statuses and the catalog are written, the invalid Tool gets an Event.
    #[tokio::test]
    async fn objects_become_statuses_and_one_catalog() {
        let good = TestTool::exec("good", "ns", "greet");
        let bad = TestTool::exec("bad", "ns", "broken").with_exec("echo {{ x ");
        let dup = TestTool::exec("dup", "other", "greet").created("2026-06-01T00:00:00Z");
        let mut fn_tool = TestTool::exec("report", "ns", "report");
        fn_tool.spec.exec = None;
        fn_tool.spec.func = Some("reports:run".into());
        let tools: Vec<Value> = [&good, &bad, &dup, &fn_tool]
            .iter()
            .map(|t| serde_json::to_value(t).unwrap())
            .collect();
        let alice = TestGrant::new("alice", "alice")
            .groups(&["ops"])
            .api_key(None);
        let alice_json = serde_json::to_value(&alice).unwrap();
        // An upstream the test policy does not allow: refused on its status, never
        // connected to (the scripted API server is the only thing it could reach).
        let upstream = json!({
            "apiVersion": "mcc.dev/v1alpha1", "kind": "MCPServer",
            "metadata": {"name": "far", "namespace": "ns", "generation": 1,
                         "creationTimestamp": "2026-06-01T00:00:00Z"},
            "spec": {"url": "http://127.0.0.1:9/mcp"}
        });

        let (service, mut api) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let operator = tokio::spawn(run(
            client,
            Arc::new(Metrics::default()),
            RunSettings {
                publish: settings("mcc-system", "mcc-catalog", Duration::from_millis(50)),
                policy: test_policy(),
                watch_selector: None,
            },
        ));

        let mut open_watches = Vec::new();
        let mut statuses: BTreeMap<String, Value> = BTreeMap::new();
        let mut events: Vec<Value> = Vec::new();
        let mut catalog: Option<Value> = None;
        let mut secret_written = false;
        let done =
            |statuses: &BTreeMap<String, Value>, catalog: &Option<Value>, events: &Vec<Value>| {
                let warned = |name: &str| events.iter().any(|e| e["regarding"]["name"] == name);
                statuses.len() == 6
                    && catalog.is_some()
                    && warned("bad")
                    && warned("dup")
                    && warned("far")
            };
        while !done(&statuses, &catalog, &events) {
            let (req, send) = tokio::time::timeout(Duration::from_secs(10), api.next_request())
                .await
                .expect("the operator stalled")
                .expect("the client closed");
            let method = req.method().to_string();
            let path = req.uri().path().to_string();
            let query = req.uri().query().unwrap_or_default().to_string();
            let body: Value = {
                let bytes = req.into_body().collect_bytes().await.unwrap();
                if bytes.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_slice(&bytes).unwrap()
                }
            };
            match (method.as_str(), path.as_str()) {
                ("GET", _) if query.contains("watch=true") => open_watches.push(send),
                ("GET", "/apis/mcc.dev/v1alpha1/tools") => {
                    reply(send, 200, &list("ToolList", tools.clone()))
                }
                ("GET", "/apis/mcc.dev/v1alpha1/usergrants") => {
                    reply(send, 200, &list("UserGrantList", vec![alice_json.clone()]))
                }
                ("GET", "/apis/mcc.dev/v1alpha1/mcpservers") => {
                    reply(send, 200, &list("MCPServerList", vec![upstream.clone()]))
                }
                ("GET", "/api/v1/namespaces/ns/secrets") => {
                    // Only in the trusted namespace, and only the operator's own.
                    assert!(
                        query.contains(
                            "labelSelector=app.kubernetes.io%2Fmanaged-by%3Dmcc-operator"
                        ),
                        "{query}"
                    );
                    reply(send, 200, &list("SecretList", vec![]))
                }
                ("GET", "/api/v1/namespaces/ns/secrets/alice-api-key") => {
                    reply(send, 404, &not_found("secrets", "alice-api-key"))
                }
                ("PATCH", "/api/v1/namespaces/ns/secrets/alice-api-key") => {
                    secret_written = true;
                    reply(send, 200, &body)
                }
                ("GET", "/api/v1/namespaces/mcc-system/configmaps/mcc-catalog") => {
                    reply(send, 404, &not_found("configmaps", "mcc-catalog"))
                }
                ("PATCH", "/api/v1/namespaces/mcc-system/configmaps/mcc-catalog") => {
                    catalog = Some(body.clone());
                    reply(send, 200, &body)
                }
                ("POST", p) if p.ends_with("/events") => {
                    events.push(body.clone());
                    reply(send, 201, &body)
                }
                ("PATCH", p) if p.ends_with("/status") => {
                    let source = if p.contains("/usergrants/") {
                        &alice_json
                    } else if p.contains("/mcpservers/") {
                        &upstream
                    } else {
                        let name = p.rsplit('/').nth(1).unwrap();
                        tools
                            .iter()
                            .find(|t| t["metadata"]["name"] == name)
                            .unwrap()
                    };
                    let mut obj = source.clone();
                    obj["status"] = body["status"].clone();
                    statuses.insert(p.to_string(), body["status"].clone());
                    reply(send, 200, &obj)
                }
                other => panic!("unexpected request {other:?} ?{query}"),
            }
        }
        operator.abort();

        let reason = |p: &str| {
            statuses[p]["conditions"][0]["reason"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(
            reason("/apis/mcc.dev/v1alpha1/namespaces/ns/tools/good/status"),
            "Published"
        );
        assert_eq!(
            reason("/apis/mcc.dev/v1alpha1/namespaces/ns/tools/bad/status"),
            "InvalidSpec"
        );
        assert_eq!(
            reason("/apis/mcc.dev/v1alpha1/namespaces/other/tools/dup/status"),
            "KeyOwnedByOtherNamespace"
        );
        assert_eq!(
            reason("/apis/mcc.dev/v1alpha1/namespaces/ns/tools/report/status"),
            "Published"
        );
        assert_eq!(
            reason("/apis/mcc.dev/v1alpha1/namespaces/ns/mcpservers/far/status"),
            "UpstreamNotAllowed"
        );
        let grant = &statuses["/apis/mcc.dev/v1alpha1/namespaces/ns/usergrants/alice/status"];
        assert!(grant["apiKey"]["sha256"].is_string());
        assert!(secret_written);
        assert!(events.iter().any(|e| e["regarding"]["name"] == "bad"));

        let text = catalog.unwrap()["data"]["catalog.json"]
            .as_str()
            .unwrap()
            .to_string();
        let doc = mcc_catalog::document::decode(Some(&text), None).unwrap();
        let keys: Vec<(&str, &str)> = doc
            .tools
            .iter()
            .map(|t| (t.tool.key.as_str(), t.namespace.as_str()))
            .collect();
        assert_eq!(keys, [("greet", "ns"), ("report", "ns")]);
        assert!(doc.tools[1].introspect);
        assert_eq!(doc.users[0].user.username, "alice");
        drop(open_watches);
    }

    /// A namespace label selector as the watch scope: the operator lists the matching
    /// Namespaces, and acts only on objects there — the grant and the invalid Tool of the
    /// other namespace get no status, no Event, no key and no place in the catalog.
    #[tokio::test]
    async fn a_selector_scope_acts_only_on_matching_namespaces() {
        let mine = TestTool::exec("mine", "ns", "greet");
        let theirs = TestTool::exec("theirs", "team-b", "broken").with_exec("echo {{ x ");
        let tools: Vec<Value> = [&mine, &theirs]
            .iter()
            .map(|t| serde_json::to_value(t).unwrap())
            .collect();
        let foreign = TestGrant::new("g", "mallory")
            .in_namespace("team-b")
            .api_key(None);
        let grants = vec![serde_json::to_value(&foreign).unwrap()];
        let selector = crate::settings::parse_selector("mcc.dev/tenant=blue").unwrap();

        let (service, mut api) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let mut policy = test_policy();
        policy.trusted.insert("team-b".into());
        let operator = tokio::spawn(run(
            client,
            Arc::new(Metrics::default()),
            RunSettings {
                publish: settings("mcc-system", "mcc-catalog", Duration::from_millis(50)),
                policy,
                watch_selector: Some(selector),
            },
        ));
        let mut open_watches = Vec::new();
        // (The mocked watches never deliver the written status, so the same status is
        // written again on every publish cycle: what matters is where writes go.)
        let mut writes = std::collections::BTreeSet::new();
        let mut catalog: Option<Value> = None;
        let mut namespaces_listed = false;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(1500);
        loop {
            let next = tokio::time::timeout_at(deadline, api.next_request()).await;
            let Ok(Some((req, send))) = next else { break };
            let method = req.method().to_string();
            let path = req.uri().path().to_string();
            let query = req.uri().query().unwrap_or_default().to_string();
            let bytes = req.into_body().collect_bytes().await.unwrap();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            match (method.as_str(), path.as_str()) {
                ("GET", _) if query.contains("watch=true") => open_watches.push(send),
                ("GET", "/api/v1/namespaces") => {
                    assert!(
                        query.contains("labelSelector=mcc.dev%2Ftenant%3Dblue"),
                        "{query}"
                    );
                    namespaces_listed = true;
                    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": "ns", "labels": {"mcc.dev/tenant": "blue"}}});
                    reply(send, 200, &list("NamespaceList", vec![ns]))
                }
                ("GET", "/apis/mcc.dev/v1alpha1/tools") => {
                    reply(send, 200, &list("ToolList", tools.clone()))
                }
                ("GET", "/apis/mcc.dev/v1alpha1/usergrants") => {
                    reply(send, 200, &list("UserGrantList", grants.clone()))
                }
                ("GET", "/apis/mcc.dev/v1alpha1/mcpservers") => {
                    reply(send, 200, &list("MCPServerList", vec![]))
                }
                ("GET", "/api/v1/namespaces/ns/secrets" | "/api/v1/namespaces/team-b/secrets") => {
                    reply(send, 200, &list("SecretList", vec![]))
                }
                ("GET", "/api/v1/namespaces/mcc-system/configmaps/mcc-catalog") => {
                    reply(send, 404, &not_found("configmaps", "mcc-catalog"))
                }
                ("PATCH", "/api/v1/namespaces/mcc-system/configmaps/mcc-catalog") => {
                    catalog = Some(body.clone());
                    reply(send, 200, &body)
                }
                ("PATCH", "/apis/mcc.dev/v1alpha1/namespaces/ns/tools/mine/status") => {
                    writes.insert(path.clone());
                    let mut obj = tools[0].clone();
                    obj["status"] = body["status"].clone();
                    reply(send, 200, &obj)
                }
                other => panic!("a request outside the scope: {other:?} ?{query}"),
            }
        }
        operator.abort();
        assert!(namespaces_listed);
        assert_eq!(
            writes.into_iter().collect::<Vec<_>>(),
            ["/apis/mcc.dev/v1alpha1/namespaces/ns/tools/mine/status"]
        );
        let text = catalog.expect("a catalog was published")["data"]["catalog.json"]
            .as_str()
            .unwrap()
            .to_string();
        let doc = mcc_catalog::document::decode(Some(&text), None).unwrap();
        assert_eq!(doc.tools.len(), 1);
        assert!(doc.users.is_empty(), "team-b's grant is not in scope");
        drop(open_watches);
    }
}
