//! An in-memory Kubernetes API for ConfigMaps in one namespace, behind kube `Client`s over
//! `tower_test::mock` (one per process it plays: the operator, each gateway replica), with
//! a latency model: every request waits `request` plus its bytes at `bytes_per_sec`, and a
//! watch event reaches a watcher `watch` after the write that caused it.
//!
//! Enough of the API for the catalog: server-side apply (`PATCH`, the body becomes the
//! object), `GET`, `DELETE`, the list and watch of one object by `fieldSelector` (a watch
//! answers the events after its `resourceVersion` and ends, like a watch that the server
//! closes after each change; the watcher then watches again from there).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use tokio::sync::watch;

/// How slow the simulated API server is.
#[derive(Debug, Clone, Copy)]
pub struct Latency {
    /// Every request, before it is answered.
    pub request: Duration,
    /// Transfer rate of request and answer bodies.
    pub bytes_per_sec: f64,
    /// From a write to its watch event reaching a watcher.
    pub watch: Duration,
}

#[derive(Default)]
struct State {
    objects: BTreeMap<String, Value>,
    /// (resourceVersion, type, object) of every change, oldest first.
    events: Vec<(u64, &'static str, Value)>,
    version: u64,
}

/// The API server's state, shared by every client.
#[derive(Clone)]
pub struct FakeApi {
    state: Arc<Mutex<State>>,
    changed: Arc<watch::Sender<u64>>,
    latency: Latency,
    namespace: String,
}

impl FakeApi {
    pub fn new(namespace: &str, latency: Latency) -> Self {
        Self {
            state: Arc::default(),
            changed: Arc::new(watch::channel(0).0),
            latency,
            namespace: namespace.to_string(),
        }
    }

    /// A client of this server (a process of its own: its own connection).
    pub fn client(&self) -> Client {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let api = self.clone();
        tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                let api = api.clone();
                tokio::spawn(async move { send.send_response(api.answer(request).await) });
            }
        });
        Client::new(service, self.namespace.clone())
    }

    /// Bytes stored in ConfigMaps named `prefix*` (their binaryData as base64, data as
    /// text), and how many there are.
    pub fn stored(&self, prefix: &str) -> (usize, usize) {
        let state = self.state.lock().unwrap();
        let mut bytes = 0;
        let mut count = 0;
        for (name, cm) in state.objects.range(prefix.to_string()..) {
            if !name.starts_with(prefix) {
                break;
            }
            count += 1;
            for key in ["data", "binaryData"] {
                if let Some(map) = cm[key].as_object() {
                    bytes += map
                        .values()
                        .filter_map(Value::as_str)
                        .map(str::len)
                        .sum::<usize>();
                }
            }
        }
        (bytes, count)
    }

    /// An annotation of a stored ConfigMap.
    pub fn annotation(&self, name: &str, key: &str) -> Option<String> {
        let state = self.state.lock().unwrap();
        state.objects.get(name)?["metadata"]["annotations"][key]
            .as_str()
            .map(str::to_string)
    }

    async fn transfer(&self, bytes: usize) {
        let secs = bytes as f64 / self.latency.bytes_per_sec;
        tokio::time::sleep(self.latency.request + Duration::from_secs_f64(secs)).await;
    }

    async fn answer(&self, request: Request<Body>) -> Response<Body> {
        let method = request.method().clone();
        let path = request.uri().path().to_string();
        let query = request.uri().query().unwrap_or_default().to_string();
        let body = request
            .into_body()
            .collect_bytes()
            .await
            .unwrap_or_default();
        self.transfer(body.len()).await;
        let base = format!("/api/v1/namespaces/{}/configmaps", self.namespace);
        let name = path.strip_prefix(&format!("{base}/")).map(str::to_string);
        let (status, reply) = match (method.as_str(), name) {
            ("PATCH", Some(name)) => (200, self.apply(&name, &body)),
            ("GET", Some(name)) => match self.state.lock().unwrap().objects.get(&name) {
                Some(cm) => (200, cm.clone()),
                None => (404, not_found(&name)),
            },
            ("DELETE", Some(name)) => self.delete(&name),
            ("GET", None) if query.contains("watch=true") => {
                let events = self.watch(&query).await;
                return Response::new(Body::from(events));
            }
            ("GET", None) => (200, self.list(&query)),
            other => panic!("the fake API does not serve {other:?} {path}"),
        };
        let reply = serde_json::to_vec(&reply).unwrap();
        self.transfer(reply.len()).await;
        Response::builder()
            .status(status)
            .body(Body::from(reply))
            .unwrap()
    }

    fn apply(&self, name: &str, body: &[u8]) -> Value {
        let mut cm: Value = serde_json::from_slice(body).expect("a JSON apply body");
        let mut state = self.state.lock().unwrap();
        state.version += 1;
        let version = state.version;
        cm["metadata"]["resourceVersion"] = json!(version.to_string());
        let kind = if state.objects.contains_key(name) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        state.objects.insert(name.to_string(), cm.clone());
        state.events.push((version, kind, cm.clone()));
        drop(state);
        self.changed.send_replace(version);
        cm
    }

    fn delete(&self, name: &str) -> (u16, Value) {
        let mut state = self.state.lock().unwrap();
        let Some(mut cm) = state.objects.remove(name) else {
            return (404, not_found(name));
        };
        state.version += 1;
        let version = state.version;
        cm["metadata"]["resourceVersion"] = json!(version.to_string());
        state.events.push((version, "DELETED", cm));
        drop(state);
        self.changed.send_replace(version);
        (
            200,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        )
    }

    fn list(&self, query: &str) -> Value {
        let wanted = selected_name(query);
        let state = self.state.lock().unwrap();
        let items: Vec<&Value> = state
            .objects
            .iter()
            .filter(|(name, _)| wanted.as_deref().is_none_or(|w| w == name.as_str()))
            .map(|(_, cm)| cm)
            .collect();
        json!({"apiVersion": "v1", "kind": "ConfigMapList",
               "metadata": {"resourceVersion": state.version.to_string()}, "items": items})
    }

    /// Waits for changes of the selected object after the watch's resourceVersion, then
    /// answers them (after the watch latency).
    async fn watch(&self, query: &str) -> Vec<u8> {
        let wanted = selected_name(query);
        let since: u64 = param(query, "resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut changed = self.changed.subscribe();
        loop {
            let lines: Vec<u8> = {
                let state = self.state.lock().unwrap();
                state
                    .events
                    .iter()
                    .filter(|(v, _, cm)| {
                        *v > since
                            && wanted
                                .as_deref()
                                .is_none_or(|w| cm["metadata"]["name"] == w)
                    })
                    .flat_map(|(_, kind, cm)| {
                        let mut line =
                            serde_json::to_vec(&json!({"type": kind, "object": cm})).unwrap();
                        line.push(b'\n');
                        line
                    })
                    .collect()
            };
            if !lines.is_empty() {
                tokio::time::sleep(self.latency.watch).await;
                self.transfer(lines.len()).await;
                return lines;
            }
            if changed.changed().await.is_err() {
                return Vec::new();
            }
        }
    }
}

fn param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.replace("%3D", "=").replace("%2C", ","))
    })
}

fn selected_name(query: &str) -> Option<String> {
    param(query, "fieldSelector")?
        .strip_prefix("metadata.name=")
        .map(str::to_string)
}

fn not_found(name: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
           "code": 404, "message": format!("configmaps \"{name}\" not found")})
}
