//! The check a bearer token passes before the gateway spends a TokenReview on it: signed
//! by one of the API server's ServiceAccount keys (`GET /openid/v1/jwks`, which every
//! ServiceAccount may read through Kubernetes' default
//! `system:service-account-issuer-discovery` binding), not expired, minted for the
//! gateway's audience, and naming a ServiceAccount. A made-up or forged token is refused
//! here and costs the API server nothing; only a genuine token is reviewed, which also
//! tells whether it was revoked (its Pod or Secret deleted).
//!
//! The keys are cached as an identity provider's are ([`JwksCache`]): refreshed from
//! half their TTL on, an unknown `kid` fetched again at most every
//! [`MIN_REFETCH`].

use std::time::Duration;

use axum::body::Bytes;
use jsonwebtoken::{Validation, decode, decode_header};
use serde::Deserialize;

use crate::auth::jwks::{JwksCache, JwksOptions, JwksSource};
use crate::auth::{AuthError, ServiceAccount};

/// How long fetched keys are used (they are refreshed from half of it on).
pub const KEYS_TTL: Duration = Duration::from_secs(300);
/// The shortest time between two fetches (a token with an unknown `kid` asks for one).
pub const MIN_REFETCH: Duration = Duration::from_secs(10);
/// Clock skew tolerated on `exp` and `nbf`.
const LEEWAY_SECS: u64 = 30;
const SA_PREFIX: &str = "system:serviceaccount:";
const JWKS_PATH: &str = "/openid/v1/jwks";

/// A token that passed [`ServiceAccountKeys::verify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub account: ServiceAccount,
    /// Its `exp`, in seconds since the Unix epoch.
    pub expires_at: u64,
}

/// The API server's signing keys and the local token check.
pub struct ServiceAccountKeys {
    keys: JwksCache,
    audience: Option<String>,
}

/// The API server's JWKS over the gateway's own Kubernetes client.
struct ApiServerJwks(kube::Client);

#[async_trait::async_trait]
impl JwksSource for ApiServerJwks {
    async fn get(&self) -> Result<Bytes, String> {
        let request = http::Request::get(JWKS_PATH)
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let text = self
            .0
            .request_text(request)
            .await
            .map_err(|e| e.to_string())?;
        if text.len() > crate::auth::jwks::MAX_JWKS_BYTES {
            return Err(format!("{} bytes, more than a key set holds", text.len()));
        }
        Ok(Bytes::from(text))
    }

    fn describe(&self) -> &str {
        "the API server's /openid/v1/jwks"
    }
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    exp: u64,
}

impl ServiceAccountKeys {
    /// `audience`: what tokens must be minted for (`auth.token_audience`); `None` leaves
    /// the audience to the TokenReview (the API server's own).
    pub fn new(client: kube::Client, audience: Option<String>) -> Self {
        let options = JwksOptions {
            url: JWKS_PATH.into(),
            cache_ttl: KEYS_TTL,
            min_refetch_interval: MIN_REFETCH,
            http_timeout: Duration::from_secs(5),
            ca_pem: None,
        };
        Self {
            keys: JwksCache::with_source(options, Box::new(ApiServerJwks(client))),
            audience,
        }
    }

    /// Whether `token` is a genuine, current ServiceAccount token for this gateway, by
    /// its signature and claims alone. `KeysUnavailable` when the keys cannot be fetched.
    pub async fn verify(&self, token: &str) -> Result<Verified, AuthError> {
        let not_ours = || AuthError::InvalidToken("not a ServiceAccount token".into());
        let header = decode_header(token).map_err(|_| not_ours())?;
        let key = self.keys.key(header.kid.as_deref()).await?;
        let mut validation = Validation::new(key.algorithm);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "sub"]);
        match &self.audience {
            Some(audience) => validation.set_audience(&[audience]),
            None => validation.validate_aud = false,
        }
        let claims = decode::<Claims>(token, &key.key, &validation)
            .map_err(|e| AuthError::InvalidToken(crate::auth::jwt::describe(e.kind())))?
            .claims;
        let account = service_account(&claims.sub).ok_or_else(|| {
            AuthError::Forbidden(format!(
                "'{}' is not a ServiceAccount; only ServiceAccount tokens are accepted",
                crate::telemetry::spans::cut(&claims.sub, 256)
            ))
        })?;
        Ok(Verified {
            account,
            expires_at: claims.exp,
        })
    }
}

/// `system:serviceaccount:<namespace>:<name>` as a ServiceAccount.
pub fn service_account(username: &str) -> Option<ServiceAccount> {
    let (namespace, name) = username.strip_prefix(SA_PREFIX)?.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then(|| ServiceAccount {
        namespace: namespace.to_string(),
        name: name.to_string(),
    })
}
