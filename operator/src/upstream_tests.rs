//! An MCPServer's `ca` against a real TLS upstream: the local rmcp upstream of
//! `listen_tests` behind a rustls front whose certificate (for 127.0.0.1) a throwaway CA
//! signed (`gateway/tests/fixtures/tls-*.pem`, made with openssl). Discovery trusts the
//! upstream only with that CA, read from a ConfigMap or Secret of the MCPServer's
//! namespace (a scripted API server); bad or oversized PEM, a missing key and a
//! forbidden read are refused with the source named. File mode's `ca_file` goes through
//! the same client function.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine as _;
use mcc_catalog::crd::{MCPServer, MCPServerSpec, SecretKey, UpstreamCa};
use mcc_catalog::kube_mock::ApiServer;
use mcc_catalog::upstream::client::{ConnectError, discover_once};
use serde_json::json;

use super::*;
use crate::listen::tests::{serve, upstream};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../gateway/tests/fixtures")
        .join(name)
}

fn ca_pem() -> String {
    std::fs::read_to_string(fixture("tls-ca.pem")).unwrap()
}

/// A TLS front on a loopback port for the plain HTTP server at `plain`.
async fn tls_front(plain: SocketAddr) -> SocketAddr {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
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
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A client that refuses our certificate ends the handshake.
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut inner) = tokio::net::TcpStream::connect(plain).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut inner).await;
            });
        }
    });
    addr
}

/// The upstream over https://127.0.0.1:port/mcp.
async fn https_upstream() -> String {
    let url = serve(upstream(true)).await;
    let plain: SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    format!("https://{}/mcp", tls_front(plain).await)
}

fn mcpserver(url: &str, ca: Option<UpstreamCa>) -> MCPServer {
    let mut s = MCPServer::new(
        "tls",
        MCPServerSpec {
            url: url.into(),
            ca,
            ..Default::default()
        },
    );
    s.metadata.namespace = Some("team-a".into());
    s
}

fn key(name: &str, key: &str) -> Option<SecretKey> {
    Some(SecretKey {
        name: name.into(),
        key: key.into(),
    })
}

fn names(listed: &[mcc_catalog::upstream::Discovered]) -> Vec<&str> {
    listed.iter().map(|d| d.name.as_str()).collect()
}

#[tokio::test]
async fn the_ca_from_a_configmap_or_secret_is_what_makes_a_tls_upstream_trusted() {
    let url = https_upstream().await;

    // Without the CA: the system roots do not know it.
    let plain = spec_of(&mcpserver(&url, None), Default::default()).unwrap();
    let e = discover_once(&plain).await.unwrap_err();
    assert!(matches!(e, ConnectError::Connect(_)), "{e:?}");

    // From a ConfigMap key.
    let server = mcpserver(
        &url,
        Some(UpstreamCa {
            config_map_key_ref: key("upstream-ca", "ca.crt"),
            secret_key_ref: None,
        }),
    );
    let (client, mut api) = ApiServer::new();
    let reply = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "upstream-ca"},
                       "data": {"ca.crt": ca_pem()}});
    let (listed, _) = tokio::join!(discover(&client, &server), async {
        api.expect(
            "GET",
            "/api/v1/namespaces/team-a/configmaps/upstream-ca",
            200,
            reply,
        )
        .await
    });
    assert_eq!(names(&listed.unwrap()), ["one"]);

    // From a Secret key.
    let server = mcpserver(
        &url,
        Some(UpstreamCa {
            config_map_key_ref: None,
            secret_key_ref: key("upstream-ca", "ca.crt"),
        }),
    );
    let b64 = base64::engine::general_purpose::STANDARD.encode(ca_pem());
    let reply = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "upstream-ca"},
                       "data": {"ca.crt": b64}});
    let (listed, _) = tokio::join!(discover(&client, &server), async {
        api.expect(
            "GET",
            "/api/v1/namespaces/team-a/secrets/upstream-ca",
            200,
            reply,
        )
        .await
    });
    assert_eq!(names(&listed.unwrap()), ["one"]);
}

#[tokio::test]
async fn a_bad_ca_is_refused_naming_its_source() {
    let url = https_upstream().await;
    let server = mcpserver(
        &url,
        Some(UpstreamCa {
            config_map_key_ref: key("upstream-ca", "ca.crt"),
            secret_key_ref: None,
        }),
    );
    let path = "/api/v1/namespaces/team-a/configmaps/upstream-ca";
    let cm = |data: serde_json::Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "upstream-ca"}, "data": data});
    let forbidden = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "reason": "Forbidden", "code": 403, "message": "forbidden"});
    let cases = [
        (
            200,
            cm(json!({"other": "x"})),
            "ca: ConfigMap team-a/upstream-ca key ca.crt: no such key",
        ),
        (
            200,
            cm(json!({"ca.crt": "a".repeat(mcc_catalog::upstream::MAX_CA_BYTES + 1)})),
            "ca: ConfigMap team-a/upstream-ca key ca.crt: more than 262144 bytes",
        ),
        (
            403,
            forbidden,
            "ca: ConfigMap team-a/upstream-ca key ca.crt: the operator may not read it",
        ),
        (
            200,
            cm(json!({"ca.crt": "not a certificate"})),
            "its ca cannot be used: no PEM CERTIFICATE block in it",
        ),
    ];
    for (status, reply, want) in cases {
        let (client, mut api) = ApiServer::new();
        let (got, _) = tokio::join!(discover(&client, &server), async {
            api.expect("GET", path, status, reply).await
        });
        let e = got.unwrap_err();
        assert!(e.public().starts_with(want), "{} / {e}", e.public());
        assert_eq!(e.kind(), "ca");
    }
}

#[test]
fn a_ca_needs_https_and_exactly_one_source() {
    let both = UpstreamCa {
        config_map_key_ref: key("a", "b"),
        secret_key_ref: key("a", "b"),
    };
    let e = spec_of(
        &mcpserver("https://mcp.internal/mcp", Some(both)),
        Default::default(),
    )
    .unwrap_err();
    assert_eq!(e.field, "ca");
    let one = UpstreamCa {
        config_map_key_ref: key("a", "b"),
        secret_key_ref: None,
    };
    let e = spec_of(
        &mcpserver("http://mcp.internal/mcp", Some(one)),
        Default::default(),
    )
    .unwrap_err();
    assert_eq!(
        (e.field.as_str(), e.message.as_str()),
        ("ca", "a CA applies to an https:// url only")
    );
}

/// File mode's `ca_file:` is the same client rule: trusted with the file, refused with
/// the path named when it is missing or holds no certificate.
#[tokio::test]
async fn file_modes_ca_file_goes_through_the_same_rule() {
    let url = https_upstream().await;
    let mut spec = spec_of(&mcpserver(&url, None), Default::default()).unwrap();
    spec.ca_file = Some(fixture("tls-ca.pem"));
    assert_eq!(names(&discover_once(&spec).await.unwrap()), ["one"]);

    spec.ca_file = Some(fixture("absent.pem"));
    let e = discover_once(&spec).await.unwrap_err();
    assert!(
        e.to_string().starts_with("ca_file ") && e.to_string().contains("absent.pem"),
        "{e}"
    );
    spec.ca_file = Some(fixture("rsa1.pub.pem"));
    let e = discover_once(&spec).await.unwrap_err();
    assert_eq!(
        e.public(),
        "its ca_file cannot be used: no PEM CERTIFICATE block in it"
    );
}

/// A projected token (the kubelet's file under the token directory) goes to the upstream
/// as `Authorization: Bearer`, over TLS; a missing or malformed file is refused by name,
/// never quoting a token.
#[tokio::test]
async fn the_projected_token_of_the_audience_reaches_the_upstream() {
    let (url, seen) = crate::listen::tests::serve_recording(upstream(true)).await;
    let plain: SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    let url = format!("https://{}/mcp", tls_front(plain).await);
    let dir = tempfile::tempdir().unwrap();
    let file = mcc_catalog::upstream::token_file(dir.path(), "mcp.vendor.example");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "eyJhbGciOi.projected.token\n").unwrap();

    let token = mcc_catalog::upstream::read_token(dir.path(), "mcp.vendor.example").unwrap();
    let headers = [("Authorization".to_string(), format!("Bearer {token}"))].into();
    let mut spec = spec_of(&mcpserver(&url, None), headers).unwrap();
    spec.ca_pem = Some(ca_pem());
    assert_eq!(names(&discover_once(&spec).await.unwrap()), ["one"]);
    let seen = seen.lock().unwrap().clone();
    assert!(!seen.is_empty());
    assert!(
        seen.iter()
            .all(|h| h == "Bearer eyJhbGciOi.projected.token"),
        "{seen:?}"
    );

    let e = mcc_catalog::upstream::read_token(dir.path(), "other.example").unwrap_err();
    assert!(
        e.contains("no projected ServiceAccount token for audience 'other.example'"),
        "{e}"
    );
    std::fs::write(&file, "two\nlines").unwrap();
    let e = mcc_catalog::upstream::read_token(dir.path(), "mcp.vendor.example").unwrap_err();
    assert!(e.contains("is not a token") && !e.contains("two"), "{e}");
}
