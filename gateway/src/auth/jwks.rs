//! A JSON Web Key Set fetched over HTTP(S) and cached: keys are reused for `cache_ttl`,
//! a token signed with an unknown `kid` triggers a refetch (key rotation), and refetches
//! are rate-limited so a flood of forged `kid`s cannot hammer the identity provider.
//!
//! Only RS256 and ES256 signing keys are taken from the set; others are skipped.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};

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

    fn is_fresh(&self, ttl: Duration) -> bool {
        self.fetched_at.is_some_and(|at| at.elapsed() < ttl)
    }
}

/// The cached key set of one JWKS URL.
pub struct JwksCache {
    options: JwksOptions,
    client: reqwest::Client,
    current: RwLock<Arc<KeySet>>,
    /// Single-flight fetching; holds the instant of the last attempt (success or not).
    fetch: tokio::sync::Mutex<Option<Instant>>,
}

/// Why the JWKS client could not be built (a configuration error).
#[derive(Debug, thiserror::Error)]
pub enum JwksSetupError {
    #[error("auth.jwt.jwks_ca_file: not a PEM certificate bundle: {0}")]
    BadCa(String),
    #[error("auth.jwt.jwks_url: cannot build the HTTP client: {0}")]
    Client(String),
}

impl JwksCache {
    pub fn new(options: JwksOptions) -> Result<Self, JwksSetupError> {
        // reqwest is built without a default TLS crypto backend; ring is the one this
        // workspace already uses. Installing fails harmlessly if one is already set.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .timeout(options.http_timeout)
            .connect_timeout(options.http_timeout);
        if let Some(pem) = &options.ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| JwksSetupError::BadCa(e.to_string()))?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let client = builder
            .build()
            .map_err(|e| JwksSetupError::Client(e.to_string()))?;
        Ok(Self {
            options,
            client,
            current: RwLock::default(),
            fetch: tokio::sync::Mutex::new(None),
        })
    }

    /// The key for a token's `kid`, fetching the set when it is stale or lacks the kid.
    pub async fn key(&self, kid: Option<&str>) -> Result<Arc<VerifyingKey>, AuthError> {
        let set = self.snapshot();
        if set.is_fresh(self.options.cache_ttl)
            && let Some(key) = set.find(kid)
        {
            return Ok(key);
        }
        let mut last_attempt = self.fetch.lock().await;
        // Another request may have refreshed the set while this one waited.
        let set = self.snapshot();
        let fresh = set.is_fresh(self.options.cache_ttl);
        if fresh && let Some(key) = set.find(kid) {
            return Ok(key);
        }
        let recently =
            last_attempt.is_some_and(|at| at.elapsed() < self.options.min_refetch_interval);
        if recently {
            return stale_or_unknown(&set, kid);
        }
        *last_attempt = Some(Instant::now());
        match self.fetch_set().await {
            Ok(new_set) => {
                let new_set = Arc::new(new_set);
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = new_set.clone();
                unknown_if_missing(&new_set, kid)
            }
            Err(reason) => {
                tracing::warn!(url = %self.options.url, %reason, "JWKS fetch failed");
                // Keep serving keys we already trust rather than locking everyone out.
                set.find(kid).ok_or(AuthError::KeysUnavailable(reason))
            }
        }
    }

    fn snapshot(&self) -> Arc<KeySet> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    async fn fetch_set(&self) -> Result<KeySet, String> {
        let response = self
            .client
            .get(&self.options.url)
            .send()
            .await
            .map_err(|e| format!("GET {}: {e}", self.options.url))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("GET {}: HTTP {status}", self.options.url));
        }
        let body: serde_json::Value = response
            .json()
            .await
            .map_err(|e| format!("GET {}: not JSON: {e}", self.options.url))?;
        parse_set(&body).map_err(|e| format!("GET {}: {e}", self.options.url))
    }
}

/// The answer while refetching is rate-limited: what we have, even if past its TTL.
fn stale_or_unknown(set: &KeySet, kid: Option<&str>) -> Result<Arc<VerifyingKey>, AuthError> {
    if set.fetched_at.is_none() {
        return Err(AuthError::KeysUnavailable(
            "the key set could not be fetched yet; retrying shortly".into(),
        ));
    }
    unknown_if_missing(set, kid)
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
}
