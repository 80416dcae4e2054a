//! Tool annotations and output schemas end to end (issue 34 item 3), on a gateway over
//! files with sessions in memory: the declared title, hints and schema appear in `search`
//! blocks, `describe_tools` and REST, and nowhere for a tool that declares none (MCC's
//! texts); a result that matches its schema comes back with `structuredContent`, one that
//! does not is a tool error (MCP) or a 502 (REST) naming the path; `tools/list` is the
//! gateway's own tools, as before.

use crate::mcp_support;
use crate::rest_support;

use mcp_support::*;
use reqwest::StatusCode;
use rest_support::*;
use serde_json::json;

const ANNOTATED: &str = r#"
  - name: count
    groups: [public]
    description: Count things.
    title: Thing counter
    read_only_hint: true
    open_world_hint: false
    params:
      - name: n
        type: str
        required: true
    output_schema:
      type: object
      required: [count]
      properties:
        count: {type: integer}
        items: {type: array, items: {type: string}}
    exec: 'echo "{\"count\": {{ n }}, \"items\": [\"a\"]}"'
"#;

async fn gateway() -> Server {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("tools")).unwrap();
    std::fs::write(
        dir.path().join("tools/tools.yaml"),
        format!("{TOOLS}{ANNOTATED}"),
    )
    .unwrap();
    let s = settings(dir.path(), "dev-admin", None);
    start_with(s, dir).await
}

const SCHEMA_LINE: &str = "Output schema: {\"type\":\"object\",\"required\":[\"count\"],\
\"properties\":{\"count\":{\"type\":\"integer\"},\"items\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotations_are_shown_and_results_checked_against_the_schema() {
    let server = gateway().await;
    let client = legacy(&server.url, TestClient::plain()).await;

    // The MCP surface is the gateway's own tools, annotations or not: catalog tools are
    // not MCP tools, and `execute` declares no output schema of its own.
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
    assert!(tools[1].output_schema.is_none() && tools[1].annotations.is_none());

    let found = call_text(&client, "search", json!({"query": "count things"})).await;
    let block = format!(
        "## public.count (n:str) -> str | (int, str, str)\nCount things.\n\
         Title: Thing counter\nHints: readOnlyHint=true, openWorldHint=false\n{SCHEMA_LINE}\n"
    );
    assert!(found.contains(&block), "{found}");
    let echo = call_text(&client, "search", json!({"query": "echo a message back"})).await;
    assert!(
        echo.contains(
            "## public.echo (message:str) -> str | (int, str, str)\n`message` — The text to echo.\n\
             Echo a message back.\n"
        ),
        "{echo}"
    );
    assert!(!echo.contains("Echo a message back.\nTitle"), "{echo}");

    let described = call_text(&client, "describe_tools", json!({"groups": ["public"]})).await;
    assert!(
        described.contains(&format!(
            "## public.count\nCount things.\nTitle: Thing counter\n\
             Hints: readOnlyHint=true, openWorldHint=false\n{SCHEMA_LINE}\n\n"
        )),
        "{described}"
    );
    assert!(
        described.contains("## public.echo\nEcho a message back.\n\n"),
        "{described}"
    );

    // A matching result: the JSON text as before, and the same value as structuredContent.
    let r = call(
        &client,
        "execute",
        json!({"key": "public.count", "params": {"n": "3"}}),
    )
    .await;
    assert_eq!(r.is_error, Some(false));
    assert_eq!(text(&r), "{\"count\":3,\"items\":[\"a\"]}");
    assert_eq!(
        r.structured_content,
        Some(json!({"count": 3, "items": ["a"]}))
    );
    // A result the schema does not admit: a tool error naming where.
    let r = call(
        &client,
        "execute",
        json!({"key": "public.count", "params": {"n": "true"}}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    let t = text(&r);
    assert!(
        t.starts_with("Output error for tool 'public.count': the result does not match the tool's output schema at /count: "),
        "{t}"
    );
    assert!(r.structured_content.is_none());

    // REST: the tool's description carries them; a mismatch is a 502 naming the path.
    let (status, info) = get(&server.base, "/v1/tools/public.count").await;
    assert_eq!(status, StatusCode::OK, "{info}");
    assert_eq!(
        info["annotations"],
        json!({"title": "Thing counter", "readOnlyHint": true, "openWorldHint": false})
    );
    assert_eq!(info["output_schema"]["required"], json!(["count"]));
    let (_, plain) = get(&server.base, "/v1/tools/public.echo").await;
    assert!(
        plain.get("annotations").is_none() && plain.get("output_schema").is_none(),
        "{plain}"
    );
    let (status, body) =
        post_json(&server.base, "/v1/tools/public.count", json!({"n": "[1]"})).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    assert_eq!(body["error"], "bad_output");
    assert!(
        body["message"].as_str().unwrap().contains("at /count: "),
        "{body}"
    );
    let (status, body) = post_json(&server.base, "/v1/tools/public.count", json!({"n": "7"})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"], json!({"count": 7, "items": ["a"]}));

    client.cancel().await.unwrap();
    server.stop().await;
}
