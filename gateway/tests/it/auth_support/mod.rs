//! Helpers shared by the auth tests: the test keys in `tests/fixtures`, token minting,
//! a JWKS server whose document can change, and an HTTPS server for the JWKS.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use http::{HeaderMap, header};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use mcc_catalog::User;
use mcc_gateway::auth::{
    AuthError, AuthSettings, Authenticator, Directory, JwtSettings, SharedDirectory,
};
use serde_json::{Value, json};

pub const ISS: &str = "https://issuer.test";
pub const AUD: &str = "mcc-gateway";
pub const SECRET: &str = "a-test-only-hs256-secret-of-32-bytes-or-more";

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn signing_key(name: &str) -> EncodingKey {
    let pem = std::fs::read(fixture(name)).unwrap();
    if name.starts_with("ec") {
        EncodingKey::from_ec_pem(&pem).unwrap()
    } else {
        EncodingKey::from_rsa_pem(&pem).unwrap()
    }
}

/// The public JWK of a fixture key, published under `kid`.
pub fn public_jwk(name: &str, alg: Algorithm, kid: &str) -> Value {
    let mut jwk = Jwk::from_encoding_key(&signing_key(name), alg).unwrap();
    jwk.common.key_id = Some(kid.into());
    serde_json::to_value(jwk).unwrap()
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Valid claims for this gateway, with `extra` merged over them.
pub fn claims(extra: Value) -> Value {
    let mut base = json!({"iss": ISS, "aud": AUD, "exp": now() + 600, "scope": "openid mcp"});
    for (k, v) in extra.as_object().unwrap() {
        base[k] = v.clone();
    }
    base
}

pub fn token(key: &str, alg: Algorithm, kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_string);
    let key = if alg == Algorithm::HS256 {
        EncodingKey::from_secret(SECRET.as_bytes()).unwrap()
    } else {
        signing_key(key)
    };
    encode(&header, claims, &key).unwrap()
}

/// A token signed with HS256 by `secret` (the tests that configure their own secret).
pub fn hs256(secret: &str, claims: &Value) -> String {
    encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret.as_bytes()).unwrap(),
    )
    .unwrap()
}

/// An `exp` claim ten minutes from now.
pub fn in_ten_minutes() -> u64 {
    now() + 600
}

pub fn rs256(kid: &str, key: &str, claims: &Value) -> String {
    token(key, Algorithm::RS256, Some(kid), claims)
}

pub fn bearer(token: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    headers
}

pub fn users() -> SharedDirectory {
    let alice = User {
        username: "alice".into(),
        email: Some("alice@example.com".into()),
        groups: vec!["osint".into()],
        tools: vec![],
    };
    let bob = User {
        username: "bob".into(),
        groups: vec!["admin".into()],
        ..User::default()
    };
    SharedDirectory::new(Directory::from_users(vec![alice, bob]).unwrap())
}

pub async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

type JwksState = (
    Arc<Mutex<Value>>,
    Arc<AtomicUsize>,
    Arc<std::sync::atomic::AtomicBool>,
);

/// A JWKS endpoint whose document the test can change, counting requests.
#[derive(Clone)]
pub struct JwksServer {
    doc: Arc<Mutex<Value>>,
    hits: Arc<AtomicUsize>,
    failing: Arc<std::sync::atomic::AtomicBool>,
    pub url: String,
}

impl JwksServer {
    pub async fn start(keys: Vec<Value>) -> Self {
        let doc = Arc::new(Mutex::new(json!({ "keys": keys })));
        let hits = Arc::new(AtomicUsize::new(0));
        let failing = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let state = (doc.clone(), hits.clone(), failing.clone());
        let router = Router::new()
            .route(
                "/jwks",
                get(|State((doc, hits, failing)): State<JwksState>| async move {
                    hits.fetch_add(1, Ordering::SeqCst);
                    if failing.load(Ordering::SeqCst) {
                        return Err(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
                    }
                    Ok(Json(doc.lock().unwrap().clone()))
                }),
            )
            .with_state(state);
        let addr = serve(router).await;
        Self {
            doc,
            hits,
            failing,
            url: format!("http://{addr}/jwks"),
        }
    }

    /// Answers 500 from now on (`true`), or the document again (`false`).
    pub fn fail(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    pub fn publish(&self, keys: Vec<Value>) {
        *self.doc.lock().unwrap() = json!({ "keys": keys });
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

pub fn jwt_settings(jwt: JwtSettings) -> AuthSettings {
    AuthSettings {
        backend: "jwt".into(),
        jwt: JwtSettings {
            issuer: Some(ISS.into()),
            audience: vec![AUD.into()],
            required_scopes: vec!["mcp".into()],
            ..jwt
        },
        ..AuthSettings::default()
    }
}

pub fn jwks_auth(url: &str, min_refetch_secs: u64, cache_ttl_secs: u64) -> Authenticator {
    let settings = jwt_settings(JwtSettings {
        jwks_url: Some(url.into()),
        jwks_min_refetch_secs: min_refetch_secs,
        jwks_cache_ttl_secs: cache_ttl_secs,
        jwks_timeout_secs: 2,
        ..JwtSettings::default()
    });
    Authenticator::new(&settings, users()).unwrap()
}

pub async fn username(auth: &Authenticator, token: &str) -> Result<String, AuthError> {
    auth.authenticate(&bearer(token))
        .await
        .map(|id| id.username().to_string())
}

/// A minimal HTTPS server (rustls, test certificate for 127.0.0.1) answering every
/// request with `body` as JSON.
pub async fn serve_https(body: String) -> SocketAddr {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let certs = CertificateDer::pem_file_iter(fixture("tls-server.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(fixture("tls-server.key.pem")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, body) = (acceptor.clone(), body.clone());
            tokio::spawn(async move {
                // A client that rejects our certificate ends the handshake: not an error here.
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(response.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    addr
}
