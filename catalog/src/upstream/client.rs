//! One connection to an upstream MCP server (rmcp's streamable HTTP client), and the
//! bounded `tools/list` over it: the discovery client of both the gateway (file mode, and
//! its `tools/call`s) and the operator (Kubernetes mode), behind the `upstream-client`
//! feature so the rest of the catalog stays free of I/O. What a connection carries — the static headers, the
//! custom CA, the response bounds — is decided here and nowhere else.
//!
//! The protocol generation is the upstream's: rmcp's `Auto` lifecycle asks
//! `server/discover` (2026-07-28) and falls back to the legacy `initialize` handshake.
//! A legacy session keeps a standing stream, on which `notifications/tools/list_changed`
//! wakes discovery ([`Handler`]).
//!
//! One session serves every caller's calls at once, so what an upstream sends about a
//! call is routed by the call, never by the session: [`Calls`] holds the calls in flight
//! by the request id and progress token rmcp gave each `tools/call` (the gateway's own,
//! never a caller's). `notifications/progress` go to the call whose token they name;
//! an `elicitation/create` goes to the call whose response stream (streamable HTTP) it
//! arrived on, or (stdio, where no stream tells) to the only call in flight. Anything
//! else is dropped (progress) or declined (a question).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::call_events;
use super::direct::{Observed, SessionSeen};
use crate::annotations::Annotations;
use crate::upstream::{Discovered, MAX_CA_BYTES, MAX_PAGES, MAX_TOOLS, UpstreamSpec};
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationCapability,
    FormElicitationCapability, Implementation, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, ProtocolVersion, RequestId,
};
use rmcp::service::{
    ClientCacheConfig, InboundStreamOrigin, NotificationContext, RequestContext, RoleClient,
    RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt};
use serde_json::Value;
use tokio::sync::{Notify, mpsc};

pub use super::MAX_RESPONSE_BYTES;
pub use super::call_events::{
    CallEvents, EventSenders, QUESTION_TIMEOUT, Question, call_events, decline,
};

/// How long connecting (handshake included) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The client side of a session: what the gateway tells an upstream about itself, and
/// what it does with the upstream's notifications and questions.
#[derive(Clone)]
pub struct Handler {
    /// Woken by `notifications/tools/list_changed`: discovery runs again.
    pub list_changed: Arc<Notify>,
    /// The calls in flight on this session, for progress and questions.
    pub calls: Calls,
    /// The legacy session rmcp holds over HTTP, for calls posted directly
    /// ([`super::direct`]).
    pub seen: SessionSeen,
}

impl Handler {
    pub fn new(list_changed: Arc<Notify>) -> Self {
        Self {
            list_changed,
            calls: Calls::default(),
            seen: SessionSeen::default(),
        }
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // Form elicitation is declared so that upstreams may ask; each question is
        // relayed to the caller of the call it belongs to, or declined ([`Calls`]).
        let mut elicitation = ElicitationCapability::new();
        elicitation.form = Some(FormElicitationCapability::default());
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(elicitation);
        ClientConfig::new(
            capabilities,
            Implementation::new("mcc", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.list_changed.notify_one();
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        self.calls.progress(params);
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let origin = match ctx.extensions.get::<InboundStreamOrigin>() {
            Some(InboundStreamOrigin::OutboundRequest(id)) => Origin::Call(id.clone()),
            Some(InboundStreamOrigin::Unassociated) => Origin::Unassociated,
            None => Origin::Unknown,
        };
        Ok(self.calls.ask(origin, request).await)
    }
}

struct Route {
    progress_token: ProgressToken,
    events: EventSenders,
}

/// Where a question arrived, as the transport tells it.
enum Origin {
    /// On the response stream of this outbound request.
    Call(RequestId),
    /// On a stream tied to no request (the standing GET stream).
    Unassociated,
    /// The transport cannot tell (stdio).
    Unknown,
}

/// The calls in flight on one session, by request id (each holds its progress token).
/// Bounded by the upstream's `max_concurrency`.
#[derive(Clone, Default)]
pub struct Calls {
    routes: Arc<Mutex<HashMap<RequestId, Route>>>,
    /// Woken by each registration: a question may arrive before its call's route.
    registered: Arc<Notify>,
}

/// How long a question on a call's response stream waits for that call's route. rmcp
/// gives the request id only once the request is on its way, so an upstream that asks
/// at once can be quicker than the registration (seen under load); a question for a
/// call that has ended waits this long, then is declined.
const ROUTE_WAIT: Duration = Duration::from_secs(2);

/// Removes its call's route when dropped.
pub struct Registered {
    calls: Calls,
    id: RequestId,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.calls.routes.lock().expect("calls").remove(&self.id);
    }
}

impl Calls {
    /// Routes what the upstream sends about request `id` (whose `_meta.progressToken`
    /// is `progress_token`) to the returned events, until the guard is dropped.
    pub fn register(
        &self,
        id: RequestId,
        progress_token: ProgressToken,
    ) -> (Registered, CallEvents) {
        let (senders, events) = call_events();
        self.routes.lock().expect("calls").insert(
            id.clone(),
            Route {
                progress_token,
                events: senders,
            },
        );
        self.registered.notify_waiters();
        let guard = Registered {
            calls: self.clone(),
            id,
        };
        (guard, events)
    }

    /// Hands a progress notification to the call whose token it names; others (a stale
    /// or made-up token) are dropped.
    fn progress(&self, params: ProgressNotificationParam) {
        let routes = self.routes.lock().expect("calls");
        if let Some(route) = routes
            .values()
            .find(|r| r.progress_token == params.progress_token)
        {
            route.events.progress.send_replace(Some(params));
        }
    }

    /// Where a question from `origin` goes: its call's questions, once registered
    /// ([`ROUTE_WAIT`]).
    async fn target(&self, origin: &Origin) -> Option<mpsc::Sender<Question>> {
        let deadline = tokio::time::Instant::now() + ROUTE_WAIT;
        loop {
            // Listening before looking: a registration in between is not missed.
            let registered = self.registered.notified();
            tokio::pin!(registered);
            registered.as_mut().enable();
            {
                let routes = self.routes.lock().expect("calls");
                match origin {
                    Origin::Call(id) => {
                        if let Some(route) = routes.get(id) {
                            return Some(route.events.questions.clone());
                        }
                    }
                    // No stream says which call asks: only an unambiguous one is asked.
                    Origin::Unknown if routes.len() == 1 => {
                        return routes.values().next().map(|r| r.events.questions.clone());
                    }
                    Origin::Unknown | Origin::Unassociated => return None,
                }
            }
            tokio::time::timeout_at(deadline, registered).await.ok()?;
        }
    }

    /// Relays a question to its call ([`call_events::ask`]); declines one that belongs
    /// to no call.
    async fn ask(&self, origin: Origin, request: ElicitRequestParams) -> ElicitResult {
        match self.target(&origin).await {
            Some(target) => call_events::ask(&target, request).await,
            None => decline(),
        }
    }
}

/// A connected upstream.
pub type Session = RunningService<RoleClient, Handler>;

/// Why an upstream could not be reached or read. The text never holds a header value;
/// rmcp's and reqwest's texts may name the URL, so the full error is logged and callers
/// get [`ConnectError::public`].
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// `origin`: `ca_file <path>`, or `ca` (an MCPServer's, read from its ConfigMap or
    /// Secret).
    #[error("{origin}: {reason}")]
    Ca { origin: String, reason: String },
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    #[error("the connection failed: {0}")]
    Connect(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("tools/list failed: {0}")]
    List(String),
    #[error("the upstream lists more than {max} tools")]
    TooManyTools { max: usize },
    #[error("the upstream's tools/list has more than {max} pages")]
    TooManyPages { max: usize },
    /// Kubernetes mode: a header value could not be read from its Secret (the text names
    /// the Secret and key, never a value).
    #[error("header Secret: {0}")]
    Headers(String),
}

impl ConnectError {
    /// What a caller and the status may see: the kind of failure, no URL or body text.
    pub fn public(&self) -> String {
        match self {
            // The reason is ours (a size, "no PEM block", an I/O error's kind), never
            // the certificate's text.
            ConnectError::Ca { origin, reason } if origin == "ca" => {
                format!("its ca cannot be used: {reason}")
            }
            ConnectError::Ca { reason, .. } => format!("its ca_file cannot be used: {reason}"),
            ConnectError::Client(_) => "its HTTP client cannot be built".into(),
            ConnectError::Connect(_) => "the connection failed".into(),
            ConnectError::List(_) => "tools/list failed".into(),
            ConnectError::Headers(_) => "a header Secret or its ca cannot be read".into(),
            other => other.to_string(),
        }
    }
}

/// Connects to `spec`'s upstream: static headers marked sensitive (never logged by the
/// HTTP stack), the system roots plus `ca_file`, responses bounded.
pub async fn connect(
    spec: &UpstreamSpec,
    list_changed: Arc<Notify>,
) -> Result<Session, ConnectError> {
    // The process's one rustls provider (ring); a provider already installed stays.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut headers = reqwest::header::HeaderMap::new();
    for (name, value) in &spec.headers {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| ConnectError::Client(format!("header name: {e}")))?;
        let mut value = reqwest::header::HeaderValue::from_str(value)
            .map_err(|_| ConnectError::Client(format!("header {name}: not a valid value")))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    let mut builder = reqwest::Client::builder()
        .default_headers(headers)
        .connect_timeout(CONNECT_TIMEOUT)
        // An upstream cannot send us elsewhere (its credentials would follow).
        .redirect(reqwest::redirect::Policy::none());
    if let Some(certs) = ca_certificates(spec)? {
        builder = builder.tls_certs_merge(certs);
    }
    let client = builder
        .build()
        .map_err(|e| ConnectError::Client(e.to_string()))?;
    let config = StreamableHttpClientTransportConfig::with_uri(spec.url.clone())
        .max_json_response_size(MAX_RESPONSE_BYTES)
        .max_sse_event_size(MAX_RESPONSE_BYTES)
        .max_concurrent_requests(spec.max_concurrency);
    let handler = Handler::new(list_changed);
    let url = reqwest::Url::parse(&spec.url).map_err(|e| ConnectError::Client(e.to_string()))?;
    let observed = Observed {
        client,
        url,
        seen: handler.seen.clone(),
    };
    let transport = StreamableHttpClientTransport::with_client(observed, config);
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    };
    let session = tokio::time::timeout(
        CONNECT_TIMEOUT,
        handler.serve_with_lifecycle(transport, lifecycle),
    )
    .await
    .map_err(|_| ConnectError::Timeout(CONNECT_TIMEOUT))?
    .map_err(|e| ConnectError::Connect(e.to_string()))?;
    // rmcp caches list results by the server's TTL hints and serves a stale list when a
    // re-fetch fails: discovery must see the upstream as it is, and fail when it fails.
    session
        .set_response_cache_config(ClientCacheConfig::disabled())
        .await;
    Ok(session)
}

/// The CA certificates `spec` trusts beside the system roots: `ca_file` (file mode) or
/// `ca_pem` (Kubernetes mode), at most [`MAX_CA_BYTES`], at least one certificate.
pub fn ca_certificates(
    spec: &UpstreamSpec,
) -> Result<Option<Vec<reqwest::Certificate>>, ConnectError> {
    let (origin, pem) = match (&spec.ca_file, &spec.ca_pem) {
        (Some(path), _) => {
            let origin = format!("ca_file {}", path.display());
            let pem = read_bounded(path).map_err(|reason| ConnectError::Ca {
                origin: origin.clone(),
                reason,
            })?;
            (origin, pem)
        }
        (None, Some(pem)) => ("ca".to_string(), pem.as_bytes().to_vec()),
        (None, None) => return Ok(None),
    };
    let bad = |reason: String| ConnectError::Ca {
        origin: origin.clone(),
        reason,
    };
    if pem.len() > MAX_CA_BYTES {
        return Err(bad(format!("more than {MAX_CA_BYTES} bytes")));
    }
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| bad(format!("not a PEM certificate bundle ({e})")))?;
    if certs.is_empty() {
        return Err(bad("no PEM CERTIFICATE block in it".into()));
    }
    Ok(Some(certs))
}

/// A file's bytes, refused past [`MAX_CA_BYTES`] without reading further.
fn read_bounded(path: &std::path::Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    file.take(MAX_CA_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() > MAX_CA_BYTES {
        return Err(format!("more than {MAX_CA_BYTES} bytes"));
    }
    Ok(out)
}

/// Whether `session` can carry `notifications/tools/list_changed`: a legacy-generation
/// session (the `initialize` handshake, before 2026-07-28, which keeps a standing
/// stream) whose upstream announced `tools.listChanged`. A 2026-07-28 upstream has no
/// standing stream and is refreshed on a schedule.
pub fn announces_list_changed(session: &Session) -> bool {
    session.peer_info().is_some_and(|info| {
        info.protocol_version.has_initialize()
            && info
                .capabilities
                .tools
                .as_ref()
                .and_then(|t| t.list_changed)
                .unwrap_or(false)
    })
}

/// One `ping` on `session` within `timeout`: whether the session still answers (a
/// legacy session the upstream forgot is re-established by rmcp on the way, with a new
/// standing stream).
pub async fn ping(session: &Session, timeout: Duration) -> Result<(), ConnectError> {
    let request = rmcp::model::ClientRequest::PingRequest(Default::default());
    match tokio::time::timeout(timeout, session.peer().send_request(request)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(ConnectError::Connect(e.to_string())),
        Err(_) => Err(ConnectError::Timeout(timeout)),
    }
}

/// Lists every tool of the upstream, page by page, within `MAX_PAGES` pages and
/// `MAX_TOOLS` tools (more is an error: a partial listing would silently drop tools).
/// The caller bounds the time.
pub async fn list_tools(session: &Session) -> Result<Vec<Discovered>, ConnectError> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let page = session
            .list_tools(Some(params))
            .await
            .map_err(|e| ConnectError::List(e.to_string()))?;
        if out.len() + page.tools.len() > MAX_TOOLS {
            return Err(ConnectError::TooManyTools { max: MAX_TOOLS });
        }
        out.extend(page.tools.into_iter().map(discovered));
        match page.next_cursor {
            Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
            _ => return Ok(out),
        }
    }
    Err(ConnectError::TooManyPages { max: MAX_PAGES })
}

/// rmcp's tool as the catalog's plain [`Discovered`].
fn discovered(t: rmcp::model::Tool) -> Discovered {
    let hints = t.annotations.unwrap_or_default();
    Discovered {
        name: t.name.to_string(),
        description: t.description.map(|d| d.to_string()),
        input_schema: Value::Object((*t.input_schema).clone()),
        output_schema: t.output_schema.map(|s| Value::Object((*s).clone())),
        annotations: Annotations {
            title: t.title.or(hints.title),
            read_only_hint: hints.read_only_hint,
            destructive_hint: hints.destructive_hint,
            idempotent_hint: hints.idempotent_hint,
            open_world_hint: hints.open_world_hint,
        },
    }
}

/// How long one discovery (connect and every page) may take.
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// One discovery on a connection of its own, closed after: connect, list every page,
/// all within [`DISCOVERY_TIMEOUT`]. The operator's form (it keeps no session between
/// refreshes); the gateway's file mode keeps its session for calls and `list_changed`.
pub async fn discover_once(spec: &UpstreamSpec) -> Result<Vec<Discovered>, ConnectError> {
    tokio::time::timeout(DISCOVERY_TIMEOUT, async {
        let session = connect(spec, Arc::new(Notify::new())).await?;
        let listed = list_tools(&session).await;
        session.cancellation_token().cancel();
        listed
    })
    .await
    .map_err(|_| ConnectError::Timeout(DISCOVERY_TIMEOUT))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ElicitationAction, ElicitationSchema, NumberOrString};

    fn question() -> ElicitRequestParams {
        let schema = serde_json::json!({"type": "object", "properties": {"n": {"type": "string"}}});
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: "name?".into(),
            requested_schema: ElicitationSchema::from_json_schema(
                schema.as_object().cloned().unwrap(),
            )
            .unwrap(),
        }
    }

    /// An upstream that asks before its call's route is registered still reaches the
    /// call (rmcp gives the id only after sending); one for no call is declined.
    #[tokio::test]
    async fn a_question_quicker_than_its_registration_reaches_its_call() {
        let calls = Calls::default();
        let id = RequestId::Number(7);
        let asking = tokio::spawn({
            let calls = calls.clone();
            let id = id.clone();
            async move { calls.ask(Origin::Call(id), question()).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let token = ProgressToken(NumberOrString::Number(1));
        let (_route, mut events) = calls.register(id, token);
        let (_, answer) = tokio::time::timeout(Duration::from_secs(5), events.questions.recv())
            .await
            .expect("the question reaches the call")
            .expect("the question arrives");
        answer
            .send(ElicitResult::new(ElicitationAction::Accept))
            .unwrap();
        assert_eq!(asking.await.unwrap().action, ElicitationAction::Accept);

        let stray = calls
            .ask(Origin::Call(RequestId::Number(8)), question())
            .await;
        assert_eq!(stray.action, ElicitationAction::Decline);
    }
}
