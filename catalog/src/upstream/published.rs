//! Kubernetes mode's upstream table and egress rule: how the catalog document records
//! an `MCPServer` for the gateways ([`PublishedUpstream`]: where calls go, which Secret
//! keys hold the headers), and the platform team's egress allow-list
//! ([`url_allowed`]), which the operator applies before it connects to anything.

use serde::{Deserialize, Serialize};

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
