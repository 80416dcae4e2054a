//! The `jwt` backend against real tokens: signed here with the test keys in
//! `tests/fixtures`, verified through a JWKS served by a real local HTTP server, and
//! through the axum middleware over real HTTP.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::get;
use axum::{Extension, Json, Router};
use http::{HeaderMap, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use mcc_catalog::User;
use mcc_gateway::auth::{
    AuthError, AuthSettings, Authenticator, Directory, Identity, JwtSettings, SharedDirectory,
    authenticate_request,
};
use serde_json::{Value, json};

const ISS: &str = "https://issuer.test";
const AUD: &str = "mcc-gateway";
const SECRET: &str = "a-test-only-hs256-secret-of-32-bytes-or-more";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn signing_key(name: &str) -> EncodingKey {
    let pem = std::fs::read(fixture(name)).unwrap();
    if name.starts_with("ec") {
        EncodingKey::from_ec_pem(&pem).unwrap()
    } else {
        EncodingKey::from_rsa_pem(&pem).unwrap()
    }
}

/// The public JWK of a fixture key, published under `kid`.
fn public_jwk(name: &str, alg: Algorithm, kid: &str) -> Value {
    let mut jwk = Jwk::from_encoding_key(&signing_key(name), alg).unwrap();
    jwk.common.key_id = Some(kid.into());
    serde_json::to_value(jwk).unwrap()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Valid claims for this gateway, with `extra` merged over them.
fn claims(extra: Value) -> Value {
    let mut base = json!({"iss": ISS, "aud": AUD, "exp": now() + 600, "scope": "openid mcp"});
    for (k, v) in extra.as_object().unwrap() {
        base[k] = v.clone();
    }
    base
}

fn token(key: &str, alg: Algorithm, kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_string);
    let key = if alg == Algorithm::HS256 {
        EncodingKey::from_secret(SECRET.as_bytes()).unwrap()
    } else {
        signing_key(key)
    };
    encode(&header, claims, &key).unwrap()
}

fn rs256(kid: &str, key: &str, claims: &Value) -> String {
    token(key, Algorithm::RS256, Some(kid), claims)
}

fn bearer(token: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    headers
}

fn users() -> SharedDirectory {
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

async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    addr
}

/// A JWKS endpoint whose document the test can change, counting requests.
#[derive(Clone)]
struct JwksServer {
    doc: Arc<Mutex<Value>>,
    hits: Arc<AtomicUsize>,
    url: String,
}

impl JwksServer {
    async fn start(keys: Vec<Value>) -> Self {
        let doc = Arc::new(Mutex::new(json!({ "keys": keys })));
        let hits = Arc::new(AtomicUsize::new(0));
        let state = (doc.clone(), hits.clone());
        let router = Router::new()
            .route(
                "/jwks",
                get(
                    |State((doc, hits)): State<(Arc<Mutex<Value>>, Arc<AtomicUsize>)>| async move {
                        hits.fetch_add(1, Ordering::SeqCst);
                        Json(doc.lock().unwrap().clone())
                    },
                ),
            )
            .with_state(state);
        let addr = serve(router).await;
        Self {
            doc,
            hits,
            url: format!("http://{addr}/jwks"),
        }
    }

    fn publish(&self, keys: Vec<Value>) {
        *self.doc.lock().unwrap() = json!({ "keys": keys });
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

fn jwt_settings(jwt: JwtSettings) -> AuthSettings {
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

fn jwks_auth(url: &str, min_refetch_secs: u64, cache_ttl_secs: u64) -> Authenticator {
    let settings = jwt_settings(JwtSettings {
        jwks_url: Some(url.into()),
        jwks_min_refetch_secs: min_refetch_secs,
        jwks_cache_ttl_secs: cache_ttl_secs,
        jwks_timeout_secs: 2,
        ..JwtSettings::default()
    });
    Authenticator::new(&settings, users()).unwrap()
}

async fn username(auth: &Authenticator, token: &str) -> Result<String, AuthError> {
    auth.authenticate(&bearer(token))
        .await
        .map(|id| id.username().to_string())
}

#[tokio::test]
async fn claims_select_catalog_users() {
    let jwks = JwksServer::start(vec![public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1")]).await;
    let auth = jwks_auth(&jwks.url, 10, 300);
    let by_email = rs256(
        "rsa1",
        "rsa1.key.pem",
        &claims(json!({"email": "alice@example.com", "sub": "x1"})),
    );
    let identity = auth.authenticate(&bearer(&by_email)).await.unwrap();
    assert_eq!(identity.user.unwrap().groups, vec!["osint".to_string()]);

    let by_login = rs256(
        "rsa1",
        "rsa1.key.pem",
        &claims(json!({"login": "bob", "sub": "x2"})),
    );
    assert_eq!(username(&auth, &by_login).await.unwrap(), "bob");
    let by_preferred = rs256(
        "rsa1",
        "rsa1.key.pem",
        &claims(json!({"preferred_username": "bob"})),
    );
    assert_eq!(username(&auth, &by_preferred).await.unwrap(), "bob");

    // Valid, but not in the catalog: a user of that name with no groups and no grants.
    let stranger = rs256(
        "rsa1",
        "rsa1.key.pem",
        &claims(json!({"sub": "carol", "email": "c@x.org"})),
    );
    let carol = auth
        .authenticate(&bearer(&stranger))
        .await
        .unwrap()
        .user
        .unwrap();
    assert_eq!(
        (
            carol.username.as_str(),
            carol.groups.len(),
            carol.tools.len()
        ),
        ("carol", 0, 0)
    );

    // An email the provider says is unverified does not select a catalog user.
    let unverified = rs256(
        "rsa1",
        "rsa1.key.pem",
        &claims(json!({"email": "alice@example.com", "email_verified": false, "sub": "zed"})),
    );
    assert_eq!(username(&auth, &unverified).await.unwrap(), "zed");

    let nameless = rs256("rsa1", "rsa1.key.pem", &claims(json!({})));
    assert_eq!(
        username(&auth, &nameless).await.unwrap_err().to_string(),
        "invalid token: token names no user (email, login, preferred_username or sub)"
    );
    assert_eq!(jwks.hits(), 1, "the key set is fetched once and cached");
}

#[tokio::test]
async fn rotated_key_is_accepted_after_refetch() {
    let jwks = JwksServer::start(vec![public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1")]).await;
    let auth = jwks_auth(&jwks.url, 0, 300);
    let old = rs256("rsa1", "rsa1.key.pem", &claims(json!({"sub": "bob"})));
    let new = rs256("rsa2", "rsa2.key.pem", &claims(json!({"sub": "bob"})));
    assert_eq!(username(&auth, &old).await.unwrap(), "bob");
    assert_eq!(
        username(&auth, &new).await,
        Err(AuthError::InvalidToken("unknown signing key 'rsa2'".into()))
    );
    assert_eq!(jwks.hits(), 2, "an unknown kid triggers a refetch");

    jwks.publish(vec![
        public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1"),
        public_jwk("rsa2.key.pem", Algorithm::RS256, "rsa2"),
    ]);
    assert_eq!(username(&auth, &new).await.unwrap(), "bob");
    assert_eq!(username(&auth, &old).await.unwrap(), "bob");
    assert_eq!(jwks.hits(), 3);
}

#[tokio::test]
async fn refetching_for_unknown_kids_is_rate_limited() {
    let jwks = JwksServer::start(vec![public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1")]).await;
    let auth = jwks_auth(&jwks.url, 60, 300);
    let good = rs256("rsa1", "rsa1.key.pem", &claims(json!({"sub": "bob"})));
    assert!(username(&auth, &good).await.is_ok());
    for i in 0..5 {
        let forged = rs256(
            &format!("forged{i}"),
            "rsa2.key.pem",
            &claims(json!({"sub": "bob"})),
        );
        assert!(username(&auth, &forged).await.is_err());
    }
    assert_eq!(
        jwks.hits(),
        1,
        "forged kids must not hammer the identity provider"
    );
}

#[tokio::test]
async fn key_set_is_refetched_after_its_ttl() {
    let jwks = JwksServer::start(vec![public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1")]).await;
    let auth = jwks_auth(&jwks.url, 0, 1);
    let good = rs256("rsa1", "rsa1.key.pem", &claims(json!({"sub": "bob"})));
    assert!(username(&auth, &good).await.is_ok());
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(username(&auth, &good).await.is_ok());
    assert_eq!(jwks.hits(), 2);
}

#[tokio::test]
async fn bad_tokens_are_refused_with_the_reason() {
    let jwks = JwksServer::start(vec![public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1")]).await;
    let auth = jwks_auth(&jwks.url, 10, 300);
    let signed = |extra: Value| rs256("rsa1", "rsa1.key.pem", &claims(extra));
    let cases = [
        (
            signed(json!({"sub": "bob", "exp": now() - 3600})),
            "token expired",
        ),
        (
            signed(json!({"sub": "bob", "aud": "someone-else"})),
            "token audience not accepted",
        ),
        (
            signed(json!({"sub": "bob", "iss": "https://evil.test"})),
            "token issuer not accepted",
        ),
        (
            signed(json!({"sub": "bob", "nbf": now() + 3600})),
            "token not yet valid (nbf)",
        ),
        (
            rs256("rsa1", "rsa2.key.pem", &claims(json!({"sub": "bob"}))),
            "bad token signature",
        ),
        (
            token(
                "",
                Algorithm::HS256,
                Some("rsa1"),
                &claims(json!({"sub": "bob"})),
            ),
            "token algorithm not accepted",
        ),
        ("not.a.jwt".to_string(), "malformed token"),
    ];
    for (token, reason) in cases {
        assert_eq!(
            username(&auth, &token).await,
            Err(AuthError::InvalidToken(reason.into())),
            "{reason}"
        );
    }
    let no_aud = json!({"iss": ISS, "exp": now() + 600, "scope": "mcp", "sub": "bob"});
    assert_eq!(
        username(&auth, &rs256("rsa1", "rsa1.key.pem", &no_aud)).await,
        Err(AuthError::InvalidToken(
            "token lacks the 'aud' claim".into()
        ))
    );
}

#[tokio::test]
async fn required_scopes_come_from_scope_or_scp() {
    let jwks = JwksServer::start(vec![public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1")]).await;
    let auth = jwks_auth(&jwks.url, 10, 300);
    let signed = |extra: Value| rs256("rsa1", "rsa1.key.pem", &claims(extra));
    assert_eq!(
        username(&auth, &signed(json!({"sub": "bob", "scope": "openid"}))).await,
        Err(AuthError::InsufficientScope("mcp".into()))
    );
    let scp_list = signed(json!({"sub": "bob", "scope": null, "scp": ["mcp"]}));
    assert_eq!(username(&auth, &scp_list).await.unwrap(), "bob");
    let scp_text = signed(json!({"sub": "bob", "scope": null, "scp": "read mcp"}));
    assert_eq!(username(&auth, &scp_text).await.unwrap(), "bob");
    let audience_list = signed(json!({"sub": "bob", "aud": ["other", AUD]}));
    assert_eq!(username(&auth, &audience_list).await.unwrap(), "bob");
}

#[tokio::test]
async fn es256_keys_from_jwks() {
    let jwks = JwksServer::start(vec![public_jwk("ec1.key.pem", Algorithm::ES256, "ec1")]).await;
    let auth = jwks_auth(&jwks.url, 10, 300);
    let good = token(
        "ec1.key.pem",
        Algorithm::ES256,
        Some("ec1"),
        &claims(json!({"sub": "bob"})),
    );
    assert_eq!(username(&auth, &good).await.unwrap(), "bob");
}

#[tokio::test]
async fn static_pem_keys_and_hs256_secrets() {
    let pem_file = Authenticator::new(
        &jwt_settings(JwtSettings {
            public_key_file: Some(fixture("rsa1.pub.pem")),
            ..JwtSettings::default()
        }),
        users(),
    )
    .unwrap();
    let by_rsa1 = rs256("any", "rsa1.key.pem", &claims(json!({"sub": "bob"})));
    assert_eq!(username(&pem_file, &by_rsa1).await.unwrap(), "bob");
    let by_rsa2 = rs256("any", "rsa2.key.pem", &claims(json!({"sub": "bob"})));
    assert!(username(&pem_file, &by_rsa2).await.is_err());

    let ec_inline = Authenticator::new(
        &jwt_settings(JwtSettings {
            public_key_pem: Some(std::fs::read_to_string(fixture("ec1.pub.pem")).unwrap()),
            ..JwtSettings::default()
        }),
        users(),
    )
    .unwrap();
    let by_ec = token(
        "ec1.key.pem",
        Algorithm::ES256,
        None,
        &claims(json!({"sub": "bob"})),
    );
    assert_eq!(username(&ec_inline, &by_ec).await.unwrap(), "bob");
    assert!(username(&ec_inline, &by_rsa1).await.is_err());

    let hs = Authenticator::new(
        &jwt_settings(JwtSettings {
            hs256_secret: Some(SECRET.into()),
            ..JwtSettings::default()
        }),
        users(),
    )
    .unwrap();
    let by_secret = token("", Algorithm::HS256, None, &claims(json!({"login": "bob"})));
    assert_eq!(username(&hs, &by_secret).await.unwrap(), "bob");
    let other_secret = encode(
        &Header::new(Algorithm::HS256),
        &claims(json!({"login": "bob"})),
        &EncodingKey::from_secret(b"another-secret-that-is-32-bytes-long!!").unwrap(),
    )
    .unwrap();
    assert_eq!(
        username(&hs, &other_secret).await,
        Err(AuthError::InvalidToken("bad token signature".into()))
    );
    assert_eq!(
        username(&hs, &by_rsa1).await,
        Err(AuthError::InvalidToken(
            "token algorithm not accepted".into()
        ))
    );
}

#[test]
fn bad_jwt_settings_are_named() {
    let err = |jwt: JwtSettings| {
        Authenticator::new(&jwt_settings(jwt), users())
            .err()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        err(JwtSettings::default()),
        "auth.jwt: set exactly one of jwks_url, public_key_pem, public_key_file, hs256_secret (found 0)"
    );
    assert_eq!(
        err(JwtSettings {
            hs256_secret: Some("short".into()),
            ..JwtSettings::default()
        }),
        "auth.jwt.hs256_secret: must be at least 32 bytes"
    );
    assert!(
        err(JwtSettings {
            public_key_pem: Some("not a key".into()),
            ..JwtSettings::default()
        })
        .starts_with("auth.jwt.public_key_pem: not an RSA or EC public key")
    );
    assert_eq!(
        err(JwtSettings {
            jwks_url: Some("ftp://x".into()),
            ..JwtSettings::default()
        }),
        "auth.jwt.jwks_url: 'ftp://x' is not an http(s) URL"
    );
    let no_audience = AuthSettings {
        backend: "jwt".into(),
        jwt: JwtSettings {
            hs256_secret: Some(SECRET.into()),
            ..JwtSettings::default()
        },
        ..AuthSettings::default()
    };
    assert_eq!(
        Authenticator::new(&no_audience, users())
            .err()
            .unwrap()
            .to_string(),
        "auth.jwt.audience: required (the token's 'aud' must name this gateway)"
    );
}

#[tokio::test]
async fn unreachable_jwks_is_unavailable_not_invalid() {
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let auth = jwks_auth(&format!("http://127.0.0.1:{closed_port}/jwks"), 0, 300);
    let good = rs256("rsa1", "rsa1.key.pem", &claims(json!({"sub": "bob"})));
    let err = username(&auth, &good).await.unwrap_err();
    assert!(matches!(err, AuthError::KeysUnavailable(_)), "{err}");
}

// ---- the middleware, over real HTTP ----

async fn whoami(Extension(identity): Extension<Identity>) -> String {
    identity.username().to_string()
}

async fn gateway(allow_anonymous: bool) -> SocketAddr {
    let settings = AuthSettings {
        allow_anonymous,
        ..jwt_settings(JwtSettings {
            hs256_secret: Some(SECRET.into()),
            ..JwtSettings::default()
        })
    };
    let auth = Authenticator::new(&settings, users()).unwrap();
    let router =
        Router::new()
            .route("/mcp", get(whoami))
            .layer(axum::middleware::from_fn_with_state(
                auth,
                authenticate_request,
            ));
    serve(router).await
}

async fn call(addr: SocketAddr, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, String) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut request = http::Request::get(format!("http://{addr}/mcp"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client
        .request(request.body(Empty::new()).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

#[tokio::test]
async fn middleware_sets_identity_or_answers_401() {
    let addr = gateway(false).await;
    let good = token(
        "",
        Algorithm::HS256,
        None,
        &claims(json!({"email": "alice@example.com"})),
    );
    let (status, _, body) = call(addr, &[("authorization", &format!("Bearer {good}"))]).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "alice"));

    let (status, headers, body) = call(addr, &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer realm=\"mcc\"");
    assert!(body.contains("authentication required"), "{body}");

    let expired = token(
        "",
        Algorithm::HS256,
        None,
        &claims(json!({"sub": "bob", "exp": now() - 3600})),
    );
    let (status, headers, _) = call(addr, &[("authorization", &format!("Bearer {expired}"))]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        headers[header::WWW_AUTHENTICATE],
        "Bearer realm=\"mcc\", error=\"invalid_token\", error_description=\"invalid token: token expired\""
    );

    let unscoped = token(
        "",
        Algorithm::HS256,
        None,
        &claims(json!({"sub": "bob", "scope": "openid"})),
    );
    let (status, headers, _) =
        call(addr, &[("authorization", &format!("Bearer {unscoped}"))]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        headers[header::WWW_AUTHENTICATE]
            .to_str()
            .unwrap()
            .contains("error=\"insufficient_scope\"")
    );
}

#[tokio::test]
async fn anonymous_allowed_only_without_any_credential() {
    let addr = gateway(true).await;
    let (status, _, body) = call(addr, &[]).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "anonymous"));
    let (status, _, _) = call(addr, &[("authorization", "Bearer garbage")]).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a bad credential is never downgraded"
    );
}

// ---- JWKS over HTTPS ----

/// A minimal HTTPS server (rustls, test certificate for 127.0.0.1) answering every
/// request with `body` as JSON.
async fn serve_https(body: String) -> SocketAddr {
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

#[tokio::test]
async fn jwks_over_https_trusts_the_configured_ca_only() {
    let body = json!({"keys": [public_jwk("rsa1.key.pem", Algorithm::RS256, "rsa1")]}).to_string();
    let addr = serve_https(body).await;
    let url = format!("https://127.0.0.1:{}/jwks", addr.port());
    let settings = |ca: Option<PathBuf>| {
        jwt_settings(JwtSettings {
            jwks_url: Some(url.clone()),
            jwks_ca_file: ca,
            jwks_timeout_secs: 2,
            ..JwtSettings::default()
        })
    };
    let good = rs256("rsa1", "rsa1.key.pem", &claims(json!({"sub": "bob"})));

    let with_ca = Authenticator::new(&settings(Some(fixture("tls-ca.pem"))), users()).unwrap();
    assert_eq!(username(&with_ca, &good).await.unwrap(), "bob");

    // Without the CA the server's certificate is not trusted: no keys, 503 not 401.
    let without_ca = Authenticator::new(&settings(None), users()).unwrap();
    let err = username(&without_ca, &good).await.unwrap_err();
    assert!(
        matches!(&err, AuthError::KeysUnavailable(why) if why.contains("certificate")),
        "{err}"
    );

    let bad_ca = Authenticator::new(&settings(Some(fixture("rsa1.pub.pem"))), users());
    assert_eq!(
        bad_ca.err().unwrap().to_string(),
        "auth.jwt.jwks_ca_file: not a PEM certificate bundle: no certificate in it"
    );
}
