//! The process's rustls crypto provider: ring, the one the whole workspace uses (no
//! aws-lc-rs in the build). It lives here, the lowest crate that builds an HTTPS client
//! (the remote embedder); the gateway re-exports it for its own clients.
//!
//! reqwest brings no provider of its own once any crate built in the same cargo
//! invocation asks for its `rustls-no-provider` feature (this crate, the CLI's MCP
//! client), and then panics when a client is built without a process default. Whatever
//! builds a reqwest client — the remote embedder, the CLI, the tests' HTTP clients —
//! calls [`install_crypto_provider`] first, so no build of the workspace depends on which
//! packages happened to be compiled together.

/// Installs ring as the process's default rustls provider; a no-op when one is already
/// installed (by this function or anyone else).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
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
