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

use std::sync::Arc;
use std::time::Duration;

use crate::annotations::Annotations;
use crate::upstream::{Discovered, MAX_CA_BYTES, MAX_PAGES, MAX_TOOLS, UpstreamSpec};
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, PaginatedRequestParams, ProtocolVersion,
};
use rmcp::service::{ClientCacheConfig, NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt};
use serde_json::Value;
use tokio::sync::Notify;

/// The largest response (JSON body or SSE event) taken from an upstream.
pub const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// How long connecting (handshake included) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The client side of a session: what the gateway tells an upstream about itself, and
/// what it does with the upstream's notifications.
#[derive(Clone)]
pub struct Handler {
    /// Woken by `notifications/tools/list_changed`: discovery runs again.
    pub list_changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mcc", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.list_changed.notify_one();
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
    let transport = StreamableHttpClientTransport::with_client(client, config);
    let handler = Handler { list_changed };
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
