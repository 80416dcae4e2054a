//! The REST surface end to end, against real gateways over real HTTP (sessions, rate
//! limits and the audit stream in the test Redis), beside rmcp clients of the same
//! gateways: REST and MCP give the same data for the same caller (tools, search, whoami,
//! execute results, session context), a key the caller may not run is a 404 exactly like
//! an unknown key (MCP keeps MCC's two texts), bad params are a 400 naming the param, a
//! rate-limited call is a 429 with `Retry-After` (one bucket for both surfaces), a busy
//! gateway a 503, and REST calls are audited and counted. Credentials and the OpenAPI
//! document: `rest_access.rs`.

use crate::mcp_support;
use crate::rest_support;

use std::time::Duration;

use mcp_support::*;
use reqwest::StatusCode;
use rest_support::*;
use serde_json::{Value, json};

#[tokio::test]
async fn rest_and_mcp_give_the_same_data_for_the_same_caller() {
    // dev-public acts as bob (public, ops); dev-admin as alice (admin).
    let bob_gw = start("dev-public").await;
    let alice_gw = start("dev-admin").await;
    let bob = stateless(&bob_gw.url, TestClient::plain()).await;
    let alice = stateless(&alice_gw.url, TestClient::plain()).await;
    let base = &bob_gw.base;

    // The tool list: what describe_tools words, key for key.
    let (status, list) = get(base, "/v1/tools").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let tools = list["tools"].as_array().unwrap();
    let described: Vec<String> = tools
        .iter()
        .map(|t| {
            format!(
                "## {}\n{}",
                t["key"].as_str().unwrap(),
                t["description"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        described.join("\n\n"),
        call_text(&bob, "describe_tools", json!({})).await
    );
    let keys: Vec<&str> = tools.iter().map(|t| t["key"].as_str().unwrap()).collect();
    assert!(
        keys.contains(&"ops.restart") && !keys.contains(&"admin.shell"),
        "{keys:?}"
    );
    let greet = tools.iter().find(|t| t["key"] == "public.greet").unwrap();
    assert_eq!(
        greet["params"][1],
        json!({"name": "times", "type": "int", "required": true})
    );
    assert_eq!(
        get(base, "/tools").await.1,
        list,
        "MCC's /tools is /v1/tools"
    );
    let (_, ops) = get(base, "/v1/tools?groups=ops").await;
    let ops: Vec<&str> = ops["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["key"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["ops.restart"]);
    assert_eq!(
        call_text(&bob, "describe_tools", json!({"groups": ["ops"]})).await,
        "## ops.restart\nRestart a service by name."
    );

    // One tool: the list's entry.
    let (status, one) = get(base, "/v1/tools/public.greet").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(&one, greet);

    // whoami: the four lines' data.
    let (status, me) = get(base, "/v1/whoami").await;
    assert_eq!(status, StatusCode::OK);
    let text = call_text(&bob, "whoami", json!({})).await;
    assert_eq!(
        text,
        format!(
            "username: {}\nemail: (none)\ngroups: {}\ntools: {}",
            me["username"].as_str().unwrap(),
            strings(&me["groups"]).join(", "),
            strings(&me["tools"]).join(", ")
        )
    );
    assert_eq!(me["username"], "bob");
    assert_eq!(get(base, "/whoami").await.1, me);

    // search: the same hits, scores and signatures.
    let (status, found) = get(base, "/v1/search?q=restart%20a%20service").await;
    assert_eq!(status, StatusCode::OK, "{found}");
    let hits = found["results"].as_array().unwrap();
    assert_eq!(hits[0]["key"], "ops.restart", "{found}");
    let as_text: Vec<String> = hits
        .iter()
        .map(|h| {
            format!(
                "[{:.2}]\n{}",
                h["score"].as_f64().unwrap(),
                h["signature"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        as_text.join("\n\n"),
        call_text(&bob, "search", json!({"query": "restart a service"})).await
    );
    let (_, filtered) = get(base, "/search?q=restart%20a%20service&min_score=1000").await;
    assert_eq!(filtered, json!({"results": []}));

    // execute: a success, a JSON result and a failure.
    let (status, ran) = post_json(base, "/v1/tools/public.echo", json!({"message": "hi"})).await;
    assert_eq!(status, StatusCode::OK, "{ran}");
    assert_eq!(
        ran,
        json!({"outcome": "success", "exit_code": 0, "result": "hi", "truncated": false, "cached": false})
    );
    let mcp = call_text(
        &bob,
        "execute",
        json!({"key": "public.echo", "params": {"message": "hi"}}),
    )
    .await;
    assert_eq!(mcp, "hi");
    let (_, number) = post_json(base, "/tools/public.echo", json!({"message": "[1, 2]"})).await;
    assert_eq!(number["result"], json!([1, 2]), "{number}");

    let failing = json!({"command": "echo out; echo err >&2; exit 3"});
    let (status, failed) =
        post_json(&alice_gw.base, "/v1/tools/admin.shell", failing.clone()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        failed,
        json!({"outcome": "failure", "exit_code": 3, "stdout": "out\n", "stderr": "err\n",
               "truncated": false, "cached": false})
    );
    let mcp = call_text(
        &alice,
        "execute",
        json!({"key": "admin.shell", "params": failing}),
    )
    .await;
    assert_eq!(
        serde_json::from_str::<Value>(&mcp).unwrap(),
        json!([3, "out\n", "err\n"])
    );

    // Session context: a handle minted over MCP gives REST the same variables.
    let handle = call_text(&bob, "new_session", json!({})).await;
    call_text(
        &bob,
        "set_session",
        json!({"name": "target", "value": "prod", "session": handle}),
    )
    .await;
    let mcp = call_text(
        &bob,
        "execute",
        json!({"key": "public.ctx", "session": handle}),
    )
    .await;
    assert_eq!(mcp, "bob prod \n");
    let (status, ctx) = post_json(
        base,
        &format!("/v1/tools/public.ctx?session={handle}"),
        json!({}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{ctx}");
    assert_eq!(ctx["result"], "bob prod \n");
    let (status, other) =
        post_json(base, "/v1/tools/public.ctx?session=nope-handle", json!({})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{other}");
    assert_eq!(other["error"], "session");

    bob_gw.stop().await;
    alice_gw.stop().await;
}

#[tokio::test]
async fn the_tool_list_is_markdown_or_html_on_request() {
    let server = start("dev-public").await;
    let http = http_client();
    let fetch = |path: &str, accept: &str| {
        http.get(format!("{}{path}", server.base))
            .header("accept", accept)
            .send()
    };
    let md = fetch("/v1/tools", "text/markdown").await.unwrap();
    assert_eq!(md.headers()["content-type"], "text/markdown; charset=utf-8");
    let md = md.text().await.unwrap();
    assert!(
        md.starts_with("# Tools\n\n## ops.restart (service:str) -> "),
        "{md}"
    );
    assert!(!md.contains("admin.shell"));
    let html = fetch("/v1/tools", "text/html,*/*;q=0.8").await.unwrap();
    assert_eq!(html.headers()["content-type"], "text/html; charset=utf-8");
    let html = html.text().await.unwrap();
    assert!(html.contains("<h2><code>public.echo</code></h2>"), "{html}");
    // MCC's ?format= wins over Accept.
    let json = fetch("/tools?format=json", "text/html").await.unwrap();
    assert_eq!(json.headers()["content-type"], "application/json");
    let same_md = fetch("/tools?format=md", "application/json").await.unwrap();
    assert_eq!(same_md.text().await.unwrap(), md);
    let bad = fetch("/v1/tools?format=yaml", "*/*").await.unwrap();
    assert_eq!(bad.status(), StatusCode::NOT_ACCEPTABLE);
    server.stop().await;
}

#[tokio::test]
async fn a_forbidden_key_is_a_404_exactly_like_an_unknown_one() {
    let server = start("dev-public").await;
    let bob = stateless(&server.url, TestClient::plain()).await;
    let base = &server.base;
    let answer = |resp: reqwest::Response, key: &'static str| async move {
        let status = resp.status();
        let content_type = resp.headers()["content-type"].clone();
        let body = resp.text().await.unwrap().replace(key, "<key>");
        (status, content_type, body)
    };
    for (forbidden, unknown) in [("admin.shell", "admin.shel1"), ("admin.shell", "nope.tool")] {
        let http = http_client();
        let get_f = answer(
            http.get(format!("{base}/v1/tools/{forbidden}"))
                .send()
                .await
                .unwrap(),
            forbidden,
        )
        .await;
        let get_u = answer(
            http.get(format!("{base}/v1/tools/{unknown}"))
                .send()
                .await
                .unwrap(),
            unknown,
        )
        .await;
        assert_eq!(get_f.0, StatusCode::NOT_FOUND);
        assert_eq!(get_f, get_u);
        let run = r#"{"command": "id"}"#;
        let post_f = answer(
            post_body(base, &format!("/v1/tools/{forbidden}"), run).await,
            forbidden,
        )
        .await;
        let post_u = answer(
            post_body(base, &format!("/tools/{unknown}"), run).await,
            unknown,
        )
        .await;
        assert_eq!(post_f.0, StatusCode::NOT_FOUND);
        assert_eq!(post_f, post_u);
        assert_eq!(
            serde_json::from_str::<Value>(&post_f.2).unwrap(),
            json!({"error": "not_found", "message": "Unknown tool: <key>"})
        );
    }
    // MCP keeps MCC's two texts.
    let exec = |key: &str| json!({"key": key, "params": {"command": "id"}});
    assert_eq!(
        call_text(&bob, "execute", exec("admin.shell")).await,
        "Unauthorized"
    );
    assert_eq!(
        call_text(&bob, "execute", exec("nope.tool")).await,
        "Unknown tool: nope.tool"
    );
    server.stop().await;
}

#[tokio::test]
async fn bad_params_are_a_400_naming_the_param() {
    let server = start("dev-public").await;
    let base = &server.base;
    let (status, body) = post_json(
        base,
        "/v1/tools/public.greet",
        json!({"name": "x", "times": "many"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"], "invalid_params");
    assert_eq!(body["params"][0]["param"], "times", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("Validation error for tool 'public.greet': 1 validation error"),
        "{body}"
    );
    // Missing required params: no question on REST, a 400 naming them.
    let (status, body) = post_json(base, "/v1/tools/public.greet", json!({"name": "x"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["params"][0]["param"], "times");
    assert!(
        body["params"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("Field required")
    );
    let (status, body) = post_json(base, "/v1/tools/public.greet", json!({})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let named: Vec<&str> = body["params"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["param"].as_str().unwrap())
        .collect();
    assert_eq!(named, ["name", "times"]);
    let (status, body) = post_json(
        base,
        "/v1/tools/public.echo",
        json!({"message": "x", "mesage": "y"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["params"][0]["param"], "mesage", "{body}");

    // A body that is no JSON object.
    for bad in ["[1]", "{", "\"x\""] {
        let resp = post_body(base, "/v1/tools/public.echo", bad).await;
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST, "{bad}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"], "invalid_body", "{bad}: {body}");
    }
    // A body over server.max_request_body (4 MiB by default).
    // The server answers as soon as the limit is passed and closes; a client still
    // writing the rest may see its write fail before it reads the answer (a race of the
    // transport, more likely on a loaded machine), so a failed write is tried again.
    let huge = format!("{{\"message\": \"{}\"}}", "x".repeat(5 << 20));
    let mut answered = None;
    for _ in 0..5 {
        let sent = http_client()
            .post(format!("{base}/v1/tools/public.echo"))
            .header("content-type", "application/json")
            .body(huge.clone())
            .send()
            .await;
        if let Ok(resp) = sent {
            answered = Some(resp.status());
            break;
        }
    }
    assert_eq!(answered, Some(StatusCode::PAYLOAD_TOO_LARGE));
    // Search's query parameters, named.
    let (status, body) = get(base, "/v1/search").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["message"].as_str().unwrap().contains("`q`"), "{body}");
    let (status, body) = get(base, "/v1/search?q=x&min_score=high").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["message"].as_str().unwrap().contains("min_score"),
        "{body}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_rate_limited_call_is_a_429_with_retry_after_in_the_bucket_mcp_shares() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path(), "dev-public", Some(&redis_url()));
    s.session.key_prefix = unique("limits");
    s.rate_limit.tools = serde_json::from_value(json!({"public.echo": "2/1h"})).unwrap();
    let server = start_with(s, dir).await;
    let bob = stateless(&server.url, TestClient::plain()).await;
    let echo = json!({"message": "hi"});
    let (status, _) = post_json(&server.base, "/v1/tools/public.echo", echo.clone()).await;
    assert_eq!(status, StatusCode::OK);
    let mcp = call_text(
        &bob,
        "execute",
        json!({"key": "public.echo", "params": echo}),
    )
    .await;
    assert_eq!(mcp, "hi");
    let resp = post_body(&server.base, "/v1/tools/public.echo", &echo.to_string()).await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry > 3500 && retry <= 3600, "{retry}");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"], "rate_limited");
    assert_eq!(body["retry_after"], retry);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("Rate limit exceeded for public.echo — retry in "),
        "{body}"
    );
    // Another tool is not limited.
    let (status, _) = post_json(
        &server.base,
        "/v1/tools/ops.restart",
        json!({"service": "x"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // Counted as MCP calls are; the HTTP metrics label the route, not the key.
    let metrics = http_client()
        .get(format!("{}/metrics", server.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        r#"mcc_tool_calls_total{tool="public.echo",outcome="rate_limited"} 1"#,
        r#"mcc_tool_calls_total{tool="public.echo",outcome="success"} 2"#,
        r#"mcc_http_requests_total{path="/v1/tools/{key}",status="429"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} not in:\n{metrics}");
    }
    server.stop().await;
}

#[tokio::test]
async fn no_execution_slot_is_a_503_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path(), "dev-admin", Some(&redis_url()));
    s.concurrency.max_executions = 1;
    s.concurrency.wait_ms = 50;
    let server = start_with(s, dir).await;
    let base = server.base.clone();
    let slow = tokio::spawn(async move {
        post_json(
            &base,
            "/v1/tools/admin.shell",
            json!({"command": "sleep 2"}),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let resp = post_body(&server.base, "/v1/tools/public.echo", r#"{"message": "x"}"#).await;
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"], "busy");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("concurrency.max_executions"),
        "{body}"
    );
    assert_eq!(slow.await.unwrap().0, StatusCode::OK);
    server.stop().await;
}

#[tokio::test]
async fn rest_calls_are_audited_as_mcp_calls_are() {
    let stream = unique("audit");
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path(), "dev-public", Some(&redis_url()));
    s.audit.stream = Some(stream.clone());
    s.audit.params = true;
    let server = start_with(s, dir).await;
    let base = &server.base;
    post_json(base, "/v1/tools/public.echo", json!({"message": "hi"})).await;
    post_json(base, "/v1/tools/admin.shell", json!({"command": "id"})).await;
    post_json(base, "/v1/tools/public.greet", json!({"name": "x"})).await;
    post_body(base, "/v1/tools/public.echo", "[1]").await;
    get(base, "/v1/search?q=echo").await;

    let events = audit_events(&stream, 5).await;
    assert_eq!(events.len(), 5, "{events:#?}");
    let find = |outcome: &str| {
        events
            .iter()
            .find(|e| e["outcome"] == outcome && e["event"] == "execute")
            .unwrap_or_else(|| panic!("no {outcome} in {events:#?}"))
    };
    let ok = find("success");
    assert_eq!(ok["user"], "bob");
    assert_eq!(ok["credential"], "dev");
    assert_eq!(ok["tool"], "public.echo");
    assert_eq!(ok["exit_code"], 0);
    assert_eq!(ok["bytes_out"], 2);
    assert_eq!(ok["params"], json!({"message": "hi"}));
    // The caller got a 404; the trail knows it was a denied attempt.
    assert_eq!(find("unauthorized")["tool"], "admin.shell");
    let invalid: Vec<&Value> = events
        .iter()
        .filter(|e| e["outcome"] == "invalid")
        .collect();
    assert_eq!(invalid.len(), 2, "{events:#?}");
    let search = events.iter().find(|e| e["event"] == "search").unwrap();
    assert_eq!(search["outcome"], "success");
    assert_eq!(search["query"], "echo");
    server.stop().await;
}
