//! Kubernetes mode's upstream table and egress rule: how the catalog document records
//! an `MCPServer` for the gateways ([`PublishedUpstream`]: where calls go, which Secret
//! keys hold the headers, what of the caller's session the calls carry), and the platform team's egress allow-list
//! ([`url_allowed`]), which the operator applies before it connects to anything.

use serde::{Deserialize, Serialize};

use super::session_context::{self, SessionContext};

/// An upstream MCP server as the catalog document publishes it (Kubernetes mode: an
/// `MCPServer` the operator discovered). Its tools are in the document's `tools` with
/// `kind: mcp` and `server` = [`Self::server`]; a gateway sends their `tools/call` to
/// [`Self::url`], with each header's value read from its Secret at call time. No
/// credential is in here, only where to find it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedUpstream {
    /// `namespace/name` of the MCPServer.
    pub server: String,
    /// Where header Secrets are read.
    pub namespace: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HeaderRef>,
    /// Where the CA certificates (PEM) trusted for this upstream are, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<CaRef>,
    /// Send the caller-independent projected ServiceAccount token of this audience
    /// (`Authorization: Bearer`, read from [`token_file`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_audience: Option<String>,
    /// What of the caller's session each call carries (`spec.sessionContext`, as the
    /// operator admitted it); off when absent.
    #[serde(
        default,
        skip_serializing_if = "SessionContext::is_off",
        deserialize_with = "session_context::lenient"
    )]
    pub session_context: SessionContext,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    pub max_concurrency: usize,
    /// `false`: the last discovery failed; the tools are the last good ones and a call
    /// fails at once as unavailable.
    pub available: bool,
    /// Why it is unavailable (the failure's kind, never a URL or an upstream's text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A header whose value is a key of a Secret in the upstream's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeaderRef {
    pub name: String,
    pub secret: String,
    pub key: String,
}

/// Where the kubelet projects the ServiceAccount token of `audience` under `dir` (the
/// chart mounts one `serviceAccountToken` projection per approved audience at the same
/// path: `<dir>/<first 16 hex digits of SHA-256(audience)>/token`, in
/// `mcc.upstreamTokenPath`). The operator (discovery) and the gateway (calls) each read
/// their own.
pub fn token_file(dir: &std::path::Path, audience: &str) -> std::path::PathBuf {
    use sha2::Digest;
    let hash = hex::encode(sha2::Sha256::digest(audience.as_bytes()));
    dir.join(&hash[..16]).join("token")
}

/// Where projected upstream tokens are mounted (`MCC_UPSTREAM_TOKEN_DIR`; the chart's
/// default path).
pub fn token_dir() -> std::path::PathBuf {
    std::env::var_os("MCC_UPSTREAM_TOKEN_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(
            || std::path::PathBuf::from("/var/run/secrets/mcc.dev/upstream-tokens"),
            std::path::PathBuf::from,
        )
}

/// The largest projected token read (a JWT; Kubernetes' are ~1 KiB).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The token of [`token_file`], checked: at most [`MAX_TOKEN_BYTES`], one line of
/// visible ASCII (it becomes a header value). The error never holds the token.
pub fn read_token(dir: &std::path::Path, audience: &str) -> Result<String, String> {
    use std::io::Read;
    let path = token_file(dir, audience);
    let mut text = String::new();
    std::fs::File::open(&path)
        .and_then(|f| f.take(MAX_TOKEN_BYTES as u64 + 1).read_to_string(&mut text))
        .map_err(|e| {
            format!(
                "no projected ServiceAccount token for audience '{audience}' at {} ({e}; chart value upstreams.tokenAudiences)",
                path.display()
            )
        })?;
    let token = text.trim();
    if text.len() > MAX_TOKEN_BYTES
        || token.is_empty()
        || !token.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(format!(
            "the projected token at {} is not a token (empty, over {MAX_TOKEN_BYTES} bytes, or not one line)",
            path.display()
        ));
    }
    Ok(token.to_string())
}

/// A key of a ConfigMap or Secret in the upstream's namespace holding PEM CA
/// certificates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaRef {
    /// `true`: a Secret; else a ConfigMap.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secret: bool,
    pub name: String,
    pub key: String,
}

/// Whether `url` is allowed by the platform team's egress allow-list: an entry with a
/// scheme (`https://api.example.com/mcp`) is a prefix that must end at a path boundary
/// (`/`, `?`, or the URL's end), an entry without one is a host (`mcp.internal`,
/// `*.example.com` for its subdomains) matched against the URL's host whatever the port
/// and path. A URL [`url_host`] does not accept matches nothing.
pub fn url_allowed(allowed: &[String], url: &str) -> bool {
    let Some(host) = url_host(url) else {
        return false;
    };
    allowed.iter().any(|entry| {
        let entry = entry.to_ascii_lowercase();
        if entry.contains("://") {
            let lower = url.to_ascii_lowercase();
            lower.strip_prefix(entry.as_str()).is_some_and(|rest| {
                entry.ends_with('/')
                    || rest.is_empty()
                    || rest.starts_with('/')
                    || rest.starts_with('?')
            }) && url_host(&entry).is_some_and(|h| h == host)
        } else if let Some(suffix) = entry.strip_prefix("*.") {
            host.len() > suffix.len() + 1
                && host.ends_with(suffix)
                && host[..host.len() - suffix.len()].ends_with('.')
        } else {
            host == entry
        }
    })
}

/// The lowercased host of an `http(s)://` URL. `None` — allowed by no entry — for
/// another scheme, no host, userinfo (`user@host` hides the real host from a reader), a
/// host of anything but letters, digits, `.`, `-`, `:` and brackets (an HTTP client reads
/// `http://evil\.ok.com` as host `evil`), and `..`, `\` or `%2e` anywhere (a prefix
/// `https://h/mcp` must not admit `https://h/mcp/../admin`).
pub fn url_host(url: &str) -> Option<String> {
    let lower = url.to_ascii_lowercase();
    if lower.contains("..") || lower.contains('\\') || lower.contains("%2e") {
        return None;
    }
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let plain = |c: char| c.is_ascii_alphanumeric() || ".-:[]".contains(c);
    if authority.is_empty() || !authority.chars().all(plain) {
        return None;
    }
    let host = if let Some(v6) = authority.strip_prefix('[') {
        format!("[{}]", v6.split(']').next()?)
    } else {
        authority.split(':').next().unwrap_or_default().to_string()
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}
