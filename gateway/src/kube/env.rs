//! `envFrom` and `valueFrom` of Kubernetes `Tool`s, resolved at execution time: Secrets
//! and ConfigMaps read from the Tool's namespace (a Pod's rules: a missing object or key
//! fails the call unless the reference is `optional`; an `envFrom` `prefix` is prepended),
//! kept for a few seconds so a burst of calls costs one read. Values go only into the tool
//! process's environment: errors and logs name objects and keys, never values, and an
//! API failure reaches the caller as a short reason ([`super::errors`]), its text only
//! the log.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::Api;
use mcc_catalog::document::RefKind;

use crate::catalog::ToolRefs;
use crate::exec::environment::{EnvResolver, ReferencedEnv};

/// How long a read object is reused.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);

/// The keys and values of one Secret or ConfigMap; `None`: it does not exist.
type Object = Option<Arc<BTreeMap<String, String>>>;
/// Kind, namespace and name of a cached object.
type ObjectKey = (&'static str, String, String);

/// Reads Secrets and ConfigMaps with a small TTL cache.
pub struct KubeEnvResolver {
    client: Client,
    ttl: Duration,
    cache: Mutex<HashMap<ObjectKey, (Object, Instant)>>,
}

impl KubeEnvResolver {
    pub fn new(client: Client, ttl: Duration) -> Self {
        Self {
            client,
            ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// One object, from the cache while fresh.
    async fn object(&self, kind: RefKind, namespace: &str, name: &str) -> Result<Object, String> {
        let key = (kind_name(kind), namespace.to_string(), name.to_string());
        if let Some((obj, at)) = self.cache.lock().expect("env cache lock").get(&key)
            && at.elapsed() < self.ttl
        {
            return Ok(obj.clone());
        }
        let obj = self.read(kind, namespace, name).await?;
        let mut cache = self.cache.lock().expect("env cache lock");
        cache.retain(|_, (_, at)| at.elapsed() < self.ttl);
        cache.insert(key, (obj.clone(), Instant::now()));
        Ok(obj)
    }

    async fn read(&self, kind: RefKind, namespace: &str, name: &str) -> Result<Object, String> {
        let what = || format!("{} {namespace}/{name}", kind_name(kind));
        // The API's own text (RBAC, addresses, the gateway's identity) stays in the log.
        let failed = |e: kube::Error| {
            tracing::warn!(object = %what(), error = %e, "reading a tool's environment reference failed");
            format!("reading {}: {}", what(), super::errors::reason(&e))
        };
        let values = match kind {
            RefKind::Secret => {
                let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
                let Some(secret) = api.get_opt(name).await.map_err(failed)? else {
                    return Ok(None);
                };
                let mut values = BTreeMap::new();
                for (key, bytes) in secret.data.unwrap_or_default() {
                    let text = String::from_utf8(bytes.0)
                        .map_err(|_| format!("{}: key '{key}' is not UTF-8 text", what()))?;
                    values.insert(key, text);
                }
                values
            }
            RefKind::ConfigMap => {
                let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
                let Some(cm) = api.get_opt(name).await.map_err(failed)? else {
                    return Ok(None);
                };
                cm.data.unwrap_or_default()
            }
        };
        Ok(Some(Arc::new(values)))
    }
}

fn kind_name(kind: RefKind) -> &'static str {
    match kind {
        RefKind::Secret => "Secret",
        RefKind::ConfigMap => "ConfigMap",
    }
}

/// A name a process environment can hold (as the kubelet accepts: no `=`, not empty).
fn usable_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('=') && !name.contains('\0')
}

#[async_trait::async_trait]
impl EnvResolver for KubeEnvResolver {
    async fn resolve(&self, refs: &ToolRefs) -> Result<ReferencedEnv, String> {
        let ns = refs.namespace.as_str();
        let mut out = ReferencedEnv::default();
        for source in &refs.env_from {
            let what = format!("envFrom {} {ns}/{}", kind_name(source.source), source.name);
            let Some(values) = self.object(source.source, ns, &source.name).await? else {
                if source.optional {
                    continue;
                }
                return Err(format!("{what}: not found"));
            };
            let prefix = source.prefix.as_deref().unwrap_or("");
            for (key, value) in values.iter() {
                let name = format!("{prefix}{key}");
                if usable_name(&name) {
                    out.env_from.push((name, value.clone()));
                } else {
                    tracing::warn!(tool = %refs.resource, source = %what, key = %key, "skipping a key that is not a variable name");
                }
            }
        }
        for entry in &refs.env_value_from {
            let what = format!(
                "valueFrom of {}: {} {ns}/{} key '{}'",
                entry.env,
                kind_name(entry.source),
                entry.name,
                entry.key
            );
            let object = self.object(entry.source, ns, &entry.name).await?;
            match object.as_ref().and_then(|values| values.get(&entry.key)) {
                Some(value) => out.value_from.push((entry.env.clone(), value.clone())),
                None if entry.optional => {}
                None if object.is_none() => return Err(format!("{what}: the object is not found")),
                None => return Err(format!("{what}: no such key")),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use mcc_catalog::document::{EnvFromRef, EnvValueRef};
    use mcc_catalog::kube_mock::ApiServer;
    use serde_json::json;

    fn b64(text: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    fn not_found(name: &str) -> serde_json::Value {
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
               "code": 404, "message": format!("\"{name}\" not found")})
    }

    fn refs() -> ToolRefs {
        ToolRefs {
            namespace: "tools".into(),
            resource: "status".into(),
            env_from: vec![EnvFromRef {
                source: RefKind::ConfigMap,
                name: "settings".into(),
                prefix: Some("APP_".into()),
                optional: false,
            }],
            env_value_from: vec![EnvValueRef {
                env: "TOKEN".into(),
                source: RefKind::Secret,
                name: "api".into(),
                key: "token".into(),
                optional: false,
            }],
            pod: None,
            session: Default::default(),
        }
    }

    #[tokio::test]
    async fn reads_configmap_and_secret_in_the_tools_namespace_then_caches() {
        let (client, mut api) = ApiServer::new();
        let resolver = KubeEnvResolver::new(client, DEFAULT_TTL);
        let server =
            async {
                api.expect("GET", "/api/v1/namespaces/tools/configmaps/settings", 200,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
                       "data": {"REGION": "eu", "bad=key": "x"}}))
                .await;
                api.expect(
                    "GET",
                    "/api/v1/namespaces/tools/secrets/api",
                    200,
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "api"},
                       "data": {"token": b64("s3cr3t")}}),
                )
                .await;
                api
            };
        let tool_refs = refs();
        let (env, mut api) = tokio::join!(resolver.resolve(&tool_refs), server);
        let env = env.unwrap();
        assert_eq!(
            env.env_from,
            vec![("APP_REGION".to_string(), "eu".to_string())]
        );
        assert_eq!(
            env.value_from,
            vec![("TOKEN".to_string(), "s3cr3t".to_string())]
        );
        assert!(
            !format!("{env:?}").contains("s3cr3t"),
            "Debug shows names only"
        );
        // Within the TTL: no further reads.
        assert_eq!(resolver.resolve(&refs()).await.unwrap(), env);
        api.expect_nothing().await;
    }

    #[tokio::test]
    async fn missing_objects_and_keys_fail_unless_optional() {
        let (client, mut api) = ApiServer::new();
        let resolver = KubeEnvResolver::new(client, Duration::ZERO);
        let secret = |data: serde_json::Value| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "api"}, "data": data});
        let only_secret = ToolRefs {
            env_from: vec![],
            ..refs()
        };

        let server = api.expect(
            "GET",
            "/api/v1/namespaces/tools/secrets/api",
            404,
            not_found("api"),
        );
        let (result, _) = tokio::join!(resolver.resolve(&only_secret), server);
        let e = result.unwrap_err();
        assert!(
            e.contains("Secret tools/api") && e.contains("TOKEN") && e.contains("not found"),
            "{e}"
        );

        let server = api.expect(
            "GET",
            "/api/v1/namespaces/tools/secrets/api",
            200,
            secret(json!({"other": b64("v")})),
        );
        let (result, _) = tokio::join!(resolver.resolve(&only_secret), server);
        let e = result.unwrap_err();
        assert!(
            e.contains("key 'token'") && e.contains("no such key"),
            "{e}"
        );

        let mut optional = only_secret.clone();
        optional.env_value_from[0].optional = true;
        let server = api.expect(
            "GET",
            "/api/v1/namespaces/tools/secrets/api",
            404,
            not_found("api"),
        );
        let (result, _) = tokio::join!(resolver.resolve(&optional), server);
        assert_eq!(result.unwrap(), ReferencedEnv::default());
    }

    #[tokio::test]
    async fn an_api_failure_reaches_the_caller_without_the_apis_text() {
        let (client, mut api) = ApiServer::new();
        let resolver = KubeEnvResolver::new(client, Duration::ZERO);
        let only_secret = ToolRefs {
            env_from: vec![],
            ..refs()
        };
        let server = api.expect(
            "GET",
            "/api/v1/namespaces/tools/secrets/api",
            403,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
                   "message": "secrets \"api\" is forbidden: User \"system:serviceaccount:mcc:mcc-gateway\" cannot get resource \"secrets\""}),
        );
        let (result, _) = tokio::join!(resolver.resolve(&only_secret), server);
        let e = result.unwrap_err();
        assert!(e.contains("Secret tools/api") && e.contains("RBAC"), "{e}");
        assert!(
            !e.contains("system:serviceaccount") && !e.contains("cannot get"),
            "{e}"
        );
    }

    /// End to end through the engine: the resolved values reach the tool process in the
    /// catalog's env order, and a gateway without a resolver refuses such a tool.
    #[tokio::test]
    async fn the_engine_runs_tools_with_resolved_references() {
        use crate::exec::{Call, Engine, EngineSettings, Outcome};
        let settings = || EngineSettings {
            env_floor: vec!["PATH".into()],
            runtime: std::sync::Arc::new(mcc_executor::InProcess::new(vec![(
                "PATH".into(),
                std::env::var("PATH").unwrap_or_default(),
            )])),
            max_output_bytes: 10_000,
            debug: false,
            default_timeout: None,
            max_timeout: None,
        };
        let tool: mcc_catalog::Tool = serde_json::from_value(json!({
            "key": "status", "name": "status", "kind": "exec",
            "command": "printf '%s %s %s' \"$APP_REGION\" \"$TOKEN\" \"$MCC_CTX_USER\"",
            "env": {"TOKEN": "plain"}
        }))
        .unwrap();
        let tool_refs = refs();
        let call = || Call {
            tool: &tool,
            refs: Some(&tool_refs),
            params: Default::default(),
            context: json!({"user": "alice"}).as_object().unwrap().clone(),
            caller: "alice",
        };

        let bare = Engine::new(settings());
        let e = bare.execute(call()).await.unwrap_err().to_string();
        assert!(e.contains("no Kubernetes API access"), "{e}");

        let (client, mut api) = ApiServer::new();
        let engine = Engine::new(settings())
            .with_env_resolver(Arc::new(KubeEnvResolver::new(client, DEFAULT_TTL)));
        let server =
            async {
                api.expect("GET", "/api/v1/namespaces/tools/configmaps/settings", 200,
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
                       "data": {"REGION": "eu"}}))
                .await;
                api.expect(
                    "GET",
                    "/api/v1/namespaces/tools/secrets/api",
                    200,
                    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "api"},
                       "data": {"token": b64("s3cr3t")}}),
                )
                .await;
            };
        let (result, ()) = tokio::join!(engine.execute(call()), server);
        match result.unwrap().outcome {
            Outcome::Success(v) => {
                assert_eq!(v, json!("eu s3cr3t alice"), "valueFrom wins over env")
            }
            other => panic!("{other:?}"),
        }
    }
}
