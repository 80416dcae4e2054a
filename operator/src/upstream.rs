//! Discovery of `MCPServer` upstreams: what the operator last listed of each upstream
//! ([`Discovery`], kept in the [`Context`]'s [`Discoveries`]), the `MCPServer` → catalog
//! [`UpstreamSpec`] rule ([`spec_of`]), and one discovery ([`discover`]: header values
//! from Secrets, then the catalog crate's client, the same one the gateway's file mode
//! uses). Turning a listing into tools is [`mcc_catalog::upstream::convert`], applied
//! where the catalog is assembled ([`crate::assemble::upstreams`]), so a changed
//! `groups`, `prefix` or filter takes effect without asking the upstream again.
//!
//! Who reads a header Secret and the `ca` ConfigMap or Secret: the operator here
//! (discovery), the gateway at call time. Header values are never stored beyond the one
//! connection, never in a status, an Event, the catalog document or a log line.
//!
//! [`Context`]: crate::controller::Context

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Client};
use mcc_catalog::crd::MCPServer;
use mcc_catalog::upstream::session_context::SessionContext;
use mcc_catalog::upstream::{self, CaRef, Discovered, MAX_CA_BYTES, UpstreamSpec};

use crate::convert::Invalid;

/// Why a discovery ran: shown on the status (`lastRefreshReason`) and as a metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshCause {
    /// The first discovery of this MCPServer (or since the operator started).
    Initial,
    /// Its URL or spec changed.
    SpecChanged,
    /// `refreshSeconds` passed.
    Schedule,
    /// The previous discovery failed (retried with backoff).
    Retry,
    /// The upstream sent `notifications/tools/list_changed` on its standing stream.
    ListChanged,
    /// The standing stream was opened again after it was lost.
    StreamReopened,
}

impl RefreshCause {
    pub fn as_str(self) -> &'static str {
        match self {
            RefreshCause::Initial => "Initial",
            RefreshCause::SpecChanged => "SpecChanged",
            RefreshCause::Schedule => "Schedule",
            RefreshCause::Retry => "Retry",
            RefreshCause::ListChanged => "ListChanged",
            RefreshCause::StreamReopened => "StreamReopened",
        }
    }

    /// Why a discovery that is due (not asked for by the stream) runs now.
    pub fn of_due(server: &MCPServer, previous: Option<&Discovery>) -> Self {
        match previous {
            None => RefreshCause::Initial,
            Some(p) if p.url != server.spec.url || p.generation != server.metadata.generation => {
                RefreshCause::SpecChanged
            }
            Some(p) if !p.available => RefreshCause::Retry,
            Some(_) => RefreshCause::Schedule,
        }
    }
}

/// What the operator last saw of one upstream.
#[derive(Debug, Clone)]
pub struct Discovery {
    /// The URL the listing came from: a listing of another URL is never published under
    /// a changed `spec.url`.
    pub url: String,
    /// The MCPServer generation discovered last (a changed spec is discovered again).
    pub generation: Option<i64>,
    /// The last good listing (empty before the first success).
    pub listed: Vec<Discovered>,
    /// Whether the last discovery succeeded.
    pub available: bool,
    /// The last failure's kind (no URL, header or upstream text).
    pub last_error: Option<String>,
    /// When the last discovery succeeded (RFC 3339).
    pub last_refresh: Option<String>,
    /// Why the last successful discovery ran.
    pub refreshed_by: Option<RefreshCause>,
    /// Whether a discovery ever succeeded for `url`.
    pub listed_ok: bool,
    /// When the last attempt ended.
    pub attempted: Instant,
    /// Consecutive failed attempts (the retry backs off).
    pub failures: u32,
}

/// `namespace/name` → its discovery. Shared by the MCPServer reconciler (writer) and the
/// publisher (reader).
pub type Discoveries = Arc<RwLock<BTreeMap<String, Discovery>>>;

/// The catalog's upstream spec of an MCPServer; `headers` are the values read from the
/// Secrets (empty when only converting: values never shape tools). The spec's `name`
/// is `namespace/name`, the `server` of every tool taken from it.
pub fn spec_of(
    server: &MCPServer,
    headers: BTreeMap<String, String>,
) -> Result<UpstreamSpec, Invalid> {
    let ns = server.metadata.namespace.clone().unwrap_or_default();
    let name = server.metadata.name.clone().unwrap_or_default();
    let spec = &server.spec;
    let invalid = |field: &str, message: &str| Invalid {
        field: field.into(),
        message: message.into(),
    };
    if upstream::url_host(&spec.url).is_none() {
        return Err(invalid(
            "url",
            "expected an http:// or https:// URL with a plain host name (no user@, \\, .. or %2e)",
        ));
    }
    if !spec.prefix.is_empty() && upstream::normalize(&spec.prefix) != spec.prefix {
        return Err(invalid(
            "prefix",
            "only letters, digits, '_' and '-' may be used in a prefix",
        ));
    }
    if let Some(t) = spec.timeout
        && !(t.is_finite() && t > 0.0)
    {
        return Err(invalid("timeout", "expected a positive number of seconds"));
    }
    ca_ref(server)?;
    if let Some(t) = &spec.service_account_token {
        if !spec.url.starts_with("https://") {
            return Err(invalid(
                "serviceAccountToken",
                "a token is sent to an https:// url only",
            ));
        }
        if t.audience.is_empty() {
            return Err(invalid(
                "serviceAccountToken.audience",
                "expected an audience",
            ));
        }
        if spec
            .headers
            .iter()
            .any(|h| h.name.eq_ignore_ascii_case("authorization"))
        {
            return Err(invalid(
                "serviceAccountToken",
                "a header named Authorization is set too: give one of the two",
            ));
        }
    }
    let rate_limit = crate::convert::rate_limit(spec.rate_limit.as_ref())?;
    let session_context = session_context_of(server)?;
    Ok(UpstreamSpec {
        name: format!("{ns}/{name}"),
        url: spec.url.clone(),
        command: None,
        groups: mcc_catalog::key::union_groups(&[], &spec.groups),
        prefix: spec.prefix.clone(),
        include: spec.include.clone(),
        exclude: spec.exclude.clone(),
        headers,
        ca_file: None,
        ca_pem: None,
        timeout: spec.timeout,
        max_concurrency: spec
            .max_concurrency
            .map_or(upstream::DEFAULT_CONCURRENCY, |c| c.max(1) as usize),
        refresh: spec.refresh_seconds.unwrap_or(upstream::DEFAULT_REFRESH),
        cache_ttl: spec.cache_ttl,
        rate_limit,
        session_context,
        source: format!("MCPServer {ns}/{name}"),
    })
}

/// `spec.sessionContext` as the catalog's [`SessionContext`], checked by its one rule
/// (variable names; the field is named as in the MCPServer). Off when absent.
pub fn session_context_of(server: &MCPServer) -> Result<SessionContext, Invalid> {
    let Some(declared) = &server.spec.session_context else {
        return Ok(SessionContext::default());
    };
    let context = SessionContext {
        identity: declared.identity,
        variables: declared.variables.clone(),
    };
    context.check().map_err(|(field, message)| Invalid {
        field: field.replacen("session_context", "sessionContext", 1),
        message,
    })?;
    Ok(context)
}

/// Where `server`'s CA certificates are (`spec.ca`), checked: exactly one source, and an
/// https:// URL (the CRD's rules, applied again to objects stored before them).
pub fn ca_ref(server: &MCPServer) -> Result<Option<CaRef>, Invalid> {
    let Some(ca) = &server.spec.ca else {
        return Ok(None);
    };
    let invalid = |message: &str| Invalid {
        field: "ca".into(),
        message: message.into(),
    };
    if !server.spec.url.starts_with("https://") {
        return Err(invalid("a CA applies to an https:// url only"));
    }
    match (&ca.config_map_key_ref, &ca.secret_key_ref) {
        (Some(r), None) => Ok(Some(CaRef {
            secret: false,
            name: r.name.clone(),
            key: r.key.clone(),
        })),
        (None, Some(r)) => Ok(Some(CaRef {
            secret: true,
            name: r.name.clone(),
            key: r.key.clone(),
        })),
        _ => Err(invalid(
            "give exactly one of configMapKeyRef and secretKeyRef",
        )),
    }
}

/// The PEM text of `server`'s CA, read from its ConfigMap or Secret now (at most
/// [`MAX_CA_BYTES`]; the certificates themselves are checked by the client).
async fn ca_value(client: &Client, server: &MCPServer) -> Result<Option<String>, DiscoveryError> {
    let Some(ca) = ca_ref(server).map_err(|e| DiscoveryError::Invalid(e.to_string()))? else {
        return Ok(None);
    };
    let ns = server.metadata.namespace.as_deref().unwrap_or_default();
    let kind = if ca.secret { "Secret" } else { "ConfigMap" };
    let problem = |p: String| DiscoveryError::Ca {
        problem: format!("{kind} {ns}/{} key {}: {p}", ca.name, ca.key),
    };
    let forbidden = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 403);
    let rbac = "the operator may not read it (chart values upstreams.secretNames / upstreams.caConfigMapNames, or the namespace is not in upstreams.namespaces)";
    let bytes: Option<Vec<u8>> = if ca.secret {
        let api: Api<Secret> = Api::namespaced(client.clone(), ns);
        match api.get_opt(&ca.name).await {
            Ok(Some(s)) => s.data.and_then(|mut d| d.remove(&ca.key)).map(|b| b.0),
            Ok(None) => return Err(problem("no such Secret".into())),
            Err(e) if forbidden(&e) => return Err(problem(rbac.into())),
            Err(e) => return Err(DiscoveryError::Kube(e)),
        }
    } else {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        match api.get_opt(&ca.name).await {
            Ok(Some(c)) => c
                .data
                .and_then(|mut d| d.remove(&ca.key))
                .map(String::into_bytes)
                .or_else(|| {
                    c.binary_data
                        .and_then(|mut d| d.remove(&ca.key))
                        .map(|b| b.0)
                }),
            Ok(None) => return Err(problem("no such ConfigMap".into())),
            Err(e) if forbidden(&e) => return Err(problem(rbac.into())),
            Err(e) => return Err(DiscoveryError::Kube(e)),
        }
    };
    let bytes = bytes.ok_or_else(|| problem("no such key".into()))?;
    if bytes.len() > MAX_CA_BYTES {
        return Err(problem(format!("more than {MAX_CA_BYTES} bytes")));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| problem("not PEM text (UTF-8)".into()))
}

/// Why a discovery failed: shown on the status as [`DiscoveryError::public`].
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("{0}")]
    Invalid(String),
    #[error("header {header}: {problem}")]
    Header { header: String, problem: String },
    #[error("ca: {problem}")]
    Ca { problem: String },
    #[error("serviceAccountToken: {problem}")]
    Token { problem: String },
    #[error("Kubernetes API: {0}")]
    Kube(#[source] kube::Error),
    #[error(transparent)]
    Upstream(#[from] upstream::client::ConnectError),
}

impl DiscoveryError {
    /// The failure's kind, as a metric label (a fixed set).
    pub fn kind(&self) -> &'static str {
        use upstream::client::ConnectError as C;
        match self {
            DiscoveryError::Invalid(_) => "invalid",
            DiscoveryError::Header { .. } => "header_secret",
            DiscoveryError::Ca { .. } => "ca",
            DiscoveryError::Token { .. } => "token",
            DiscoveryError::Kube(_) => "kube",
            DiscoveryError::Upstream(e) => match e {
                C::Ca { .. } => "ca",
                C::Client(_) => "client",
                C::Connect(_) => "connect",
                C::Timeout(_) => "timeout",
                C::List(_) => "list",
                C::TooManyTools { .. } => "too_many_tools",
                C::TooManyPages { .. } => "too_many_pages",
                C::Headers(_) => "header_secret",
            },
        }
    }
}

impl DiscoveryError {
    /// The status text: names the header, Secret and key, never a value; for upstream
    /// failures only their kind (a transport error may quote the URL's query).
    pub fn public(&self) -> String {
        match self {
            DiscoveryError::Upstream(e) => e.public(),
            DiscoveryError::Kube(_) => {
                "the Kubernetes API failed while reading a header Secret".into()
            }
            other => other.to_string(),
        }
    }
}

/// The header values of `server`, each from its Secret key in the server's namespace.
async fn header_values(
    client: &Client,
    server: &MCPServer,
) -> Result<BTreeMap<String, String>, DiscoveryError> {
    let ns = server.metadata.namespace.as_deref().unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    let mut out = BTreeMap::new();
    for h in &server.spec.headers {
        let where_ = format!(
            "Secret {ns}/{} key {}",
            h.secret_key_ref.name, h.secret_key_ref.key
        );
        let problem = |p: &str| DiscoveryError::Header {
            header: h.name.clone(),
            problem: format!("{where_}: {p}"),
        };
        let secret = match api.get_opt(&h.secret_key_ref.name).await {
            Ok(Some(s)) => s,
            Ok(None) => return Err(problem("no such Secret")),
            Err(kube::Error::Api(e)) if e.code == 403 => {
                return Err(problem(
                    "the operator may not read it (chart value upstreams.secretNames, or the namespace is not in upstreams.namespaces)",
                ));
            }
            Err(e) => return Err(DiscoveryError::Kube(e)),
        };
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(&h.secret_key_ref.key))
            .ok_or_else(|| problem("no such key"))?;
        let value = std::str::from_utf8(&bytes.0)
            .ok()
            .filter(|v| !v.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0))
            .ok_or_else(|| problem("not a valid header value (UTF-8, no line breaks)"))?;
        out.insert(h.name.clone(), value.to_string());
    }
    Ok(out)
}

/// The spec to connect to `server` with: its header values and CA read from their
/// Secrets and ConfigMap now.
pub async fn spec_with_headers(
    client: &Client,
    server: &MCPServer,
) -> Result<UpstreamSpec, DiscoveryError> {
    let mut headers = header_values(client, server).await?;
    if let Some(t) = &server.spec.service_account_token {
        let token = upstream::read_token(&upstream::token_dir(), &t.audience)
            .map_err(|problem| DiscoveryError::Token { problem })?;
        headers.insert("Authorization".into(), format!("Bearer {token}"));
    }
    let mut spec = spec_of(server, headers).map_err(|e| DiscoveryError::Invalid(e.to_string()))?;
    spec.ca_pem = ca_value(client, server).await?;
    Ok(spec)
}

/// One discovery of `server`: its header values, then connect and list (bounded by the
/// client: [`upstream::client::DISCOVERY_TIMEOUT`], pages, tools, response size).
pub async fn discover(
    client: &Client,
    server: &MCPServer,
) -> Result<Vec<Discovered>, DiscoveryError> {
    let spec = spec_with_headers(client, server).await?;
    Ok(upstream::client::discover_once(&spec).await?)
}

/// `previous` updated with one attempt's `result` for `server`, run for `cause`.
pub fn record(
    previous: Option<&Discovery>,
    server: &MCPServer,
    result: Result<Vec<Discovered>, DiscoveryError>,
    cause: RefreshCause,
) -> Discovery {
    let url = server.spec.url.clone();
    // A listing of another URL is dropped: its tools came from elsewhere.
    let kept = previous.filter(|p| p.url == url);
    let generation = server.metadata.generation;
    match result {
        Ok(listed) => Discovery {
            url,
            generation,
            listed,
            available: true,
            last_error: None,
            last_refresh: Some(k8s_openapi::jiff::Timestamp::now().to_string()),
            refreshed_by: Some(cause),
            listed_ok: true,
            attempted: Instant::now(),
            failures: 0,
        },
        Err(e) => Discovery {
            url,
            generation,
            listed: kept.map(|p| p.listed.clone()).unwrap_or_default(),
            available: false,
            last_error: Some(e.public()),
            last_refresh: kept.and_then(|p| p.last_refresh.clone()),
            refreshed_by: kept.and_then(|p| p.refreshed_by),
            listed_ok: kept.is_some_and(|p| p.listed_ok),
            attempted: Instant::now(),
            failures: previous.map_or(0, |p| p.failures) + 1,
        },
    }
}

#[cfg(test)]
#[path = "upstream_tests.rs"]
mod tests;
