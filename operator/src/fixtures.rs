//! Test helpers: small builders for `Tool` and `UserGrant` objects, contexts over stores
//! of them, and the mocked API server (`mcc_catalog::kube_mock`) as `ApiServerVerifier`.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Client, Resource};
use mcc_catalog::crd::{
    ApiKeySpec, ApiKeyStatus, PodRuntime, Runtime, Tool, ToolSpec, ToolStatus, UserGrant,
    UserGrantSpec,
};
use serde_json::Value;

use crate::controller::Context;
use crate::metrics::Metrics;
use crate::policy::Policy;

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
    fn with_groups(self, groups: &[&str]) -> Self;
    /// `runtime: pod` with a placeholder image.
    fn in_pod(self) -> Self;
    /// `runtime: pod` (the default image unless set), changed by `f`.
    fn pod(self, f: impl FnOnce(&mut PodRuntime)) -> Self;
    /// An fn tool `module:callable` instead of the exec command, with no name.
    fn with_fn(self, path: &str) -> Self;
    /// As if the operator had published it under its current key.
    fn serving(self) -> Self;
}

impl ToolBuilder for Tool {
    fn with_exec(mut self, command: &str) -> Self {
        self.spec.exec = Some(command.into());
        self
    }
    fn with_groups(mut self, groups: &[&str]) -> Self {
        self.spec.groups = groups.iter().map(|g| g.to_string()).collect();
        self
    }
    fn in_pod(mut self) -> Self {
        self.spec.runtime = Some(Runtime::Pod(PodRuntime {
            image: Some("example/tool:1".into()),
            ..Default::default()
        }));
        self
    }
    fn pod(mut self, f: impl FnOnce(&mut PodRuntime)) -> Self {
        let mut pod = match self.spec.runtime.take() {
            Some(Runtime::Pod(p)) => p,
            _ => PodRuntime::default(),
        };
        f(&mut pod);
        self.spec.runtime = Some(Runtime::Pod(pod));
        self
    }
    fn with_fn(mut self, path: &str) -> Self {
        (self.spec.exec, self.spec.name) = (None, None);
        self.spec.func = Some(path.into());
        self
    }
    fn serving(mut self) -> Self {
        let key = crate::convert::catalog_tool(&self)
            .expect("a serving Tool is valid")
            .tool
            .key;
        self.status = Some(ToolStatus {
            key: Some(key),
            conditions: vec![crate::status::ready_condition(
                true,
                "Published",
                "in the catalog".into(),
                Some(1),
                &[],
            )],
            ..Default::default()
        });
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
    fn in_namespace(self, ns: &str) -> Self;
    /// As if the operator had issued a key with this prefix.
    fn issued(self, prefix: &str) -> Self;
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
    fn in_namespace(mut self, ns: &str) -> Self {
        self.metadata.namespace = Some(ns.into());
        self
    }
    fn issued(mut self, prefix: &str) -> Self {
        let name = format!(
            "{}-api-key",
            self.metadata.name.as_deref().unwrap_or_default()
        );
        self.status.get_or_insert_with(Default::default).api_key = Some(ApiKeyStatus {
            secret_name: name,
            prefix: prefix.into(),
            sha256: "ab".repeat(32),
            expires_at: None,
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

/// The mocked API server, shared with the gateway's Kubernetes tests.
pub use mcc_catalog::kube_mock::{ApiServer as ApiServerVerifier, Seen};

/// A 404 Status body.
pub fn not_found(kind: &str, name: &str) -> Value {
    serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": format!("{kind} \"{name}\" not found"), "reason": "NotFound", "code": 404
    })
}

/// The policy of most tests: a single-tenant install whose trusted namespace is `ns`
/// (where [`TestGrant`]s live), with `other` also allowed the local runtime.
pub fn test_policy() -> Policy {
    let mut policy = Policy::single_tenant(["ns"]);
    policy.local_runtime.insert("other".into());
    policy
}

/// [`test_policy`] with the pod runtime on in `ns` and `team-a` (not `team-b`), where
/// pod Tools may use images under `example/`, the ServiceAccount `runner`, the node
/// selector `pool: tools`, tolerations of `dedicated`; no token.
pub fn pod_test_policy() -> Policy {
    use crate::policy::{PodAllowance, PodScope};
    let mut policy = test_policy();
    policy.pod_namespaces = PodScope::Only(["ns".into(), "team-a".into()].into());
    policy.pod_policy = [(
        "*".to_string(),
        PodAllowance {
            images: vec!["example/".into()],
            service_accounts: ["runner".into()].into(),
            node_selector: [("pool".into(), ["tools".into()].into())].into(),
            tolerations: ["dedicated".into()].into(),
            automount_service_account_token: false,
            resources: Default::default(),
        },
    )]
    .into();
    policy
}

/// A Context over stores of the given objects, under [`test_policy`].
pub fn context(client: Client, tools: &[Tool], grants: &[UserGrant]) -> Arc<Context> {
    context_with(client, tools, grants, test_policy())
}

/// A Context over stores of the given objects, under `policy`.
pub fn context_with(
    client: Client,
    tools: &[Tool],
    grants: &[UserGrant],
    policy: Policy,
) -> Arc<Context> {
    Arc::new(Context::new(
        client,
        store(tools),
        store(grants),
        Arc::new(Metrics::default()),
        policy,
        None,
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
