//! Progress of a long `execute` (issue 34 item 5): a real gateway (JSON responses
//! configured, its default) and rmcp clients of both protocol generations asking with a
//! `progressToken` receive `notifications/progress` while the call runs, then the result.
//! A 2026-07-28 client can only receive them because the answer turned to SSE.

use crate::mcp_support;

use std::sync::{Arc, Mutex};

use mcp_support::*;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, NumberOrString,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestMetaObject,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ServiceExt};
use serde_json::json;

/// Records the progress notifications it receives.
#[derive(Clone, Default)]
pub(crate) struct Listener {
    pub(crate) heard: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("progress-test", "0"),
        )
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        self.heard.lock().unwrap().push(params);
    }
}

pub(crate) async fn connect(
    url: &str,
    modern: bool,
    listener: Listener,
) -> RunningService<RoleClient, Listener> {
    mcc_gateway::tls::install_crypto_provider();
    let transport = StreamableHttpClientTransport::from_uri(url.to_string());
    match modern {
        false => listener.serve(transport).await.unwrap(),
        true => listener
            .serve_with_lifecycle(
                transport,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .unwrap(),
    }
}

fn call(command: &str, token: Option<&str>) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new("execute").with_arguments(args(
        json!({"key": "admin.shell", "params": {"command": command}}),
    ));
    if let Some(token) = token {
        let mut meta = RequestMetaObject::default();
        meta.set_progress_token(ProgressToken(NumberOrString::String(
            token.to_string().into(),
        )));
        params.meta = Some(meta);
    }
    params
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_call_reports_its_progress_in_both_generations() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings(dir.path(), "dev-admin", Some(&redis_url()));
    settings.server.json_response = true;
    let server = start_with(settings, dir).await;
    for modern in [false, true] {
        let listener = Listener::default();
        let heard = listener.heard.clone();
        let client = connect(&server.url, modern, listener).await;

        let result = client
            .call_tool(call("sleep 3; echo done", Some("p-1")))
            .await
            .unwrap();
        assert!(text(&result).contains("done"), "{result:?}");
        let heard = heard.lock().unwrap().clone();
        // At 0 s and 2 s at least (every 2 s), each naming the request's token (rmcp's
        // client puts its own in place of the one given), growing.
        assert!(heard.len() >= 2, "modern={modern}: {heard:?}");
        assert!(
            heard
                .iter()
                .all(|p| p.progress_token == heard[0].progress_token),
            "{heard:?}"
        );
        assert!(
            heard.windows(2).all(|w| w[0].progress < w[1].progress),
            "{heard:?}"
        );
        assert_eq!(
            heard[0].message.as_deref(),
            Some("execute admin.shell: started")
        );
        assert!(
            heard[1]
                .message
                .as_deref()
                .unwrap_or("")
                .starts_with("execute admin.shell: running for"),
            "{heard:?}"
        );

        client.cancel().await.unwrap();
    }
    server.stop().await;
}

/// A raw 2026-07-28 `execute` request: its response's content type and body.
async fn modern_raw(url: &str, token: Option<&str>) -> (String, String) {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    if let Some(token) = token {
        meta["progressToken"] = json!(token);
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "execute", "_meta": meta,
        "arguments": {"key": "admin.shell", "params": {"command": "sleep 2.5; echo done"}}}});
    let resp = modern_execute(&http_client(), url, &body)
        .send()
        .await
        .unwrap();
    let kind = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (kind, resp.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_responses_turn_to_sse_only_for_a_progress_token() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = settings(dir.path(), "dev-admin", Some(&redis_url()));
    settings.server.json_response = true;
    let server = start_with(settings, dir).await;

    let (kind, body) = modern_raw(&server.url, None).await;
    assert!(kind.starts_with("application/json"), "{kind}");
    assert!(
        !body.contains("notifications/progress") && body.contains("done"),
        "{body}"
    );

    let (kind, body) = modern_raw(&server.url, Some("t-7")).await;
    assert!(kind.starts_with("text/event-stream"), "{kind}");
    assert!(body.contains("\"progressToken\":\"t-7\""), "{body}");
    assert!(body.contains("done"), "{body}");
    server.stop().await;
}

/// A tool that reports its own progress through `MCC_PROGRESS_FILE`, then prints.
const REPORTING: &str = "echo '1/4 copying' >> \"$MCC_PROGRESS_FILE\"; sleep 1; \
    echo '3/4 almost there' >> \"$MCC_PROGRESS_FILE\"; sleep 1; echo done";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_reports_its_own_progress_in_process_and_through_the_executor() {
    for through_executor in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = settings(dir.path(), "dev-admin", Some(&redis_url()));
        let _executor = through_executor.then(|| {
            let socket = dir.path().join("run/executor.sock");
            std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
            let runtime = mcc_executor::InProcess::new(vec![(
                "PATH".into(),
                std::env::var("PATH").unwrap_or_default(),
            )]);
            let address = mcc_executor::Address::Path(socket.clone());
            let listener = mcc_executor::server::bind(&address).unwrap();
            settings.execution.runtime = mcc_gateway::config::RuntimeKind::Executor;
            settings.execution.executor_socket = socket.display().to_string();
            tokio::spawn(mcc_executor::server::serve(listener, runtime, 4))
        });
        let server = start_with(settings, dir).await;
        let listener = Listener::default();
        let heard = listener.heard.clone();
        let client = connect(&server.url, false, listener).await;

        let result = client.call_tool(call(REPORTING, Some("p"))).await.unwrap();
        // The reports are not output.
        assert_eq!(text(&result), "done\n", "executor={through_executor}");
        let heard = heard.lock().unwrap().clone();
        let said = |needle: &str| {
            heard
                .iter()
                .find(|p| p.message.as_deref().is_some_and(|m| m.contains(needle)))
                .cloned()
        };
        let first = said("copying (1/4)").unwrap_or_else(|| panic!("{heard:?}"));
        let second = said("almost there (3/4)").unwrap_or_else(|| panic!("{heard:?}"));
        // progress/total is the tool's fraction.
        let fraction = |p: &ProgressNotificationParam| p.progress / p.total.unwrap();
        assert!((fraction(&first) - 0.25).abs() < 1e-9, "{first:?}");
        assert!((fraction(&second) - 0.75).abs() < 1e-9, "{second:?}");
        assert!(
            heard.windows(2).all(|w| w[0].progress < w[1].progress),
            "{heard:?}"
        );
        client.cancel().await.unwrap();
        server.stop().await;
    }
}
