//! `--upstream-namespaces`, `--upstream-allowed-urls`, `--upstream-token-audiences` and
//! `--upstream-identity-namespaces`: where `MCPServer`s may be declared, the egress
//! allow-list of their URLs, the audiences of projected ServiceAccount tokens they may
//! ask for, and where they may send the caller's identity. The rules that apply them are
//! [`crate::policy::Policy::refused_upstream`] and
//! [`crate::policy::Policy::may_send_identity`]; the chart renders the URL list into the
//! operator's and the gateway's NetworkPolicy egress.

use mcc_catalog::upstream::url_host;

use super::{SettingsError, error, given};
use crate::policy::PodScope;

const NAMESPACES: (&str, &str) = ("--upstream-namespaces", "MCC_UPSTREAM_NAMESPACES");
const URLS: (&str, &str) = ("--upstream-allowed-urls", "MCC_UPSTREAM_ALLOWED_URLS");
const AUDIENCES: (&str, &str) = ("--upstream-token-audiences", "MCC_UPSTREAM_TOKEN_AUDIENCES");
const IDENTITY: (&str, &str) = (
    "--upstream-identity-namespaces",
    "MCC_UPSTREAM_IDENTITY_NAMESPACES",
);

/// Audiences the Kubernetes API server accepts by default (kubeadm, k3s, kind, EKS,
/// GKE, AKS); the running cluster's own are added from this Pod's token
/// ([`api_server_audiences`]).
const API_SERVER_AUDIENCES: [&str; 4] = [
    "https://kubernetes.default.svc",
    "https://kubernetes.default.svc.cluster.local",
    "kubernetes.default.svc",
    "kubernetes",
];

/// The audiences this cluster's API server accepts: the well-known defaults, and the
/// `aud` of the operator's own default ServiceAccount token (issued for the API server)
/// when it runs in a Pod.
pub(super) fn api_server_audiences() -> Vec<String> {
    let mut out: Vec<String> = API_SERVER_AUDIENCES.iter().map(|a| a.to_string()).collect();
    let token = std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/token");
    out.extend(
        token
            .ok()
            .map(|t| token_audiences_of(&t))
            .unwrap_or_default(),
    );
    out
}

/// The `aud` of a JWT (not verified: the token is our own, read to learn what the API
/// server accepts).
fn token_audiences_of(token: &str) -> Vec<String> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1).unwrap_or_default();
    let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload) else {
        return Vec::new();
    };
    match serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.get("aud").cloned())
    {
        Some(serde_json::Value::String(a)) => vec![a],
        Some(serde_json::Value::Array(list)) => list
            .iter()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

/// The approved audiences: each 1 to 253 visible characters, and none that the API
/// server (`api_server`) or the gateway (`gateway`) accepts, since a tenant's upstream
/// would receive a token either would take.
pub(super) fn token_audiences(
    value: &Option<String>,
    gateway: &Option<String>,
    api_server: &[String],
) -> Result<Vec<String>, SettingsError> {
    let Some(text) = given(value) else {
        return Ok(Vec::new());
    };
    let gateway = given(gateway).unwrap_or("mcc-gateway");
    let mut out = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        if entry.len() > 253 || !entry.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(error(
                AUDIENCES,
                format!("'{entry}' is not an audience (1 to 253 visible characters)"),
            ));
        }
        if api_server.iter().any(|a| a == entry) {
            return Err(error(
                AUDIENCES,
                format!(
                    "'{entry}' is an audience the Kubernetes API server accepts: an upstream would receive a token for the cluster's API"
                ),
            ));
        }
        if entry == gateway {
            return Err(error(
                AUDIENCES,
                format!(
                    "'{entry}' is the gateway's own audience (MCC_GATEWAY_TOKEN_AUDIENCE): an upstream would receive a token the gateway accepts"
                ),
            ));
        }
        out.push(entry.to_string());
    }
    if out.len() > MAX_ENTRIES {
        return Err(error(AUDIENCES, format!("at most {MAX_ENTRIES} entries")));
    }
    Ok(out)
}

/// At most this many allow-list entries.
const MAX_ENTRIES: usize = 256;

pub(super) fn namespaces(value: &Option<String>) -> Result<PodScope, SettingsError> {
    super::pods::namespace_scope(value, NAMESPACES)
}

/// Namespace names only: no `*` (identity is allowed namespace by namespace).
pub(super) fn identity_namespaces(
    value: &Option<String>,
) -> Result<std::collections::BTreeSet<String>, SettingsError> {
    Ok(super::namespace_list(value, IDENTITY)?.unwrap_or_default())
}

/// Each entry is an `http(s)://host[:port][/path]` prefix, a host name, or `*.` and a
/// domain (its subdomains). A bare `*` (any host) is refused: an allow-list that allows
/// everything is no allow-list, and would let a tenant reach the cluster's internals.
pub(super) fn allowed_urls(value: &Option<String>) -> Result<Vec<String>, SettingsError> {
    let Some(text) = given(value) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let host_ok = |h: &str| {
            !h.is_empty()
                && h.len() <= 253
                && h.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                })
        };
        let ok = if entry.contains("://") {
            url_host(entry).is_some()
        } else if let Some(domain) = entry.strip_prefix("*.") {
            host_ok(domain)
        } else {
            host_ok(entry)
        };
        if !ok {
            return Err(error(
                URLS,
                format!(
                    "'{entry}' is neither an http(s):// URL prefix nor a host name (e.g. https://api.example.com/mcp, mcp.internal, *.example.com)"
                ),
            ));
        }
        out.push(entry.to_ascii_lowercase());
    }
    if out.len() > MAX_ENTRIES {
        return Err(error(URLS, format!("at most {MAX_ENTRIES} entries")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(text: &str) -> Result<Vec<String>, SettingsError> {
        allowed_urls(&Some(text.into()))
    }

    #[test]
    fn entries_are_prefixes_or_hosts_and_errors_name_the_flag() {
        assert_eq!(
            urls("https://API.example.com/mcp, mcp.internal,*.vendor.io").unwrap(),
            ["https://api.example.com/mcp", "mcp.internal", "*.vendor.io"]
        );
        assert!(urls("").unwrap().is_empty());
        for bad in ["*", "ftp://x", "http://a@b/", "bad host", "*.", "a..b"] {
            let e = urls(bad).unwrap_err();
            assert_eq!((e.flag, e.env), URLS, "{bad}");
            assert!(e.message.contains(bad.trim()), "{bad}: {}", e.message);
        }
        assert_eq!(namespaces(&Some("*".into())).unwrap(), PodScope::All);

        let api = api_server_audiences();
        let audiences = |text: &str| token_audiences(&Some(text.into()), &None, &api);
        assert_eq!(
            audiences("mcp.vendor.example, https://idp.example/x").unwrap(),
            ["mcp.vendor.example", "https://idp.example/x"]
        );
        for bad in [
            "https://kubernetes.default.svc.cluster.local",
            "kubernetes.default.svc",
            "mcc-gateway",
            "two words",
        ] {
            let e = audiences(&format!("ok.example,{bad}")).unwrap_err();
            assert_eq!((e.flag, e.env), AUDIENCES, "{bad}");
            assert!(e.message.contains(bad), "{bad}: {}", e.message);
        }
        let e = token_audiences(&Some("my-gw".into()), &Some("my-gw".into()), &api).unwrap_err();
        assert!(
            e.message.contains("the gateway's own audience"),
            "{}",
            e.message
        );
        // The running cluster's own audience, from this Pod's token.
        let token = format!(
            "h.{}.s",
            base64::Engine::encode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                r#"{"aud":["https://oidc.eks.example/id/X","sts.example"]}"#
            )
        );
        assert_eq!(
            token_audiences_of(&token),
            ["https://oidc.eks.example/id/X", "sts.example"]
        );
        let e = namespaces(&Some("team-a,*".into())).unwrap_err();
        assert_eq!(e.flag, "--upstream-namespaces");

        let identity = identity_namespaces(&Some("team-a, team-b".into())).unwrap();
        assert_eq!(identity, ["team-a".to_string(), "team-b".into()].into());
        assert!(identity_namespaces(&None).unwrap().is_empty());
        let e = identity_namespaces(&Some("team-a,*".into())).unwrap_err();
        assert_eq!((e.flag, e.env), IDENTITY);
    }
}
