//! Upstream MCP servers end to end: a real gateway over HTTP in file mode whose tool files
//! declare `mcp_servers:` pointing at the reference server-everything (npm, streamable
//! HTTP), driven by rmcp clients of both protocol generations. Discovery, search beside
//! local tools, describe, execute with text, image, resource and structured results, an
//! upstream `isError`, argument validation before the upstream, RBAC hiding, timeouts, and
//! an upstream that goes away and comes back.

use crate::mcp_support;
use crate::upstream_support;

use std::time::{Duration, Instant};

use mcp_support::*;
use serde_json::{Value, json};
use upstream_support::Everything;

/// The upstreams the tests declare over one server-everything: its public tools (minus
/// the ones that need a client feature), one tool again for the ops group only, one for
/// a group no dev user has, and one with a short timeout.
fn upstreams_file(url: &str) -> String {
    format!(
        r#"
mcp_servers:
  - name: everything
    url: {url}
    groups: [public]
    prefix: ev_
    exclude: ["trigger-*", "toggle-*", "simulate-*", "get-roots-list"]
    cache_ttl: 60
  - name: finance-everything
    url: {url}
    groups: [finance]
    prefix: fin_
    include: [get-env]
  - name: slow-everything
    url: {url}
    groups: [public]
    prefix: slow_
    include: [trigger-long-running-operation]
    timeout: 1
"#
    )
}

async fn gateway(auth: &str, everything: &Everything) -> Server {
    let upstreams = ("tools/upstreams.yaml", upstreams_file(&everything.url()));
    start_configured(auth, Some(&redis_url()), &[upstreams], |_| {}).await
}

fn keys_of(search: &str) -> Vec<String> {
    search
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect()
}

async fn execute(client: &Client, key: &str, params: Value) -> rmcp::model::CallToolResult {
    call(client, "execute", json!({"key": key, "params": params})).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_tools_are_searched_described_and_executed_like_local_ones() {
    let Some(everything) = Everything::start().await else {
        return;
    };
    let server = gateway("dev-admin", &everything).await;
    for client in [
        legacy(&server.url, TestClient::plain()).await,
        stateless(&server.url, TestClient::plain()).await,
    ] {
        // Discovery: the upstream's tools, prefixed, beside the local ones; filtered
        // ones absent.
        let found = call_text(&client, "search", json!({"query": "add two numbers sum"})).await;
        let keys = keys_of(&found);
        assert!(keys.contains(&"public.ev_get-sum".to_string()), "{found}");
        assert!(
            keys.iter().any(|k| !k.contains(".ev_")),
            "local tools ranked beside them: {found}"
        );
        assert_eq!(
            keys[0], "public.ev_get-sum",
            "the upstream tool ranks first: {found}"
        );
        assert!(!found.contains("ev_trigger-"), "excluded: {found}");
        let described = call_text(&client, "describe_tools", json!({})).await;
        assert!(
            found
                .contains("## public.ev_get-sum (a:float, b:float) -> content\n`a` — First number"),
            "{found}"
        );
        assert!(
            described.contains(
                "## public.ev_get-sum\nReturns the sum of two numbers\nTitle: Get Sum Tool"
            ),
            "{described}"
        );
        assert!(described.contains("## public.ev_echo\n"), "{described}");
        assert!(
            described.contains("finance.fin_get-env"),
            "admin sees every group: {described}"
        );
        assert!(
            described.contains("Hints: readOnlyHint=true"),
            "annotations: {described}"
        );

        // Text.
        let r = execute(
            &client,
            "public.ev_echo",
            json!({"message": "hello upstream"}),
        )
        .await;
        assert_eq!(text(&r), "Echo: hello upstream");
        assert_ne!(r.is_error, Some(true));
        let r = execute(&client, "public.ev_get-sum", json!({"a": 2, "b": 3.5})).await;
        assert!(text(&r).contains("5.5"), "{}", text(&r));
        // An image comes back as an image block.
        let r = execute(&client, "public.ev_get-tiny-image", json!({})).await;
        let blocks = serde_json::to_value(&r.content).unwrap();
        let image = blocks
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "image")
            .unwrap_or_else(|| panic!("an image block: {blocks}"));
        assert_eq!(image["mimeType"], "image/png");
        assert!(image["data"].as_str().unwrap().len() > 20);
        // Structured content as the upstream sent it.
        let r = execute(
            &client,
            "public.ev_get-structured-content",
            json!({"location": "New York"}),
        )
        .await;
        let structured = r.structured_content.clone().expect("structured content");
        assert!(structured.get("temperature").is_some(), "{structured}");
        // An embedded resource.
        let r = execute(
            &client,
            "public.ev_get-resource-reference",
            json!({"resourceId": 2}),
        )
        .await;
        let blocks = serde_json::to_value(&r.content).unwrap();
        assert!(
            blocks
                .as_array()
                .unwrap()
                .iter()
                .any(|b| b["type"] == "resource"),
            "{blocks}"
        );
        // The upstream's own error (isError) comes back as an error result.
        let r = execute(
            &client,
            "public.ev_get-resource-reference",
            json!({"resourceId": 0}),
        )
        .await;
        assert_eq!(r.is_error, Some(true), "{r:?}");
        assert!(text(&r).contains("Invalid resourceId"), "{}", text(&r));
        // Arguments are checked against the upstream's schema before any call.
        let r = execute(&client, "public.ev_get-sum", json!({"a": "two", "b": 1})).await;
        let t = text(&r);
        assert!(
            t.contains("validation error for public.ev_get-sum_params"),
            "{t}"
        );
        assert!(t.contains("\na\n"), "names the param: {t}");
        assert!(!t.contains("two"), "the value is not echoed: {t}");
        let r = execute(&client, "public.ev_get-sum", json!({"a": 1})).await;
        assert!(
            text(&r).contains("\"b\" is a required property"),
            "{}",
            text(&r)
        );
        // The upstream's timeout: the call ends after 1 s, not the operation's 10 s.
        let started = Instant::now();
        let r = execute(
            &client,
            "public.slow_trigger-long-running-operation",
            json!({"duration": 10, "steps": 2}),
        )
        .await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(r.is_error, Some(true));
        assert!(
            text(&r).contains("did not answer within 1 s"),
            "{}",
            text(&r)
        );
        client.cancel().await.unwrap();
    }
    // Measured like any tool: by key and outcome.
    let metrics = server.gateway_shared.metrics.render();
    assert!(
        metrics.contains("mcc_tool_calls_total{tool=\"public.ev_echo\",outcome=\"success\"} 2"),
        "{metrics}"
    );
    // REST: the same call, the blocks as JSON; the second from the result cache
    // (`cache_ttl`), blocks and all.
    let rest_call = || async {
        http_client()
            .post(format!("{}/v1/tools/public.ev_get-tiny-image", server.base))
            .json(&json!({}))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    rest_call().await;
    let rest = rest_call().await;
    assert_eq!(rest["outcome"], "success", "{rest}");
    assert_eq!(rest["cached"], true, "{rest}");
    let blocks = rest["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{rest}"));
    assert!(blocks.iter().any(|b| b["type"] == "image"), "{rest}");
    let status = get_json(&format!("{}/readyz", server.base)).await;
    assert!(
        !status.to_string().contains("127.0.0.1"),
        "no upstream URL in the unauthenticated status: {status}"
    );
    let ups = status
        .pointer("/catalog/upstreams")
        .unwrap_or_else(|| panic!("{status}"));
    assert_eq!(ups[0]["name"], "everything", "{status}");
    assert_eq!(ups[0]["available"], true, "{status}");
    assert!(ups[0]["filtered_tools"].as_u64().unwrap() > 0, "{status}");
    server.stop().await;
    everything.stop().await;
}

/// A caller sees an upstream tool of a group it is not in exactly as it sees a local
/// tool of such a group: not in search or describe, and `execute` answers as for the
/// local one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_tools_of_other_groups_stay_hidden() {
    let Some(everything) = Everything::start().await else {
        return;
    };
    // dev-public acts as bob (public, ops): not in finance or admin.
    let server = gateway("dev-public", &everything).await;
    let client = legacy(&server.url, TestClient::plain()).await;
    let found = call_text(
        &client,
        "search",
        json!({"query": "environment variables get env"}),
    )
    .await;
    assert!(!found.contains("fin_"), "{found}");
    let described = call_text(&client, "describe_tools", json!({})).await;
    assert!(!described.contains("fin_"), "{described}");
    assert!(described.contains("public.ev_echo"), "{described}");
    let hidden = text(&execute(&client, "finance.fin_get-env", json!({})).await);
    let local_hidden = text(&execute(&client, "admin.shell", json!({"command": "id"})).await);
    assert_eq!(
        hidden, local_hidden,
        "the same answer as for a local tool of another group"
    );
    client.cancel().await.unwrap();
    server.stop().await;
    everything.stop().await;
}

/// An upstream that goes away keeps its tools (searchable, described) and its calls fail
/// fast with a clear error; the other tools keep working; when it comes back, calls work
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_goes_away_keeps_its_tools_and_comes_back() {
    let Some(everything) = Everything::start().await else {
        return;
    };
    let port = everything.port;
    let server = gateway("dev-admin", &everything).await;
    let client = stateless(&server.url, TestClient::plain()).await;
    // Messages no earlier run left in the shared result cache (`cache_ttl`).
    let run = format!("{:?}", Instant::now());
    let message = |m: &str| json!({"message": format!("{m} {run}")});
    let r = execute(&client, "public.ev_echo", message("one")).await;
    assert_eq!(text(&r), format!("Echo: one {run}"));
    everything.stop().await;

    let started = Instant::now();
    let r = execute(&client, "public.ev_echo", message("two")).await;
    assert_eq!(r.is_error, Some(true));
    assert!(
        text(&r).contains("upstream 'everything' is unavailable"),
        "{}",
        text(&r)
    );
    assert!(!text(&r).contains("127.0.0.1"), "no URL: {}", text(&r));
    assert!(started.elapsed() < Duration::from_secs(5));
    // The rest of the catalog is untouched, and the upstream's tools are still listed.
    let local = execute(&client, "public.echo", json!({"message": "local"})).await;
    assert_eq!(text(&local), "local");
    let described = call_text(&client, "describe_tools", json!({})).await;
    assert!(described.contains("public.ev_echo"), "{described}");

    let everything = Everything::start_on(port).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = execute(&client, "public.ev_echo", message("three")).await;
        if text(&r) == format!("Echo: three {run}") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the upstream did not come back: {}",
            text(&r)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    client.cancel().await.unwrap();
    server.stop().await;
    everything.stop().await;
}

/// Semantic search ranks upstream tools as it ranks local ones: a sentence sharing no
/// word with the tool finds it once the embeddings are built (skipped, loudly, where no
/// local model is installed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_tools_are_found_by_meaning() {
    let Some(everything) = Everything::start().await else {
        return;
    };
    let server = gateway("dev-admin", &everything).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let status: Value = http_client()
            .get(format!("{}/readyz", server.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if status["search"]["semantic"] == true {
            break;
        }
        if status["search"]["building"] != true || Instant::now() > deadline {
            eprintln!("SKIPPED: no semantic search on this machine (no local model): {status}");
            server.stop().await;
            everything.stop().await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let client = stateless(&server.url, TestClient::plain()).await;
    let found = call_text(
        &client,
        "search",
        json!({"query": "arithmetic total of a pair"}),
    )
    .await;
    assert_eq!(keys_of(&found)[0], "public.ev_get-sum", "{found}");
    client.cancel().await.unwrap();
    server.stop().await;
    everything.stop().await;
}

/// A legacy-generation HTTP upstream's call is posted by the gateway itself in its
/// session with the upstream (catalog/src/upstream/direct.rs), for callers of both
/// generations: the upstream sees a request id and progress token of the gateway's own
/// (never rmcp's numbers, never a caller's token) and the session context its entry
/// declares. (2026-07-28 upstreams: `upstream_published_context`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_upstreams_call_is_numbered_by_the_gateway_and_carries_its_context() {
    let Some(echo) = Everything::start_meta_echo().await else {
        return;
    };
    let file = format!(
        "mcp_servers:\n  - name: echo\n    url: {}\n    groups: [public]\n    prefix: echo_\n    session_context:\n      identity: true\n",
        echo.url()
    );
    let upstreams = ("tools/upstreams.yaml", file);
    let server = start_configured("dev-admin", Some(&redis_url()), &[upstreams], |_| {}).await;
    let mut ids = Vec::new();
    for client in [
        legacy(&server.url, TestClient::plain()).await,
        stateless(&server.url, TestClient::plain()).await,
    ] {
        for _ in 0..2 {
            let text = call_text(&client, "execute", json!({"key": "public.echo_whoami"})).await;
            let seen: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
            let id = seen["id"].as_str().unwrap_or_default().to_string();
            assert!(id.starts_with("mcc-"), "{seen}");
            assert_eq!(seen["meta"]["progressToken"], json!(id), "{seen}");
            assert!(seen["meta"]["dev.mcc/user"].is_string(), "{seen}");
            ids.push(id);
        }
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4, "every call has an id of its own: {ids:?}");
}

/// An upstream that restarted no longer knows the gateway's sessions (HTTP 404 to the
/// call the gateway posts itself): the call is sent again through rmcp's client, which
/// opens a new session, and succeeds (the 404 does not mark the upstream unavailable).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_after_the_upstream_restarted_succeeds_in_a_new_session() {
    let Some(echo) = Everything::start_meta_echo().await else {
        return;
    };
    let port = echo.port;
    let file = format!(
        "mcp_servers:\n  - name: echo\n    url: {}\n    groups: [public]\n    prefix: echo_\n",
        echo.url()
    );
    let upstreams = ("tools/upstreams.yaml", file);
    let server = start_configured("dev-admin", Some(&redis_url()), &[upstreams], |_| {}).await;
    let client = stateless(&server.url, TestClient::plain()).await;
    let id_of = |text: String| {
        let seen: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        seen["id"].clone()
    };
    let whoami = json!({"key": "public.echo_whoami"});
    let first = id_of(call_text(&client, "execute", whoami.clone()).await);
    assert!(
        first.as_str().is_some_and(|id| id.starts_with("mcc-")),
        "{first}"
    );
    echo.stop().await;
    let echo = Everything::start_meta_echo_on(port).await;

    // A call on the thread that served the first one meets the 404 in its direct post
    // and is sent again through rmcp's client, in a new session (meta-echo keeps no
    // standing stream on which rmcp's client could hear of the loss first); one served
    // on the gateway's other thread opens a session there. Either way both succeed.
    for _ in 0..2 {
        let id = id_of(call_text(&client, "execute", whoami.clone()).await);
        assert!(id.is_number() || id.is_string(), "{id}");
    }
    client.cancel().await.unwrap();
    server.stop().await;
    echo.stop().await;
}

/// An upstream's answer over the 8 MiB bound (`MAX_RESPONSE_BYTES`) fails the call the
/// gateway posts itself, with an error that names no URL, instead of being read whole;
/// the gateway goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_answer_over_the_bound_fails_the_call() {
    let Some(echo) = Everything::start_meta_echo().await else {
        return;
    };
    let file = format!(
        "mcp_servers:\n  - name: echo\n    url: {}\n    groups: [public]\n    prefix: echo_\n",
        echo.url()
    );
    let upstreams = ("tools/upstreams.yaml", file);
    let server = start_configured("dev-admin", Some(&redis_url()), &[upstreams], |_| {}).await;
    let client = stateless(&server.url, TestClient::plain()).await;
    let r = execute(&client, "public.echo_big", json!({})).await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r).len());
    assert!(
        text(&r).len() < 4096,
        "not the answer: {} bytes",
        text(&r).len()
    );
    assert!(text(&r).contains("upstream 'echo'"), "{}", text(&r));
    assert!(!text(&r).contains("127.0.0.1"), "no URL: {}", text(&r));
    let local = execute(&client, "public.echo", json!({"message": "still here"})).await;
    assert_eq!(text(&local), "still here");
    client.cancel().await.unwrap();
    server.stop().await;
    echo.stop().await;
}
