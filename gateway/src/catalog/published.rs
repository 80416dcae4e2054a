//! The operator's catalog document in the gateway (Kubernetes mode): decodes the
//! ConfigMap payload ([`mcc_catalog::document::decode`]), introspects the fn tools the
//! document flags, and builds the same [`Catalog`] snapshot and auth [`Directory`] that
//! file mode builds. Free of Kubernetes API calls: `kube` fetches the ConfigMap.
//!
//! Only a document that cannot be decoded is refused. Inside one, what cannot be served
//! is left out and logged, and everything else is served: a fn tool whose introspection
//! fails or whose introspected key collides ([`crate::catalog::exclude`]), an API-key
//! record that is malformed, expires at no valid instant or shares its prefix
//! ([`Directory::lenient`]); an entry that cannot even be read. Users and tools are built apart ([`users`], [`tools`]) so
//! the watcher can swap users in before the (slower) tools are introspected.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use mcc_catalog::document::{self, CatalogDocument, CatalogTool, CatalogUser, Runtime};
use mcc_catalog::introspect::{Introspector, Pending};

use crate::auth::directory::LeftOut;
use crate::auth::{ApiKeyEntry, Directory, UserEntry};
use crate::catalog::exclude::{self, DeclaredDuplicates, ExcludedTool};
use crate::catalog::users::log_left_out;
use crate::catalog::{Catalog, ToolRefs, Users};

/// Why a published document cannot be served; the last good catalog stays.
#[derive(Debug, thiserror::Error)]
pub enum PublishedError {
    #[error("catalog ConfigMap {configmap}: {source}")]
    Decode {
        configmap: String,
        source: document::DocumentError,
    },
}

/// A document built for serving, with what was left out of it.
#[derive(Debug)]
pub struct Published {
    pub catalog: Catalog,
    pub users: Users,
    pub excluded_tools: Vec<ExcludedTool>,
}

/// A decoded document, and what of it could not even be read (logged).
#[derive(Debug)]
pub struct Decoded {
    pub doc: CatalogDocument,
    /// Tool entries that do not deserialize.
    pub skipped_tools: Vec<ExcludedTool>,
    /// API-key records of user entries that do not deserialize.
    pub skipped_api_keys: usize,
}

/// Decodes a ConfigMap's payload (`data[catalog.json]` or `binaryData[catalog.json.gz]`)
/// entry by entry ([`document::decode_entries`]): an entry that cannot be read (a newer
/// operator's shape) is left out and logged. `configmap` (`namespace/name`) names the
/// source in errors and logs.
pub fn decode(
    configmap: &str,
    json: Option<&str>,
    gzip: Option<&[u8]>,
) -> Result<Decoded, PublishedError> {
    let (doc, skipped) =
        document::decode_entries(json, gzip).map_err(|source| PublishedError::Decode {
            configmap: configmap.to_string(),
            source,
        })?;
    let mut decoded = Decoded {
        doc,
        skipped_tools: Vec::new(),
        skipped_api_keys: 0,
    };
    for s in skipped {
        tracing::warn!(
            source = %format!("catalog ConfigMap {configmap}"),
            entry = %s.entry,
            reason = %s.reason,
            "catalog document entry left out: it cannot be read"
        );
        decoded.skipped_api_keys += s.api_keys;
        if s.list == "tools" {
            decoded.skipped_tools.push(ExcludedTool {
                key: String::new(),
                place: s.entry,
                reason: s.reason,
            });
        }
    }
    Ok(decoded)
}

/// Decodes and builds a whole document. Blocking: introspection runs Python.
pub fn build(
    configmap: &str,
    json: Option<&str>,
    gzip: Option<&[u8]>,
    introspector: &Introspector,
) -> Result<Published, PublishedError> {
    let Decoded {
        doc,
        mut skipped_tools,
        skipped_api_keys,
    } = decode(configmap, json, gzip)?;
    let mut users = users(configmap, &doc.users);
    users.excluded_api_keys += skipped_api_keys;
    let (catalog, excluded_tools) = tools(configmap, doc.tools, introspector);
    let catalog = catalog.with_users(users.directory.users().to_vec());
    skipped_tools.extend(excluded_tools);
    Ok(Published {
        catalog,
        users,
        excluded_tools: skipped_tools,
    })
}

/// Builds the snapshot and directory of a decoded document (what was left out is
/// logged).
pub fn from_document(
    configmap: &str,
    doc: CatalogDocument,
    introspector: &Introspector,
) -> Result<(Catalog, Directory), PublishedError> {
    let users = users(configmap, &doc.users);
    let (catalog, _) = tools(configmap, doc.tools, introspector);
    let catalog = catalog.with_users(users.directory.users().to_vec());
    Ok((catalog, users.directory))
}

/// The tools of a document, introspected; tools that cannot be served are left out,
/// logged and returned. The snapshot has no users ([`Catalog::with_users`]).
pub fn tools(
    configmap: &str,
    entries: Vec<CatalogTool>,
    introspector: &Introspector,
) -> (Catalog, Vec<ExcludedTool>) {
    let mut tools = Vec::with_capacity(entries.len());
    let mut refs = Vec::with_capacity(entries.len());
    let mut places = Vec::with_capacity(entries.len());
    let mut pending = Vec::new();
    let mut not_introspectable = Vec::new();
    for entry in entries {
        let place = format!("Tool {}/{}", entry.namespace, entry.resource);
        let pod = match entry.runtime {
            Runtime::Local => None,
            Runtime::Pod(spec) => Some(spec),
        };
        // A pod fn tool's module is in its image, not here: it is never imported in the
        // gateway (the operator publishes it with its declared name, params and type).
        if entry.introspect && pod.is_some() {
            not_introspectable.push(ExcludedTool {
                key: entry.tool.key.clone(),
                place,
                reason: "a runtime: pod fn tool is not introspected by the gateway (its \
                         module is in its image): declare its name, params and return_type"
                    .into(),
            });
            continue;
        }
        if entry.introspect {
            pending.push(Pending {
                index: tools.len(),
                name_from_callable: entry.name_from_callable,
            });
        }
        places.push(place);
        refs.push(ToolRefs {
            namespace: entry.namespace,
            resource: entry.resource,
            env_from: entry.env_from,
            env_value_from: entry.env_value_from,
            pod,
            session: entry.session,
        });
        tools.push(entry.tool);
    }
    // The operator already refused keys declared twice; should a document hold one
    // anyway, the first keeps it rather than the whole document being refused.
    let mut selection = exclude::introspect(
        &mut tools,
        &pending,
        introspector,
        &places,
        DeclaredDuplicates::KeepFirst,
    )
    .unwrap_or_else(|_| unreachable!("KeepFirst never refuses"));
    selection.excluded.splice(0..0, not_introspectable);
    selection.log(&format!("catalog ConfigMap {configmap}"));
    let tools = selection.retain(tools);
    let refs: HashMap<String, ToolRefs> = tools
        .iter()
        .map(|t| t.key.clone())
        .zip(selection.retain(refs))
        .filter(|(_, r)| !r.is_empty())
        .collect();
    (
        Catalog::new(tools, vec![]).with_refs(refs),
        selection.excluded,
    )
}

/// The auth directory of the document's users: their API keys (prefix, hash, expiry)
/// and the ServiceAccounts bound to them. A key record that cannot be used is left out
/// (logged and counted); its user and every other record are served.
pub fn users(configmap: &str, users: &[CatalogUser]) -> Users {
    let source = format!("catalog ConfigMap {configmap}");
    let mut left_out = Vec::new();
    let mut entries = Vec::with_capacity(users.len());
    for u in users {
        let mut api_keys = Vec::with_capacity(u.api_keys.len());
        for key in &u.api_keys {
            let expires_at = match key.expires_at.as_deref().map(str::parse::<DateTime<Utc>>) {
                None => None,
                Some(Ok(at)) => Some(at),
                Some(Err(e)) => {
                    // Not "never expires": a key whose expiry cannot be read logs no one in.
                    left_out.push(LeftOut {
                        error: crate::auth::DirectoryError::BadExpiry {
                            user: u.user.username.clone(),
                            prefix: key.prefix.clone(),
                            value: key.expires_at.clone().unwrap_or_default(),
                            reason: e.to_string(),
                        },
                        api_keys: 1,
                    });
                    continue;
                }
            };
            api_keys.push(ApiKeyEntry {
                prefix: key.prefix.clone(),
                sha256: key.sha256.clone(),
                expires_at,
            });
        }
        entries.push(UserEntry {
            user: u.user.clone(),
            oidc_subjects: u.oidc_subjects.clone(),
            api_keys,
        });
    }
    let (mut directory, more) = Directory::lenient(entries);
    left_out.extend(more);
    let excluded_api_keys = log_left_out(&source, &left_out);
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
    Users {
        directory,
        excluded_api_keys,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(value: serde_json::Value) -> String {
        value.to_string()
    }

    fn record(seed: u8) -> mcc_catalog::apikey::ApiKeyRecord {
        let raw = mcc_catalog::apikey::format_key(&[0xab; 6], &[seed; 32]);
        mcc_catalog::apikey::ApiKeyRecord::of(&raw, None).unwrap()
    }

    fn sample() -> serde_json::Value {
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
                 "apiKeys": [record(1)]},
                {"user": {"username": "bob"},
                 "serviceAccounts": [{"namespace": "agents", "name": "bot"}]}
            ]
        })
    }

    fn built(value: serde_json::Value) -> Published {
        build("ns/cm", Some(&doc(value)), None, &Introspector::default()).unwrap()
    }

    #[test]
    fn a_document_becomes_the_file_mode_snapshot() {
        let Published {
            catalog,
            users,
            excluded_tools,
        } = built(sample());
        assert!(excluded_tools.is_empty());
        assert_eq!(users.excluded_api_keys, 0);
        let dir = users.directory;
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
    fn only_an_undecodable_document_is_refused() {
        let e = build("ns/cm", None, None, &Introspector::default())
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("ns/cm") && e.contains("catalog.json"), "{e}");

        // A key declared twice (the operator refuses it; a bad document could hold it):
        // the first keeps it, the rest of the document is served.
        let mut dup = sample();
        dup["tools"][1]["tool"]["key"] = json!("ops.status");
        let p = built(dup);
        assert_eq!(p.catalog.tools().len(), 1);
        assert_eq!(p.catalog.tool("ops.status").unwrap().name, "status");
        assert_eq!(p.excluded_tools[0].place, "Tool tools/hello");

        // An expiry that is no instant: that key logs no one in; alice is still served.
        let mut expiry = sample();
        expiry["users"][0]["apiKeys"][0]["expiresAt"] = json!("next week");
        let p = built(expiry);
        assert_eq!(p.users.excluded_api_keys, 1);
        assert!(p.users.directory.key("abababababab").is_none());
        assert!(p.users.directory.by_username("alice").is_some());
    }

    /// Two records with one prefix (a grant copying another user's key record, say):
    /// neither logs anyone in, everything else is served.
    #[test]
    fn a_prefix_held_twice_leaves_out_both_records_only() {
        let mut value = sample();
        value["users"][1]["apiKeys"] = json!([record(2)]);
        let mut other = record(3);
        other.prefix = "cdcdcdcdcdcd".into();
        value["users"][0]["apiKeys"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::to_value(&other).unwrap());
        let p = built(value);
        assert_eq!(p.users.excluded_api_keys, 2);
        let dir = &p.users.directory;
        assert!(dir.key("abababababab").is_none());
        assert_eq!(dir.key("cdcdcdcdcdcd").unwrap().username, "alice");
        assert_eq!(dir.users().len(), 2);
        assert_eq!(p.catalog.tools().len(), 2);
    }

    fn fn_entry(
        dir: &std::path::Path,
        resource: &str,
        path: &str,
        renamed: bool,
    ) -> serde_json::Value {
        json!({"tool": {"key": format!("math.{resource}"), "name": resource, "kind": "fn",
                        "path": path, "groups": ["math"], "cwd": dir},
               "namespace": "tools", "resource": resource, "introspect": true,
               "nameFromCallable": renamed})
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
            fn_entry(dir.path(), "k8s_mod", "k8s_mod:add", true)
        ]});
        let p = built(value);
        let tool = p.catalog.tool("math.add").expect("renamed after __name__");
        assert_eq!(tool.params.len(), 2);
        assert_eq!(tool.description, "Adds.");
    }

    /// The shipped examples/k8s failure: a fn Tool whose module exists nowhere, in the
    /// same interpreter batch as a good one and next to a module that kills its
    /// interpreter on import. Only the two bad tools are left out.
    #[test]
    fn a_tool_that_cannot_be_introspected_leaves_its_batch_mates_served() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("good.py"),
            "def add(a: int) -> int:\n    return a\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("dies.py"), "import os\nos._exit(1)\n").unwrap();
        let mut value = sample();
        let tools = value["tools"].as_array_mut().unwrap();
        tools.push(fn_entry(dir.path(), "good", "good:add", false));
        tools.push(fn_entry(dir.path(), "missing", "nowhere:f", false));
        tools.push(fn_entry(dir.path(), "dies", "dies:f", false));
        let p = built(value);
        let mut keys: Vec<&str> = p.catalog.tools().iter().map(|t| t.key.as_str()).collect();
        keys.sort();
        assert_eq!(keys, ["hello", "math.good", "ops.status"]);
        assert_eq!(p.catalog.tool("math.good").unwrap().params[0].name, "a");
        let excluded: Vec<(&str, &str)> = p
            .excluded_tools
            .iter()
            .map(|e| (e.place.as_str(), e.reason.as_str()))
            .collect();
        assert_eq!(excluded.len(), 2, "{excluded:#?}");
        assert_eq!(excluded[0].0, "Tool tools/missing");
        assert!(
            excluded[0].1.contains("No module named 'nowhere'"),
            "{excluded:#?}"
        );
        assert_eq!(excluded[1].0, "Tool tools/dies");
        assert!(
            excluded[1].1.contains("Introspection subprocess failed"),
            "{excluded:#?}"
        );
        assert_eq!(p.users.directory.users().len(), 2, "users unaffected");
    }

    /// `renamed` takes the key `ops.status` through its callable's `__name__`: the tool
    /// that declared the key keeps it, the renamed one is left out.
    #[test]
    fn an_introspected_key_that_collides_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("clash.py"),
            "def status() -> str:\n    return 'mine'\n",
        )
        .unwrap();
        let mut value = sample();
        value["tools"].as_array_mut().unwrap().push(json!({
            "tool": {"key": "ops.clash", "name": "clash", "kind": "fn", "path": "clash:status",
                     "groups": ["ops"], "cwd": dir.path()},
            "namespace": "tenant", "resource": "renamed", "introspect": true,
            "nameFromCallable": true}));
        let p = built(value);
        assert_eq!(p.catalog.tools().len(), 2);
        let status = p.catalog.tool("ops.status").unwrap();
        assert_eq!(
            status.kind.command(),
            Some("echo ok"),
            "the declared tool kept it"
        );
        assert_eq!(p.excluded_tools.len(), 1);
        assert_eq!(p.excluded_tools[0].place, "Tool tenant/renamed");
        assert!(
            p.excluded_tools[0].reason.contains("Tool tools/status"),
            "{:?}",
            p.excluded_tools
        );
    }

    /// examples/k8s as the operator publishes it (the fn Tool is Python's
    /// `string:capwords`, introspected here): every tool served, nothing left out.
    #[test]
    fn the_examples_k8s_document_is_served_whole() {
        let value = json!({"format": 1, "tools": [
            {"tool": {"key": "ops.api_status", "name": "api_status", "kind": "curl",
                      "target": "-H \"Authorization: Bearer $API_TOKEN\" https://api.internal.example.com/status",
                      "command": "curl -sS -H \"Authorization: Bearer $API_TOKEN\" https://api.internal.example.com/status",
                      "groups": ["ops"], "env_passthrough": ["LANG", "LC_*"], "cache_ttl": 30,
                      "source": "Tool mcc-system/ops.api-status"},
             "namespace": "mcc-system", "resource": "ops.api-status",
             "envFrom": [{"source": "configMap", "name": "ops-settings"}],
             "envValueFrom": [{"env": "API_TOKEN", "source": "secret", "name": "ops-api", "key": "token"}]},
            {"tool": {"key": "ops.whoami_echo", "name": "whoami_echo", "kind": "exec",
                      "command": "echo \"called by $MCC_CTX_USER\"", "groups": ["ops"]},
             "namespace": "mcc-system", "resource": "ops.whoami-echo"},
            {"tool": {"key": "public.greet", "name": "greet", "kind": "exec",
                      "command": "echo Hello, {{ name | quote }}", "groups": ["public"],
                      "params": [{"name": "name", "type": "str", "required": true},
                                 {"name": "times", "type": "int", "default": 1}],
                      "limits": {"timeout": 5}},
             "namespace": "mcc-system", "resource": "public.greet"},
            {"tool": {"key": "reports.title_case", "name": "title_case", "kind": "fn",
                      "path": "string:capwords", "groups": ["reports"],
                      "description": "Capitalize each word of a text (Python's string.capwords).",
                      "limits": {"timeout": 5}},
             "namespace": "mcc-system", "resource": "reports.title-case", "introspect": true}
        ], "users": [
            {"user": {"username": "alice", "groups": ["ops", "reports"]}, "apiKeys": [record(4)]}
        ]});
        let p = built(value);
        assert!(p.excluded_tools.is_empty(), "{:?}", p.excluded_tools);
        assert_eq!(p.users.excluded_api_keys, 0);
        assert_eq!(p.catalog.tools().len(), 4);
        let title = p.catalog.tool("reports.title_case").unwrap();
        let params: Vec<&str> = title.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(params, ["s", "sep"], "introspected from the signature");
        assert!(p.catalog.refs("ops.api_status").is_some());
    }

    /// A pod tool keeps its Pod shape in its refs (even without references); a pod fn
    /// tool is never imported here: declared, it is served as declared; flagged for
    /// introspection (an operator that should not publish it so), it is left out.
    #[test]
    fn pod_tools_carry_their_pod_and_are_never_introspected_here() {
        let mut value = sample();
        let tools = value["tools"].as_array_mut().unwrap();
        tools[1]["runtime"] = json!({"pod": {"image": "registry.x/hello:1"}});
        tools.push(
            json!({"tool": {"key": "math.add", "name": "add", "kind": "fn",
                                   "path": "nowhere_here:add", "groups": ["math"],
                                   "return_type": "int",
                                   "params": [{"name": "a", "type": "int", "required": true}]},
                          "namespace": "tools", "resource": "add",
                          "runtime": {"pod": {"image": "registry.x/math:1"}}}),
        );
        tools.push(
            json!({"tool": {"key": "math.sub", "name": "sub", "kind": "fn",
                                   "path": "nowhere_here:sub", "groups": ["math"]},
                          "namespace": "tools", "resource": "sub", "introspect": true,
                          "runtime": {"pod": {}}}),
        );
        let p = built(value);
        let refs = p.catalog.refs("hello").expect("a pod tool has refs");
        assert_eq!(
            refs.pod.as_ref().unwrap().image.as_deref(),
            Some("registry.x/hello:1")
        );
        let add = p.catalog.tool("math.add").expect("served as declared");
        assert_eq!(add.params[0].name, "a");
        assert!(p.catalog.refs("math.add").unwrap().pod.is_some());
        assert!(p.catalog.tool("math.sub").is_none());
        assert_eq!(p.excluded_tools.len(), 1, "{:?}", p.excluded_tools);
        assert_eq!(p.excluded_tools[0].place, "Tool tools/sub");
        assert!(p.excluded_tools[0].reason.contains("return_type"));
        assert!(p.catalog.refs("ops.status").unwrap().pod.is_none());
    }

    /// Entries a newer operator might write: a tool with a runtime this gateway does not
    /// know, a user entry of another shape. Both are left out and counted; the rest of the
    /// document (users and keys included) is served.
    #[test]
    fn entries_that_cannot_be_read_are_left_out() {
        let mut value = sample();
        value["tools"][0]["runtime"] = json!({"wasm": {"module": "x"}});
        value["users"]
            .as_array_mut()
            .unwrap()
            .push(json!({"user": {"username": "carol", "groups": 7}, "apiKeys": [record(5)]}));
        let p = built(value);
        assert_eq!(p.catalog.tools().len(), 1);
        assert!(p.catalog.tool("hello").is_some());
        assert_eq!(p.excluded_tools.len(), 1);
        assert_eq!(
            p.excluded_tools[0].place,
            "tools[0] 'ops.status' (Tool tools/status)"
        );
        assert_eq!(p.users.excluded_api_keys, 1);
        assert_eq!(p.users.directory.users().len(), 2);
        assert!(
            p.users.directory.key("abababababab").is_some(),
            "alice's key still works"
        );
    }
}
