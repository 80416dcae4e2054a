//! What an upstream sends about a call while it runs, relayed to the caller (issue 33
//! item 4): a real gateway in file mode over the reference server-everything (npm,
//! streamable HTTP, a legacy-generation server), driven by rmcp clients of both
//! protocol generations. Its `trigger-long-running-operation` reports progress on the
//! token the gateway gave the upstream request, which reaches the caller as progress of
//! the caller's own token; its `trigger-elicitation-request` asks a question, which a
//! legacy caller answers and a 2026-07-28 caller (who cannot be asked within its
//! request) declines through the gateway.

use crate::mcp_support;
use crate::upstream_support;

use std::sync::{Arc, Mutex};

use mcp_support::*;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, NumberOrString,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestMetaObject,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ServiceExt};
use serde_json::{Value, json};
use upstream_support::Everything;

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
"#
    )
}

async fn gateway(everything: &Everything) -> Server {
    let upstreams = ("tools/upstreams.yaml", upstreams_file(&everything.url()));
    start_configured("dev-admin", Some(&redis_url()), &[upstreams], |_| {}).await
}

/// Records the progress notifications it receives.
#[derive(Clone, Default)]
struct Listener {
    heard: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("relay-test", "0"),
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

async fn listen(
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

fn execute_with_token(key: &str, params: Value, token: &str) -> CallToolRequestParams {
    let mut call = CallToolRequestParams::new("execute")
        .with_arguments(args(json!({"key": key, "params": params})));
    let mut meta = RequestMetaObject::default();
    meta.set_progress_token(ProgressToken(NumberOrString::String(
        token.to_string().into(),
    )));
    call.meta = Some(meta);
    call
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_progress_reaches_the_caller_as_progress_of_its_token() {
    let Some(everything) = Everything::start().await else {
        return;
    };
    let server = gateway(&everything).await;
    for modern in [false, true] {
        let listener = Listener::default();
        let heard = listener.heard.clone();
        let client = listen(&server.url, modern, listener).await;
        let result = client
            .call_tool(execute_with_token(
                "public.ev_trigger-long-running-operation",
                json!({"duration": 3, "steps": 4}),
                "caller-token",
            ))
            .await
            .unwrap();
        assert!(
            text(&result).contains("Long running operation completed"),
            "modern={modern}: {result:?}"
        );
        let heard = heard.lock().unwrap().clone();
        // The upstream's steps, as the caller's progress: "k/4" in the message, and
        // progress/total its fraction; all on the one token the caller's request had.
        let steps: Vec<&str> = heard
            .iter()
            .filter_map(|p| p.message.as_deref())
            .filter_map(|m| m.strip_prefix("execute public.ev_trigger-long-running-operation: "))
            .filter(|m| m.ends_with("/4"))
            .collect();
        assert!(
            steps.contains(&"1/4") && steps.contains(&"2/4"),
            "modern={modern}: upstream steps relayed: {heard:?}"
        );
        let second = heard
            .iter()
            .find(|p| p.message.as_deref().is_some_and(|m| m.ends_with(": 2/4")))
            .unwrap();
        let fraction = second.progress / second.total.expect("a total");
        assert!((fraction - 0.5).abs() < 1e-6, "{second:?}");
        assert!(
            heard
                .iter()
                .all(|p| p.progress_token == heard[0].progress_token),
            "{heard:?}"
        );
        assert!(
            heard.windows(2).all(|w| w[0].progress < w[1].progress),
            "progress only grows: {heard:?}"
        );
        client.cancel().await.unwrap();
    }
    server.stop().await;
    everything.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_question_is_relayed_to_a_legacy_caller_and_declined_otherwise() {
    let Some(everything) = Everything::start().await else {
        return;
    };
    let server = gateway(&everything).await;
    let key = "public.ev_trigger-elicitation-request";

    // A legacy caller that answers: the upstream's own question, its answer back.
    let answering = TestClient::answering(Answer::Accept(
        json!({"name": "Ada Lovelace", "check": true}),
    ));
    let asked = answering.asked.clone();
    let client = legacy(&server.url, answering).await;
    let result = call(&client, "execute", json!({"key": key, "params": {}})).await;
    let out = text(&result);
    assert!(
        out.contains("User provided the requested information"),
        "{out}"
    );
    assert!(out.contains("Name: Ada Lovelace"), "{out}");
    assert_eq!(
        asked.lock().unwrap().clone(),
        vec!["Please provide inputs for the following fields:".to_string()]
    );
    client.cancel().await.unwrap();

    // A legacy caller that declines: the upstream hears the decline.
    let client = legacy(&server.url, TestClient::answering(Answer::Decline)).await;
    let out = text(&call(&client, "execute", json!({"key": key, "params": {}})).await);
    assert!(out.contains("User declined"), "{out}");
    client.cancel().await.unwrap();

    // A legacy caller without elicitation, and a 2026-07-28 caller (even one that
    // declares elicitation): never asked, the gateway declines for them.
    for client in [
        legacy(&server.url, TestClient::plain()).await,
        stateless(
            &server.url,
            TestClient::answering(Answer::Accept(json!({"name": "x"}))),
        )
        .await,
    ] {
        let asked = client.service().asked.clone();
        let out = text(&call(&client, "execute", json!({"key": key, "params": {}})).await);
        assert!(out.contains("User declined"), "{out}");
        assert!(asked.lock().unwrap().is_empty());
        client.cancel().await.unwrap();
    }
    server.stop().await;
    everything.stop().await;
}
