//! Every MCP tool and prompt end to end: a real gateway over HTTP, the rmcp client of both
//! protocol generations, sessions in the real Redis.

use crate::mcp_support;

use mcp_support::*;
use rmcp::model::{CallToolRequestParams, CallToolResponse, GetPromptRequestParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_the_reference_tools_and_prompts() {
    let server = start("dev-admin").await;
    let client = legacy(&server.url, TestClient::plain()).await;
    let info = client.peer_info().unwrap();
    assert_eq!(
        info.server_info.clone().unwrap().name,
        "model-context-catalog (mcc)"
    );
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "search",
            "execute",
            "whoami",
            "describe_tools",
            "set_session",
            "get_session",
            "new_session"
        ]
    );
    assert!(tools[0].description.as_deref().unwrap().starts_with(
        "Search the tool catalog using natural language. Combines keyword and semantic\nsimilarity for best results."
    ));
    assert_eq!(tools[1].input_schema["required"], json!(["key"]));
    assert!(tools[1].output_schema.is_none());
    assert!(tools[0].output_schema.is_some());
    let prompts = client.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["find_and_run", "explain_tool", "debug_error"]);
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_render_the_reference_texts() {
    let server = start("dev-admin").await;
    let client = stateless(&server.url, TestClient::plain()).await;
    let get = |name: &str, a: serde_json::Value| {
        GetPromptRequestParams::new(name).with_arguments(args(a))
    };
    let r = client
        .get_prompt(get("find_and_run", json!({"task": "T"})))
        .await
        .unwrap();
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["description"], "Find a tool for a task and execute it.");
    assert_eq!(
        v["messages"][0]["content"]["text"],
        "Search the tool catalog for a tool that can: T. Review the results, pick the best match, and execute it with appropriate parameters."
    );
    let r = client
        .get_prompt(get("explain_tool", json!({"key": "K"})))
        .await
        .unwrap();
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(
        v["messages"][0]["content"]["text"],
        "Read the tool catalog entry for 'K' and explain:\n1. What the tool does\n2. What parameters it accepts (required vs optional)\n3. When you would use this tool"
    );
    let r = client
        .get_prompt(get("debug_error", json!({"key": "K", "error": "E"})))
        .await
        .unwrap();
    let v = serde_json::to_value(&r).unwrap();
    assert!(
        v["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .starts_with("The tool 'K' returned this error:\n\nE\n\n")
    );
    let missing = client
        .get_prompt(get("debug_error", json!({"key": "K"})))
        .await;
    assert!(format!("{:?}", missing.unwrap_err()).contains("Missing required argument 'error'"));
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeds_session_example_in_both_generations() {
    let server = start("dev-admin").await;
    for client in [
        legacy(&server.url, TestClient::plain()).await,
        stateless(&server.url, TestClient::plain()).await,
    ] {
        // A fresh handle keeps the stateless client's default bucket out of the way.
        let handle = call_text(&client, "new_session", json!({})).await;
        let s = |extra: serde_json::Value| {
            let mut a = extra;
            if client.peer_info().unwrap().protocol_version.as_str() >= "2026-07-28" {
                a["session"] = json!(handle);
            }
            a
        };
        assert_eq!(
            call_text(
                &client,
                "set_session",
                s(json!({"name": "target", "value": "10.0.0.5"}))
            )
            .await,
            "Set 'target'."
        );
        assert_eq!(
            call_text(
                &client,
                "set_session",
                s(json!({"name": "budget", "value": 1000}))
            )
            .await,
            "Set 'budget'."
        );
        let get = |name: &str| s(json!({ "name": name }));
        assert_eq!(
            call_text(&client, "get_session", get("target")).await,
            "\"10.0.0.5\""
        );
        assert_eq!(
            call_text(&client, "get_session", get("budget")).await,
            "1000"
        );
        assert_eq!(
            call_text(&client, "get_session", get("user")).await,
            "\"alice\""
        );
        assert_eq!(
            call_text(&client, "get_session", get("never_set")).await,
            "null"
        );
        assert_eq!(
            call_text(&client, "get_session", get("groups")).await,
            "[\"admin\", \"osint\"]"
        );
        let r = call(&client, "get_session", get("target")).await;
        assert_eq!(
            r.structured_content,
            Some(json!({"result": "\"10.0.0.5\""}))
        );
        client.cancel().await.unwrap();
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_session_refuses_bad_and_reserved_names_and_keeps_types() {
    let server = start("dev-admin").await;
    let client = legacy(&server.url, TestClient::plain()).await;
    assert_eq!(
        call_text(
            &client,
            "set_session",
            json!({"name": "Bad-Name", "value": 1})
        )
        .await,
        "Invalid name 'Bad-Name': must match ^[a-z_][a-z0-9_]*$ (lowercase letters, digits, underscores; not starting with a digit)."
    );
    assert_eq!(
        call_text(
            &client,
            "set_session",
            json!({"name": "user", "value": "mallory"})
        )
        .await,
        "Cannot set reserved identity key 'user'."
    );
    assert_eq!(
        call_text(&client, "get_session", json!({"name": "user"})).await,
        "\"alice\""
    );
    call_text(
        &client,
        "set_session",
        json!({"name": "obj", "value": {"a": [1, "é"], "b": true}}),
    )
    .await;
    assert_eq!(
        call_text(&client, "get_session", json!({"name": "obj"})).await,
        "{\"a\": [1, \"\\u00e9\"], \"b\": true}"
    );
    let missing = call(&client, "set_session", json!({"name": "x"})).await;
    assert_eq!(missing.is_error, Some(true));
    assert!(
        text(&missing).contains("missing field `value`"),
        "{}",
        text(&missing)
    );
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_separate_per_session_and_handle() {
    let server = start("dev-admin").await;
    let a = legacy(&server.url, TestClient::plain()).await;
    let b = legacy(&server.url, TestClient::plain()).await;
    call_text(&a, "set_session", json!({"name": "target", "value": "a"})).await;
    assert_eq!(
        call_text(&b, "get_session", json!({"name": "target"})).await,
        "null"
    );

    let s = stateless(&server.url, TestClient::plain()).await;
    let h1 = call_text(&s, "new_session", json!({})).await;
    let h2 = call_text(&s, "new_session", json!({})).await;
    assert_ne!(h1, h2);
    call_text(
        &s,
        "set_session",
        json!({"name": "x", "value": 1, "session": h1}),
    )
    .await;
    assert_eq!(
        call_text(&s, "get_session", json!({"name": "x", "session": h1})).await,
        "1"
    );
    assert_eq!(
        call_text(&s, "get_session", json!({"name": "x", "session": h2})).await,
        "null"
    );
    let bad = call(
        &s,
        "get_session",
        json!({"name": "x", "session": "s-forged"}),
    )
    .await;
    assert_eq!(bad.is_error, Some(true));
    assert!(
        text(&bad).contains("Unknown or expired session 's-forged'"),
        "{}",
        text(&bad)
    );
    // A legacy client may use a minted handle too; the handle wins over its session id.
    assert_eq!(
        call_text(&a, "get_session", json!({"name": "x", "session": h1})).await,
        "1"
    );
    for c in [a, b, s] {
        c.cancel().await.unwrap();
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_set_session_calls_lose_no_update() {
    let server = start("dev-admin").await;
    let client = std::sync::Arc::new(legacy(&server.url, TestClient::plain()).await);
    let mut tasks = Vec::new();
    for i in 0..20 {
        let c = client.clone();
        tasks.push(tokio::spawn(async move {
            call_text(
                &c,
                "set_session",
                json!({"name": format!("v{i}"), "value": i}),
            )
            .await
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    for i in 0..20 {
        assert_eq!(
            call_text(&client, "get_session", json!({"name": format!("v{i}")})).await,
            i.to_string()
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_filters_search_describe_whoami_and_execute() {
    // dev-public acts as bob: groups public, ops.
    let server = start("dev-public").await;
    let client = stateless(&server.url, TestClient::plain()).await;
    assert_eq!(
        call_text(&client, "whoami", json!({})).await,
        "username: bob\nemail: (none)\ngroups: public, ops\ntools: ops.restart, public.ctx, public.echo, public.greet"
    );
    let described = call_text(&client, "describe_tools", json!({})).await;
    assert!(
        described.starts_with("## ops.restart\nRestart a service by name."),
        "{described}"
    );
    assert!(!described.contains("admin.shell"), "{described}");
    assert_eq!(
        call_text(&client, "describe_tools", json!({"groups": ["ops"]})).await,
        "## ops.restart\nRestart a service by name."
    );
    assert_eq!(
        call_text(
            &client,
            "describe_tools",
            json!({"groups": ["ops", "public"]})
        )
        .await,
        "No tools available."
    );
    let found = call_text(&client, "search", json!({"query": "run a shell command"})).await;
    assert!(!found.contains("admin.shell"), "{found}");
    let found = call_text(&client, "search", json!({"query": "restart service"})).await;
    assert!(
        found.starts_with("[")
            && found.contains("]\n## ops.restart (service:str) -> str | (int, str, str)\nRestart a service by name.\n")
            && found.split("\n\n\n").next().unwrap().contains("## ops.restart"),
        "{found}"
    );
    assert_eq!(
        call_text(
            &client,
            "search",
            json!({"query": "restart service", "min_score": 100.0})
        )
        .await,
        "No tools matched your query. Try expanding your query or reducing min_score"
    );
    assert_eq!(
        call_text(
            &client,
            "execute",
            json!({"key": "admin.shell", "params": {"command": "id"}})
        )
        .await,
        "Unauthorized"
    );
    assert_eq!(
        call_text(&client, "execute", json!({"key": "nope.nothing"})).await,
        "Unknown tool: nope.nothing"
    );
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_sees_everything() {
    let server = start("dev-admin").await;
    let client = legacy(&server.url, TestClient::plain()).await;
    let who = call_text(&client, "whoami", json!({})).await;
    assert_eq!(
        who,
        "username: alice\nemail: alice@example.com\ngroups: admin, osint\ntools: admin.shell, ops.restart, public.ctx, public.echo, public.greet"
    );
    let found = call_text(&client, "search", json!({"query": "shell command"})).await;
    assert!(
        found.starts_with("[") && found.contains("## admin.shell (command:str)"),
        "{found}"
    );
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_validation_errors_name_the_parameter() {
    let server = start("dev-admin").await;
    let client = legacy(&server.url, TestClient::plain()).await;
    let r = call_text(
        &client,
        "execute",
        json!({"key": "public.greet", "params": {"name": "x", "times": "many", "bogus": 1}}),
    )
    .await;
    assert!(
        r.starts_with("Validation error for tool 'public.greet': 2 validation errors"),
        "{r}"
    );
    assert!(
        r.contains(
            "times\n  Input should be a valid integer, unable to parse string as an integer"
        ),
        "{r}"
    );
    assert!(r.contains("bogus\n  Extra inputs are not permitted"), "{r}");
    // No elicitation declared: missing params go straight to the validation error.
    let r = call_text(&client, "execute", json!({"key": "public.greet"})).await;
    assert!(r.contains("name\n  Field required [type=missing"), "{r}");
    let bad = call(
        &client,
        "execute",
        json!({"key": "public.echo", "params": [1]}),
    )
    .await;
    assert_eq!(bad.is_error, Some(true));
    assert!(
        text(&bad).starts_with("Invalid arguments for tool 'execute'"),
        "{}",
        text(&bad)
    );
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_elicitation_asks_for_missing_params_and_honours_decline() {
    let server = start("dev-admin").await;
    for answer in [Answer::Decline, Answer::Cancel] {
        let handler = TestClient::answering(answer);
        let asked = handler.asked.clone();
        let client = legacy(&server.url, handler).await;
        let r = call_text(
            &client,
            "execute",
            json!({"key": "public.greet", "params": {"name": "x"}}),
        )
        .await;
        assert_eq!(r, "Execution cancelled: required parameters not provided");
        assert_eq!(
            asked.lock().unwrap().as_slice(),
            ["Tool 'public.greet' requires: times (int)"]
        );
        client.cancel().await.unwrap();
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_clients_get_input_required_for_missing_params() {
    let server = start("dev-admin").await;
    let mut handler = TestClient::answering(Answer::Decline);
    handler.version = None;
    let asked = handler.asked.clone();
    let client = stateless(&server.url, handler).await;
    // One round by hand: the server answers input_required with our question.
    let first = client
        .call_tool_once(
            CallToolRequestParams::new("execute")
                .with_arguments(args(json!({"key": "public.greet"}))),
        )
        .await
        .unwrap();
    let CallToolResponse::InputRequired(ir) = first else {
        panic!("expected input_required, got {first:?}");
    };
    let v = serde_json::to_value(&ir).unwrap();
    assert_eq!(v["resultType"], "input_required");
    let q = &v["inputRequests"]["missing_params"];
    assert_eq!(q["method"], "elicitation/create");
    assert_eq!(
        q["params"]["message"],
        "Tool 'public.greet' requires: name (str), times (int)"
    );
    // The client's driver answers (declines) and retries: cancelled.
    let r = call_text(&client, "execute", json!({"key": "public.greet"})).await;
    assert_eq!(r, "Execution cancelled: required parameters not provided");
    assert_eq!(asked.lock().unwrap().len(), 1);
    client.cancel().await.unwrap();

    // A 2026-07-28 client without elicitation gets the validation error.
    let plain = stateless(&server.url, TestClient::plain()).await;
    let r = call_text(&plain, "execute", json!({"key": "public.greet"})).await;
    assert!(
        r.starts_with("Validation error for tool 'public.greet'"),
        "{r}"
    );
    plain.cancel().await.unwrap();
    server.stop().await;
}
