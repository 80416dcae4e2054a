//! OAuth discovery through a real gateway over real HTTP, as an MCP client walks it: a
//! 401 on `/mcp` names the metadata URL, that URL serves the Protected Resource Metadata
//! naming the authorization server, and a token from that server gets in. Also the 404
//! of a gateway without discovery, and bad `auth.oauth` settings refused by name.

use crate::auth_support::{self, in_ten_minutes as exp};
use crate::mcp_support;

use mcc_gateway::config::{self, Settings};
use mcp_support::{Server, get_json, http_client, settings, start_on};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const SECRET: &str = "an-hs256-secret-for-tests-only-32-bytes+";
const ISSUER: &str = "https://idp.example.com/realms/mcc";

/// A gateway serving on a port chosen before it is built, so its settings can name its
/// own public URL (`auth.oauth.resource`).
async fn start(configure: impl FnOnce(&mut Settings, &str)) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mut s = settings(dir.path(), "jwt", None);
    s.auth.jwt.hs256_secret = Some(SECRET.into());
    s.auth.jwt.audience = vec![format!("{base}/mcp")];
    s.auth.jwt.issuer = Some(ISSUER.into());
    s.auth.jwt.required_scopes = vec!["mcp".into()];
    configure(&mut s, &base);
    start_on(listener, s, dir).await
}

fn with_discovery(s: &mut Settings, base: &str) {
    s.auth.oauth.resource = Some(format!("{base}/mcp"));
}

/// An MCP `initialize` POST; returns the status and the challenge, if any.
async fn initialize(url: &str, token: Option<&str>) -> (u16, Option<String>) {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "discovery-test", "version": "0"}}});
    let mut req = http_client()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(init.to_string());
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string());
    (resp.status().as_u16(), challenge)
}

/// The value of `name="…"` in a challenge.
fn param(challenge: &str, name: &str) -> Option<String> {
    let start = challenge.find(&format!("{name}=\""))? + name.len() + 2;
    let len = challenge[start..].find('"')?;
    Some(challenge[start..start + len].to_string())
}

fn token(claims: Value) -> String {
    auth_support::hs256(SECRET, &claims)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_finds_the_authorization_server_from_a_401() {
    let gw = start(with_discovery).await;
    let mcp = format!("{}/mcp", gw.base);

    // 1. No token: 401, and the challenge says where the metadata is and what to ask for.
    let (status, challenge) = initialize(&mcp, None).await;
    assert_eq!(status, 401);
    let challenge = challenge.expect("a WWW-Authenticate challenge");
    let metadata_url = param(&challenge, "resource_metadata").expect(&challenge);
    assert_eq!(
        metadata_url,
        format!("{}/.well-known/oauth-protected-resource/mcp", gw.base)
    );
    assert_eq!(
        param(&challenge, "scope").as_deref(),
        Some("mcp"),
        "{challenge}"
    );

    // 2. The metadata: unauthenticated, cacheable, naming the authorization server.
    let resp = http_client().get(&metadata_url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let headers = resp.headers().clone();
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["cache-control"], "public, max-age=3600");
    assert_eq!(headers["access-control-allow-origin"], "*");
    let document: Value = resp.json().await.unwrap();
    assert_eq!(
        document,
        json!({
            "resource": mcp,
            "authorization_servers": [ISSUER],
            "scopes_supported": ["mcp"],
            "bearer_methods_supported": ["header"],
        })
    );

    // Clients that drop the resource's path fall back to the bare well-known URL.
    let root = get_json(&format!("{}/.well-known/oauth-protected-resource", gw.base)).await;
    assert_eq!(root, document);

    // A browser-based client's preflight.
    let preflight = http_client()
        .request(reqwest::Method::OPTIONS, &metadata_url)
        .header("origin", "http://localhost:6274")
        .header("access-control-request-method", "GET")
        .header("access-control-request-headers", "mcp-protocol-version")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 204);
    assert_eq!(preflight.headers()["access-control-allow-origin"], "*");

    // 3. A token from that server, for that resource, with that scope, gets in.
    let good = token(
        json!({"iss": ISSUER, "aud": mcp, "exp": exp(), "sub": "carol", "scope": "openid mcp"}),
    );
    assert_eq!(initialize(&mcp, Some(&good)).await.0, 200);

    // A bad token is still told where to go.
    let (status, challenge) = initialize(&mcp, Some("not-a-jwt")).await;
    assert_eq!(status, 401);
    let challenge = challenge.unwrap();
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    assert_eq!(param(&challenge, "resource_metadata"), Some(metadata_url));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_metadata_url_is_kept() {
    let gw = start(|s, base| {
        with_discovery(s, base);
        s.auth.resource_metadata_url = Some("https://mcc.example.com/prm".into());
        s.auth.jwt.required_scopes = vec![];
    })
    .await;
    let (status, challenge) = initialize(&format!("{}/mcp", gw.base), None).await;
    assert_eq!(status, 401);
    assert_eq!(
        challenge.as_deref(),
        Some("Bearer realm=\"mcc\", resource_metadata=\"https://mcc.example.com/prm\"")
    );
    let document: Value = http_client()
        .get(format!(
            "{}/.well-known/oauth-protected-resource/mcp",
            gw.base
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(document.get("scopes_supported").is_none(), "{document}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_discovery_the_well_known_urls_say_why() {
    // jwt without auth.oauth: the challenge is as before, the metadata a 404 with the fix.
    let gw = start(|_, _| {}).await;
    let (status, challenge) = initialize(&format!("{}/mcp", gw.base), None).await;
    assert_eq!(
        (status, challenge.as_deref()),
        (401, Some("Bearer realm=\"mcc\""))
    );
    for path in ["", "/mcp"] {
        let resp = http_client()
            .get(format!(
                "{}/.well-known/oauth-protected-resource{path}",
                gw.base
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 404, "{path}");
        let body: Value = resp.json().await.unwrap();
        let why = body["error_description"].as_str().unwrap();
        assert!(why.contains("auth.oauth.resource"), "{why}");
    }

    // Another backend: off, saying which.
    let gw = start(|s, _| s.auth.backend = "dev-admin".into()).await;
    let resp = http_client()
        .get(format!(
            "{}/.well-known/oauth-protected-resource/mcp",
            gw.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains("'dev-admin'") && body.contains("jwt"),
        "{body}"
    );
}

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: std::collections::HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

const JWT: [(&str, &str); 3] = [
    ("MCC_AUTH", "jwt"),
    ("MCC_AUTH__JWT__AUDIENCE", "https://mcc.example.com/mcp"),
    ("MCC_AUTH__JWT__HS256_SECRET", SECRET),
];

fn load_error(extra: &[(&str, &str)]) -> String {
    let pairs: Vec<_> = JWT.iter().chain(extra).copied().collect();
    match config::load(None, &env(&pairs)) {
        Ok(_) => panic!("{extra:?} accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn settings_from_the_environment() {
    let pairs: Vec<_> = JWT
        .iter()
        .copied()
        .chain([
            ("MCC_AUTH__OAUTH__RESOURCE", "https://mcc.example.com/mcp"),
            (
                "MCC_AUTH__OAUTH__AUTHORIZATION_SERVERS",
                "https://a.example.com; https://b.example.com",
            ),
            ("MCC_AUTH__OAUTH__SCOPES_SUPPORTED", "mcp;offline_access"),
            ("MCC_AUTH__OAUTH__RESOURCE_NAME", "MCC"),
            ("MCC_AUTH__JWT__REQUIRED_SCOPES", "mcp"),
        ])
        .collect();
    let s = config::load(None, &env(&pairs)).unwrap();
    let oauth = &s.auth.oauth;
    assert_eq!(
        oauth.resource.as_deref(),
        Some("https://mcc.example.com/mcp")
    );
    assert_eq!(
        oauth.authorization_servers,
        ["https://a.example.com", "https://b.example.com"]
    );
    assert_eq!(
        oauth.scopes_supported.as_deref(),
        Some(&["mcp".to_string(), "offline_access".to_string()][..])
    );
    assert_eq!(oauth.resource_name.as_deref(), Some("MCC"));
    assert_eq!(s.auth.jwt.required_scopes, ["mcp"]);
}

#[test]
fn bad_settings_stop_startup_naming_the_setting() {
    let e = load_error(&[("MCC_AUTH__OAUTH__RESOURCE", "mcc.example.com/mcp")]);
    assert!(
        e.contains("MCC_AUTH__OAUTH__RESOURCE")
            && e.contains("auth.oauth.resource: 'mcc.example.com/mcp' is not an absolute URL"),
        "{e}"
    );
    let e = load_error(&[("MCC_AUTH__OAUTH__RESOURCE", "https://mcc.example.com/mcp")]);
    assert!(
        e.contains("auth.oauth.authorization_servers: is empty and auth.jwt.issuer is not set"),
        "{e}"
    );
    let e = load_error(&[
        ("MCC_AUTH", "api_key"),
        ("MCC_AUTH__OAUTH__RESOURCE", "https://mcc.example.com/mcp"),
    ]);
    assert!(
        e.contains("auth.oauth.resource") && e.contains("auth.backend: jwt"),
        "{e}"
    );
    let e = load_error(&[("MCC_AUTH__OAUTH__SCOPES_SUPPORTED", "mcp")]);
    assert!(e.contains("auth.oauth.resource: required when"), "{e}");

    // Unknown keys in the section are refused by name.
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        file.path(),
        "auth:\n  backend: jwt\n  oauth:\n    resorce: https://mcc.example.com/mcp\n",
    )
    .unwrap();
    let e = config::load(Some(file.path()), &env(&[]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("resorce"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_refuses_what_the_settings_loader_refuses() {
    // Settings built in code skip `config::load`; building the gateway checks them too.
    let dir = tempfile::tempdir().unwrap();
    let mut s = settings(dir.path(), "jwt", None);
    s.auth.jwt.hs256_secret = Some(SECRET.into());
    s.auth.jwt.audience = vec!["mcc".into()];
    s.auth.jwt.issuer = Some("https://idp.example.com".into());
    s.auth.oauth.resource = Some("https://mcc.example.com/mcp".into());
    s.auth.oauth.authorization_servers = vec!["ftp://idp.example.com".into()];
    let e = match mcc_gateway::app::build(&s, CancellationToken::new()).await {
        Ok(_) => panic!("built"),
        Err(e) => e.to_string(),
    };
    assert_eq!(
        e,
        "auth: auth.oauth.authorization_servers: 'ftp://idp.example.com' must be an https:// (or http://) URL"
    );
}
