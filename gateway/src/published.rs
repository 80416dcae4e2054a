//! The operator's catalog document in the gateway (Kubernetes mode): decodes the
//! ConfigMap payload ([`mcc_catalog::document::decode`]), introspects the fn tools the
//! document flags, and builds the same [`Catalog`] snapshot and auth [`Directory`] that
//! file mode builds. Free of Kubernetes API calls: [`crate::kube`] fetches the ConfigMap.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use mcc_catalog::document::{self, CatalogDocument, CatalogUser, Runtime};
use mcc_catalog::introspect::{Introspector, Pending};

use crate::auth::{ApiKeyEntry, Directory, UserEntry};
use crate::catalog::{Catalog, ToolRefs};

/// Why a published document cannot be served; the last good catalog stays.
#[derive(Debug, thiserror::Error)]
pub enum PublishedError {
    #[error("catalog ConfigMap {configmap}: {source}")]
    Decode {
        configmap: String,
        source: document::DocumentError,
    },
    #[error("catalog ConfigMap {configmap}: introspecting fn tools: {source}")]
    Introspection {
        configmap: String,
        source: Box<mcc_catalog::introspect::IntrospectError>,
    },
    #[error("catalog ConfigMap {configmap}: {source}")]
    Tools {
        configmap: String,
        source: Box<mcc_catalog::LoadError>,
    },
    #[error("catalog ConfigMap {configmap}: {message}")]
    Users { configmap: String, message: String },
}

/// Decodes a ConfigMap's payload (`data[catalog.json]` or `binaryData[catalog.json.gz]`)
/// into a snapshot. `configmap` (`namespace/name`) only names the source in errors.
/// Blocking: introspection runs Python.
pub fn build(
    configmap: &str,
    json: Option<&str>,
    gzip: Option<&[u8]>,
    introspector: &Introspector,
) -> Result<(Catalog, Directory), PublishedError> {
    let doc = document::decode(json, gzip).map_err(|source| PublishedError::Decode {
        configmap: configmap.to_string(),
        source,
    })?;
    from_document(configmap, doc, introspector)
}

/// Builds the snapshot of a decoded document.
pub fn from_document(
    configmap: &str,
    doc: CatalogDocument,
    introspector: &Introspector,
) -> Result<(Catalog, Directory), PublishedError> {
    let mut tools = Vec::with_capacity(doc.tools.len());
    let mut refs = Vec::with_capacity(doc.tools.len());
    let mut pending = Vec::new();
    for (index, entry) in doc.tools.into_iter().enumerate() {
        if entry.introspect {
            pending.push(Pending {
                index,
                name_from_callable: entry.name_from_callable,
            });
        }
        refs.push(ToolRefs {
            namespace: entry.namespace,
            resource: entry.resource,
            env_from: entry.env_from,
            env_value_from: entry.env_value_from,
            pod: !matches!(entry.runtime, Runtime::Local),
        });
        tools.push(entry.tool);
    }
    introspector
        .fill(&mut tools, &pending)
        .map_err(|source| PublishedError::Introspection {
            configmap: configmap.to_string(),
            source: Box::new(source),
        })?;
    // Introspection may rename a tool (its callable's `__name__`), so keys are checked
    // after it, as the file loader does.
    mcc_catalog::load::check_duplicates(&tools).map_err(|source| PublishedError::Tools {
        configmap: configmap.to_string(),
        source: Box::new(source),
    })?;
    let refs: HashMap<String, ToolRefs> = tools
        .iter()
        .map(|t| t.key.clone())
        .zip(refs)
        .filter(|(_, r)| !r.is_empty())
        .collect();
    let directory = directory(configmap, &doc.users)?;
    let catalog = Catalog::new(tools, directory.users().to_vec()).with_refs(refs);
    Ok((catalog, directory))
}

/// The auth directory of the document's users: their API keys (prefix, hash, expiry)
/// and the ServiceAccounts bound to them.
fn directory(configmap: &str, users: &[CatalogUser]) -> Result<Directory, PublishedError> {
    let err = |message: String| PublishedError::Users {
        configmap: configmap.to_string(),
        message,
    };
    let mut entries = Vec::with_capacity(users.len());
    for u in users {
        let mut api_keys = Vec::with_capacity(u.api_keys.len());
        for key in &u.api_keys {
            let expires_at = key
                .expires_at
                .as_deref()
                .map(|at| {
                    at.parse::<DateTime<Utc>>().map_err(|e| {
                        err(format!(
                            "user '{}': API key {}: expiresAt '{at}': {e}",
                            u.user.username, key.prefix
                        ))
                    })
                })
                .transpose()?;
            api_keys.push(ApiKeyEntry {
                prefix: key.prefix.clone(),
                sha256: key.sha256.clone(),
                expires_at,
            });
        }
        entries.push(UserEntry {
            user: u.user.clone(),
            api_keys,
        });
    }
    let mut directory = Directory::new(entries).map_err(|e| err(e.to_string()))?;
    for u in users {
        for sa in &u.service_accounts {
            if !directory.bind_service_account(&sa.namespace, &sa.name, &u.user.username) {
                tracing::warn!(
                    service_account = %format!("{}/{}", sa.namespace, sa.name),
                    user = %u.user.username,
                    "ServiceAccount bound to more than one user; it acts as the first (by username)"
                );
            }
        }
    }
    Ok(directory)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(value: serde_json::Value) -> String {
        value.to_string()
    }

    fn sample() -> serde_json::Value {
        let raw = mcc_catalog::apikey::format_key(&[0xab; 6], &[1; 32]);
        let record = mcc_catalog::apikey::ApiKeyRecord::of(&raw, None).unwrap();
        json!({
            "format": 1,
            "tools": [
                {"tool": {"key": "ops.status", "name": "status", "kind": "exec", "command": "echo ok", "groups": ["ops"]},
                 "namespace": "tools", "resource": "status",
                 "envValueFrom": [{"env": "TOKEN", "source": "secret", "name": "api", "key": "token"}]},
                {"tool": {"key": "hello", "name": "hello", "kind": "exec", "command": "echo hi"},
                 "namespace": "tools", "resource": "hello"}
            ],
            "users": [
                {"user": {"username": "alice", "groups": ["ops"]},
                 "serviceAccounts": [{"namespace": "agents", "name": "bot"}],
                 "apiKeys": [record]},
                {"user": {"username": "bob"},
                 "serviceAccounts": [{"namespace": "agents", "name": "bot"}]}
            ]
        })
    }

    #[test]
    fn a_document_becomes_the_file_mode_snapshot() {
        let (catalog, dir) = build(
            "mcc/mcc-catalog",
            Some(&doc(sample())),
            None,
            &Introspector::default(),
        )
        .unwrap();
        assert_eq!(catalog.tools().len(), 2);
        assert_eq!(catalog.tool("ops.status").unwrap().name, "status");
        let refs = catalog.refs("ops.status").unwrap();
        assert_eq!(refs.namespace, "tools");
        assert_eq!(refs.env_value_from[0].env, "TOKEN");
        assert!(catalog.refs("hello").is_none(), "no references, no entry");
        assert_eq!(catalog.users().len(), 2);
        assert_eq!(
            dir.by_service_account("agents", "bot").unwrap().username,
            "alice",
            "a ServiceAccount bound twice acts as the first user"
        );
        assert!(dir.by_service_account("agents", "other").is_none());
        assert!(dir.key("abababababab").is_some());
    }

    #[test]
    fn bad_documents_name_the_configmap_and_problem() {
        let e = build("ns/cm", None, None, &Introspector::default())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("ns/cm") && e.contains("catalog.json"), "{e}");

        let mut dup = sample();
        dup["tools"][1]["tool"]["key"] = json!("ops.status");
        let e = build("ns/cm", Some(&doc(dup)), None, &Introspector::default())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("ns/cm") && e.contains("ops.status"), "{e}");

        let mut expiry = sample();
        expiry["users"][0]["apiKeys"][0]["expiresAt"] = json!("next week");
        let e = build("ns/cm", Some(&doc(expiry)), None, &Introspector::default())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("alice") && e.contains("next week"), "{e}");
    }

    #[test]
    fn flagged_fn_tools_are_introspected() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("k8s_mod.py"),
            "def add(a: int, b: int = 2) -> int:\n    \"\"\"Adds.\"\"\"\n    return a + b\n",
        )
        .unwrap();
        let value = json!({"format": 1, "users": [], "tools": [
            {"tool": {"key": "math.k8s_mod", "name": "k8s_mod", "kind": "fn", "path": "k8s_mod:add",
                      "groups": ["math"], "cwd": dir.path()},
             "namespace": "tools", "resource": "add", "introspect": true, "nameFromCallable": true}
        ]});
        let (catalog, _) =
            build("ns/cm", Some(&doc(value)), None, &Introspector::default()).unwrap();
        let tool = catalog.tool("math.add").expect("renamed after __name__");
        assert_eq!(tool.params.len(), 2);
        assert_eq!(tool.description, "Adds.");
    }
}
