//! Session variables across tenants (issue 32, item 7): a real gateway, real tool
//! processes. A Tool the operator published with a declared session access (another
//! tenant's Tool: its `sessionKeys`) receives the identity keys plus those variables
//! only, and its fn write-back changes only those; a tool without one (file mode, a
//! trusted namespace) keeps MCC's rule and sees the whole store.

use crate::mcp_support;

use std::collections::HashMap;

use mcc_catalog::context::SessionAccess;
use mcc_gateway::catalog::{Catalog, ToolRefs};
use mcp_support::*;
use serde_json::{Value, json};

const MODULE: &str = r#"
def rewrite(context: dict = None) -> str:
    context["cursor"] = 2
    context["target"] = "prod"
    context["planted"] = "by a tenant"
    return "rewritten"
"#;

/// Prints the `MCC_CTX_<NAME>` variables an exec tool receives, as JSON.
const READ: &str = r#"'python3 -c "import os, json; print(json.dumps({k[8:].lower(): v for k, v in os.environ.items() if k.startswith(\"MCC_CTX_\")}))"'"#;

fn tools(dir: &std::path::Path) -> String {
    format!(
        r#"
tools:
  - name: read
    groups: [public]
    description: Print the session context the tool receives.
    exec: {READ}
  - name: tenant_read
    groups: [public]
    description: The same, published as another tenant's Tool.
    exec: {READ}
  - fn: tenant:rewrite
    name: tenant_rewrite
    groups: [public]
    cwd: {dir}
"#,
        dir = dir.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_tool_sees_and_writes_only_its_declared_variables() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("tools")).unwrap();
    std::fs::write(dir.path().join("tenant.py"), MODULE).unwrap();
    std::fs::write(dir.path().join("tools/tools.yaml"), tools(dir.path())).unwrap();
    let server = start_with(settings(dir.path(), "dev-admin", None), dir).await;

    // What the operator publishes for a Tool of an untrusted namespace that declared
    // `sessionKeys: [cursor]`: the same tools, with that access on two of them.
    let live = &server.gateway_shared.catalog;
    let current = live.snapshot();
    let declared = ToolRefs {
        namespace: "tenant-a".into(),
        resource: "t".into(),
        session: SessionAccess::Keys(vec!["cursor".into()]),
        ..Default::default()
    };
    let refs: HashMap<String, ToolRefs> = ["public.tenant_read", "public.tenant_rewrite"]
        .into_iter()
        .map(|k| (k.to_string(), declared.clone()))
        .collect();
    live.install_tools(
        Catalog::new(current.tools().to_vec(), vec![]).with_refs(refs),
        0,
        None,
    );

    let client = stateless(&server.url, TestClient::plain()).await;
    let set = |name: &str, value: Value| json!({"name": name, "value": value});
    call_text(&client, "set_session", set("cursor", json!(1))).await;
    call_text(&client, "set_session", set("target", json!("db"))).await;
    let read = |key: &'static str| {
        let client = &client;
        async move {
            let result = call(client, "execute", json!({"key": key})).await;
            let text = text(&result);
            serde_json::from_str::<Value>(&text).unwrap_or_else(|_| panic!("{key}: {result:?}"))
        }
    };

    let all = read("public.read").await;
    assert_eq!(
        (&all["cursor"], &all["target"]),
        (&json!("1"), &json!("db")),
        "{all}"
    );
    let tenant = read("public.tenant_read").await;
    assert_eq!(tenant["cursor"], json!("1"), "{tenant}");
    assert!(
        tenant.get("target").is_none(),
        "another tenant's tool saw it: {tenant}"
    );
    assert!(
        tenant.get("user").is_some(),
        "identity keys always arrive: {tenant}"
    );

    let out = call_text(&client, "execute", json!({"key": "public.tenant_rewrite"})).await;
    assert!(out.contains("rewritten"), "{out}");
    let get = |name: &'static str| {
        let client = &client;
        async move { call_text(client, "get_session", json!({ "name": name })).await }
    };
    assert_eq!(get("cursor").await, "2", "its own variable is written back");
    assert_eq!(
        get("target").await,
        "\"db\"",
        "another variable stays as it was"
    );
    assert_eq!(get("planted").await, "null", "no variable is planted");
    server.stop().await;
}
