//! Approval before a tool runs (issue 34, item 4), end to end: real gateways, real Redis,
//! rmcp clients of both generations and plain HTTP. Legacy clients are asked by
//! elicitation in the call; 2026-07-28 clients get `input_required` with a single-use
//! ticket bound to the exact arguments; REST answers 428 with a ticket. Clients that
//! cannot be asked are refused; a cached result never skips the question; every
//! decision is on the call's audit event.

use crate::mcp_support;
use crate::rest_support;

use std::time::Duration;

use mcp_support::replica::*;
use mcp_support::*;
use rmcp::model::CallToolResponse;
use serde_json::{Value, json};

/// Tools that ask for approval themselves, one cached, after the standard ones (among
/// them `public.echo` and `ops.restart`, which do not). Also `approval_shown`'s tools.
const APPROVAL_TOOLS: &str = r#"
  - name: deploy
    groups: [ops]
    description: Deploy a service.
    approval: required
    params:
      - name: service
        type: str
        required: true
      - name: replicas
        type: int
        default: 1
    exec: printf 'deployed %s x%s' {{ service | quote }} {{ replicas }}
  - name: stamp
    groups: [public]
    description: Print a fresh number (cached for a minute).
    approval: required
    cache_ttl: 60
    exec: date +%s%N
"#;

pub(crate) fn tools_file() -> String {
    format!("{}{APPROVAL_TOOLS}", mcp_support::TOOLS.trim_end())
}

const DEPLOYED: &str = "deployed web x1";

async fn gateway(configure: impl FnOnce(&mut mcc_gateway::config::Settings)) -> Server {
    start_configured(
        "dev-admin",
        Some(&redis_url()),
        &[("tools/tools.yaml", tools_file())],
        |s| {
            s.session.key_prefix = rest_support::unique("approval");
            configure(s)
        },
    )
    .await
}

fn deploy(service: &str) -> Value {
    json!({"key": "ops.deploy", "params": {"service": service}})
}

fn declined(key: &str) -> String {
    format!("Execution not approved: running '{key}' was declined")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_clients_are_asked_in_the_call() {
    let server = gateway(|_| {}).await;
    let accepting = TestClient::answering(Answer::Accept(json!({})));
    let asked = accepting.asked.clone();
    let client = legacy(&server.url, accepting).await;
    assert_eq!(call_text(&client, "execute", deploy("web")).await, DEPLOYED);
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    // The key and the exact validated arguments (the default included).
    assert!(
        asked[0].starts_with("Approve running tool 'ops.deploy' with these arguments (sha256 "),
        "{asked:?}"
    );
    assert!(
        asked[0].ends_with("{\n  \"service\": \"web\",\n  \"replicas\": 1\n}"),
        "{asked:?}"
    );
    // A tool without approval is not asked about.
    assert_eq!(
        call_text(
            &client,
            "execute",
            json!({"key": "public.echo", "params": {"message": "x"}})
        )
        .await,
        "x"
    );
    client.cancel().await.unwrap();

    for answer in [Answer::Decline, Answer::Cancel] {
        let client = legacy(&server.url, TestClient::answering(answer)).await;
        let r = call(&client, "execute", deploy("web")).await;
        assert_eq!(text(&r), declined("ops.deploy"));
        assert_eq!(r.is_error, Some(true));
        client.cancel().await.unwrap();
    }

    // Without elicitation: refused (missing params would go on unasked, as in MCC).
    let plain = legacy(&server.url, TestClient::plain()).await;
    let r = call(&plain, "execute", deploy("web")).await;
    assert_eq!(
        text(&r),
        "Execution refused: tool 'ops.deploy' needs approval before it runs, and this client \
         cannot be asked (it did not declare form elicitation)"
    );
    assert_eq!(r.is_error, Some(true));
    plain.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_params_are_asked_first_then_approval() {
    let server = gateway(|_| {}).await;
    let handler = TestClient::answering(Answer::Accept(json!({"service": "api"})));
    let asked = handler.asked.clone();
    let client = legacy(&server.url, handler).await;
    let r = call_text(&client, "execute", json!({"key": "ops.deploy"})).await;
    assert_eq!(r, "deployed api x1");
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked[0], "Tool 'ops.deploy' requires: service (str)");
    assert!(asked[1].contains("\"service\": \"api\""), "{asked:?}");
    client.cancel().await.unwrap();

    // 2026-07-28: two rounds of input_required; the approval's retry repeats only the
    // original arguments, and the params answered before come from its ticket.
    let handler = TestClient::answering(Answer::Accept(json!({"service": "api"})));
    let asked = handler.asked.clone();
    let client = stateless(&server.url, handler).await;
    let r = call_text(&client, "execute", json!({"key": "ops.deploy"})).await;
    assert_eq!(r, "deployed api x1");
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked[0], "Tool 'ops.deploy' requires: service (str)");
    assert!(
        asked[1].starts_with("Approve running tool 'ops.deploy'"),
        "{asked:?}"
    );
    client.cancel().await.unwrap();

    // Declining the missing params keeps MCC's own text.
    let client = legacy(&server.url, TestClient::answering(Answer::Decline)).await;
    let r = call_text(&client, "execute", json!({"key": "ops.deploy"})).await;
    assert_eq!(r, "Execution cancelled: required parameters not provided");
    client.cancel().await.unwrap();
    server.stop().await;
}

/// A 2026-07-28 `execute` of `arguments`, once (no automatic retry).
async fn once(
    client: &Client,
    arguments: Value,
    answer: Option<Value>,
    state: Option<&str>,
) -> CallToolResponse {
    execute_once(client, arguments, "approval", answer, state).await
}

fn accept() -> Value {
    json!({"action": "accept", "content": {}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_clients_answer_with_a_single_use_ticket_bound_to_the_arguments() {
    let server = gateway(|_| {}).await;
    // rmcp's driver answers and retries by itself.
    let accepting = stateless(
        &server.url,
        TestClient::answering(Answer::Accept(json!({}))),
    )
    .await;
    assert_eq!(
        call_text(&accepting, "execute", deploy("web")).await,
        DEPLOYED
    );
    let declining = stateless(&server.url, TestClient::answering(Answer::Decline)).await;
    let r = call(&declining, "execute", deploy("web")).await;
    assert_eq!(text(&r), declined("ops.deploy"));
    declining.cancel().await.unwrap();

    // By hand: the question and its ticket.
    let first = asked(once(&accepting, deploy("web"), None, None).await);
    let v = serde_json::to_value(&first).unwrap();
    let q = &v["inputRequests"]["approval"];
    assert_eq!(q["method"], "elicitation/create", "{v}");
    assert!(
        q["params"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Approve running tool 'ops.deploy'"),
        "{v}"
    );
    let ticket = first.request_state.clone().expect("a ticket");

    // Approved for `web`, retried for `db`: refused, and the ticket is spent.
    let changed = result_text(once(&accepting, deploy("db"), Some(accept()), Some(&ticket)).await);
    assert_eq!(
        changed,
        "Execution refused: the approval was given for other arguments than this call of \
         'ops.deploy'; call again to be asked anew"
    );
    let reused = result_text(once(&accepting, deploy("web"), Some(accept()), Some(&ticket)).await);
    assert_eq!(
        reused,
        "Execution refused: the approval ticket for 'ops.deploy' is unknown, expired or \
         already used; call again to be asked anew"
    );

    // A fresh ticket runs the call once; its reuse is refused.
    let ticket = asked(once(&accepting, deploy("web"), None, None).await)
        .request_state
        .unwrap();
    let ran = result_text(once(&accepting, deploy("web"), Some(accept()), Some(&ticket)).await);
    assert_eq!(ran, DEPLOYED);
    let again = result_text(once(&accepting, deploy("web"), Some(accept()), Some(&ticket)).await);
    assert!(
        again.contains("unknown, expired or already used"),
        "{again}"
    );

    // An answer without a ticket, or with a made-up one, approves nothing.
    let forged = "apv_00000000000000000000000000000000";
    for state in [None, Some(forged)] {
        let r = result_text(once(&accepting, deploy("web"), Some(accept()), state).await);
        assert!(r.contains("unknown, expired or already used"), "{r}");
    }
    accepting.cancel().await.unwrap();

    // Without elicitation: refused.
    let plain = stateless(&server.url, TestClient::plain()).await;
    let r = call_text(&plain, "execute", deploy("web")).await;
    assert!(r.contains("cannot be asked"), "{r}");
    plain.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_ticket_is_refused() {
    let server = gateway(|s| s.execution.approval.ttl_seconds = 1).await;
    let client = stateless(
        &server.url,
        TestClient::answering(Answer::Accept(json!({}))),
    )
    .await;
    let ticket = asked(once(&client, deploy("web"), None, None).await)
        .request_state
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let r = result_text(once(&client, deploy("web"), Some(accept()), Some(&ticket)).await);
    assert!(r.contains("unknown, expired or already used"), "{r}");
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_result_is_still_asked_for() {
    let server = gateway(|_| {}).await;
    let handler = TestClient::answering(Answer::Accept(json!({})));
    let asked = handler.asked.clone();
    let client = legacy(&server.url, handler).await;
    let stamp = json!({"key": "public.stamp"});
    let first = call_text(&client, "execute", stamp.clone()).await;
    let second = call_text(&client, "execute", stamp.clone()).await;
    assert_eq!(first, second, "the second result comes from the cache");
    assert_eq!(asked.lock().unwrap().len(), 2);
    client.cancel().await.unwrap();
    // Declined: the cached result is not handed out.
    let declining = legacy(&server.url, TestClient::answering(Answer::Decline)).await;
    let r = call_text(&declining, "execute", stamp).await;
    assert_eq!(r, declined("public.stamp"));
    declining.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_platform_requires_approval_by_group() {
    let server = gateway(|s| s.execution.approval.groups = vec!["ops".into()]).await;
    let plain = legacy(&server.url, TestClient::plain()).await;
    let restart = json!({"key": "ops.restart", "params": {"service": "web"}});
    let r = call_text(&plain, "execute", restart.clone()).await;
    assert!(
        r.starts_with("Execution refused: tool 'ops.restart' needs approval"),
        "{r}"
    );
    let echo = json!({"key": "public.echo", "params": {"message": "free"}});
    assert_eq!(call_text(&plain, "execute", echo).await, "free");
    plain.cancel().await.unwrap();
    let handler = TestClient::answering(Answer::Accept(json!({})));
    let client = legacy(&server.url, handler).await;
    assert_eq!(
        call_text(&client, "execute", restart).await,
        "restarting web\n"
    );
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_answers_428_with_a_ticket_to_approve_with() {
    let server = gateway(|_| {}).await;
    let base = &server.base;
    let body = json!({"service": "web"});
    let (status, first) = rest_support::post_json(base, "/v1/tools/ops.deploy", body.clone()).await;
    assert_eq!(status.as_u16(), 428, "{first}");
    assert_eq!(first["error"], "approval_required");
    let ticket = first["approval"]["ticket"].as_str().unwrap().to_string();
    assert_eq!(first["approval"]["expires_in"], 300);
    assert!(
        first["approval"]["question"]
            .as_str()
            .unwrap()
            .contains("\"service\": \"web\""),
        "{first}"
    );
    let answer = |ticket: &str, decision: &str| {
        format!("/v1/tools/ops.deploy?approval_ticket={ticket}&approval={decision}")
    };
    // Another body under the same ticket: refused, and the ticket is spent.
    let (status, other) =
        rest_support::post_json(base, &answer(&ticket, "approve"), json!({"service": "db"})).await;
    assert_eq!(status.as_u16(), 409, "{other}");
    assert_eq!(other["error"], "approval_refused");
    assert!(
        other["message"]
            .as_str()
            .unwrap()
            .contains("other arguments")
    );
    let (status, _) =
        rest_support::post_json(base, &answer(&ticket, "approve"), body.clone()).await;
    assert_eq!(status.as_u16(), 409);

    let (_, first) = rest_support::post_json(base, "/v1/tools/ops.deploy", body.clone()).await;
    let ticket = first["approval"]["ticket"].as_str().unwrap().to_string();
    let (status, ran) =
        rest_support::post_json(base, &answer(&ticket, "approve"), body.clone()).await;
    assert_eq!(status.as_u16(), 200, "{ran}");
    assert_eq!(ran["result"], DEPLOYED, "{ran}");

    let (_, first) = rest_support::post_json(base, "/v1/tools/ops.deploy", body.clone()).await;
    let ticket = first["approval"]["ticket"].as_str().unwrap().to_string();
    let (status, no) =
        rest_support::post_json(base, &answer(&ticket, "decline"), body.clone()).await;
    assert_eq!(status.as_u16(), 403, "{no}");
    assert_eq!(no["error"], "approval_declined");

    let (status, bad) = rest_support::post_json(
        base,
        &format!("/v1/tools/ops.deploy?approval_ticket={ticket}"),
        body,
    )
    .await;
    assert_eq!(status.as_u16(), 400, "{bad}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_decision_is_on_the_calls_audit_event() {
    let stream = rest_support::unique("approval-audit");
    let server = gateway(|s| s.audit.stream = Some(stream.clone())).await;
    let accepting = legacy(
        &server.url,
        TestClient::answering(Answer::Accept(json!({}))),
    )
    .await;
    call_text(&accepting, "execute", deploy("web")).await;
    accepting.cancel().await.unwrap();
    let declining = legacy(&server.url, TestClient::answering(Answer::Decline)).await;
    call_text(&declining, "execute", deploy("web")).await;
    declining.cancel().await.unwrap();
    let plain = legacy(&server.url, TestClient::plain()).await;
    call_text(&plain, "execute", deploy("web")).await;
    plain.cancel().await.unwrap();
    let modern = stateless(
        &server.url,
        TestClient::answering(Answer::Accept(json!({}))),
    )
    .await;
    let ticket = asked(once(&modern, deploy("web"), None, None).await)
        .request_state
        .unwrap();
    once(&modern, deploy("db"), Some(accept()), Some(&ticket)).await;
    once(&modern, deploy("db"), Some(accept()), Some(&ticket)).await;
    modern.cancel().await.unwrap();

    let events = audit_events(&stream, 6).await;
    let seen: Vec<(String, String)> = events
        .iter()
        .map(|e| {
            (
                e["outcome"].as_str().unwrap().to_string(),
                e["approval"].as_str().unwrap_or("-").to_string(),
            )
        })
        .collect();
    let expected = [
        ("success", "approved"),
        ("not_approved", "declined"),
        ("not_approved", "unsupported"),
        ("input_required", "asked"),
        ("not_approved", "mismatch"),
        ("not_approved", "expired"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(o, a)| (o.to_string(), a.to_string()))
        .collect();
    assert_eq!(seen, expected, "{events:#?}");
    // The hash the approval is bound to: equal for equal arguments.
    assert_eq!(events[0]["params_hash"], events[1]["params_hash"]);
    assert_ne!(events[3]["params_hash"], events[4]["params_hash"]);
    assert!(events[0]["params_hash"].as_str().unwrap().len() == 64);
    server.stop().await;
}

/// Reads the JSON-RPC messages of a response body (plain JSON or SSE `data:` lines).
fn messages(body: &str) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return vec![v];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

/// A raw 2026-07-28 `execute` of `ops.deploy` (declaring elicitation) and its result.
async fn raw_deploy(url: &str, extra: Value) -> Value {
    let mut params = json!({"name": "execute",
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}},
        "arguments": {"key": "ops.deploy", "params": {"service": "web"}}});
    if let (Value::Object(p), Value::Object(e)) = (&mut params, extra) {
        p.extend(e);
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let resp = modern_execute(&http_client(), url, &body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let msgs = messages(&resp.text().await.unwrap());
    let reply = msgs.iter().find(|m| m["id"] == json!(1)).cloned();
    reply.unwrap_or_else(|| panic!("no reply: {msgs:?}"))["result"].clone()
}

/// Two `mcc-gateway serve` processes over these tools, sharing one Redis (and a key
/// prefix of their own); the directory lives as long as they run.
async fn two_replicas() -> (tempfile::TempDir, Replica, Replica) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("tools")).unwrap();
    std::fs::write(dir.path().join("tools").join("tools.yaml"), tools_file()).unwrap();
    let prefix = rest_support::unique("approval-replicas");
    let env = [
        ("REDIS_URL", redis_url()),
        ("MCC_LOG", "warn".to_string()),
        ("MCC_SESSION__KEY_PREFIX", prefix),
    ];
    let a = spawn_gateway(dir.path(), &env).await;
    let b = spawn_gateway(dir.path(), &env).await;
    (dir, a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_asked_on_one_replica_is_answered_on_another() {
    let (_dir, a, b) = two_replicas().await;

    let first = raw_deploy(&a.url, json!({})).await;
    assert_eq!(first["resultType"], "input_required", "{first}");
    let ticket = first["requestState"].as_str().unwrap().to_string();
    let answer = json!({"inputResponses": {"approval": accept()}, "requestState": ticket});
    let ran = raw_deploy(&b.url, answer.clone()).await;
    assert_eq!(ran["content"][0]["text"], DEPLOYED, "{ran}");
    // Spent on B: A refuses it too.
    let again = raw_deploy(&a.url, answer).await;
    let text = again["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("unknown, expired or already used"), "{again}");
}

/// A legacy client's approval answer works across replicas, as a missing-params answer
/// does (`replicas_elicitation`): the call's stream is on A, the client's answer to the
/// question is POSTed to B and relayed to the call waiting on A. Accept runs the call;
/// decline ends it with approval's own text, so the answer itself crossed, not a timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_approval_answered_on_another_replica_resumes_the_call() {
    use crate::replicas_elicitation::{initialize_eliciting, legacy_call, next_message};
    let (_dir, a, b) = two_replicas().await;
    let http = http_client();
    let sid = initialize_eliciting(&http, &a.url).await;

    for (id, action, expected) in [
        (7, "accept", DEPLOYED.to_string()),
        (8, "decline", declined("ops.deploy")),
    ] {
        let flow = async {
            let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "execute", "arguments": deploy("web")}});
            let mut stream = legacy_call(&http, &a.url, &sid, &call).await;
            let mut buffer = String::new();
            let question = next_message(&mut stream, &mut buffer, |m| {
                m["method"] == "elicitation/create"
            })
            .await;
            let message = question["params"]["message"].as_str().unwrap();
            assert!(
                message.starts_with("Approve running tool 'ops.deploy' with these arguments"),
                "{question}"
            );
            let answer = json!({"jsonrpc": "2.0", "id": question["id"],
                "result": {"action": action, "content": {}}});
            let (status, _, msgs) = post(&http, &b.url, Some(&sid), answer.to_string()).await;
            assert_eq!(status, 202, "{msgs:?}");
            let reply = next_message(&mut stream, &mut buffer, |m| m["id"] == json!(id)).await;
            reply["result"]["content"][0]["text"].clone()
        };
        let text = tokio::time::timeout(Duration::from_secs(30), flow)
            .await
            .expect("the call on A resumed within 30 s (the question's own TTL is 300 s)");
        assert_eq!(text, json!(expected), "{action} answered on B");
    }
}
