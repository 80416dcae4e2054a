//! `--upstream-namespaces` and `--upstream-allowed-urls`: where `MCPServer`s may be
//! declared, and the egress allow-list of their URLs. The rule that applies both is
//! [`crate::policy::Policy::refused_upstream`]; the chart renders the same list into the
//! operator's and the gateway's NetworkPolicy egress.

use mcc_catalog::upstream::url_host;

use super::{SettingsError, error, given};
use crate::policy::PodScope;

const NAMESPACES: (&str, &str) = ("--upstream-namespaces", "MCC_UPSTREAM_NAMESPACES");
const URLS: (&str, &str) = ("--upstream-allowed-urls", "MCC_UPSTREAM_ALLOWED_URLS");

/// At most this many allow-list entries.
const MAX_ENTRIES: usize = 256;

pub(super) fn namespaces(value: &Option<String>) -> Result<PodScope, SettingsError> {
    super::pods::namespace_scope(value, NAMESPACES)
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
        let e = namespaces(&Some("team-a,*".into())).unwrap_err();
        assert_eq!(e.flag, "--upstream-namespaces");
    }
}
