//! The execute path end to end through the real execution engine: results, context
//! injection, elicitation and input_required answers, fn write-back, response truncation.

use crate::mcp_support;

use mcp_support::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_runs_tools_and_injects_the_session() {
    let server = start("dev-admin").await;
    let client = legacy(&server.url, TestClient::plain()).await;
    assert_eq!(
        call_text(
            &client,
            "execute",
            json!({"key": "public.echo", "params": {"message": "hello"}})
        )
        .await,
        "hello"
    );
    call_text(
        &client,
        "set_session",
        json!({"name": "target", "value": "10.0.0.5"}),
    )
    .await;
    call_text(
        &client,
        "set_session",
        json!({"name": "budget", "value": 1000}),
    )
    .await;
    assert_eq!(
        call_text(&client, "execute", json!({"key": "public.ctx"})).await,
        "alice 10.0.0.5 1000\n"
    );
    // A failing command comes back as [code, stdout, stderr], not as an MCP error.
    let r = call(
        &client,
        "execute",
        json!({"key": "admin.shell", "params": {"command": "echo out; echo err >&2; exit 3"}}),
    )
    .await;
    assert_eq!(r.is_error, Some(false));
    assert_eq!(text(&r), "[3,\"out\\n\",\"err\\n\"]");
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_params_answered_by_elicitation_and_input_required() {
    let server = start("dev-admin").await;
    let legacy_client = legacy(
        &server.url,
        TestClient::answering(Answer::Accept(json!({"times": 2}))),
    )
    .await;
    assert_eq!(
        call_text(
            &legacy_client,
            "execute",
            json!({"key": "public.greet", "params": {"name": "x"}})
        )
        .await,
        "hi x\nhi x\n"
    );
    legacy_client.cancel().await.unwrap();
    let stateless_client = stateless(
        &server.url,
        TestClient::answering(Answer::Accept(json!({"name": "y", "times": 1}))),
    )
    .await;
    assert_eq!(
        call_text(&stateless_client, "execute", json!({"key": "public.greet"})).await,
        "hi y\n"
    );
    stateless_client.cancel().await.unwrap();
    server.stop().await;
}

const FN_MODULE: &str = r#"
def remember(cursor: int = 0, context: dict = None) -> int:
    context["cursor"] = cursor + 1
    context["user"] = "mallory"
    return cursor

def spoil(context: dict = None) -> str:
    context["Bad-Key"] = 1
    context["cursor"] = 99
    return "spoiled"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fn_tools_write_back_the_session() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("tools")).unwrap();
    std::fs::write(dir.path().join("pager.py"), FN_MODULE).unwrap();
    let cwd = dir.path().display();
    std::fs::write(
        dir.path().join("tools").join("tools.yaml"),
        format!(
            "tools:\n  - fn: pager:remember\n    groups: [public]\n    cwd: {cwd}\n  - fn: pager:spoil\n    groups: [public]\n    cwd: {cwd}\n"
        ),
    )
    .unwrap();
    let s = settings(dir.path(), "dev-admin", Some(&redis_url()));
    let server = start_with(s, dir).await;
    let client = legacy(&server.url, TestClient::plain()).await;
    assert_eq!(
        call_text(
            &client,
            "execute",
            json!({"key": "public.remember", "params": {"cursor": 4}})
        )
        .await,
        "4"
    );
    assert_eq!(
        call_text(&client, "get_session", json!({"name": "cursor"})).await,
        "5"
    );
    // Reserved keys are stripped from write-backs: the caller is still alice.
    assert_eq!(
        call_text(&client, "get_session", json!({"name": "user"})).await,
        "\"alice\""
    );
    // An invalid key rejects the whole write-back; the result still comes back.
    assert_eq!(
        call_text(&client, "execute", json!({"key": "public.spoil"})).await,
        "spoiled"
    );
    assert_eq!(
        call_text(&client, "get_session", json!({"name": "cursor"})).await,
        "5"
    );
    client.cancel().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_results_are_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path(), "dev-admin", None);
    s.server.response_max_size = 1000;
    let server = start_with(s, dir).await;
    let client = legacy(&server.url, TestClient::plain()).await;
    let out = call_text(
        &client,
        "execute",
        json!({"key": "admin.shell", "params": {"command": "head -c 5000 /dev/zero | tr '\\0' x"}}),
    )
    .await;
    assert!(out.len() <= 1000, "{}", out.len());
    assert!(
        out.ends_with("[Response truncated due to size limit]"),
        "{out}"
    );
    client.cancel().await.unwrap();
    server.stop().await;
}

/// With Redis sessions the execute result cache lives in Redis: a `cache_ttl` tool run on
/// one replica is answered from the cache on another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_cached_results_through_redis() {
    // A unique tool name keeps runs of this test from seeing each other's entries.
    let name = format!("stamp_{}", std::process::id());
    let tools = format!(
        "tools:\n  - name: {name}\n    groups: [public]\n    cache_ttl: 60\n    exec: echo \"run $$ $(date +%s%N)\"\n"
    );
    let mut servers = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("tools")).unwrap();
        std::fs::write(dir.path().join("tools").join("tools.yaml"), &tools).unwrap();
        let s = settings(dir.path(), "dev-admin", Some(&redis_url()));
        servers.push(start_with(s, dir).await);
    }
    let key = format!("public.{name}");
    let mut outputs = Vec::new();
    for server in &servers {
        let client = stateless(&server.url, TestClient::plain()).await;
        outputs.push(call_text(&client, "execute", json!({ "key": key })).await);
        client.cancel().await.unwrap();
    }
    assert!(outputs[0].starts_with("run "), "{outputs:?}");
    assert_eq!(
        outputs[0], outputs[1],
        "the second replica answered from the shared cache"
    );
    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("mcc:exec:{key}:*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let _: () = redis::cmd("DEL")
        .arg(&keys)
        .query_async(&mut conn)
        .await
        .unwrap();
    for server in servers {
        server.stop().await;
    }
}
