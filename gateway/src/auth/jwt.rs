//! The `jwt` backend: verify a bearer JWT (RS256/ES256 from a JWKS URL or a static PEM
//! key, or HS256 with a shared secret), check issuer, audience, expiry and required
//! scopes, and map its claims to a catalog user.
//!
//! Identity, first match wins:
//! 1. `iss` + `sub` bound to a user by `oidcSubjects` (a UserGrant's, or a users-file
//!    entry's `oidc_subjects`). An old plain-subject binding counts only under the pinned
//!    `auth.jwt.issuer`.
//! 2. `email`, only when the provider vouches for it (`email_verified: true`;
//!    `require_email_verified: false` also accepts a token that does not say).
//! 3. The claims listed in `username_claims` (default `[sub]`), in order, naming a catalog
//!    user by username. Claims the user can edit at the identity provider
//!    (`preferred_username`, `name`, a GitHub `login`) count only if listed there.
//! 4. Otherwise the caller is a user named by `sub` with no groups and no grants (public
//!    tools only), refused if that name is a catalog user it was not mapped to (it would
//!    share that user's sessions).

use std::path::PathBuf;
use std::time::Duration;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use mcc_catalog::{Secret, User};
use serde::{Deserialize, Deserializer};

use super::AuthError;
use super::directory::Directory;
use super::jwks::{JwksCache, JwksOptions, VerifyingKey};

/// `auth.jwt.*`: exactly one key source (`jwks_url`, `public_key_pem`,
/// `public_key_file`, `hs256_secret`) plus the claims every token must satisfy.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtSettings {
    /// URL of the identity provider's JSON Web Key Set (RS256/ES256 keys by `kid`).
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// A PEM public key, inline: RSA → RS256, EC P-256 → ES256.
    #[serde(default)]
    pub public_key_pem: Option<String>,
    /// A file holding a PEM public key (same rules as `public_key_pem`).
    #[serde(default)]
    pub public_key_file: Option<PathBuf>,
    /// An HS256 shared secret, at least 32 bytes. Prefer the `MCC_` environment override
    /// to writing it in a file.
    #[serde(default)]
    pub hs256_secret: Option<Secret>,
    /// Required `iss` value (required: a token of another provider must not work here).
    #[serde(default)]
    pub issuer: Option<String>,
    /// Accepted `aud` values (one string or a list); required: a token minted for
    /// another service must not work here.
    #[serde(default, deserialize_with = "one_or_many")]
    pub audience: Vec<String>,
    /// Scopes every token must carry, in its `scope` string or `scp` list.
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// Seconds a fetched key set is reused before it is fetched again.
    #[serde(default = "default_cache_ttl")]
    pub jwks_cache_ttl_secs: u64,
    /// Minimum seconds between two fetches (an unknown `kid` triggers a fetch).
    #[serde(default = "default_min_refetch")]
    pub jwks_min_refetch_secs: u64,
    /// Timeout of one JWKS request, in seconds.
    #[serde(default = "default_http_timeout")]
    pub jwks_timeout_secs: u64,
    /// Extra PEM CA bundle trusted for the JWKS URL (e.g. the cluster CA).
    #[serde(default)]
    pub jwks_ca_file: Option<PathBuf>,
    /// Clock skew tolerated on `exp` and `nbf`, in seconds.
    #[serde(default = "default_leeway")]
    pub leeway_secs: u64,
    /// `true` (default): an `email` claim selects a catalog user only when the token
    /// says `email_verified: true`. `false`: also when it does not say (never when it
    /// says `false`).
    #[serde(default = "default_true")]
    pub require_email_verified: bool,
    /// Claims whose value may name a catalog user by username, tried in order after
    /// `oidcSubjects` and the email. Default `[sub]`. List a claim the user can edit at
    /// the identity provider (`preferred_username`, `name`) only if the provider forbids
    /// that edit.
    #[serde(default = "default_username_claims")]
    pub username_claims: Vec<String>,
}

fn default_true() -> bool {
    true
}
fn default_username_claims() -> Vec<String> {
    vec!["sub".into()]
}

fn default_cache_ttl() -> u64 {
    300
}
fn default_min_refetch() -> u64 {
    10
}
fn default_http_timeout() -> u64 {
    5
}
fn default_leeway() -> u64 {
    60
}

impl Default for JwtSettings {
    fn default() -> Self {
        Self {
            jwks_url: None,
            public_key_pem: None,
            public_key_file: None,
            hs256_secret: None,
            issuer: None,
            audience: vec![],
            required_scopes: vec![],
            jwks_cache_ttl_secs: default_cache_ttl(),
            jwks_min_refetch_secs: default_min_refetch(),
            jwks_timeout_secs: default_http_timeout(),
            jwks_ca_file: None,
            leeway_secs: default_leeway(),
            require_email_verified: true,
            username_claims: default_username_claims(),
        }
    }
}

fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

/// A bad `auth.jwt` setting, named.
#[derive(Debug, thiserror::Error)]
pub enum JwtSetupError {
    #[error(
        "auth.jwt: set exactly one of jwks_url, public_key_pem, public_key_file, hs256_secret (found {0})"
    )]
    KeySource(usize),
    #[error("auth.jwt.audience: required (the token's 'aud' must name this gateway)")]
    NoAudience,
    #[error(
        "auth.jwt.issuer: required (the token's 'iss' must name your identity provider: \
         without it, a token of any provider that shares the audience would be accepted)"
    )]
    NoIssuer,
    #[error("auth.jwt.hs256_secret: must be at least 32 bytes")]
    WeakSecret,
    #[error("auth.jwt.username_claims: '{0}' is not a claim name")]
    BadClaimName(String),
    #[error("auth.jwt.{field}: {reason}")]
    BadKey { field: &'static str, reason: String },
    #[error("auth.jwt.{field}: cannot read {path}: {reason}")]
    Read {
        field: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error(transparent)]
    Jwks(#[from] super::jwks::JwksSetupError),
}

enum KeySource {
    Jwks(Box<JwksCache>),
    Static(VerifyingKey),
}

/// Verifies tokens against one key source and one set of claim rules.
pub struct JwtVerifier {
    keys: KeySource,
    validation: Validation,
    required_scopes: Vec<String>,
    mapping: Mapping,
}

/// How a verified token's claims select a catalog user (see the module doc).
struct Mapping {
    /// `auth.jwt.issuer`: old plain-subject bindings count under it alone.
    pinned_issuer: Option<String>,
    require_email_verified: bool,
    username_claims: Vec<String>,
}

/// The claims that name the caller and carry scopes.
#[derive(Debug, Deserialize)]
struct Claims {
    iss: Option<String>,
    sub: Option<String>,
    email: Option<String>,
    /// A boolean, or (some providers) the string `"true"`/`"false"`.
    email_verified: Option<serde_json::Value>,
    scope: Option<String>,
    scp: Option<Scopes>,
    /// Every other claim, for `username_claims`.
    #[serde(flatten)]
    other: serde_json::Map<String, serde_json::Value>,
}

impl Claims {
    /// A non-empty string claim by name.
    fn text(&self, name: &str) -> Option<&str> {
        let value = match name {
            "iss" => self.iss.as_deref(),
            "sub" => self.sub.as_deref(),
            "email" => self.email.as_deref(),
            "scope" => self.scope.as_deref(),
            other => self.other.get(other).and_then(|v| v.as_str()),
        };
        value.filter(|v| !v.is_empty())
    }

    /// `Some(true)`/`Some(false)` when the token says whether its email is verified.
    fn email_verified(&self) -> Option<bool> {
        match self.email_verified.as_ref()? {
            serde_json::Value::Bool(b) => Some(*b),
            serde_json::Value::String(s) if s.eq_ignore_ascii_case("true") => Some(true),
            _ => Some(false),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Scopes {
    List(Vec<String>),
    Text(String),
}

impl JwtVerifier {
    pub fn new(settings: &JwtSettings) -> Result<Self, JwtSetupError> {
        if settings.audience.is_empty() {
            return Err(JwtSetupError::NoAudience);
        }
        let Some(issuer) = settings.issuer.as_ref().filter(|i| !i.trim().is_empty()) else {
            return Err(JwtSetupError::NoIssuer);
        };
        let keys = key_source(settings)?;
        let mut validation = Validation::new(Algorithm::RS256);
        validation.leeway = settings.leeway_secs;
        validation.validate_nbf = true;
        validation.set_audience(&settings.audience);
        validation.set_issuer(&[issuer]);
        validation.set_required_spec_claims(&["exp", "aud", "iss"]);
        if let Some(bad) = settings
            .username_claims
            .iter()
            .find(|c| c.trim().is_empty() || c.trim() != c.as_str())
        {
            return Err(JwtSetupError::BadClaimName(bad.clone()));
        }
        Ok(Self {
            keys,
            validation,
            required_scopes: settings.required_scopes.clone(),
            mapping: Mapping {
                pinned_issuer: settings.issuer.clone(),
                require_email_verified: settings.require_email_verified,
                username_claims: settings.username_claims.clone(),
            },
        })
    }

    /// The catalog user a valid token stands for.
    pub async fn verify(&self, token: &str, directory: &Directory) -> Result<User, AuthError> {
        let header =
            decode_header(token).map_err(|_| AuthError::InvalidToken("malformed token".into()))?;
        let key = match &self.keys {
            KeySource::Jwks(cache) => cache.key(header.kid.as_deref()).await?,
            KeySource::Static(key) => std::sync::Arc::new(key.clone()),
        };
        let mut validation = self.validation.clone();
        validation.algorithms = vec![key.algorithm];
        let claims = decode::<Claims>(token, &key.key, &validation)
            .map_err(|e| AuthError::InvalidToken(describe(e.kind())))?
            .claims;
        self.check_scopes(&claims)?;
        self.mapping.resolve(&claims, directory)
    }

    fn check_scopes(&self, claims: &Claims) -> Result<(), AuthError> {
        let granted: Vec<&str> = claims
            .scope
            .iter()
            .flat_map(|s| s.split_whitespace())
            .chain(match &claims.scp {
                Some(Scopes::List(list)) => list.iter().map(String::as_str).collect(),
                Some(Scopes::Text(text)) => text.split_whitespace().collect(),
                None => vec![],
            })
            .collect();
        let missing: Vec<&str> = self
            .required_scopes
            .iter()
            .map(String::as_str)
            .filter(|s| !granted.contains(s))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(AuthError::InsufficientScope(self.required_scopes.join(" ")))
        }
    }
}

fn key_source(settings: &JwtSettings) -> Result<KeySource, JwtSetupError> {
    let count = [
        settings.jwks_url.is_some(),
        settings.public_key_pem.is_some(),
        settings.public_key_file.is_some(),
        settings.hs256_secret.is_some(),
    ]
    .iter()
    .filter(|set| **set)
    .count();
    if count != 1 {
        return Err(JwtSetupError::KeySource(count));
    }
    if let Some(url) = &settings.jwks_url {
        let cache = JwksCache::new(jwks_options(url, settings)?)?;
        return Ok(KeySource::Jwks(Box::new(cache)));
    }
    if let Some(pem) = &settings.public_key_pem {
        return Ok(KeySource::Static(pem_key(
            pem.as_bytes(),
            "public_key_pem",
        )?));
    }
    if let Some(path) = &settings.public_key_file {
        let pem = read(path, "public_key_file")?;
        return Ok(KeySource::Static(pem_key(&pem, "public_key_file")?));
    }
    let secret = settings.hs256_secret.as_ref().map_or("", Secret::expose);
    if secret.len() < 32 {
        return Err(JwtSetupError::WeakSecret);
    }
    let key = DecodingKey::from_secret(secret.as_bytes()).map_err(|e| JwtSetupError::BadKey {
        field: "hs256_secret",
        reason: e.to_string(),
    })?;
    Ok(KeySource::Static(VerifyingKey {
        key,
        algorithm: Algorithm::HS256,
    }))
}

fn jwks_options(url: &str, settings: &JwtSettings) -> Result<JwksOptions, JwtSetupError> {
    let ca_pem = match &settings.jwks_ca_file {
        Some(path) => Some(read(path, "jwks_ca_file")?),
        None => None,
    };
    Ok(JwksOptions {
        url: url.to_string(),
        cache_ttl: Duration::from_secs(settings.jwks_cache_ttl_secs),
        min_refetch_interval: Duration::from_secs(settings.jwks_min_refetch_secs),
        http_timeout: Duration::from_secs(settings.jwks_timeout_secs),
        ca_pem,
    })
}

fn read(path: &PathBuf, field: &'static str) -> Result<Vec<u8>, JwtSetupError> {
    std::fs::read(path).map_err(|e| JwtSetupError::Read {
        field,
        path: path.clone(),
        reason: e.to_string(),
    })
}

/// An RSA key means RS256, an EC key ES256.
fn pem_key(pem: &[u8], field: &'static str) -> Result<VerifyingKey, JwtSetupError> {
    if let Ok(key) = DecodingKey::from_rsa_pem(pem) {
        return Ok(VerifyingKey {
            key,
            algorithm: Algorithm::RS256,
        });
    }
    DecodingKey::from_ec_pem(pem)
        .map(|key| VerifyingKey {
            key,
            algorithm: Algorithm::ES256,
        })
        .map_err(|e| JwtSetupError::BadKey {
            field,
            reason: format!("not an RSA or EC public key in PEM form ({e})"),
        })
}

/// What went wrong, in words safe to send back to the caller.
pub(crate) fn describe(kind: &ErrorKind) -> String {
    match kind {
        ErrorKind::ExpiredSignature => "token expired".into(),
        ErrorKind::ImmatureSignature => "token not yet valid (nbf)".into(),
        ErrorKind::InvalidAudience => "token audience not accepted".into(),
        ErrorKind::InvalidIssuer => "token issuer not accepted".into(),
        ErrorKind::InvalidSignature => "bad token signature".into(),
        ErrorKind::InvalidAlgorithm => "token algorithm not accepted".into(),
        ErrorKind::MissingRequiredClaim(claim) => format!("token lacks the '{claim}' claim"),
        _ => "malformed token".into(),
    }
}

impl Mapping {
    /// The catalog user a verified token stands for (the rule is in the module doc).
    fn resolve(&self, claims: &Claims, directory: &Directory) -> Result<User, AuthError> {
        let sub = claims.text("sub");
        if let Some(sub) = sub {
            // `iss` was checked against the pinned issuer when one is set, so a plain
            // subject binding is only ever honoured for tokens of that issuer.
            let bound = claims
                .text("iss")
                .and_then(|iss| directory.by_oidc_subject(Some(iss), sub))
                .or_else(|| {
                    self.pinned_issuer
                        .as_ref()
                        .and_then(|_| directory.by_oidc_subject(None, sub))
                });
            if let Some(user) = bound {
                return Ok(user.clone());
            }
        }
        let verified = match claims.email_verified() {
            Some(said) => said,
            None => !self.require_email_verified,
        };
        let email = claims.text("email").filter(|_| verified);
        if let Some(user) = email.and_then(|e| directory.by_email(e)) {
            return Ok(user.clone());
        }
        for claim in &self.username_claims {
            if let Some(user) = claims.text(claim).and_then(|n| directory.by_username(n)) {
                return Ok(user.clone());
            }
        }
        let Some(sub) = sub else {
            return Err(AuthError::InvalidToken(
                "token names no catalog user and has no 'sub' claim".into(),
            ));
        };
        if directory.by_username(sub).is_some() {
            // Named after a catalog user it was not mapped to, it would share that
            // user's session buckets.
            return Err(AuthError::Forbidden(format!(
                "the token's subject '{sub}' is the name of a catalog user it is not mapped to; bind it with that user's oidcSubjects (issuer and subject)"
            )));
        }
        Ok(User {
            username: sub.to_string(),
            email: email.map(str::to_string),
            ..User::default()
        })
    }
}

#[cfg(test)]
#[path = "jwt_tests.rs"]
mod tests;
