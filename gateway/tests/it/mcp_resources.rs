//! Completion, resources and logging end to end: a real gateway over HTTP, two users of
//! different groups (API keys), the rmcp client of both protocol generations.
#![allow(deprecated)] // logging/setLevel: deprecated by 2026-07-28, still legacy clients'

use crate::mcp_support;

use std::time::Duration;

use mcc_gateway::auth::api_key::{self, MintedKey};
use mcp_support::*;
use rmcp::ServiceError;
use rmcp::model::{
    ArgumentInfo, CompleteRequestParams, CompletionInfo, LoggingLevel, PaginatedRequestParams,
    ReadResourceRequestParams, Reference, ResourceContents, SetLevelRequestParams,
};
use serde_json::json;

/// 150 public tools (more than a page) and one admin tool.
fn tools_file() -> String {
    let mut yaml = String::from("tools:\n");
    for i in 0..150 {
        yaml.push_str(&format!(
            "  - name: t{i:03}\n    groups: [public]\n    description: Tool {i}.\n    exec: printf ok\n"
        ));
    }
    yaml.push_str("  - name: shell\n    groups: [admin]\n    description: Run a command.\n    exec: printf ok\n");
    yaml
}

/// alice (admin, public) and bob (public), each with an API key.
struct Users {
    alice: MintedKey,
    bob: MintedKey,
}

async fn gateway() -> (Server, Users) {
    let users = Users {
        alice: api_key::mint(None).unwrap(),
        bob: api_key::mint(None).unwrap(),
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("tools")).unwrap();
    std::fs::write(dir.path().join("tools").join("tools.yaml"), tools_file()).unwrap();
    std::fs::write(
        dir.path().join("users.yaml"),
        users_file(&[
            ("alice", &["admin", "public"], &[&users.alice]),
            ("bob", &["public"], &[&users.bob]),
        ]),
    )
    .unwrap();
    let s = settings(dir.path(), "api_key", Some(&redis_url()));
    (start_with(s, dir).await, users)
}

async fn client(server: &Server, key: &MintedKey, stateless: bool) -> Client {
    with_token_as(
        &server.url,
        key.raw.expose(),
        stateless,
        TestClient::plain(),
    )
    .await
}

async fn complete(
    client: &Client,
    reference: Reference,
    name: &str,
    value: &str,
) -> CompletionInfo {
    client
        .complete(CompleteRequestParams::new(
            reference,
            ArgumentInfo::new(name, value),
        ))
        .await
        .expect("completion/complete answers")
        .completion
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_offers_only_the_keys_the_caller_sees() {
    let (server, users) = gateway().await;
    for stateless in [false, true] {
        let bob = client(&server, &users.bob, stateless).await;
        let caps = bob.peer_info().unwrap().capabilities.clone();
        assert!(caps.completions.is_some() && caps.resources.is_some() && caps.logging.is_some());

        let all = complete(&bob, Reference::for_prompt("explain_tool"), "key", "").await;
        assert_eq!(all.values.len(), 100);
        assert_eq!((all.total, all.has_more), (Some(150), Some(true)));
        assert_eq!(all.values[0], "public.t000");
        assert!(all.values.windows(2).all(|w| w[0] < w[1]));
        let hidden = complete(&bob, Reference::for_prompt("debug_error"), "key", "admin").await;
        assert!(hidden.values.is_empty(), "{hidden:?}");
        let some = complete(
            &bob,
            Reference::for_prompt("debug_error"),
            "key",
            "public.t14",
        )
        .await;
        assert_eq!(some.values.len(), 10);
        assert_eq!((some.total, some.has_more), (Some(10), Some(false)));
        for (reference, name) in [
            (Reference::for_prompt("find_and_run"), "task"),
            (Reference::for_prompt("no_such_prompt"), "key"),
            (Reference::for_prompt("debug_error"), "error"),
        ] {
            assert!(complete(&bob, reference, name, "").await.values.is_empty());
        }

        let alice = client(&server, &users.alice, stateless).await;
        let admin = complete(&alice, Reference::for_prompt("explain_tool"), "key", "adm").await;
        assert_eq!(admin.values, ["admin.shell"]);
        let template = complete(
            &alice,
            Reference::for_resource("mcc://tools/{key}"),
            "key",
            "admin",
        )
        .await;
        assert_eq!(template.values, ["admin.shell"]);
        bob.cancel().await.unwrap();
        alice.cancel().await.unwrap();
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_list_in_pages_what_each_caller_sees() {
    let (server, users) = gateway().await;
    for stateless in [false, true] {
        let bob = client(&server, &users.bob, stateless).await;
        let first = bob.list_resources(None).await.unwrap();
        assert_eq!(first.resources.len(), 100);
        assert_eq!(first.resources[0].uri, "mcc://session");
        assert_eq!(first.resources[1].uri, "mcc://tools/public.t000");
        assert_eq!(
            first.resources[1].mime_type.as_deref(),
            Some("text/markdown")
        );
        let cursor = first.next_cursor.clone().expect("a second page");
        let second = bob
            .list_resources(Some(
                PaginatedRequestParams::default().with_cursor(Some(cursor)),
            ))
            .await
            .unwrap();
        assert_eq!(second.resources.len(), 51);
        assert!(second.next_cursor.is_none());
        let uris: Vec<&str> = first
            .resources
            .iter()
            .chain(&second.resources)
            .map(|r| r.uri.as_str())
            .collect();
        assert!(uris.iter().all(|u| !u.contains("admin")), "{uris:?}");
        assert_eq!(uris.last(), Some(&"mcc://tools/public.t149"));

        let alice = client(&server, &users.alice, stateless).await;
        let hers = alice.list_all_resources().await.unwrap();
        assert_eq!(hers.len(), 152);
        assert_eq!(hers[1].uri, "mcc://tools/admin.shell");

        let templates = bob.list_resource_templates(None).await.unwrap();
        let names: Vec<&str> = templates
            .resource_templates
            .iter()
            .map(|t| t.uri_template.as_str())
            .collect();
        assert_eq!(names, ["mcc://tools/{key}"]);
        bob.cancel().await.unwrap();
        alice.cancel().await.unwrap();
    }
    server.stop().await;
}

fn read(uri: &str) -> ReadResourceRequestParams {
    ReadResourceRequestParams::new(uri)
}

fn text_of(contents: &[ResourceContents]) -> (String, Option<String>) {
    match &contents[0] {
        ResourceContents::TextResourceContents {
            text, mime_type, ..
        } => (text.clone(), mime_type.clone()),
        other => panic!("not text: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_resource_is_its_describe_tools_block_and_a_hidden_one_is_not_found() {
    let (server, users) = gateway().await;
    for stateless in [false, true] {
        let bob = client(&server, &users.bob, stateless).await;
        let read_back = bob
            .read_resource(read("mcc://tools/public.t007"))
            .await
            .unwrap();
        let (text, mime) = text_of(&read_back.contents);
        assert_eq!(mime.as_deref(), Some("text/markdown"));
        let described = call_text(&bob, "describe_tools", json!({})).await;
        let block = described
            .split("\n\n")
            .find(|b| b.starts_with("## public.t007\n"))
            .unwrap();
        assert_eq!(text, block);
        assert_eq!(text, "## public.t007\nTool 7.");

        // Forbidden and unknown: the same error, which names neither.
        let errors: Vec<String> = futures::future::join_all(
            [
                "mcc://tools/admin.shell",
                "mcc://tools/nope.nothing",
                "file:///etc/passwd",
            ]
            .map(|uri| bob.read_resource(read(uri))),
        )
        .await
        .into_iter()
        .map(|r| match r.unwrap_err() {
            ServiceError::McpError(e) => format!("{} {}", e.code.0, e.message),
            other => panic!("{other:?}"),
        })
        .collect();
        let code = if stateless { -32602 } else { -32002 };
        assert!(
            errors
                .iter()
                .all(|e| *e == format!("{code} Resource not found")),
            "{errors:?}"
        );

        let alice = client(&server, &users.alice, stateless).await;
        let (text, _) = text_of(
            &alice
                .read_resource(read("mcc://tools/admin.shell"))
                .await
                .unwrap()
                .contents,
        );
        assert_eq!(text, "## admin.shell\nRun a command.");
        bob.cancel().await.unwrap();
        alice.cancel().await.unwrap();
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_resource_shows_the_session_variables() {
    let (server, users) = gateway().await;
    let bob = client(&server, &users.bob, false).await;
    call_text(
        &bob,
        "set_session",
        json!({"name": "target", "value": "10.0.0.5"}),
    )
    .await;
    let (text, mime) = text_of(
        &bob.read_resource(read("mcc://session"))
            .await
            .unwrap()
            .contents,
    );
    assert_eq!(mime.as_deref(), Some("application/json"));
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["target"], "10.0.0.5");
    // Another session of the same user has its own variables.
    let other = client(&server, &users.bob, false).await;
    let (text, _) = text_of(
        &other
            .read_resource(read("mcc://session"))
            .await
            .unwrap()
            .contents,
    );
    assert!(!text.contains("10.0.0.5"), "{text}");
    bob.cancel().await.unwrap();
    other.cancel().await.unwrap();
    server.stop().await;
}

/// Waits until `logs` holds a line containing `needle`, at most 5 s.
async fn wait_for(logs: &std::sync::Mutex<Vec<String>>, needle: &str) -> Vec<String> {
    for _ in 0..50 {
        let now = logs.lock().unwrap().clone();
        if now.iter().any(|l| l.contains(needle)) {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no log line with {needle:?}: {:?}", logs.lock().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_level_sends_a_session_its_own_calls_logs_only() {
    let (server, users) = gateway().await;
    let alice_handler = TestClient::plain();
    let alice = with_token_as(
        &server.url,
        users.alice.raw.expose(),
        false,
        alice_handler.clone(),
    )
    .await;
    let bob_handler = TestClient::plain();
    let bob = with_token_as(
        &server.url,
        users.bob.raw.expose(),
        false,
        bob_handler.clone(),
    )
    .await;
    // alice's second session, without a level.
    let quiet_handler = TestClient::plain();
    let quiet = with_token_as(
        &server.url,
        users.alice.raw.expose(),
        false,
        quiet_handler.clone(),
    )
    .await;

    alice
        .set_level(SetLevelRequestParams::new(LoggingLevel::Info))
        .await
        .unwrap();
    let echo = json!({"key": "public.t001"});
    assert_eq!(call_text(&alice, "execute", echo.clone()).await, "ok");
    assert_eq!(call_text(&bob, "execute", echo.clone()).await, "ok");
    assert_eq!(call_text(&quiet, "execute", echo.clone()).await, "ok");
    let logs = wait_for(&alice_handler.logs, "finished").await;
    assert_eq!(logs[0], "info: execute public.t001 started");
    assert!(
        logs[1].starts_with("info: execute public.t001 finished in ")
            && logs[1].ends_with(" ms (success)"),
        "{logs:?}"
    );
    assert_eq!(logs.len(), 2, "info hides debug: {logs:?}");

    // Debug adds what the call ran with and returned.
    alice
        .set_level(SetLevelRequestParams::new(LoggingLevel::Debug))
        .await
        .unwrap();
    call_text(&alice, "execute", json!({"key": "admin.shell"})).await;
    let logs = wait_for(&alice_handler.logs, "admin.shell finished").await;
    assert!(
        logs.iter()
            .any(|l| l.starts_with("debug: execute admin.shell: params []")),
        "{logs:?}"
    );
    assert!(
        logs.iter()
            .any(|l| l.starts_with("debug: execute admin.shell: exit code 0, 2 bytes")),
        "{logs:?}"
    );
    // Error and above: nothing of a successful call.
    alice
        .set_level(SetLevelRequestParams::new(LoggingLevel::Error))
        .await
        .unwrap();
    let before = alice_handler.logs.lock().unwrap().len();
    call_text(&alice, "execute", echo.clone()).await;

    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(alice_handler.logs.lock().unwrap().len(), before);
    assert!(
        bob_handler.logs.lock().unwrap().is_empty(),
        "another user's session"
    );
    assert!(
        quiet_handler.logs.lock().unwrap().is_empty(),
        "another session of the same user"
    );
    for c in [alice, bob, quiet] {
        c.cancel().await.unwrap();
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_level_is_accepted_without_effect_by_2026_07_28() {
    let (server, users) = gateway().await;
    let handler = TestClient::plain();
    let alice = with_token_as(&server.url, users.alice.raw.expose(), true, handler.clone()).await;
    alice
        .set_level(SetLevelRequestParams::new(LoggingLevel::Debug))
        .await
        .unwrap();
    assert_eq!(
        call_text(&alice, "execute", json!({"key": "public.t001"})).await,
        "ok"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(handler.logs.lock().unwrap().is_empty());
    alice.cancel().await.unwrap();
    server.stop().await;
}

/// Waits up to 5 s for `count` to reach `want`.
async fn reaches(count: &std::sync::atomic::AtomicUsize, want: usize) -> bool {
    for _ in 0..50 {
        if count.load(std::sync::atomic::Ordering::SeqCst) >= want {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_change_notifies_the_sessions_whose_list_changed() {
    let (server, users) = gateway().await;
    let alice_hears = TestClient::plain();
    let bob_hears = TestClient::plain();
    let (a_changes, b_changes) = (
        alice_hears.list_changes.clone(),
        bob_hears.list_changes.clone(),
    );
    let alice = with_token_as(&server.url, users.alice.raw.expose(), false, alice_hears).await;
    let bob = with_token_as(&server.url, users.bob.raw.expose(), false, bob_hears).await;
    // Both hold their standalone stream (the rmcp client opens it after initializing).
    tokio::time::sleep(Duration::from_millis(500)).await;

    // A new admin tool: only alice's list changes, bob hears nothing.
    let mut yaml = tools_file();
    yaml.push_str(
        "  - name: reboot\n    groups: [admin]\n    description: Reboot.\n    exec: printf ok\n",
    );
    std::fs::write(server.tools_file(), &yaml).unwrap();
    assert!(reaches(&a_changes, 1).await, "alice hears of her new tool");
    let listed = alice.list_all_resources().await.unwrap();
    assert!(listed.iter().any(|r| r.uri == "mcc://tools/admin.reboot"));
    assert_eq!(b_changes.load(std::sync::atomic::Ordering::SeqCst), 0);

    // A new public tool: both hear of it.
    yaml.push_str(
        "  - name: hello\n    groups: [public]\n    description: Hi.\n    exec: printf ok\n",
    );
    std::fs::write(server.tools_file(), &yaml).unwrap();
    assert!(reaches(&b_changes, 1).await, "bob hears of the public tool");
    assert!(reaches(&a_changes, 2).await, "alice too");

    alice.cancel().await.unwrap();
    bob.cancel().await.unwrap();
    server.stop().await;
}
