//! A JSON Web Key Set fetched over HTTPS (plain HTTP only to a loopback address) and
//! cached: a set is refreshed from half of `cache_ttl` on and never trusted past it, a
//! token signed with an unknown `kid` triggers a refetch (key rotation), and refetches
//! are rate-limited so a flood of forged `kid`s cannot hammer the identity provider.
//!
//! Only RS256 and ES256 signing keys are taken from the set; others are skipped.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http::Uri;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::AuthError;

/// A verification key and the one algorithm it may be used with.
#[derive(Clone)]
pub struct VerifyingKey {
    pub key: DecodingKey,
    pub algorithm: Algorithm,
}

/// How the cache behaves; see `jwt.*` in `docs/auth.md`.
#[derive(Debug, Clone)]
pub struct JwksOptions {
    pub url: String,
    pub cache_ttl: Duration,
    pub min_refetch_interval: Duration,
    pub http_timeout: Duration,
    /// Extra PEM root certificates (e.g. the cluster CA for the API server's JWKS).
    pub ca_pem: Option<Vec<u8>>,
}

#[derive(Default)]
struct KeySet {
    keys: HashMap<String, Arc<VerifyingKey>>,
    /// Keys without a `kid`, usable only when the set holds exactly one key.
    unnamed: Vec<Arc<VerifyingKey>>,
    fetched_at: Option<Instant>,
}

impl KeySet {
    fn find(&self, kid: Option<&str>) -> Option<Arc<VerifyingKey>> {
        match kid {
            Some(kid) => self.keys.get(kid).cloned(),
            None if self.keys.len() + self.unnamed.len() == 1 => self
                .keys
                .values()
                .chain(self.unnamed.iter())
                .next()
                .cloned(),
            None => None,
        }
    }

    fn is_younger_than(&self, age: Duration) -> bool {
        self.fetched_at.is_some_and(|at| at.elapsed() < age)
    }
}

/// The HTTP(S) client used for JWKS requests: rustls with the ring provider, the
/// system's root certificates plus any configured CA bundle.
type HttpClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// A JWKS document larger than this is refused (a key set is a few kilobytes).
pub const MAX_JWKS_BYTES: usize = 1 << 20;

/// Where a key set document comes from: an identity provider's URL ([`JwksCache::new`]),
/// or the Kubernetes API server's ServiceAccount keys (`crate::kube::sa_keys`).
#[async_trait::async_trait]
pub trait JwksSource: Send + Sync {
    /// The document (at most [`MAX_JWKS_BYTES`]), or why there is none.
    async fn get(&self) -> Result<Bytes, String>;
    /// Where it comes from, for log lines.
    fn describe(&self) -> &str;
}

/// A JWKS URL over HTTP(S).
struct HttpSource {
    url: String,
    uri: Uri,
    client: HttpClient,
}

#[async_trait::async_trait]
impl JwksSource for HttpSource {
    async fn get(&self) -> Result<Bytes, String> {
        let response = self
            .client
            .get(self.uri.clone())
            .await
            .map_err(|e| mcc_catalog::error_chain::render(&e))?;
        if !response.status().is_success() {
            return Err(format!("HTTP {}", response.status()));
        }
        let body = Limited::new(response.into_body(), MAX_JWKS_BYTES)
            .collect()
            .await
            .map_err(|e| format!("reading the body: {e}"))?;
        Ok(body.to_bytes())
    }

    fn describe(&self) -> &str {
        &self.url
    }
}

/// The cached key set of one source.
pub struct JwksCache {
    options: JwksOptions,
    source: Box<dyn JwksSource>,
    current: RwLock<Arc<KeySet>>,
    /// Single-flight fetching; holds the instant of the last attempt (success or not).
    fetch: tokio::sync::Mutex<Option<Instant>>,
}

/// Why the JWKS client could not be built (a configuration error).
#[derive(Debug, thiserror::Error)]
pub enum JwksSetupError {
    #[error("auth.jwt.jwks_url: '{0}' is not an http(s) URL")]
    BadUrl(String),
    #[error(
        "auth.jwt.jwks_url: '{0}' is plain http to a host that is not loopback: keys fetched \
         without TLS can be replaced on the way; use https"
    )]
    PlainHttp(String),
    #[error("auth.jwt.jwks_ca_file: not a PEM certificate bundle: {0}")]
    BadCa(String),
    #[error("auth.jwt.jwks_url: cannot set up TLS: {0}")]
    Tls(String),
}

impl JwksCache {
    pub fn new(options: JwksOptions) -> Result<Self, JwksSetupError> {
        let uri: Uri = options
            .url
            .parse()
            .ok()
            .filter(|u: &Uri| matches!(u.scheme_str(), Some("http" | "https")))
            .ok_or_else(|| JwksSetupError::BadUrl(options.url.clone()))?;
        if uri.scheme_str() == Some("http") && !is_loopback_host(uri.host().unwrap_or("")) {
            return Err(JwksSetupError::PlainHttp(options.url.clone()));
        }
        let client = http_client(options.ca_pem.as_deref())?;
        let source = HttpSource {
            url: options.url.clone(),
            uri,
            client,
        };
        Ok(Self::with_source(options, Box::new(source)))
    }

    /// A cache over `source` (`options.url` and `options.ca_pem` are not used).
    pub fn with_source(options: JwksOptions, source: Box<dyn JwksSource>) -> Self {
        Self {
            options,
            source,
            current: RwLock::default(),
            fetch: tokio::sync::Mutex::new(None),
        }
    }

    /// The key for a token's `kid`. A set is refreshed from half its TTL on, and never
    /// used past its TTL: a key removed at the identity provider stops working within
    /// `cache_ttl` even while the provider cannot be reached (tokens are then refused
    /// as "keys unavailable" until a fetch succeeds). An unknown `kid` triggers a fetch.
    pub async fn key(&self, kid: Option<&str>) -> Result<Arc<VerifyingKey>, AuthError> {
        let refresh_from = self.options.cache_ttl / 2;
        let set = self.snapshot();
        if set.is_younger_than(refresh_from)
            && let Some(key) = set.find(kid)
        {
            return Ok(key);
        }
        // One request refreshes; the others go on with the keys still valid, if any.
        let mut last_attempt = match self.fetch.try_lock() {
            Ok(guard) => guard,
            Err(_) => match self.usable(&set, kid) {
                Ok(key) => return Ok(key),
                Err(_) => self.fetch.lock().await,
            },
        };
        // Another request may have refreshed the set while this one waited.
        let set = self.snapshot();
        if set.is_younger_than(refresh_from)
            && let Some(key) = set.find(kid)
        {
            return Ok(key);
        }
        let recently =
            last_attempt.is_some_and(|at| at.elapsed() < self.options.min_refetch_interval);
        if recently {
            return self.usable(&set, kid);
        }
        *last_attempt = Some(Instant::now());
        match self.fetch_set().await {
            Ok(new_set) => {
                let new_set = Arc::new(new_set);
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = new_set.clone();
                unknown_if_missing(&new_set, kid)
            }
            Err(reason) => {
                tracing::warn!(source = %self.source.describe(), %reason, "JWKS fetch failed");
                // Keys fetched less than a TTL ago are still trusted; older ones are not.
                // The caller gets no detail: the URL and the cause are for the log.
                self.usable(&set, kid)
            }
        }
    }

    /// The key from `set` while the set is younger than its TTL.
    fn usable(&self, set: &KeySet, kid: Option<&str>) -> Result<Arc<VerifyingKey>, AuthError> {
        match set.fetched_at {
            None => Err(AuthError::KeysUnavailable(
                "the signing keys could not be fetched".into(),
            )),
            Some(at) if at.elapsed() >= self.options.cache_ttl => Err(AuthError::KeysUnavailable(
                "the signing keys could not be refreshed; retrying shortly".into(),
            )),
            Some(_) => unknown_if_missing(set, kid),
        }
    }

    fn snapshot(&self) -> Arc<KeySet> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    async fn fetch_set(&self) -> Result<KeySet, String> {
        let from = self.source.describe();
        let body = tokio::time::timeout(self.options.http_timeout, self.source.get())
            .await
            .map_err(|_| {
                format!(
                    "GET {from}: no answer within {:?}",
                    self.options.http_timeout
                )
            })?
            .map_err(|e| format!("GET {from}: {e}"))?;
        let json: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| format!("GET {from}: not JSON: {e}"))?;
        parse_set(&json).map_err(|e| format!("GET {from}: {e}"))
    }
}

fn http_client(extra_ca_pem: Option<&[u8]>) -> Result<HttpClient, JwksSetupError> {
    let mut roots = crate::tls::system_roots();
    if let Some(pem) = extra_ca_pem {
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| JwksSetupError::BadCa(e.to_string()))?;
        if certs.is_empty() {
            return Err(JwksSetupError::BadCa("no certificate in it".into()));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| JwksSetupError::BadCa(e.to_string()))?;
        }
    }
    let connector =
        crate::tls::https_connector(roots).map_err(|e| JwksSetupError::Tls(e.to_string()))?;
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

/// `localhost`, or an IPv4 or IPv6 loopback address.
fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn unknown_if_missing(set: &KeySet, kid: Option<&str>) -> Result<Arc<VerifyingKey>, AuthError> {
    set.find(kid).ok_or_else(|| {
        AuthError::InvalidToken(match kid {
            Some(kid) => format!("unknown signing key '{kid}'"),
            None => "token has no 'kid' and the key set does not hold exactly one key".into(),
        })
    })
}

/// The usable signing keys of a JWKS document.
fn parse_set(body: &serde_json::Value) -> Result<KeySet, String> {
    let keys = body
        .get("keys")
        .and_then(|k| k.as_array())
        .ok_or("no 'keys' array")?;
    let mut set = KeySet {
        fetched_at: Some(Instant::now()),
        ..KeySet::default()
    };
    for raw in keys {
        // One odd key (another type, an encryption key) must not spoil the whole set.
        let Ok(jwk) = serde_json::from_value::<Jwk>(raw.clone()) else {
            continue;
        };
        let Some(key) = verifying_key(&jwk) else {
            continue;
        };
        match jwk.common.key_id {
            Some(kid) => {
                set.keys.insert(kid, Arc::new(key));
            }
            None => set.unnamed.push(Arc::new(key)),
        }
    }
    Ok(set)
}

fn verifying_key(jwk: &Jwk) -> Option<VerifyingKey> {
    if matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
        return None;
    }
    let algorithm = match (&jwk.algorithm, jwk.common.key_algorithm) {
        (AlgorithmParameters::RSA(_), None | Some(KeyAlgorithm::RS256)) => Algorithm::RS256,
        (AlgorithmParameters::EllipticCurve(ec), None | Some(KeyAlgorithm::ES256))
            if ec.curve == EllipticCurve::P256 =>
        {
            Algorithm::ES256
        }
        _ => return None,
    };
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(VerifyingKey { key, algorithm })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn skips_keys_it_cannot_use() {
        let body = json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {"kty": "RSA", "use": "enc", "kid": "enc", "n": "AQAB", "e": "AQAB"},
            {"kty": "weird", "kid": "weird"},
            {"kty": "EC", "crv": "P-256", "kid": "ec", "alg": "ES256",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}
        ]});
        let set = parse_set(&body).unwrap();
        assert_eq!(set.keys.keys().collect::<Vec<_>>(), vec!["ec"]);
        assert_eq!(set.find(None).unwrap().algorithm, Algorithm::ES256);
        assert!(parse_set(&json!({"nokeys": []})).is_err());
    }

    #[test]
    fn plain_http_only_to_loopback() {
        let options = |url: &str| JwksOptions {
            url: url.into(),
            cache_ttl: Duration::from_secs(300),
            min_refetch_interval: Duration::from_secs(10),
            http_timeout: Duration::from_secs(5),
            ca_pem: None,
        };
        crate::tls::install_crypto_provider();
        for ok in [
            "http://127.0.0.1:8080/jwks",
            "http://localhost/jwks",
            "http://[::1]/k",
            "https://idp.example/k",
        ] {
            assert!(JwksCache::new(options(ok)).is_ok(), "{ok}");
        }
        for bad in [
            "http://idp.example/jwks",
            "http://10.0.0.1/jwks",
            "http://127.0.0.1.nip.io/k",
        ] {
            let e = JwksCache::new(options(bad)).err().unwrap().to_string();
            assert!(e.contains("use https") && e.contains(bad), "{e}");
        }
    }
}
