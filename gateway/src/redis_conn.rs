//! The gateway's one Redis connection definition. Every Redis user of the gateway gets its
//! client and connection here: sessions and handles ([`crate::session`]), the legacy MCP
//! session registry and session owners ([`crate::mcp`]), the elicitation relay's pub/sub
//! channel, rate-limit windows ([`crate::ratelimit`]), the result cache ([`crate::exec`]),
//! the audit stream ([`crate::audit`]) and the search embedding cache ([`crate::search`]).
//! So a setting of how to reach Redis (TLS and its CA today) is read once and holds for
//! all of them.
//!
//! To add a Redis user: take [`RedisOptions`] from
//! [`crate::session::SessionSettings::redis_options`] and call [`client`] (pub/sub, a
//! connection of your own) or [`connect`] (the lazy, reconnecting [`ConnectionManager`]
//! that commands share). Key formats stay with their owners; this module only connects.
//!
//! TLS: `rediss://host:port` verifies the server against the system's roots, or only
//! against the PEM bundle of `session.redis_tls_ca_file` when set (a private CA). rustls
//! with ring, the process's one provider ([`crate::tls`]); `#insecure` URLs are refused
//! (the crate is built without `tls-rustls-insecure`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

/// How to reach Redis beyond its URL; the same for every Redis connection of a gateway.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedisOptions {
    /// PEM file of the CA certificates a `rediss://` server's certificate must chain to
    /// (instead of the system's roots). Ignored by `redis://` URLs.
    pub tls_ca_file: Option<PathBuf>,
}

/// A Redis setting that cannot be used: the setting's name (`session.redis_url`,
/// `rate_limit.redis_url`, `session.redis_tls_ca_file`, …) and why. Never shows a
/// password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {reason}")]
pub struct RedisSetupError {
    pub setting: &'static str,
    pub reason: String,
}

/// Whether `url` names a Redis this gateway can talk to (`redis://` or `rediss://`).
pub fn is_redis_url(url: &str) -> bool {
    url.starts_with("redis://") || url.starts_with("rediss://")
}

/// A client for `url` (named by `setting` in errors). Nothing is contacted yet.
pub fn client(
    setting: &'static str,
    url: &str,
    options: &RedisOptions,
) -> Result<redis::Client, RedisSetupError> {
    let bad_url = |e: redis::RedisError| RedisSetupError {
        setting,
        reason: format!("{} is not a Redis URL: {e}", redact_url(url)),
    };
    if !is_redis_url(url) {
        return Err(RedisSetupError {
            setting,
            reason: format!("{} must start with redis:// or rediss://", redact_url(url)),
        });
    }
    if !url.starts_with("rediss://") {
        return redis::Client::open(url).map_err(bad_url);
    }
    if url.contains("#insecure") {
        return Err(RedisSetupError {
            setting,
            reason: "#insecure (no certificate check) is not supported; set session.redis_tls_ca_file to trust a private CA".into(),
        });
    }
    crate::tls::install_crypto_provider();
    match &options.tls_ca_file {
        None => redis::Client::open(url).map_err(bad_url),
        Some(path) => {
            let root_cert = read_ca(path)?;
            redis::Client::build_with_tls(
                url,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(root_cert),
                },
            )
            .map_err(|e| RedisSetupError {
                setting: "session.redis_tls_ca_file",
                reason: format!("{}: {e}", path.display()),
            })
        }
    }
}

/// The CA bundle, checked to hold at least one PEM certificate (an empty or DER file
/// would otherwise trust nothing and fail only at the first connection).
fn read_ca(path: &Path) -> Result<Vec<u8>, RedisSetupError> {
    let error = |reason: String| RedisSetupError {
        setting: "session.redis_tls_ca_file",
        reason: format!("{}: {reason}", path.display()),
    };
    let pem = std::fs::read(path).map_err(|e| error(e.to_string()))?;
    if !pem
        .windows(b"-----BEGIN CERTIFICATE-----".len())
        .any(|w| w == b"-----BEGIN CERTIFICATE-----")
    {
        return Err(error(
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(pem)
}

/// The shared command connection for `url`: lazy (not contacted yet; the gateway starts
/// while Redis is down), reconnecting on its own, every call bounded by `timeout`. While
/// Redis is down each call fails fast, and works again once it is back. Must be called
/// within a Tokio runtime.
pub fn connect(
    setting: &'static str,
    url: &str,
    options: &RedisOptions,
    timeout: Duration,
) -> Result<(redis::Client, ConnectionManager), RedisSetupError> {
    let client = client(setting, url, options)?;
    // Few, quick reconnection attempts per failure: a caller waits at most a few
    // timeouts, and the next call starts a new attempt.
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(500));
    let conn = ConnectionManager::new_lazy_with_config(client.clone(), config).map_err(|e| {
        RedisSetupError {
            setting,
            reason: e.to_string(),
        }
    })?;
    Ok((client, conn))
}

/// A URL with any `user:password@` part hidden.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}<redacted>{}", &url[..scheme_end + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_without_a_certificate_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate").unwrap();
        let options = RedisOptions {
            tls_ca_file: Some(path),
        };
        let err = client("session.redis_url", "rediss://127.0.0.1:1", &options).unwrap_err();
        assert_eq!(err.setting, "session.redis_tls_ca_file");
        assert!(err.reason.contains("no PEM certificate"), "{err}");
        let missing = RedisOptions {
            tls_ca_file: Some(dir.path().join("absent.pem")),
        };
        let err = client("session.redis_url", "rediss://127.0.0.1:1", &missing).unwrap_err();
        assert!(
            err.to_string().starts_with("session.redis_tls_ca_file: "),
            "{err}"
        );
    }

    #[test]
    fn bad_urls_name_their_setting_and_hide_the_password() {
        let options = RedisOptions::default();
        let err = client("audit.redis_url", "http://u:secret@h:1", &options).unwrap_err();
        assert_eq!(err.setting, "audit.redis_url");
        assert!(!err.to_string().contains("secret"), "{err}");
        let err = client("audit.redis_url", "rediss://h:1/#insecure", &options).unwrap_err();
        assert!(err.reason.contains("#insecure"), "{err}");
        // Plain and TLS URLs build clients without contacting anything.
        client("audit.redis_url", "redis://127.0.0.1:1", &options).unwrap();
        client("audit.redis_url", "rediss://127.0.0.1:1", &options).unwrap();
    }
}
