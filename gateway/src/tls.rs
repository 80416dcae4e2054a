//! TLS as the gateway's own HTTP clients use it: the process's rustls crypto provider
//! (ring, the one the whole workspace uses: no aws-lc-rs in the build) and the one HTTPS
//! connector its hyper clients share (JWKS, the OTLP exporter).
//!
//! [`install_crypto_provider`] is defined below the gateway, in `mcc_search::tls` (the
//! remote embedder builds a reqwest client too; why every reqwest user calls it first is
//! told there), and re-exported here for the gateway's other clients, the CLI and tests.

use std::sync::Arc;

use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use rustls::RootCertStore;

pub use mcc_search::tls::install_crypto_provider;

/// The system's root certificates. Unreadable ones are skipped, not an error: a
/// plain-http endpoint needs none, and a configured CA may be all that is needed.
pub fn system_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    roots
}

/// An HTTP/1.1 connector for `http://` and `https://` URLs: rustls with ring, verifying
/// servers against `roots`.
pub fn https_connector(
    roots: RootCertStore,
) -> Result<HttpsConnector<HttpConnector>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build())
}
