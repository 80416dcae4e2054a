//! Kubernetes mode's session context (an MCPServer's `sessionContext`): a gateway serving
//! a catalog document as the operator publishes it — tools with the session access the
//! operator gave them, an `upstreams` table carrying each upstream's session context —
//! sends an upstream, over streamable HTTP, exactly what its entry declares, through the
//! whole `execute` path (session variables from the store, identity from
//! authentication). The upstream is the official Python SDK (from mcp-server-time's
//! venv) answering with the `_meta` its call carried.

use crate::mcp_support;

use std::time::Duration;

use mcc_catalog::context::SessionAccess;
use mcc_catalog::document::{CatalogDocument, CatalogTool, CatalogUser, Runtime};
use mcc_catalog::introspect::Introspector;
use mcc_catalog::upstream::session_context::SessionContext;
use mcc_catalog::upstream::{self, Discovered, PublishedUpstream};
use mcc_gateway::catalog::{LiveCatalog, published};
use mcc_gateway::upstream::Upstreams;
use mcp_support::*;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

/// The echo server over streamable HTTP on `port`, from the venv's Python; `None` when
/// the venv cannot be installed (the test is then skipped, as the stdio tests are).
async fn echo_upstream(dir: &std::path::Path) -> Option<(tokio::process::Child, u16)> {
    tokio::task::spawn_blocking(crate::upstream_stdio::time_server)
        .await
        .unwrap()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = dir.join("echo_meta_http.py");
    let text = crate::upstream_relay::ECHO_SERVER.replace(
        "server.run()",
        "import sys\nserver.run(transport=\"streamable-http\", host=\"127.0.0.1\", port=int(sys.argv[1]))",
    );
    std::fs::write(&script, text).unwrap();
    let child = tokio::process::Command::new(crate::upstream_stdio::venv().join("bin/python"))
        .arg(&script)
        .arg(port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("python starts");
    let started = std::time::Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the echo upstream did not listen within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Some((child, port))
}

/// The upstream's `whoami` as the operator publishes it for MCPServer `team-a/<name>`
/// (the catalog crate's conversion, the operator's session access: the variables its
/// `sessionContext` names).
fn published_tool(name: &str, context: &SessionContext) -> CatalogTool {
    let mut spec = upstream::parse_server(
        &json!({"name": name, "url": "http://127.0.0.1:1/mcp", "groups": ["team-a"],
                "prefix": format!("{name}_")}),
        &[],
        "test",
    )
    .unwrap();
    spec.name = format!("team-a/{name}");
    let listed = [Discovered {
        name: "whoami".into(),
        description: Some("What this call's _meta carried.".into()),
        input_schema: json!({"type": "object", "properties": {}}),
        output_schema: None,
        annotations: Default::default(),
    }];
    let tool = upstream::convert(&spec, &listed).tools.remove(0);
    CatalogTool {
        tool,
        namespace: "team-a".into(),
        resource: name.into(),
        env_from: Vec::new(),
        env_value_from: Vec::new(),
        runtime: Runtime::Local,
        introspect: false,
        name_from_callable: false,
        session: SessionAccess::Keys(context.variables.clone()),
    }
}

fn published_upstream(name: &str, port: u16, context: SessionContext) -> PublishedUpstream {
    PublishedUpstream {
        server: format!("team-a/{name}"),
        namespace: "team-a".into(),
        url: format!("http://127.0.0.1:{port}/mcp"),
        headers: Vec::new(),
        ca: None,
        token_audience: None,
        session_context: context,
        timeout: Some(30.0),
        max_concurrency: 4,
        available: true,
        reason: None,
    }
}

/// A gateway serving `doc` (decoded by the gateway's own document reader) and calling
/// its upstreams as the Kubernetes watch installs them.
async fn gateway_of(doc: &CatalogDocument) -> (Server, Upstreams) {
    let text = serde_json::to_string(doc).unwrap();
    let label = "mcc/mcc-catalog";
    let decoded = published::decode(label, Some(text.as_str()), None).unwrap();
    let upstreams_table = decoded.doc.upstreams.clone();
    let built =
        published::build(label, Some(text.as_str()), None, &Introspector::default()).unwrap();
    assert!(
        built.excluded_tools.is_empty(),
        "{:?}",
        built.excluded_tools
    );
    let dir = tempfile::tempdir().unwrap();
    let settings = settings(dir.path(), "dev-admin", Some(&redis_url()));
    let shutdown = CancellationToken::new();
    let live = std::sync::Arc::new(LiveCatalog::with_catalog(built.catalog, vec![], None));
    let upstreams = Upstreams::new(shutdown.child_token(), None);
    live.attach_upstreams(upstreams.clone());
    upstreams.set_published(upstreams_table);
    let search =
        mcc_search::SearchService::with_embedder(settings.search_settings().unwrap(), None)
            .unwrap();
    search.update(live.snapshot()).unwrap();
    let gateway =
        mcc_gateway::app::build_with_catalog(&settings, live, search, shutdown.clone()).unwrap();
    let shared = gateway.shared.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(gateway.serve(listener, shutdown.clone()));
    let server = Server {
        url: format!("http://{addr}/mcp"),
        base: format!("http://{addr}"),
        dir,
        shutdown,
        task,
        gateway_shared: shared,
    };
    (server, upstreams)
}

fn meta_of(out: &str) -> Map<String, Value> {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_session_context_reaches_the_upstream_as_declared() {
    let dir = tempfile::tempdir().unwrap();
    let Some((_upstream, port)) = echo_upstream(dir.path()).await else {
        return;
    };
    let both = SessionContext {
        identity: true,
        variables: vec!["project".into()],
    };
    let vars = SessionContext {
        identity: false,
        variables: vec!["project".into(), "region".into()],
    };
    let servers = [
        ("who", both),
        ("vars", vars),
        ("plain", SessionContext::default()),
    ];
    let mut doc = CatalogDocument::default();
    for (name, context) in &servers {
        doc.tools.push(published_tool(name, context));
        doc.upstreams
            .push(published_upstream(name, port, context.clone()));
    }
    doc.users.push(CatalogUser {
        user: mcc_catalog::User {
            username: "alice".into(),
            groups: vec!["admin".into(), "osint".into()],
            ..Default::default()
        },
        service_accounts: Vec::new(),
        oidc_subjects: Vec::new(),
        api_keys: Vec::new(),
    });
    let (server, upstreams) = gateway_of(&doc).await;

    for modern in [false, true] {
        let client = match modern {
            false => legacy(&server.url, TestClient::plain()).await,
            true => stateless(&server.url, TestClient::plain()).await,
        };
        for (name, value) in [("project", "apollo"), ("other", "not-declared")] {
            call(
                &client,
                "set_session",
                json!({"name": name, "value": value}),
            )
            .await;
        }
        let run = |key: &'static str| {
            let client = &client;
            async move {
                meta_of(&call_text(client, "execute", json!({"key": key, "params": {}})).await)
            }
        };
        // Identity and one variable: dev-admin acts as alice, the document's admin.
        let meta = run("team-a.who_whoami").await;
        assert_eq!(meta["dev.mcc/user"], json!("alice"), "{meta:?}");
        assert_eq!(
            meta["dev.mcc/groups"],
            json!(["admin", "osint"]),
            "{meta:?}"
        );
        assert_eq!(
            meta["dev.mcc/session"],
            json!({"project": "apollo"}),
            "{meta:?}"
        );
        // Variables only: those the session holds; never the identity, never `other`.
        let meta = run("team-a.vars_whoami").await;
        assert!(!meta.contains_key("dev.mcc/user"), "{meta:?}");
        assert_eq!(
            meta["dev.mcc/session"],
            json!({"project": "apollo"}),
            "{meta:?}"
        );
        // Nothing declared: nothing sent.
        let meta = run("team-a.plain_whoami").await;
        assert!(
            !meta.keys().any(|k| k.starts_with("dev.mcc/")),
            "nothing by default: {meta:?}"
        );
        client.cancel().await.unwrap();
    }

    // A new document without the declaration: the next call carries nothing (the entry
    // changed, so its connection is new and its spec is the document's).
    let mut changed: Vec<PublishedUpstream> = doc.upstreams.clone();
    changed[0].session_context = SessionContext::default();
    assert_eq!(changed[0].server, "team-a/who");
    upstreams.set_published(changed);
    let client = legacy(&server.url, TestClient::plain()).await;
    let out = call_text(
        &client,
        "execute",
        json!({"key": "team-a.who_whoami", "params": {}}),
    )
    .await;
    assert!(!meta_of(&out).contains_key("dev.mcc/user"), "{out}");
    client.cancel().await.unwrap();
    server.stop().await;
}
