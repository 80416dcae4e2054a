//! The standing stream against a real local MCP upstream (rmcp's streamable HTTP server
//! over loopback) whose tool list changes: a legacy-generation upstream's
//! `notifications/tools/list_changed` asks for one refresh (a burst is debounced into
//! one), and a 2026-07-28 upstream gets no stream (schedule only).

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use mcc_catalog::crd::{MCPServer, MCPServerSpec};
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    DiscoverRequestMethod, DiscoverResult, ErrorData, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::*;
use crate::metrics::Metrics;

/// An upstream whose tools are `names`; it remembers every initialized session, to tell
/// each when they change (as a real server tells its connected clients).
#[derive(Clone)]
pub(crate) struct Changing {
    names: Arc<Mutex<Vec<String>>>,
    peers: Arc<Mutex<Vec<Peer<RoleServer>>>>,
    /// Only the `initialize` handshake (a server from before 2026-07-28).
    legacy: bool,
}

impl ServerHandler for Changing {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("changing", "1"))
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        if self.legacy {
            // What a server from before 2026-07-28 answers: no such method.
            return Err(ErrorData::method_not_found::<DiscoverRequestMethod>());
        }
        let _ = context;
        Ok(DiscoverResult::from_server_info(
            ProtocolVersion::KNOWN_VERSIONS.to_vec(),
            self.get_info(),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let _ = context;
        let schema: serde_json::Map<String, serde_json::Value> =
            serde_json::from_value(serde_json::json!({"type": "object"})).unwrap();
        let schema = Arc::new(schema);
        let tools = self
            .names
            .lock()
            .unwrap()
            .iter()
            .map(|n| Tool::new(n.clone(), "a tool", schema.clone()))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        self.peers.lock().unwrap().push(context.peer.clone());
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }
}

impl Changing {
    /// Adds a tool and tells every session that listed tools.
    async fn add(&self, name: &str) {
        self.names.lock().unwrap().push(name.into());
        let peers = self.peers.lock().unwrap().clone();
        for p in peers {
            let _ = p.notify_tool_list_changed().await;
        }
    }
}

/// Serves `upstream` on a loopback port; returns its URL.
pub(crate) async fn serve(upstream: Changing) -> String {
    serve_recording(upstream).await.0
}

/// [`serve`], and the `Authorization` headers of every request it received.
pub(crate) async fn serve_recording(upstream: Changing) -> (String, Arc<Mutex<Vec<String>>>) {
    let service = StreamableHttpService::new(
        move || Ok(upstream.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let seen: Arc<Mutex<Vec<String>>> = Default::default();
    let record = seen.clone();
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                if let Some(v) = req
                    .headers()
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                {
                    record.lock().unwrap().push(v.to_string());
                }
                next.run(req)
            },
        ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/mcp"), seen)
}

pub(crate) fn upstream(legacy: bool) -> Changing {
    Changing {
        names: Arc::new(Mutex::new(vec!["one".into()])),
        peers: Default::default(),
        legacy,
    }
}

fn mcpserver(url: &str) -> MCPServer {
    let mut s = MCPServer::new(
        "changing",
        MCPServerSpec {
            url: url.into(),
            ..Default::default()
        },
    );
    s.metadata.namespace = Some("team-a".into());
    s.metadata.generation = Some(1);
    s
}

/// A client no request reaches (the MCPServers here have no header Secrets).
fn unused_client() -> Client {
    let (service, _api) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    Client::new(service, "default")
}

async fn next_trigger(triggers: &mut Triggers, within: Duration) -> Option<String> {
    use futures::StreamExt;
    tokio::time::timeout(within, triggers.next())
        .await
        .ok()
        .flatten()
        .map(|r| r.name)
}

async fn wait_state(listeners: &Listeners, id: &str, want: StreamState) {
    for _ in 0..200 {
        if listeners.state(id) == Some(want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{id} never reached {want:?}: {:?}", listeners.state(id));
}

#[tokio::test]
async fn a_legacy_upstreams_list_changed_asks_for_one_refresh_per_burst() {
    let up = upstream(true);
    let url = serve(up.clone()).await;
    let (listeners, mut triggers) = Listeners::new();
    let metrics = Arc::new(Metrics::default());
    let server = mcpserver(&url);
    listeners.ensure("team-a/changing", &server, &unused_client(), &metrics);
    wait_state(&listeners, "team-a/changing", StreamState::Listening).await;
    assert_eq!(
        next_trigger(&mut triggers, Duration::from_secs(5))
            .await
            .as_deref(),
        Some("changing"),
        "the state change asks for a status write"
    );
    assert_eq!(listeners.take_pending("team-a/changing"), None);

    assert_eq!(
        up.peers.lock().unwrap().len(),
        1,
        "the standing session is the upstream's one session"
    );

    // A burst of three changes: one refresh.
    up.add("two").await;
    up.add("three").await;
    up.add("four").await;
    assert_eq!(
        next_trigger(&mut triggers, Duration::from_secs(10))
            .await
            .as_deref(),
        Some("changing")
    );
    assert_eq!(
        listeners.take_pending("team-a/changing"),
        Some(RefreshCause::ListChanged)
    );
    assert_eq!(
        next_trigger(&mut triggers, DEBOUNCE * 3).await,
        None,
        "a burst is one refresh"
    );
    assert_eq!(listeners.take_pending("team-a/changing"), None);
    assert!(
        metrics
            .render()
            .contains("mcc_operator_mcpserver_list_changed_notifications_total")
    );

    // A changed spec replaces the stream; a stopped one is gone.
    listeners.stop("team-a/changing");
    assert!(listeners.is_empty());
}

#[tokio::test]
async fn a_2026_07_28_upstream_stays_schedule_only() {
    let up = upstream(false);
    let url = serve(up.clone()).await;
    let (listeners, mut triggers) = Listeners::new();
    let server = mcpserver(&url);
    listeners.ensure(
        "team-a/changing",
        &server,
        &unused_client(),
        &Arc::new(Metrics::default()),
    );
    wait_state(&listeners, "team-a/changing", StreamState::ScheduleOnly).await;
    assert_eq!(
        next_trigger(&mut triggers, Duration::from_secs(5))
            .await
            .as_deref(),
        Some("changing")
    );
    up.add("two").await;
    assert_eq!(
        next_trigger(&mut triggers, Duration::from_secs(3)).await,
        None,
        "no stream, no refresh outside the schedule"
    );
}
