//! The HTTP surface: `/mcp` (rmcp's streamable HTTP service behind the identity layer),
//! malformed-body guard ([`jsonrpc_guard`]), the REST routes ([`crate::rest`]), `/healthz`, `/readyz` (catalog, runtime and session store, JSON detail) and `/metrics`, with
//! request tracing and request metrics as tower layers.
//!
//! Also what bounds one client ([`serve`]): a connection must send a request's headers
//! within `connections.header_read_timeout_secs` (idle keep-alive and half-open
//! connections are closed by the same timer), a request body must not stall longer than
//! `connections.body_read_timeout_secs`, and a request must produce its response within
//! the request timeout (an SSE stream, once its response has started, is exempt).
//! `/metrics` is served on its own port ([`metrics_router`]) when `metrics.port` is set,
//! and requires `Authorization: Bearer <metrics.token>` when a token is set.
//!
//! The transport layers, one file each: [`jsonrpc_guard`] (malformed JSON-RPC bodies),
//! [`caller_caps`] (per-caller bounds on streams and sessions), [`sse_coalesce`] (a quick
//! SSE answer in one write), [`quickack`] (`TCP_QUICKACK` on accepted sockets), and
//! [`connections`], the `connections` section. The clients' TLS is not here but in
//! `crate::tls`: the modules that use it (auth, telemetry, redis_conn) sit below this one.

pub mod caller_caps;
pub mod connections;
pub mod jsonrpc_guard;
pub mod quickack;
pub mod restore_gate;
pub mod sse_coalesce;

use std::convert::Infallible;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use futures::future::BoxFuture;
use http_body_util::combinators::BoxBody;
use rmcp::transport::streamable_http_server::session::SessionStore as McpSessionStore;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::mcp::relay::{Relay, RelayingSessionManager};
use crate::mcp::session_owner::{self, SessionOwners};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceBuilder;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::auth::{self, Authenticator};
use crate::config::ServerSettings;
use crate::mcp::{McpServer, Shared};
use crate::metrics::MetricsSettings;
use caller_caps::CallerCaps;
use jsonrpc_guard::BodyLimit;

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
    /// Who each legacy session belongs to (another caller's use of an id is refused).
    pub owners: SessionOwners,
    pub shutdown: CancellationToken,
}

/// What bounds the router's requests and where `/metrics` is.
#[derive(Debug, Clone)]
pub struct RouterLimits {
    /// Where `/metrics` is served and the token it needs.
    pub metrics: MetricsSettings,
    /// How long a request may take to produce its response (`None`: no limit).
    pub request_timeout: Option<Duration>,
    /// Legacy MCP sessions one caller may hold in this replica.
    pub max_legacy_sessions_per_caller: usize,
    /// SSE streams one caller may have open at once in this replica.
    pub max_sse_streams_per_caller: usize,
}

impl Default for RouterLimits {
    /// `/metrics` on the MCP port without a token; no limits.
    fn default() -> Self {
        Self {
            metrics: MetricsSettings::default(),
            request_timeout: None,
            max_legacy_sessions_per_caller: usize::MAX,
            max_sse_streams_per_caller: usize::MAX,
        }
    }
}

/// rmcp's `/mcp` service behind an `Arc`. axum clones a route's service for every
/// request, and so does each `from_fn` layer around it; a `StreamableHttpService` clone
/// copies its whole config (the allowed host and origin lists as owned strings), an
/// `Arc` clone is one increment.
#[derive(Clone)]
struct SharedMcpService(Arc<StreamableHttpService<McpServer, RelayingSessionManager>>);

impl tower::Service<Request> for SharedMcpService {
    type Response = http::Response<BoxBody<Bytes, Infallible>>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let service = self.0.clone();
        Box::pin(async move { Ok(service.handle(request).await) })
    }
}

fn mcp_service(
    shared: Arc<Shared>,
    options: McpOptions<'_>,
) -> (SharedMcpService, Arc<RelayingSessionManager>) {
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
    // A legacy client's answer to a question may land on another replica (item 8).
    let relay = Relay::for_store(&shared.sessions);
    // A legacy client's broken stream resumes on any replica (issue 34).
    let events = shared.sessions.redis_client().map(|(_, conn, prefix)| {
        let store = crate::mcp::events::EventStore::new(conn, &prefix, Default::default());
        Arc::new(store) as Arc<dyn crate::mcp::events::SessionEvents>
    });
    let sessions =
        RelayingSessionManager::new(sessions, relay, events, options.shutdown.child_token());
    let sessions = Arc::new(sessions);
    // Legacy sessions hear of resource list changes (issue 34).
    let list_changed = crate::mcp::list_changed::ListChanged::start(
        shared.catalog.clone(),
        options.shutdown.child_token(),
    );
    let service = StreamableHttpService::new(
        move || Ok(McpServer::new(shared.clone()).with_list_changed(list_changed.clone())),
        sessions.clone(),
        config,
    );
    (SharedMcpService(Arc::new(service)), sessions)
}

/// The whole router, `/metrics` on it without a token and no request timeout.
pub fn router(
    shared: Arc<Shared>,
    authenticator: Authenticator,
    options: McpOptions<'_>,
) -> Router {
    router_with(shared, authenticator, options, RouterLimits::default())
}

/// The whole router, with `limits`.
pub fn router_with(
    shared: Arc<Shared>,
    authenticator: Authenticator,
    options: McpOptions<'_>,
    limits: RouterLimits,
) -> Router {
    let limit = BodyLimit(options.server.max_request_body);
    // REST beside MCP: the same authentication and the same calls (crate::rest).
    let rest = crate::rest::router(shared.clone(), authenticator.clone(), options.server);
    let RouterLimits {
        metrics,
        request_timeout,
        max_legacy_sessions_per_caller,
        max_sse_streams_per_caller,
    } = limits;
    let owners = options.owners.clone();
    let (service, sessions) = mcp_service(shared.clone(), options);
    // Unauthenticated: OAuth discovery (RFC 9728) for MCP clients.
    let well_known = auth::oauth::routes(authenticator.oauth());
    let restore_gate = restore_gate::RestoreGate::new(sessions.clone());
    let caps = CallerCaps::new(
        max_legacy_sessions_per_caller,
        max_sse_streams_per_caller,
        sessions,
    );
    // One `layer` call for the whole stack: each `Router::layer` boxes the route again,
    // and every box below a `from_fn` layer is cloned (allocated) on every request.
    let mcp_layers = ServiceBuilder::new()
        .layer(middleware::from_fn_with_state(
            authenticator,
            auth::authenticate_request,
        ))
        // Inside authentication: another caller's session id is an unknown session, before
        // anything counts or forgets it.
        .layer(middleware::from_fn_with_state(
            owners,
            session_owner::enforce,
        ))
        // Inside the owner check: one restore at a time per session moving here.
        .layer(middleware::from_fn_with_state(
            restore_gate,
            restore_gate::serialize,
        ))
        // Inside authentication: counts per caller.
        .layer(middleware::from_fn_with_state(caps, caller_caps::enforce))
        .layer(middleware::from_fn_with_state(limit, jsonrpc_guard::guard))
        // Innermost: a quick SSE answer leaves as one write (head and body).
        .layer(middleware::from_fn(sse_coalesce::coalesce));
    let mcp = Router::new()
        .nest_service("/mcp", service)
        .layer(mcp_layers);
    let state = HttpState { shared };
    let mut probes = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz));
    if metrics.port.is_none() {
        probes = probes.merge(metrics_route(&state, &metrics));
    }
    // Ends when the response starts: an SSE stream's body is not covered.
    let timeout = request_timeout
        .map(|timeout| TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, timeout));
    // One `layer` call, as for `/mcp`'s stack, outermost first.
    let layers = ServiceBuilder::new()
        // The OpenTelemetry `request` span (continuing a caller's traceparent).
        .layer(middleware::from_fn(crate::telemetry::trace_request))
        .layer(TraceLayer::new_for_http())
        .option_layer(timeout)
        .layer(middleware::from_fn_with_state(state.clone(), track));
    probes
        .with_state(state)
        .merge(mcp)
        .merge(rest)
        .merge(well_known)
        .layer(layers)
}

/// The router of the separate metrics port (`metrics.port`): `/metrics` only.
pub fn metrics_router(shared: Arc<Shared>, metrics: &MetricsSettings) -> Router {
    let state = HttpState { shared };
    metrics_route(&state, metrics)
        .with_state(state)
        .layer(TraceLayer::new_for_http())
}

/// `/metrics`, behind the bearer token when one is configured.
fn metrics_route(state: &HttpState, settings: &MetricsSettings) -> Router<HttpState> {
    let route = Router::new().route("/metrics", get(metrics));
    match settings.token.as_ref().map(mcc_catalog::Secret::expose) {
        None => route,
        Some(token) => route.layer(middleware::from_fn_with_state(
            (state.clone(), Arc::<str>::from(token)),
            metrics_auth,
        )),
    }
}

/// Answers 401 unless the request carries `Authorization: Bearer <metrics.token>`
/// (compared in constant time).
async fn metrics_auth(
    State((_, token)): State<(HttpState, Arc<str>)>,
    request: Request,
    next: Next,
) -> Response {
    use subtle::ConstantTimeEq;
    let given = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(axum::http::header::WWW_AUTHENTICATE, "Bearer")],
        "/metrics needs Authorization: Bearer <metrics.token>\n",
    )
        .into_response()
}

/// How [`serve`] treats connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// The whole request head must arrive within this (also the idle keep-alive limit).
    pub header_read_timeout: Duration,
    /// The longest pause between two chunks of a request body.
    pub body_read_timeout: Duration,
    /// Serve only clients on a loopback address (the `dev-*` auth backends check no
    /// credential: anyone who reaches them is an admin); others get a 403 and are closed.
    pub loopback_peers_only: bool,
}

/// What a client beyond loopback gets from a gateway whose auth checks no credential.
const LOOPBACK_ONLY: &str = "auth dev-admin / dev-public checks no credential, so this gateway \
     serves loopback clients only; for others use auth jwt, api_key or kubernetes\n";

/// Answers a client beyond loopback 403 and closes. Its request head is read first (at
/// most 16 KiB, never interpreted) and whatever it still sends is drained after the
/// answer, so the answer is neither taken for a reply to nothing nor lost to a reset.
fn refuse_beyond_loopback(stream: tokio::net::TcpStream, peer: std::net::SocketAddr) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tracing::warn!(%peer, "refused a client beyond loopback: auth dev-* serves loopback only");
    tokio::spawn(async move {
        let mut stream = stream;
        let answered = tokio::time::timeout(Duration::from_secs(2), async {
            let mut buf = vec![0u8; 4096];
            let mut head = Vec::new();
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 << 10 {
                let n = stream.read(&mut buf).await?;
                if n == 0 {
                    break;
                }
                head.extend_from_slice(&buf[..n]);
            }
            let answer = format!(
                "HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\nconnection: close\r\n\
                 content-length: {}\r\n\r\n{LOOPBACK_ONLY}",
                LOOPBACK_ONLY.len()
            );
            stream.write_all(answer.as_bytes()).await?;
            stream.shutdown().await?;
            while stream.read(&mut buf).await? > 0 {}
            std::io::Result::Ok(())
        });
        let _ = answered.await;
    });
}

/// Serves `router` on `listener` until `shutdown` fires, then lets open connections
/// finish. Unlike `axum::serve`, each connection gets hyper's header read timer, so a
/// client that opens a connection and sends nothing (or stops half-way through its
/// headers, or idles between requests) is disconnected.
///
/// Each connection is served on one thread of a pool of single-threaded runtimes (one per
/// available CPU; the least busy at accept), with everything its requests spawn: the rmcp
/// service task, the tool process's pipes and pidfd. On a work-stealing runtime those
/// hopped between workers several times per `execute` (measured on 2 cores: ~100 µs of
/// the gateway's CPU per call, and wake-ups of idle CPUs on the request's path;
/// RESULTS-execute-floor.md, run 5). Background work stays on the main runtime.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    serve_until(listener, router, limits, shutdown, None).await
}

/// [`serve`] for a stopping process: once `stop` fires, drains as [`crate::drain`] says,
/// then cancels `sessions` (the MCP sessions' token) and closes what is left.
pub async fn serve_draining(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
    sessions: CancellationToken,
) -> std::io::Result<()> {
    serve_until(listener, router, limits, stop, Some(sessions)).await
}

async fn serve_until(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
    drain_then: Option<CancellationToken>,
) -> std::io::Result<()> {
    use hyper::server::conn::http1::Builder;
    use hyper_util::rt::{TokioIo, TokioTimer};
    use hyper_util::server::graceful::GracefulShutdown;
    use hyper_util::service::TowerToHyperService;
    use tower::ServiceBuilder;
    use tower_http::timeout::RequestBodyTimeoutLayer;

    let drain = crate::drain::Drain::default();
    let router = match drain_then {
        Some(_) => router.layer(middleware::from_fn_with_state(
            drain.clone(),
            crate::drain::track,
        )),
        None => router,
    };
    let service = ServiceBuilder::new()
        .layer(RequestBodyTimeoutLayer::new(limits.body_read_timeout))
        .map_request(|r: http::Request<_>| r.map(axum::body::Body::new))
        .service(router);
    let graceful = GracefulShutdown::new();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = tokio_util::task::LocalPoolHandle::new(threads);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) if limits.loopback_peers_only
                    && !peer.ip().to_canonical().is_loopback() =>
                {
                    refuse_beyond_loopback(stream, peer);
                    continue;
                }
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        // Neither side waits on a delayed ACK: our writes go out at once, and what the
        // client sent is acknowledged before we wait for more ([`quickack`]).
        let _ = stream.set_nodelay(true);
        // The socket is registered again with the reactor of the thread that serves it.
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "handing a connection to its thread failed");
                continue;
            }
        };
        let service = service.clone();
        let watcher = graceful.watcher();
        pool.spawn_pinned(move || async move {
            let stream = match tokio::net::TcpStream::from_std(stream) {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "registering a connection failed");
                    return;
                }
            };
            let conn = Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout)
                .serve_connection(
                    TokioIo::new(quickack::QuickAck::new(stream)),
                    TowerToHyperService::new(service),
                );
            if let Err(e) = watcher.watch(conn).await {
                tracing::debug!(error = %e, "connection closed");
            }
        });
    }
    drop(listener);
    if let Some(sessions) = drain_then {
        drain.start();
        tracing::info!(
            in_flight = drain.in_flight(),
            "stopping: answering open connections a little longer, waiting for running calls"
        );
        drain.settled().await;
        sessions.cancel();
    }
    graceful.shutdown().await;
    Ok(())
}

async fn healthz() -> &'static str {
    "ok"
}

/// Ready when this replica can serve: a catalog is loaded, its keyword index is built,
/// and its runtime (the executor, in Kubernetes mode) answers. Tool embeddings are not
/// waited for: `search.semantic` says when semantic ranking has joined. The session store's state is reported but does not count:
/// a shared Redis's blip would otherwise empty the Service of every replica at once,
/// and calls that need no session still work meanwhile.
async fn readyz(State(state): State<HttpState>) -> Response {
    let catalog = state.shared.catalog.status();
    let (store, runtime) = tokio::join!(
        state.shared.sessions.ping(),
        state.shared.engine.check_runtime()
    );
    let search = state.shared.search.status();
    let ready = catalog.generation > 0 && search.generation > 0 && runtime.is_ok();
    let body = json!({
        "ready": ready,
        "catalog": catalog,
        "search": search,
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

/// Counts requests and their latency by route and status.
async fn track(State(state): State<HttpState>, request: Request, next: Next) -> Response {
    let route = route_label(request.uri().path());
    let started = Instant::now();
    let response = next.run(request).await;
    state
        .shared
        .metrics
        .http_request(route, response.status().as_u16(), started.elapsed());
    response
}

/// The metrics label of a request path: one of the routes this router serves, or
/// `other` (so a client cannot add series by inventing paths).
fn route_label(path: &str) -> &'static str {
    match path {
        "/mcp" => "/mcp",
        "/healthz" => "/healthz",
        "/readyz" => "/readyz",
        "/metrics" => "/metrics",
        p if p.starts_with("/mcp") => "/mcp",
        p => crate::rest::route_label(p).unwrap_or("other"),
    }
}

#[cfg(test)]
mod tests {
    use super::route_label;

    #[test]
    fn request_paths_map_to_the_routes_or_other() {
        assert_eq!(route_label("/mcp"), "/mcp");
        assert_eq!(route_label("/mcp/anything"), "/mcp");
        assert_eq!(route_label("/readyz"), "/readyz");
        assert_eq!(route_label("/v1/tools/public.echo"), "/v1/tools/{key}");
        for invented in ["/", "/x\"} 1\nmcc_fake 9", "/v1/tools/a/b", "/healthz/x"] {
            assert_eq!(route_label(invented), "other", "{invented}");
        }
    }
}
