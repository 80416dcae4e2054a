//! What an upstream sends about a call while it runs, relayed to the caller (issue 33
//! item 4): a real gateway in file mode over the reference server-everything (npm,
//! streamable HTTP, a legacy-generation server), driven by rmcp clients of both
//! protocol generations. Its `trigger-long-running-operation` reports progress on the
//! token the gateway gave the upstream request, which reaches the caller as progress of
//! the caller's own token; its `trigger-elicitation-request` asks a question, which a
//! legacy caller answers within its request, and a caller that declared no elicitation
//! declines through the gateway. 2026-07-28 callers answer in a retry: see
//! `upstream_relay_held`.

use crate::mcp_support;
use crate::upstream_support;

use crate::mcp_progress::{Listener, connect};
use mcp_support::*;
use rmcp::model::{CallToolRequestParams, NumberOrString, ProgressToken, RequestMetaObject};
use serde_json::{Value, json};
use upstream_support::Everything;

fn upstreams_file(url: &str) -> String {
    format!(
        r#"
mcp_servers:
  - name: everything
    url: {url}
    groups: [public]
    prefix: ev_
    include: [trigger-long-running-operation, trigger-elicitation-request]
    timeout: 60
"#
    )
}

async fn gateway(everything: &Everything) -> Server {
    let upstreams = ("tools/upstreams.yaml", upstreams_file(&everything.url()));
    start_configured("dev-admin", Some(&redis_url()), &[upstreams], |_| {}).await
}

fn execute_with_token(key: &str, params: Value, token: &str) -> CallToolRequestParams {
    let mut call = CallToolRequestParams::new("execute")
        .with_arguments(args(json!({"key": key, "params": params})));
    let mut meta = RequestMetaObject::default();
    meta.set_progress_token(ProgressToken(NumberOrString::String(
        token.to_string().into(),
    )));
    call.meta = Some(meta);
    call
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_progress_reaches_the_caller_as_progress_of_its_token() {
    let Some(everything) = Everything::start().await else {
        return;
    };
    let server = gateway(&everything).await;
    for modern in [false, true] {
        let listener = Listener::default();
        let heard = listener.heard.clone();
        let client = connect(&server.url, modern, listener).await;
        let result = client
            .call_tool(execute_with_token(
                "public.ev_trigger-long-running-operation",
                json!({"duration": 3, "steps": 4}),
                "caller-token",
            ))
            .await
            .unwrap();
        assert!(
            text(&result).contains("Long running operation completed"),
            "modern={modern}: {result:?}"
        );
        let heard = heard.lock().unwrap().clone();
        // The upstream's steps, as the caller's progress: "k/4" in the message, and
        // progress/total its fraction; all on the one token the caller's request had.
        let steps: Vec<&str> = heard
            .iter()
            .filter_map(|p| p.message.as_deref())
            .filter_map(|m| m.strip_prefix("execute public.ev_trigger-long-running-operation: "))
            .filter(|m| m.ends_with("/4"))
            .collect();
        assert!(
            steps.contains(&"1/4") && steps.contains(&"2/4"),
            "modern={modern}: upstream steps relayed: {heard:?}"
        );
        let second = heard
            .iter()
            .find(|p| p.message.as_deref().is_some_and(|m| m.ends_with(": 2/4")))
            .unwrap();
        let fraction = second.progress / second.total.expect("a total");
        assert!((fraction - 0.5).abs() < 1e-6, "{second:?}");
        assert!(
            heard
                .iter()
                .all(|p| p.progress_token == heard[0].progress_token),
            "{heard:?}"
        );
        assert!(
            heard.windows(2).all(|w| w[0].progress < w[1].progress),
            "progress only grows: {heard:?}"
        );
        client.cancel().await.unwrap();
    }
    server.stop().await;
    everything.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_question_is_relayed_to_a_legacy_caller_and_declined_without_elicitation() {
    let Some(everything) = Everything::start().await else {
        return;
    };
    let server = gateway(&everything).await;
    let key = "public.ev_trigger-elicitation-request";

    // A legacy caller that answers: the upstream's own question, its answer back.
    let answering = TestClient::answering(Answer::Accept(
        json!({"name": "Ada Lovelace", "check": true}),
    ));
    let asked = answering.asked.clone();
    let client = legacy(&server.url, answering).await;
    let result = call(&client, "execute", json!({"key": key, "params": {}})).await;
    let out = text(&result);
    assert!(
        out.contains("User provided the requested information"),
        "{out}"
    );
    assert!(out.contains("Name: Ada Lovelace"), "{out}");
    assert_eq!(
        asked.lock().unwrap().clone(),
        vec!["Please provide inputs for the following fields:".to_string()]
    );
    client.cancel().await.unwrap();

    // A legacy caller that declines: the upstream hears the decline.
    let client = legacy(&server.url, TestClient::answering(Answer::Decline)).await;
    let out = text(&call(&client, "execute", json!({"key": key, "params": {}})).await);
    assert!(out.contains("User declined"), "{out}");
    client.cancel().await.unwrap();

    // A caller of either generation without elicitation: never asked, the gateway
    // declines for it.
    for client in [
        legacy(&server.url, TestClient::plain()).await,
        stateless(&server.url, TestClient::plain()).await,
    ] {
        let asked = client.service().asked.clone();
        let out = text(&call(&client, "execute", json!({"key": key, "params": {}})).await);
        assert!(out.contains("User declined"), "{out}");
        assert!(asked.lock().unwrap().is_empty());
        client.cancel().await.unwrap();
    }
    server.stop().await;
    everything.stop().await;
}

/// A stdio upstream on the official Python SDK (from mcp-server-time's venv): `whoami`
/// answers with the `_meta` its call carried, `wait` records its own cancellation. (Its `ask_name` cannot ask over stdio: the
/// SDK speaks 2026-07-28 there, which has no server-to-client requests.)
pub(crate) const ECHO_SERVER: &str = r#"
import json
from pydantic import BaseModel
from mcp.server.mcpserver import MCPServer, Context

server = MCPServer("meta-echo")

@server.tool()
def whoami(ctx: Context) -> str:
    """What this call's _meta carried."""
    meta = ctx.request_context.meta
    data = meta if isinstance(meta, dict) else (meta.model_dump(exclude_none=True) if meta else {})
    return json.dumps(data, sort_keys=True, default=str)

@server.tool()
async def wait(path: str) -> str:
    """Waits; records in `path` that it started, then whether it was cancelled."""
    import anyio
    with open(path, "w") as f:
        f.write("started")
    try:
        await anyio.sleep(60)
    except BaseException:
        with open(path, "w") as f:
            f.write("cancelled")
        raise
    return "waited"

class Name(BaseModel):
    name: str

@server.tool()
async def ask_name(ctx: Context) -> str:
    """Asks the caller for a name."""
    r = await ctx.elicit(message="Your name?", schema=Name)
    return f"{r.action}: {r.data.name if r.action == 'accept' else '-'}"

server.run()
"#;

/// The echo server twice: once declaring the session context it is sent, once not.
async fn echo_gateway(dir: &std::path::Path) -> Option<Server> {
    tokio::task::spawn_blocking(crate::upstream_stdio::time_server)
        .await
        .unwrap()?;
    let python = crate::upstream_stdio::venv().join("bin/python");
    let script = dir.join("echo_meta.py");
    std::fs::write(&script, ECHO_SERVER).unwrap();
    let (python, script) = (python.display(), script.display());
    let file = format!(
        r#"
mcp_servers:
  - name: echo
    command: [{python}, {script}]
    groups: [public]
    prefix: echo_
    session_context:
      identity: true
      variables: [project, region]
  - name: plain
    command: [{python}, {script}]
    groups: [public]
    prefix: plain_
"#
    );
    let upstreams = ("tools/upstreams.yaml", file);
    Some(start_configured("dev-admin", Some(&redis_url()), &[upstreams], |_| {}).await)
}

fn meta_of(result: &rmcp::model::CallToolResult) -> serde_json::Map<String, Value> {
    let out = text(result);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_context_reaches_an_upstream_only_as_declared() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = echo_gateway(dir.path()).await else {
        return;
    };
    for modern in [false, true] {
        let listener = Listener::default();
        let client = connect(&server.url, modern, listener).await;
        for (name, value) in [("project", "apollo"), ("other", "not-declared")] {
            let set = CallToolRequestParams::new("set_session")
                .with_arguments(args(json!({"name": name, "value": value})));
            client.call_tool(set).await.unwrap();
        }
        let token = "caller-token";
        let declared = client
            .call_tool(execute_with_token("public.echo_whoami", json!({}), token))
            .await
            .unwrap();
        let meta = meta_of(&declared);
        // dev-admin is the first user in group admin: alice.
        assert_eq!(meta["dev.mcc/user"], json!("alice"), "{meta:?}");
        assert_eq!(
            meta["dev.mcc/groups"],
            json!(["admin", "osint"]),
            "{meta:?}"
        );
        // Only the declared variables the session holds; never the others.
        assert_eq!(
            meta["dev.mcc/session"],
            json!({"project": "apollo"}),
            "{meta:?}"
        );
        // The upstream request had a progress token of the gateway's, not the caller's.
        let upstream_token = meta.get("progress_token").or(meta.get("progressToken"));
        assert!(upstream_token.is_some(), "{meta:?}");
        assert_ne!(upstream_token, Some(&json!(token)), "{meta:?}");

        let plain = client
            .call_tool(execute_with_token("public.plain_whoami", json!({}), token))
            .await
            .unwrap();
        let meta = meta_of(&plain);
        assert!(
            !meta.keys().any(|k| k.starts_with("dev.mcc/")),
            "nothing by default: {meta:?}"
        );
        client.cancel().await.unwrap();
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_execute_cancels_the_upstream_request() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = echo_gateway(dir.path()).await else {
        return;
    };
    for modern in [false, true] {
        let record = dir.path().join(format!("wait-{modern}"));
        let client = connect(&server.url, modern, Listener::default()).await;
        let call = CallToolRequestParams::new("execute").with_arguments(args(json!({
            "key": "public.plain_wait", "params": {"path": record.display().to_string()}
        })));
        let peer = client.peer().clone();
        let running = tokio::spawn(async move { peer.call_tool(call).await });
        let read = || std::fs::read_to_string(&record).unwrap_or_default();
        let started = std::time::Instant::now();
        while read() != "started" {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "never started"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        // The caller gives up: rmcp's client sends notifications/cancelled for it.
        running.abort();
        let cancelled = std::time::Instant::now();
        while read() != "cancelled" {
            assert!(
                cancelled.elapsed() < std::time::Duration::from_secs(10),
                "modern={modern}: the upstream request was not cancelled ({})",
                read()
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        client.cancel().await.unwrap();
    }
    server.stop().await;
}
