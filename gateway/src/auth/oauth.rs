//! OAuth discovery for MCP clients (RFC 9728, as MCP's authorization spec uses it): the
//! `auth.oauth.*` settings and their checks, the Protected Resource Metadata document
//! built from them, the URL of that document ([`resource_metadata_url`], what the
//! `WWW-Authenticate` challenge points at) and the routes that serve it,
//! `/.well-known/oauth-protected-resource` and its path-inserted form for the resource
//! (`/.well-known/oauth-protected-resource/mcp`).
//!
//! A client that gets a 401 on `/mcp` reads `resource_metadata` from the challenge (or
//! derives the well-known URL from the resource URL), fetches the document, and finds in
//! `authorization_servers` the identity provider to get a token from.
//!
//! Discovery is on when `auth.oauth.resource` is set, which needs the `jwt` backend (the
//! only one whose tokens come from an authorization server). Checking tokens is not done
//! here ([`super::jwt`]), nor is writing the challenge ([`super::middleware`]).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use http::{HeaderValue, StatusCode, header};
use reqwest::Url;
use serde::{Deserialize, Serialize};

use super::AuthSettings;

/// The well-known path of RFC 9728 (the metadata of a resource without a path).
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// How long clients and proxies may reuse the document (`Cache-Control: max-age`).
const MAX_AGE_SECS: u32 = 3600;

/// `auth.oauth`: what the gateway tells MCP clients about where its tokens come from.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct OAuthSettings {
    /// The public URL clients use for `/mcp` (e.g. `https://mcc.example.com/mcp`): the
    /// document's `resource`, and where its URL is derived from. Unset: discovery off.
    pub resource: Option<String>,
    /// Issuer URLs of the authorization servers clients get tokens from. Empty: the one
    /// in `auth.jwt.issuer`.
    pub authorization_servers: Vec<String>,
    /// Scopes advertised in `scopes_supported`. Unset: `auth.jwt.required_scopes`.
    pub scopes_supported: Option<Vec<String>>,
    /// A human-readable name of the gateway (`resource_name`), shown by some clients.
    pub resource_name: Option<String>,
}

/// An `auth.oauth` setting (or one it depends on) that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {reason}")]
pub struct OAuthSetupError {
    /// The settings key at fault, e.g. `auth.oauth.resource`.
    pub setting: &'static str,
    pub reason: String,
}

fn refuse(setting: &'static str, reason: impl Into<String>) -> OAuthSetupError {
    OAuthSetupError {
        setting,
        reason: reason.into(),
    }
}

/// RFC 9728 §2: the Protected Resource Metadata document. Field names are the JSON names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectedResourceMetadata {
    pub resource: String,
    pub authorization_servers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes_supported: Vec<String>,
    pub bearer_methods_supported: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
}

/// Whether this gateway serves discovery, settled from the settings at startup.
#[derive(Debug, Clone)]
pub enum OAuthDiscovery {
    Served(Arc<Served>),
    /// Not configured; the reason is the body of the well-known URLs' 404.
    Off(String),
}

/// A document ready to serve, and where it is served.
#[derive(Debug)]
pub struct Served {
    pub metadata: ProtectedResourceMetadata,
    /// Where clients fetch it: `auth.resource_metadata_url` if set, else derived from
    /// the resource URL.
    pub metadata_url: String,
    /// The well-known paths this gateway answers on.
    pub paths: Vec<String>,
    body: String,
}

impl OAuthDiscovery {
    /// Checks `auth.oauth` against the rest of `auth` and builds the document. Every
    /// refusal names the setting; [`crate::config`] calls this at load time so a bad
    /// setting stops startup.
    pub fn from_settings(auth: &AuthSettings) -> Result<Self, OAuthSetupError> {
        let oauth = &auth.oauth;
        let Some(resource) = oauth.resource.as_deref().map(str::trim) else {
            if !oauth.authorization_servers.is_empty()
                || oauth.scopes_supported.is_some()
                || oauth.resource_name.is_some()
            {
                return Err(refuse(
                    "auth.oauth.resource",
                    "required when other auth.oauth settings are set: the public URL of /mcp, e.g. https://mcc.example.com/mcp",
                ));
            }
            return Ok(Self::Off(off_reason(&auth.backend)));
        };
        if auth.backend != "jwt" {
            return Err(refuse(
                "auth.oauth.resource",
                format!(
                    "OAuth discovery names the authorization server that issues the gateway's tokens, so it needs auth.backend: jwt (the backend is '{}')",
                    auth.backend
                ),
            ));
        }
        let url = absolute_url(resource)
            .map_err(|why| refuse("auth.oauth.resource", format!("'{resource}' {why}")))?;
        let metadata = ProtectedResourceMetadata {
            resource: resource.to_string(),
            authorization_servers: authorization_servers(auth)?,
            scopes_supported: scopes(auth)?,
            bearer_methods_supported: vec!["header".into()],
            resource_name: match oauth.resource_name.as_deref().map(str::trim) {
                Some("") => return Err(refuse("auth.oauth.resource_name", "is empty")),
                other => other.map(str::to_string),
            },
        };
        let body = serde_json::to_string(&metadata).expect("the document serializes");
        Ok(Self::Served(Arc::new(Served {
            metadata_url: auth
                .resource_metadata_url
                .clone()
                .unwrap_or_else(|| resource_metadata_url(&url)),
            paths: well_known_paths(&url),
            metadata,
            body,
        })))
    }

    /// The document and where it is, when discovery is on.
    pub fn served(&self) -> Option<&Served> {
        match self {
            Self::Served(served) => Some(served),
            Self::Off(_) => None,
        }
    }
}

fn off_reason(backend: &str) -> String {
    if backend == "jwt" {
        "OAuth discovery is not configured: set auth.oauth.resource (MCC_AUTH__OAUTH__RESOURCE) to the public URL of /mcp".into()
    } else {
        format!(
            "OAuth discovery is off: the auth backend is '{backend}', and only the jwt backend takes tokens from an authorization server"
        )
    }
}

/// `text` as an absolute `http`/`https` URL with a host, no credentials, query or
/// fragment (RFC 9728 §1.2 for a resource, RFC 8414 §2 for an issuer); else why not.
fn absolute_url(text: &str) -> Result<Url, &'static str> {
    let url = Url::parse(text).map_err(|_| "is not an absolute URL (e.g. https://host/path)")?;
    if !matches!(url.scheme(), "https" | "http") {
        return Err("must be an https:// (or http://) URL");
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("has no host");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not contain credentials");
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("must not have a query or a fragment");
    }
    Ok(url)
}

/// `auth.oauth.authorization_servers`, else `[auth.jwt.issuer]`.
fn authorization_servers(auth: &AuthSettings) -> Result<Vec<String>, OAuthSetupError> {
    const KEY: &str = "auth.oauth.authorization_servers";
    let issuer = auth.jwt.issuer.as_deref().map(str::trim);
    let servers: Vec<String> = if auth.oauth.authorization_servers.is_empty() {
        issuer.into_iter().map(str::to_string).collect()
    } else {
        auth.oauth
            .authorization_servers
            .iter()
            .map(|s| s.trim().to_string())
            .collect()
    };
    if servers.is_empty() {
        return Err(refuse(
            KEY,
            "is empty and auth.jwt.issuer is not set: name the issuer URL clients get tokens from (e.g. https://idp.example.com/realms/mcc)",
        ));
    }
    for server in &servers {
        absolute_url(server).map_err(|why| refuse(KEY, format!("'{server}' {why}")))?;
    }
    if let Some(issuer) = issuer
        && !servers.iter().any(|s| s == issuer)
    {
        return Err(refuse(
            KEY,
            format!(
                "does not list auth.jwt.issuer '{issuer}': tokens from the servers listed would be refused"
            ),
        ));
    }
    Ok(servers)
}

/// `auth.oauth.scopes_supported`, else `auth.jwt.required_scopes`; each an RFC 6749
/// scope token (visible ASCII without space, `"` and `\`).
fn scopes(auth: &AuthSettings) -> Result<Vec<String>, OAuthSetupError> {
    let (key, scopes) = match &auth.oauth.scopes_supported {
        Some(scopes) => ("auth.oauth.scopes_supported", scopes),
        None => ("auth.jwt.required_scopes", &auth.jwt.required_scopes),
    };
    if let Some(bad) = scopes.iter().find(|s| {
        s.is_empty()
            || !s
                .bytes()
                .all(|b| matches!(b, b'!' | b'#'..=b'[' | b']'..=b'~'))
    }) {
        return Err(refuse(
            key,
            format!("'{bad}' is not a scope (visible ASCII without spaces, '\"' or '\\')"),
        ));
    }
    Ok(scopes.clone())
}

/// Where RFC 9728 §3.1 puts the metadata of `resource`: the well-known path inserted
/// between the host and the path, a trailing `/` dropped
/// (`https://h/mcp` → `https://h/.well-known/oauth-protected-resource/mcp`).
pub fn resource_metadata_url(resource: &Url) -> String {
    format!(
        "{}{WELL_KNOWN}{}",
        resource.origin().ascii_serialization(),
        resource.path().trim_end_matches('/')
    )
}

/// The paths served: the bare well-known path (clients that ignore the resource's path
/// fall back to it), the path-inserted form for `/mcp`, and the one for the resource's
/// own path when a proxy serves `/mcp` elsewhere.
fn well_known_paths(resource: &Url) -> Vec<String> {
    let mut paths = vec![WELL_KNOWN.to_string(), format!("{WELL_KNOWN}/mcp")];
    let own = format!("{WELL_KNOWN}{}", resource.path().trim_end_matches('/'));
    if !paths.contains(&own) {
        paths.push(own);
    }
    paths
}

/// The well-known routes, unauthenticated: the document on each of its paths, or a 404
/// saying why discovery is off.
pub fn routes(discovery: &OAuthDiscovery) -> Router {
    match discovery {
        OAuthDiscovery::Served(served) => {
            let mut router = Router::new();
            for path in &served.paths {
                router = router.route(path, get(document).options(preflight));
            }
            router.with_state(served.clone())
        }
        OAuthDiscovery::Off(reason) => {
            let reason: Arc<str> = reason.as_str().into();
            Router::new()
                .route(WELL_KNOWN, get(not_configured))
                .route(&format!("{WELL_KNOWN}/{{*rest}}"), get(not_configured))
                .with_state(reason)
        }
    }
}

/// The document: public, cacheable, readable from any origin (browser-based clients
/// such as the MCP Inspector fetch it cross-origin).
async fn document(State(served): State<Arc<Served>>) -> Response {
    let mut response = Response::new(Body::from(served.body.clone()));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_str(&format!("public, max-age={MAX_AGE_SECS}")).expect("ASCII"),
    );
    allow_any_origin(headers);
    response
}

/// A browser's CORS preflight (clients send `MCP-Protocol-Version` with the request).
async fn preflight() -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    allow_any_origin(headers);
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, OPTIONS"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("*"),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("86400"),
    );
    response
}

fn allow_any_origin(headers: &mut http::HeaderMap) {
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
}

async fn not_configured(State(reason): State<Arc<str>>) -> Response {
    let body = serde_json::json!({"error": "not_found", "error_description": &*reason});
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = StatusCode::NOT_FOUND;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::JwtSettings;

    const ISSUER: &str = "https://idp.example.com/realms/mcc";

    fn jwt(oauth: OAuthSettings) -> AuthSettings {
        AuthSettings {
            backend: "jwt".into(),
            jwt: JwtSettings {
                issuer: Some(ISSUER.into()),
                required_scopes: vec!["mcp".into()],
                ..JwtSettings::default()
            },
            oauth,
            ..AuthSettings::default()
        }
    }

    fn resource(url: &str) -> OAuthSettings {
        OAuthSettings {
            resource: Some(url.into()),
            ..OAuthSettings::default()
        }
    }

    fn served(auth: &AuthSettings) -> Arc<Served> {
        match OAuthDiscovery::from_settings(auth).unwrap() {
            OAuthDiscovery::Served(s) => s,
            OAuthDiscovery::Off(why) => panic!("off: {why}"),
        }
    }

    fn refused(auth: &AuthSettings) -> OAuthSetupError {
        OAuthDiscovery::from_settings(auth).unwrap_err()
    }

    #[test]
    fn the_document_defaults_to_the_jwt_settings() {
        let s = served(&jwt(resource("https://mcc.example.com/mcp")));
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&s.body).unwrap(),
            serde_json::json!({
                "resource": "https://mcc.example.com/mcp",
                "authorization_servers": [ISSUER],
                "scopes_supported": ["mcp"],
                "bearer_methods_supported": ["header"],
            })
        );
        assert_eq!(
            s.metadata_url,
            "https://mcc.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            s.paths,
            [
                "/.well-known/oauth-protected-resource",
                "/.well-known/oauth-protected-resource/mcp"
            ]
        );
    }

    #[test]
    fn explicit_settings_win() {
        let mut auth = jwt(OAuthSettings {
            resource: Some("https://gw.example.com:8443/tools/mcp/".into()),
            authorization_servers: vec![ISSUER.into(), "https://other.example.com".into()],
            scopes_supported: Some(vec!["mcp".into(), "offline_access".into()]),
            resource_name: Some("MCC".into()),
        });
        let s = served(&auth);
        assert_eq!(s.metadata.authorization_servers.len(), 2);
        assert_eq!(s.metadata.scopes_supported, ["mcp", "offline_access"]);
        assert_eq!(s.metadata.resource_name.as_deref(), Some("MCC"));
        assert_eq!(
            s.metadata_url,
            "https://gw.example.com:8443/.well-known/oauth-protected-resource/tools/mcp"
        );
        assert_eq!(
            s.paths[2],
            "/.well-known/oauth-protected-resource/tools/mcp"
        );

        auth.resource_metadata_url = Some("https://elsewhere.example.com/prm".into());
        assert_eq!(
            served(&auth).metadata_url,
            "https://elsewhere.example.com/prm"
        );

        auth.oauth.scopes_supported = Some(vec![]);
        let s = served(&auth);
        assert!(!s.body.contains("scopes_supported"), "{}", s.body);
    }

    #[test]
    fn metadata_urls_follow_rfc_9728() {
        for (resource, expected) in [
            (
                "https://h/mcp",
                "https://h/.well-known/oauth-protected-resource/mcp",
            ),
            (
                "https://h/",
                "https://h/.well-known/oauth-protected-resource",
            ),
            (
                "https://h",
                "https://h/.well-known/oauth-protected-resource",
            ),
            (
                "http://127.0.0.1:8000/mcp",
                "http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp",
            ),
            (
                "https://H.Example.com:443/a/b/",
                "https://h.example.com/.well-known/oauth-protected-resource/a/b",
            ),
        ] {
            let url = Url::parse(resource).unwrap();
            assert_eq!(resource_metadata_url(&url), expected, "{resource}");
        }
    }

    #[test]
    fn off_without_a_resource_with_the_reason() {
        let OAuthDiscovery::Off(why) =
            OAuthDiscovery::from_settings(&jwt(Default::default())).unwrap()
        else {
            panic!("served without a resource");
        };
        assert!(why.contains("auth.oauth.resource"), "{why}");
        let OAuthDiscovery::Off(why) =
            OAuthDiscovery::from_settings(&AuthSettings::default()).unwrap()
        else {
            panic!("served on dev-admin");
        };
        assert!(why.contains("'dev-admin'"), "{why}");
    }

    #[test]
    fn bad_settings_are_named() {
        for bad in [
            "mcc.example.com/mcp",
            "ftp://h/mcp",
            "https://h/mcp?x=1",
            "https://h/mcp#f",
            "https://u:p@h/mcp",
            "/mcp",
        ] {
            let e = refused(&jwt(resource(bad)));
            assert_eq!(e.setting, "auth.oauth.resource", "{bad}: {e}");
            assert!(e.reason.contains(bad), "{e}");
        }

        let mut no_issuer = jwt(resource("https://h/mcp"));
        no_issuer.jwt.issuer = None;
        let e = refused(&no_issuer);
        assert_eq!(e.setting, "auth.oauth.authorization_servers", "{e}");
        assert!(e.reason.contains("auth.jwt.issuer"), "{e}");

        let mut other = jwt(resource("https://h/mcp"));
        other.oauth.authorization_servers = vec!["https://other.example.com".into()];
        let e = refused(&other);
        assert!(
            e.to_string()
                .starts_with("auth.oauth.authorization_servers: does not list auth.jwt.issuer"),
            "{e}"
        );
        other.oauth.authorization_servers = vec!["not a url".into()];
        assert_eq!(refused(&other).setting, "auth.oauth.authorization_servers");

        let mut scope = jwt(resource("https://h/mcp"));
        scope.jwt.required_scopes = vec!["two words".into()];
        assert_eq!(refused(&scope).setting, "auth.jwt.required_scopes");
        scope.oauth.scopes_supported = Some(vec!["".into()]);
        assert_eq!(refused(&scope).setting, "auth.oauth.scopes_supported");

        let api_key = AuthSettings {
            backend: "api_key".into(),
            oauth: resource("https://h/mcp"),
            ..AuthSettings::default()
        };
        let e = refused(&api_key);
        assert_eq!(e.setting, "auth.oauth.resource");
        assert!(e.reason.contains("auth.backend: jwt"), "{e}");

        let orphan = jwt(OAuthSettings {
            authorization_servers: vec![ISSUER.into()],
            ..OAuthSettings::default()
        });
        assert_eq!(refused(&orphan).setting, "auth.oauth.resource");
    }
}
