//! Callers can see that a tool needs approval before they call it (issue 34, item 4):
//! `describe_tools`, the `mcc://tools/{key}` resource, `search` blocks and REST's tool
//! descriptions end with `Approval: required` (REST also has `"approval": "required"`)
//! exactly when `execute` would ask: the tool's own `approval: required` or the
//! platform's `execution.approval.groups`. Where approval does not apply, the texts are
//! MCC's, byte for byte: the same gateway without the group policy differs only in the
//! policy's lines.

use crate::mcp_support;
use crate::rest_support;

use mcp_support::*;
use reqwest::StatusCode;
use rest_support::*;
use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::json;

const LINE: &str = "Approval: required";

async fn gateway(policy_groups: &[&str]) -> Server {
    let groups: Vec<String> = policy_groups.iter().map(|g| g.to_string()).collect();
    start_configured(
        "dev-admin",
        None,
        &[("tools/tools.yaml", crate::approval::tools_file())],
        |s| s.execution.approval.groups = groups,
    )
    .await
}

async fn resource_text(client: &Client, uri: &str) -> String {
    let read = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .unwrap();
    match &read.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => text.clone(),
        other => panic!("not text: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_needing_approval_say_so_where_they_are_described() {
    let ops = gateway(&["ops"]).await;
    let client = legacy(&ops.url, TestClient::plain()).await;

    // describe_tools: the tool's own flag and the platform's group both show; a tool
    // neither applies to keeps MCC's block.
    let described = call_text(&client, "describe_tools", json!({})).await;
    let restart_block = "## ops.restart\nRestart a service by name.";
    for block in [
        "## ops.deploy\nDeploy a service.\nApproval: required\n\n",
        &format!("{restart_block}\n{LINE}\n\n"),
        "## public.echo\nEcho a message back.\n\n",
    ] {
        assert!(described.contains(block), "{block:?} in {described}");
    }
    // ops.deploy, ops.restart and public.stamp.
    assert_eq!(described.matches(LINE).count(), 3, "{described}");

    // The tool's resource is its describe_tools block.
    assert_eq!(
        resource_text(&client, "mcc://tools/ops.restart").await,
        format!("{restart_block}\n{LINE}")
    );
    assert_eq!(
        resource_text(&client, "mcc://tools/public.echo").await,
        "## public.echo\nEcho a message back."
    );

    // search: the signature block, then the line.
    let found = call_text(&client, "search", json!({"query": "restart a service"})).await;
    assert!(
        found.contains(
            "## ops.restart (service:str) -> str | (int, str, str)\n\
             Restart a service by name.\nApproval: required\n"
        ),
        "{found}"
    );

    // REST: a field and the same signature block, in JSON and Markdown.
    let (status, info) = get(&ops.base, "/v1/tools/ops.restart").await;
    assert_eq!(status, StatusCode::OK, "{info}");
    assert_eq!(info["approval"], "required", "{info}");
    let signature = info["signature"].as_str().unwrap();
    assert!(signature.ends_with("\nApproval: required\n"), "{info}");
    let (_, echo) = get(&ops.base, "/v1/tools/public.echo").await;
    assert!(echo.get("approval").is_none(), "{echo}");
    assert!(
        !echo["signature"].as_str().unwrap().contains(LINE),
        "{echo}"
    );
    let (_, list) = get(&ops.base, "/v1/tools").await;
    let flagged: Vec<&str> = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["approval"] == "required")
        .map(|t| t["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        flagged,
        ["ops.deploy", "ops.restart", "public.stamp"],
        "{list}"
    );
    let markdown = get_text(&format!("{}/v1/tools?format=md", ops.base)).await;
    assert!(markdown.contains(signature), "{markdown}");
    client.cancel().await.unwrap();

    // Without the group policy only the tool's own flag shows: the texts differ by the
    // policy's line alone.
    let plain = gateway(&[]).await;
    let client = legacy(&plain.url, TestClient::plain()).await;
    let unpolicied = call_text(&client, "describe_tools", json!({})).await;
    assert_eq!(
        unpolicied,
        described.replace(&format!("{restart_block}\n{LINE}"), restart_block)
    );
    assert_eq!(
        resource_text(&client, "mcc://tools/ops.restart").await,
        restart_block
    );
    let (_, info) = get(&plain.base, "/v1/tools/ops.restart").await;
    assert!(info.get("approval").is_none(), "{info}");
    client.cancel().await.unwrap();
    plain.stop().await;
    ops.stop().await;
}
