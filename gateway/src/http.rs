//! The HTTP surface: `/mcp` (rmcp's streamable HTTP service behind the identity layer),
//! malformed-body guard ([`crate::jsonrpc_guard`]), `/healthz`, `/readyz` (catalog, runtime and session store, JSON detail) and `/metrics`, with
//! request tracing and request metrics as tower layers.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use rmcp::transport::streamable_http_server::session::SessionStore as McpSessionStore;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tower_http::trace::TraceLayer;

use crate::auth::{self, Authenticator};
use crate::config::ServerSettings;
use crate::jsonrpc_guard::{self, BodyLimit};
use crate::mcp::{McpServer, Shared};

/// Everything the probes and `/mcp` need.
#[derive(Clone)]
pub struct HttpState {
    pub shared: Arc<Shared>,
}

/// How `/mcp` is served.
pub struct McpOptions<'a> {
    pub server: &'a ServerSettings,
    /// The cross-replica registry of legacy MCP sessions (Redis), if any.
    pub registry: Option<Arc<dyn McpSessionStore>>,
    /// How long session variables live (idle legacy sessions are kept this long when
    /// there is no registry to restore them from).
    pub session_ttl: std::time::Duration,
    pub shutdown: CancellationToken,
}

fn mcp_service(
    shared: Arc<Shared>,
    options: McpOptions<'_>,
) -> StreamableHttpService<McpServer, LocalSessionManager> {
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(options.server.legacy_sessions)
        .with_json_response(options.server.json_response)
        .with_max_request_body_bytes(options.server.max_request_body)
        .with_cancellation_token(options.shutdown.child_token());
    config = if options.server.allowed_hosts.is_empty() {
        config.disable_allowed_hosts()
    } else {
        config.with_allowed_hosts(options.server.allowed_hosts.clone())
    };
    let mut sessions = LocalSessionManager::default();
    if options.registry.is_none() {
        // Without a shared registry an idle session cannot be restored, so keep it in
        // memory as long as its variables live (rmcp's default is 5 minutes).
        sessions.session_config.keep_alive = Some(options.session_ttl);
    }
    if !options.server.allowed_origins.is_empty() {
        config = config.with_allowed_origins(options.server.allowed_origins.clone());
    }
    config.session_store = options.registry;
    StreamableHttpService::new(
        move || Ok(McpServer::new(shared.clone())),
        Arc::new(sessions),
        config,
    )
}

/// The whole router.
pub fn router(
    shared: Arc<Shared>,
    authenticator: Authenticator,
    options: McpOptions<'_>,
) -> Router {
    let limit = BodyLimit(options.server.max_request_body);
    let mcp = Router::new()
        .nest_service("/mcp", mcp_service(shared.clone(), options))
        .layer(middleware::from_fn_with_state(limit, jsonrpc_guard::guard))
        .layer(middleware::from_fn_with_state(
            authenticator,
            auth::authenticate_request,
        ));
    let state = HttpState { shared };
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state.clone())
        .merge(mcp)
        .layer(middleware::from_fn_with_state(state, track))
        .layer(TraceLayer::new_for_http())
}

async fn healthz() -> &'static str {
    "ok"
}

/// Ready when this replica can serve: a catalog is loaded and its runtime (the executor,
/// in Kubernetes mode) answers. The session store's state is reported but does not count:
/// a shared Redis's blip would otherwise empty the Service of every replica at once,
/// and calls that need no session still work meanwhile.
async fn readyz(State(state): State<HttpState>) -> Response {
    let catalog = state.shared.catalog.status();
    let (store, runtime) = tokio::join!(
        state.shared.sessions.ping(),
        state.shared.engine.check_runtime()
    );
    let ready = catalog.generation > 0 && runtime.is_ok();
    let body = json!({
        "ready": ready,
        "catalog": catalog,
        "runtime": {
            "ok": runtime.is_ok(),
            "error": runtime.err(),
        },
        "session_store": {
            "backend": match state.shared.sessions {
                crate::session::SessionStore::Memory(_) => "memory",
                crate::session::SessionStore::Redis(_) => "redis",
            },
            "ok": store.is_ok(),
            "error": store.err().map(|e| e.to_string()),
        },
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

async fn metrics(State(state): State<HttpState>) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.shared.metrics.render(),
    )
        .into_response()
}

/// Counts requests and their latency by path and status.
async fn track(State(state): State<HttpState>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    let started = Instant::now();
    let response = next.run(request).await;
    state
        .shared
        .metrics
        .http_request(&path, response.status().as_u16(), started.elapsed());
    response
}
