//! What keeps a web page from using the REST routes through a caller's browser, as rmcp
//! keeps it from `/mcp`: the `Host` must be one of `server.allowed_hosts` (against DNS
//! rebinding), a browser `Origin` one of `server.allowed_origins` when that list is set,
//! and a `POST` must say `Content-Type: application/json` (a page cannot send that
//! cross-site without a CORS preflight, which this gateway never grants). The matching
//! rules are those rmcp applies to `/mcp` (it does not export them): an allowed host
//! without a port admits any port; an allowed origin is `scheme://host[:port]`, `:*` for
//! any port, no port for any port, or `null`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// The allow-lists of `server.*`.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    pub allowed_hosts: Arc<[String]>,
    pub allowed_origins: Arc<[String]>,
}

/// The middleware: refuses (403, or 415 for a POST that is not JSON) before any handler.
pub async fn check(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    match guard.admits(request.method(), request.uri(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(e) => {
            tracing::warn!(reason = %e, "REST request refused");
            e.into_response()
        }
    }
}

impl Guard {
    pub fn admits(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Result<(), ApiError> {
        if !self.allowed_hosts.is_empty() {
            let host = headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .and_then(|h| h.parse::<axum::http::uri::Authority>().ok())
                .or_else(|| uri.authority().cloned())
                .ok_or_else(|| {
                    ApiError::Forbidden("the Host header is missing or malformed".into())
                })?;
            if !host_allowed(&host, &self.allowed_hosts) {
                // The refusal is logged, and it comes before authentication: the caller's
                // text is cut (as in every log line that carries one).
                let host = crate::telemetry::spans::bounded(host.as_str());
                return Err(ApiError::Forbidden(format!(
                    "Host '{host}' is not in server.allowed_hosts"
                )));
            }
        }
        if !self.allowed_origins.is_empty()
            && let Some(origin) = headers.get(header::ORIGIN)
        {
            let origin = origin.to_str().unwrap_or("");
            if !origin_allowed(origin, &self.allowed_origins) {
                let origin = crate::telemetry::spans::bounded(origin);
                return Err(ApiError::Forbidden(format!(
                    "Origin '{origin}' is not in server.allowed_origins"
                )));
            }
        }
        if method == Method::POST {
            let json = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(';').next())
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
            if !json {
                return Err(ApiError::UnsupportedMediaType);
            }
        }
        Ok(())
    }
}

fn bare(host: &str) -> String {
    host.trim_matches(['[', ']']).to_ascii_lowercase()
}

fn host_allowed(host: &axum::http::uri::Authority, allowed: &[String]) -> bool {
    let name = bare(host.host());
    allowed.iter().any(|entry| {
        let entry = entry.trim();
        let (entry_host, entry_port) = match entry.parse::<axum::http::uri::Authority>() {
            Ok(a) => (bare(a.host()), a.port_u16()),
            Err(_) => (bare(entry), None),
        };
        entry_host == name && entry_port.is_none_or(|p| host.port_u16() == Some(p))
    })
}

/// `(scheme, host, port)` of an origin, the port filled in from the scheme.
fn parts(origin: &str) -> Option<(String, String, Option<u16>)> {
    let uri: Uri = origin.trim().parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let authority = uri.authority()?;
    let port = authority.port_u16().or(match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    });
    Some((scheme, bare(authority.host()), port))
}

fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    if origin.trim().eq_ignore_ascii_case("null") {
        return allowed
            .iter()
            .any(|a| a.trim().eq_ignore_ascii_case("null"));
    }
    let Some((scheme, host, port)) = parts(origin) else {
        return false;
    };
    allowed.iter().any(|entry| {
        let entry = entry.trim();
        let (base, any_port) = match entry.strip_suffix(":*") {
            Some(base) => (base, true),
            None => (entry, false),
        };
        let Ok(uri) = base.parse::<Uri>() else {
            return false;
        };
        let (Some(s), Some(a)) = (uri.scheme_str(), uri.authority()) else {
            return false;
        };
        s.eq_ignore_ascii_case(&scheme)
            && bare(a.host()) == host
            && (any_port || a.port_u16().is_none_or(|p| Some(p) == port))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(hosts: &[&str], origins: &[&str]) -> Guard {
        Guard {
            allowed_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            allowed_origins: origins.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    fn admits(g: &Guard, method: Method, pairs: &[(&str, &str)]) -> Result<(), ApiError> {
        g.admits(&method, &Uri::from_static("/v1/tools"), &headers(pairs))
    }

    #[test]
    fn hosts_as_rmcp_matches_them() {
        let g = guard(
            &["localhost", "127.0.0.1", "::1", "mcc.example.com:8443"],
            &[],
        );
        for ok in [
            "localhost",
            "localhost:8000",
            "127.0.0.1:1",
            "[::1]:8000",
            "MCC.example.com:8443",
        ] {
            assert!(admits(&g, Method::GET, &[("host", ok)]).is_ok(), "{ok}");
        }
        for bad in [
            "evil.example:8000",
            "mcc.example.com",
            "mcc.example.com:443",
        ] {
            let err = admits(&g, Method::GET, &[("host", bad)]).unwrap_err();
            assert!(
                err.to_string().contains("server.allowed_hosts"),
                "{bad}: {err}"
            );
        }
        assert!(admits(&guard(&[], &[]), Method::GET, &[("host", "anything")]).is_ok());
    }

    #[test]
    fn origins_only_when_listed() {
        let open = guard(&[], &[]);
        assert!(admits(&open, Method::GET, &[("origin", "https://evil.example")]).is_ok());
        let g = guard(
            &[],
            &["https://app.example.com", "http://localhost:*", "null"],
        );
        for ok in [
            "https://app.example.com",
            "https://app.example.com:443",
            "http://localhost:3000",
            "null",
        ] {
            assert!(admits(&g, Method::GET, &[("origin", ok)]).is_ok(), "{ok}");
        }
        for bad in ["https://evil.example", "http://app.example.com", "garbage"] {
            assert!(
                admits(&g, Method::GET, &[("origin", bad)]).is_err(),
                "{bad}"
            );
        }
        assert!(
            admits(&g, Method::GET, &[]).is_ok(),
            "no Origin: not a browser"
        );
        // The refusal is logged before authentication: it cannot carry a huge header.
        let huge = format!("https://{}.example", "a".repeat(100_000));
        let refused = admits(&g, Method::GET, &[("origin", &huge)]).unwrap_err();
        assert!(
            refused.to_string().len() < 400,
            "{}",
            refused.to_string().len()
        );
    }

    #[test]
    fn posts_must_be_json() {
        let g = guard(&[], &[]);
        let json = [("content-type", "application/json; charset=utf-8")];
        assert!(admits(&g, Method::POST, &json).is_ok());
        for simple in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data",
        ] {
            let err = admits(&g, Method::POST, &[("content-type", simple)]).unwrap_err();
            assert!(matches!(err, ApiError::UnsupportedMediaType), "{simple}");
        }
        assert!(admits(&g, Method::POST, &[]).is_err());
        assert!(admits(&g, Method::GET, &[]).is_ok());
    }
}
