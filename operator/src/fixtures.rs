//! Test helpers: small builders for `Tool` and `UserGrant` objects, and an
//! `ApiServerVerifier` that plays the Kubernetes API server over `tower_test::mock`,
//! asserting each request the operator makes and answering it.

use std::sync::Arc;

use http::{Request, Response};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::client::Body;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Client, Resource};
use mcc_catalog::crd::{ApiKeySpec, Tool, ToolSpec, UserGrant, UserGrantSpec};
use serde_json::Value;

use crate::controller::Context;
use crate::metrics::Metrics;

/// A Tool under construction.
pub struct TestTool;

impl TestTool {
    /// An exec tool `name` in namespace `ns`, resource name `resource`.
    #[allow(clippy::new_ret_no_self)]
    pub fn exec(resource: &str, ns: &str, name: &str) -> Tool {
        let mut t = Tool::new(
            resource,
            ToolSpec {
                name: Some(name.into()),
                exec: Some("echo hi".into()),
                ..Default::default()
            },
        );
        t.metadata.namespace = Some(ns.into());
        t.metadata.uid = Some(format!("uid-{ns}-{resource}"));
        t.metadata.generation = Some(1);
        t.metadata.creation_timestamp = Some(time("2026-01-01T00:00:00Z"));
        t
    }
}

/// Chainable changes to a test object.
pub trait Builder: Sized {
    fn created(self, at: &str) -> Self;
}

impl<K: Resource> Builder for K {
    fn created(mut self, at: &str) -> Self {
        self.meta_mut().creation_timestamp = Some(time(at));
        self
    }
}

/// Tool-only changes.
pub trait ToolBuilder {
    fn with_exec(self, command: &str) -> Self;
}

impl ToolBuilder for Tool {
    fn with_exec(mut self, command: &str) -> Self {
        self.spec.exec = Some(command.into());
        self
    }
}

/// A UserGrant under construction.
pub struct TestGrant;

impl TestGrant {
    #[allow(clippy::new_ret_no_self)]
    pub fn new(resource: &str, username: &str) -> UserGrant {
        let mut g = UserGrant::new(
            resource,
            UserGrantSpec {
                username: username.into(),
                ..Default::default()
            },
        );
        g.metadata.namespace = Some("ns".into());
        g.metadata.uid = Some(format!("uid-{resource}"));
        g.metadata.generation = Some(1);
        g.metadata.creation_timestamp = Some(time("2026-01-01T00:00:00Z"));
        g
    }
}

/// Grant-only changes.
pub trait GrantBuilder {
    fn groups(self, groups: &[&str]) -> Self;
    fn api_key(self, ttl_days: Option<u32>) -> Self;
}

impl GrantBuilder for UserGrant {
    fn groups(mut self, groups: &[&str]) -> Self {
        self.spec.groups = groups.iter().map(|g| g.to_string()).collect();
        self
    }
    fn api_key(mut self, ttl_days: Option<u32>) -> Self {
        self.spec.api_key = Some(ApiKeySpec {
            enabled: true,
            ttl_days,
        });
        self
    }
}

pub fn time(at: &str) -> Time {
    Time(at.parse().expect("test timestamps are RFC 3339"))
}

/// A ready reflector store holding `objs`.
pub fn store<K>(objs: &[K]) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let (reader, mut writer) = reflector::store();
    writer.apply_watcher_event(&watcher::Event::Init);
    for o in objs {
        writer.apply_watcher_event(&watcher::Event::InitApply(o.clone()));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    // The writer must outlive the test for the store to stay ready.
    std::mem::forget(writer);
    reader
}

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

/// Plays the API server: each `expect` takes the next request, checks it, and answers.
pub struct ApiServerVerifier(pub Handle);

/// One request as the verifier saw it.
#[derive(Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: String,
    pub body: Value,
}

impl ApiServerVerifier {
    /// A client talking to a new verifier.
    pub fn new() -> (Client, Self) {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        (Client::new(service, "default"), Self(handle))
    }

    /// Takes the next request, asserts method and path, and answers `status` with `reply`.
    pub async fn expect(&mut self, method: &str, path: &str, status: u16, reply: Value) -> Seen {
        self.expect_with(method, path, move |_| (status, reply))
            .await
    }

    /// Like [`Self::expect`], answering the body as the API server would store it (echo).
    pub async fn expect_echo(&mut self, method: &str, path: &str) -> Seen {
        self.expect_with(method, path, |seen| (200, seen.body.clone()))
            .await
    }

    /// Takes the next request, asserts method and path, and answers what `reply` computes.
    pub async fn expect_with(
        &mut self,
        method: &str,
        path: &str,
        reply: impl FnOnce(&Seen) -> (u16, Value),
    ) -> Seen {
        let (request, send) =
            tokio::time::timeout(std::time::Duration::from_secs(5), self.0.next_request())
                .await
                .unwrap_or_else(|_| panic!("timed out waiting for {method} {path}"))
                .unwrap_or_else(|| panic!("the client closed before {method} {path}"));
        let seen = Seen {
            method: request.method().to_string(),
            path: request.uri().path().to_string(),
            query: request.uri().query().unwrap_or_default().to_string(),
            content_type: request
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string(),
            body: {
                let bytes = request.into_body().collect_bytes().await.unwrap();
                if bytes.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_slice(&bytes).unwrap()
                }
            },
        };
        assert_eq!(
            (seen.method.as_str(), seen.path.as_str()),
            (method, path),
            "{seen:#?}"
        );
        let (status, reply) = reply(&seen);
        send.send_response(
            Response::builder()
                .status(status)
                .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                .unwrap(),
        );
        seen
    }

    /// Asserts that no request arrives within a short while.
    pub async fn expect_nothing(&mut self) {
        let next =
            tokio::time::timeout(std::time::Duration::from_millis(200), self.0.next_request())
                .await;
        if let Ok(Some((req, _))) = next {
            panic!("unexpected request {} {}", req.method(), req.uri());
        }
    }
}

/// A 404 Status body.
pub fn not_found(kind: &str, name: &str) -> Value {
    serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": format!("{kind} \"{name}\" not found"), "reason": "NotFound", "code": 404
    })
}

/// A Context over stores of the given objects.
pub fn context(client: Client, tools: &[Tool], grants: &[UserGrant]) -> Arc<Context> {
    Arc::new(Context::new(
        client,
        store(tools),
        store(grants),
        Arc::new(Metrics::default()),
    ))
}

/// Asserts a server-side apply by the operator.
pub fn assert_apply(seen: &Seen) {
    assert_eq!(seen.method, "PATCH");
    assert!(
        seen.query.contains("fieldManager=mcc-operator"),
        "{}",
        seen.query
    );
    assert!(seen.query.contains("force=true"), "{}", seen.query);
    assert_eq!(seen.content_type, "application/apply-patch+yaml");
}
