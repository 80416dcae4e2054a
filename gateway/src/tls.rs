//! TLS as the gateway's own HTTP clients use it: the process's rustls crypto provider
//! (ring, the one the whole workspace uses: no aws-lc-rs in the build) and the one HTTPS
//! connector its hyper clients share (JWKS, the OTLP exporter).
//!
//! reqwest brings no provider of its own once any crate built in the same cargo
//! invocation asks for its `rustls-no-provider` feature (the CLI's MCP client does), and
//! then panics when a client is built without a process default. Whatever builds a
//! reqwest client — the gateway's remote embedder, the CLI, the tests' HTTP clients —
//! calls [`install_crypto_provider`] first, so no build of the workspace depends on which
//! packages happened to be compiled together.

use std::sync::Arc;

use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use rustls::RootCertStore;

/// Installs ring as the process's default rustls provider; a no-op when one is already
/// installed (by this function or anyone else).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

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

#[cfg(test)]
mod tests {
    #[test]
    fn a_provider_is_installed_and_a_second_call_is_harmless() {
        super::install_crypto_provider();
        super::install_crypto_provider();
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    }
}
