//! An upstream's question to a 2026-07-28 caller (issue 33 item 4): the reference
//! server-everything (npm, streamable HTTP) asks in its `trigger-elicitation-request`;
//! the gateway holds the upstream call open, answers the caller's `execute` with
//! `input_required` (the question and a single-use ticket), and the caller's retry
//! resumes the call — through rmcp's 2026-07-28 client, which answers and retries by
//! itself, by hand for the ticket's rules, and across two `mcc-gateway` processes
//! sharing one Redis.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::mcp_support;
use crate::upstream_support;

use mcp_support::replica::*;
use mcp_support::*;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, Implementation, NumberOrString, ProgressNotificationParam,
    ProgressToken, RequestMetaObject,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use rmcp::{ClientHandler, ClientServiceExt};
use serde_json::{Value, json};
use upstream_support::Everything;

const ASK: &str = "public.ev_trigger-elicitation-request";
/// The same tool on an upstream entry whose calls time out after 2 s.
const ASK_SHORT: &str = "public.evs_trigger-elicitation-request";
const QUESTION: &str = "Please provide inputs for the following fields:";

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
  - name: short
    url: {url}
    groups: [public]
    prefix: evs_
    include: [trigger-elicitation-request]
    timeout: 2
"#
    )
}

async fn gateway(everything: &Everything) -> Server {
    let upstreams = ("tools/upstreams.yaml", upstreams_file(&everything.url()));
    start_configured("dev-admin", Some(&redis_url()), &[upstreams], |_| {}).await
}

/// A 2026-07-28 `execute` of `key` with `params`, once (no automatic retry), answering
/// the upstream's question with `answer` under `ticket`.
async fn once(
    client: &Client,
    key: &str,
    params: Value,
    answer: Option<Value>,
    ticket: Option<&str>,
) -> CallToolResponse {
    let arguments = json!({"key": key, "params": params});
    execute_once(client, arguments, "upstream", answer, ticket).await
}

fn accept_ada() -> Value {
    json!({"action": "accept", "content": {"name": "Ada Lovelace", "check": true}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_caller_is_asked_and_its_answer_reaches_the_upstream() {
    let Some(everything) = Everything::start().await else {
        return;
    };
    let server = gateway(&everything).await;

    // rmcp's driver gets input_required, asks its handler, and retries with the answer.
    let answering = TestClient::answering(Answer::Accept(
        json!({"name": "Ada Lovelace", "check": true}),
    ));
    let questions = answering.asked.clone();
    let client = stateless(&server.url, answering).await;
    let out = call_text(&client, "execute", json!({"key": ASK, "params": {}})).await;
    assert!(
        out.contains("User provided the requested information"),
        "{out}"
    );
    assert!(out.contains("Name: Ada Lovelace"), "{out}");
    assert!(out.contains("Agreed to terms: true"), "{out}");
    assert_eq!(
        questions.lock().unwrap().clone(),
        vec![QUESTION.to_string()]
    );
    client.cancel().await.unwrap();

    // Decline and cancel reach the upstream as they were given.
    for (answer, said) in [
        (Answer::Decline, "User declined"),
        (Answer::Cancel, "User cancelled"),
    ] {
        let client = stateless(&server.url, TestClient::answering(answer)).await;
        let out = call_text(&client, "execute", json!({"key": ASK, "params": {}})).await;
        assert!(out.contains(said), "{said}: {out}");
        client.cancel().await.unwrap();
    }

    // A 2026-07-28 caller that declared no elicitation is not asked: declined for it.
    let plain = stateless(&server.url, TestClient::plain()).await;
    let out = call_text(&plain, "execute", json!({"key": ASK, "params": {}})).await;
    assert!(out.contains("User declined"), "{out}");
    plain.cancel().await.unwrap();

    server.stop().await;
    everything.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_question_and_its_ticket_are_single_use_and_bound_to_the_call() {
    let Some(everything) = Everything::start().await else {
        return;
    };
    let server = gateway(&everything).await;
    let client = stateless(&server.url, TestClient::answering(Answer::Decline)).await;

    // The upstream's own question: its message and requested schema, under `upstream`.
    let first = asked(once(&client, ASK, json!({}), None, None).await);
    let v = serde_json::to_value(&first).unwrap();
    let q = &v["inputRequests"]["upstream"];
    assert_eq!(q["method"], "elicitation/create", "{v}");
    assert_eq!(q["params"]["message"], QUESTION, "{v}");
    assert_eq!(
        q["params"]["requestedSchema"]["properties"]["name"]["description"],
        "Your full, legal name",
        "{v}"
    );
    let ticket = first.request_state.clone().expect("a ticket");
    assert!(ticket.starts_with("apv_"), "{ticket}");

    // Answered for other arguments: refused, and the ticket is spent.
    let changed = result_text(
        once(
            &client,
            ASK,
            json!({"other": 1}),
            Some(accept_ada()),
            Some(&ticket),
        )
        .await,
    );
    assert_eq!(
        changed,
        format!(
            "Execution refused: the upstream's question was asked in a call with other \
             arguments than this call of '{ASK}'; call again to be asked anew"
        )
    );
    let spent = result_text(once(&client, ASK, json!({}), Some(accept_ada()), Some(&ticket)).await);
    let unknown = format!(
        "Execution refused: the ticket of the upstream's question for '{ASK}' is unknown, \
         expired or already used; call again to be asked anew"
    );
    assert_eq!(spent, unknown);

    // A fresh question, answered once: the upstream's result; the ticket's replay is
    // refused and starts no second call (it would ask again).
    let ticket = asked(once(&client, ASK, json!({}), None, None).await)
        .request_state
        .unwrap();
    let ran = result_text(once(&client, ASK, json!({}), Some(accept_ada()), Some(&ticket)).await);
    assert!(ran.contains("Name: Ada Lovelace"), "{ran}");
    let replay =
        result_text(once(&client, ASK, json!({}), Some(accept_ada()), Some(&ticket)).await);
    assert_eq!(replay, unknown);

    // An answer without a ticket, with a made-up one, or for a tool of another key.
    let forged = "apv_00000000000000000000000000000000";
    for state in [None, Some(forged)] {
        let r = result_text(once(&client, ASK, json!({}), Some(accept_ada()), state).await);
        assert_eq!(r, unknown, "{state:?}");
    }
    let ticket = asked(once(&client, ASK, json!({}), None, None).await)
        .request_state
        .unwrap();
    let other_tool = "public.ev_trigger-long-running-operation";
    let r = result_text(
        once(
            &client,
            other_tool,
            json!({}),
            Some(accept_ada()),
            Some(&ticket),
        )
        .await,
    );
    assert!(r.contains("was asked in a call with another tool"), "{r}");
    client.cancel().await.unwrap();
    server.stop().await;
    everything.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_left_unanswered_past_the_calls_timeout_is_closed() {
    let Some(everything) = Everything::start().await else {
        return;
    };
    let server = gateway(&everything).await;
    let client = stateless(&server.url, TestClient::answering(Answer::Decline)).await;
    let ticket = asked(once(&client, ASK_SHORT, json!({}), None, None).await)
        .request_state
        .unwrap();
    // The call's 2 s run out while the question waits: it is closed (the upstream
    // hears cancel, the held call ends), and the late answer says so.
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let late = result_text(
        once(
            &client,
            ASK_SHORT,
            json!({}),
            Some(accept_ada()),
            Some(&ticket),
        )
        .await,
    );
    assert!(
        late.contains("upstream 'short': the question this answers is no longer open"),
        "{late}"
    );
    client.cancel().await.unwrap();
    server.stop().await;
    everything.stop().await;
}

/// A 2026-07-28 client that answers questions (accepting with a name) and records the
/// progress it hears.
#[derive(Clone, Default)]
struct Listening {
    heard: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Listening {
    fn get_info(&self) -> ClientConfig {
        let caps = ClientCapabilities::builder().enable_elicitation().build();
        ClientConfig::new(caps, Implementation::new("held-progress", "0"))
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": "P"})))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        self.heard.lock().unwrap().push(params);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_calls_progress_reaches_the_2026_caller() {
    let Some(everything) = Everything::start().await else {
        return;
    };
    let server = gateway(&everything).await;
    let listening = Listening::default();
    let heard = listening.heard.clone();
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(server.url.clone());
    let client = listening
        .serve_with_lifecycle(
            transport,
            rmcp::ClientLifecycleMode::Discover {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap();
    let mut call = CallToolRequestParams::new("execute").with_arguments(args(json!({
        "key": "public.ev_trigger-long-running-operation",
        "params": {"duration": 2, "steps": 4}
    })));
    let mut meta = RequestMetaObject::default();
    meta.set_progress_token(ProgressToken(NumberOrString::String("held".into())));
    call.meta = Some(meta);
    let result = client.call_tool(call).await.unwrap();
    assert!(
        text(&result).contains("Long running operation completed"),
        "{result:?}"
    );
    let heard = heard.lock().unwrap().clone();
    assert!(
        heard
            .iter()
            .any(|p| p.message.as_deref().is_some_and(|m| m.ends_with(": 2/4"))),
        "{heard:?}"
    );
    client.cancel().await.unwrap();
    server.stop().await;
    everything.stop().await;
}

/// A raw 2026-07-28 `execute` of `key` (declaring elicitation) with `extra` request
/// params (`inputResponses`, `requestState`); returns the JSON-RPC result.
async fn raw(url: &str, key: &str, extra: Value) -> Value {
    let mut params = json!({"name": "execute",
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}},
        "arguments": {"key": key, "params": {}}});
    if let (Value::Object(p), Value::Object(e)) = (&mut params, extra) {
        p.extend(e);
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let resp = modern_execute(&http_client(), url, &body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let body = resp.text().await.unwrap();
    let messages: Vec<Value> = match serde_json::from_str::<Value>(&body) {
        Ok(v) => vec![v],
        Err(_) => body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect(),
    };
    let reply = messages.iter().find(|m| m["id"] == json!(1)).cloned();
    reply.unwrap_or_else(|| panic!("no reply: {messages:?}"))["result"].clone()
}

fn answer(action: Value, ticket: &str) -> Value {
    json!({"inputResponses": {"upstream": action}, "requestState": ticket})
}

fn question_ticket(result: &Value) -> String {
    assert_eq!(result["resultType"], "input_required", "{result}");
    assert_eq!(
        result["inputRequests"]["upstream"]["params"]["message"], QUESTION,
        "{result}"
    );
    result["requestState"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_held_on_one_replica_is_answered_on_another() {
    let Some(everything) = Everything::start().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::write(
        tools.join("upstreams.yaml"),
        upstreams_file(&everything.url()),
    )
    .unwrap();
    let env = [
        ("REDIS_URL", redis_url()),
        ("MCC_LOG", "warn".to_string()),
        (
            "MCC_SESSION__KEY_PREFIX",
            crate::rest_support::unique("held-replicas"),
        ),
    ];
    let a = spawn_gateway(dir.path(), &env).await;
    let mut b = spawn_gateway(dir.path(), &env).await;
    // Both discovered the upstream before answering readyz; give the subscriptions a
    // moment on a loaded machine.
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Asked on A, answered on B: the answer reaches the call held on A, and its result
    // comes back through B.
    let ticket = question_ticket(&raw(&a.url, ASK, json!({})).await);
    let ran = raw(&b.url, ASK, answer(accept_ada(), &ticket)).await;
    let out = ran["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<String>();
    assert!(out.contains("Name: Ada Lovelace"), "{ran}");
    // Spent on B: A refuses it too.
    let again = raw(&a.url, ASK, answer(accept_ada(), &ticket)).await;
    let text = again["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("unknown, expired or already used"), "{again}");

    // Asked on B, declined on A.
    let ticket = question_ticket(&raw(&b.url, ASK, json!({})).await);
    let declined = raw(&a.url, ASK, answer(json!({"action": "decline"}), &ticket)).await;
    assert!(declined.to_string().contains("User declined"), "{declined}");

    // The replica holding the question goes away: the answer on A says so at once.
    let ticket = question_ticket(&raw(&b.url, ASK, json!({})).await);
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    let started = std::time::Instant::now();
    let lost = raw(&a.url, ASK, answer(accept_ada(), &ticket)).await;
    let text = lost["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("is held by another gateway replica, which cannot be reached (it is gone)"),
        "{lost}"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "told at once");
    drop(a);
    everything.stop().await;
}
