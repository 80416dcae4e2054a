//! Authentication: the first step of every `/mcp` request. Turns the request's
//! credential into an [`Identity`] (a catalog user, or anonymous) with the backend chosen
//! by configuration ([`AuthSettings`]):
//!
//! - `dev-admin` / `dev-public`: no credential checked; the caller is the first catalog
//!   user in group `admin` / `public`, else a stand-in user `dev-admin` (groups `[admin]`)
//!   / `dev-public` (groups `[public]`). For local use only.
//! - `jwt`: a bearer JWT, see [`jwt`].
//! - `api_key`: a key `mcc_<prefix>_<secret>`, see [`api_key`].
//! - `kubernetes`: a Kubernetes ServiceAccount token, checked by a [`TokenReviewer`] (the
//!   TokenReview API) and mapped to the catalog user whose UserGrant binds that
//!   ServiceAccount; an API key is accepted too (the operator mints them).
//!
//! On `jwt` and `api_key`, a present but bad credential is refused (401, see
//! [`middleware`]); a request with no credential at all is refused too unless
//! `allow_anonymous` is set, in which case it runs as anonymous (public tools only).
//! Authorization (what the identity may do) is not decided here: see
//! [`mcc_catalog::rbac`]. How MCP clients find the identity provider that issues `jwt`
//! tokens (RFC 9728 discovery) is [`oauth`].

pub mod api_key;
pub mod directory;
pub mod jwks;
pub mod jwt;
pub mod middleware;
pub mod oauth;

use std::sync::Arc;

use http::HeaderMap;
use mcc_catalog::User;
use serde::{Deserialize, Deserializer};

pub use directory::{ApiKeyEntry, Directory, DirectoryError, SharedDirectory, UserEntry};
pub use jwt::JwtSettings;
pub use middleware::{authenticate_request, challenge};
pub use oauth::{OAuthDiscovery, OAuthSettings};

/// The `auth` section of the settings. Also accepts a bare backend name
/// (`auth: dev-public`), as MCC's `auth` setting does.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    /// `dev-admin` (default), `dev-public`, `jwt` or `api_key`.
    #[serde(default = "default_backend")]
    pub backend: String,
    /// On `jwt` / `api_key`: let a request that carries no credential at all in as
    /// anonymous (it sees only `public` tools). Default false: such requests get 401.
    #[serde(default)]
    pub allow_anonymous: bool,
    /// The `realm` of the `WWW-Authenticate` challenge.
    #[serde(default = "default_realm")]
    pub realm: String,
    /// URL of the OAuth protected-resource metadata, advertised in the challenge
    /// (`resource_metadata=`) so MCP clients can discover the authorization server.
    /// Unset with `oauth.resource` set: derived from it (see [`oauth`]).
    #[serde(default)]
    pub resource_metadata_url: Option<String>,
    /// OAuth discovery (`/.well-known/oauth-protected-resource`), see [`oauth`].
    #[serde(default)]
    pub oauth: OAuthSettings,
    /// Settings of the `jwt` backend.
    #[serde(default)]
    pub jwt: JwtSettings,
    /// `kubernetes` backend: the audience TokenReview checks tokens against (tokens must
    /// be minted for it). Unset: the API server's own audience.
    #[serde(default)]
    pub token_audience: Option<String>,
}

fn default_backend() -> String {
    "dev-admin".into()
}

impl AuthSettings {
    /// The `dev-*` backends: no credential is checked, so whoever reaches the gateway acts
    /// as its dev user; the HTTP server then serves loopback clients only.
    pub fn checks_no_credential(&self) -> bool {
        matches!(self.backend.as_str(), "dev-admin" | "dev-public")
    }
}

fn default_realm() -> String {
    "mcc".into()
}

impl Default for AuthSettings {
    fn default() -> Self {
        Self {
            backend: default_backend(),
            allow_anonymous: false,
            realm: default_realm(),
            resource_metadata_url: None,
            oauth: OAuthSettings::default(),
            jwt: JwtSettings::default(),
            token_audience: None,
        }
    }
}

/// Parse `auth` from either a backend name or a map of the fields above.
pub fn deserialize_auth_settings<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<AuthSettings, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NameOrMap {
        Name(String),
        Map(serde_json::Value),
    }
    match NameOrMap::deserialize(d)? {
        NameOrMap::Name(backend) => Ok(AuthSettings {
            backend,
            ..AuthSettings::default()
        }),
        NameOrMap::Map(map) => serde_json::from_value(map).map_err(serde::de::Error::custom),
    }
}

/// Who is calling: a catalog user, or anonymous (`None`). Inserted into each request's
/// extensions by [`middleware::authenticate_request`]; the MCP handlers read it from the
/// request parts rmcp hands them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub user: Option<User>,
    /// What the caller presented (for the audit trail; never the credential itself).
    pub credential: Credential,
}

/// The kind of credential a caller was identified by, and for an API key its public
/// prefix (`mcc_<prefix>`): what the audit trail may record about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Credential {
    /// No credential (anonymous, or a caller built without one).
    #[default]
    None,
    /// `dev-admin` / `dev-public`: nothing checked.
    Dev,
    Jwt,
    /// An API key; `prefix` is the 12 hex characters after `mcc_`.
    ApiKey {
        prefix: String,
    },
    /// A Kubernetes ServiceAccount token.
    ServiceAccount,
}

impl Credential {
    /// `none`, `dev`, `jwt`, `api_key` or `service_account`.
    pub fn kind(&self) -> &'static str {
        match self {
            Credential::None => "none",
            Credential::Dev => "dev",
            Credential::Jwt => "jwt",
            Credential::ApiKey { .. } => "api_key",
            Credential::ServiceAccount => "service_account",
        }
    }

    /// `mcc_<prefix>` for an API key: the part of a key that may be logged.
    pub fn key_prefix(&self) -> Option<String> {
        match self {
            Credential::ApiKey { prefix } => {
                Some(format!("{}{prefix}", mcc_catalog::apikey::KEY_PREFIX))
            }
            _ => None,
        }
    }

    fn api_key(raw: &str) -> Self {
        Credential::ApiKey {
            prefix: mcc_catalog::apikey::prefix_of(raw)
                .unwrap_or_default()
                .to_string(),
        }
    }
}

impl Identity {
    pub fn anonymous() -> Self {
        Self::default()
    }

    pub fn user(user: User) -> Self {
        Self {
            user: Some(user),
            credential: Credential::None,
        }
    }

    /// The same identity, recorded as identified by `credential`.
    pub fn with_credential(mut self, credential: Credential) -> Self {
        self.credential = credential;
        self
    }

    /// The identity [`middleware::authenticate_request`] stored in a request's parts (rmcp
    /// hands the parts to each handler in its request context). `None` means the
    /// middleware did not run for this request: refuse the call rather than guess.
    pub fn from_parts(parts: &http::request::Parts) -> Option<&Identity> {
        parts.extensions.get::<Identity>()
    }

    /// The username the session store and logs use (`anonymous` when there is none).
    pub fn username(&self) -> &str {
        self.user
            .as_ref()
            .map_or(mcc_catalog::context::ANONYMOUS, |u| u.username.as_str())
    }
}

/// Why a request's credential was refused. Descriptions never contain the credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No credential on a backend that requires one (401, no error code).
    #[error("authentication required: send 'Authorization: Bearer <token>'{0}")]
    Missing(&'static str),
    /// A credential that is malformed, forged, expired or unknown (401 invalid_token).
    #[error("invalid token: {0}")]
    InvalidToken(String),
    /// A valid token without every required scope (403 insufficient_scope).
    #[error("insufficient scope: requires '{0}'")]
    InsufficientScope(String),
    /// The identity provider's keys could not be fetched (503).
    #[error("authentication temporarily unavailable: {0}")]
    KeysUnavailable(String),
    /// A genuine credential whose subject is not a catalog user (403).
    #[error("forbidden: {0}")]
    Forbidden(String),
}

/// A ServiceAccount as an authenticated token names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccount {
    pub namespace: String,
    pub name: String,
}

/// Checks a ServiceAccount token (the `kubernetes` backend; the Kubernetes implementation
/// asks the TokenReview API). A token that is not genuine is `InvalidToken`.
#[async_trait::async_trait]
pub trait TokenReviewer: Send + Sync {
    async fn review(&self, token: &str) -> Result<ServiceAccount, AuthError>;
}

/// A bad `auth` setting.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    #[error("Unknown auth backend: '{0}'")]
    UnknownBackend(String),
    #[error(transparent)]
    Jwt(#[from] jwt::JwtSetupError),
    #[error(transparent)]
    OAuth(#[from] oauth::OAuthSetupError),
    #[error(
        "auth backend 'kubernetes' needs the Kubernetes API (catalog.source: kubernetes, and a gateway built with the `kubernetes` feature)"
    )]
    NoTokenReview,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dev {
    Admin,
    Public,
}

enum Backend {
    Dev(Dev),
    Jwt(Box<jwt::JwtVerifier>),
    ApiKey,
    Kubernetes(Arc<dyn TokenReviewer>),
}

/// Resolves credentials to identities. Cheap to clone.
#[derive(Clone)]
pub struct Authenticator {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Backend,
    users: SharedDirectory,
    allow_anonymous: bool,
    realm: String,
    /// `resource_metadata="…"` of challenges: set explicitly, or discovery's.
    resource_metadata_url: Option<String>,
    /// `scope="…"` of 401 challenges: the required scopes, when discovery is on.
    challenge_scope: Option<String>,
    oauth: OAuthDiscovery,
}

impl Authenticator {
    /// Build the configured backend over the (reloadable) users. Fails on an unknown
    /// backend or a bad `jwt` setting, naming it.
    pub fn new(settings: &AuthSettings, users: SharedDirectory) -> Result<Self, AuthSetupError> {
        Self::with_token_reviewer(settings, users, None)
    }

    /// Like [`Self::new`], with the token checker the `kubernetes` backend needs.
    pub fn with_token_reviewer(
        settings: &AuthSettings,
        users: SharedDirectory,
        reviewer: Option<Arc<dyn TokenReviewer>>,
    ) -> Result<Self, AuthSetupError> {
        let backend = match settings.backend.as_str() {
            "dev-admin" => Backend::Dev(Dev::Admin),
            "dev-public" => Backend::Dev(Dev::Public),
            "jwt" => Backend::Jwt(Box::new(jwt::JwtVerifier::new(&settings.jwt)?)),
            "api_key" => Backend::ApiKey,
            "kubernetes" => Backend::Kubernetes(reviewer.ok_or(AuthSetupError::NoTokenReview)?),
            other => return Err(AuthSetupError::UnknownBackend(other.to_string())),
        };
        let oauth = OAuthDiscovery::from_settings(settings)?;
        let served = oauth.served();
        let required = &settings.jwt.required_scopes;
        Ok(Self {
            inner: Arc::new(Inner {
                backend,
                users,
                allow_anonymous: settings.allow_anonymous,
                realm: settings.realm.clone(),
                resource_metadata_url: settings
                    .resource_metadata_url
                    .clone()
                    .or_else(|| served.map(|s| s.metadata_url.clone())),
                challenge_scope: (served.is_some() && !required.is_empty())
                    .then(|| required.join(" ")),
                oauth,
            }),
        })
    }

    /// The identity behind a request's headers.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Identity, AuthError> {
        let directory = self.inner.users.current();
        match &self.inner.backend {
            Backend::Dev(dev) => {
                Ok(Identity::user(dev_user(&directory, *dev)).with_credential(Credential::Dev))
            }
            Backend::Jwt(verifier) => match credential(headers, CredentialKind::Jwt)? {
                Some(token) => verifier
                    .verify(token, &directory)
                    .await
                    .map(|u| Identity::user(u).with_credential(Credential::Jwt)),
                None => self.without_credential(CredentialKind::Jwt),
            },
            Backend::ApiKey => match credential(headers, CredentialKind::ApiKey)? {
                Some(key) => api_key_user(&directory, key)
                    .map(|u| Identity::user(u).with_credential(Credential::api_key(key))),
                None => self.without_credential(CredentialKind::ApiKey),
            },
            Backend::Kubernetes(reviewer) => match credential(headers, CredentialKind::ApiKey)? {
                Some(key) if mcc_catalog::apikey::prefix_of(key).is_some() => {
                    api_key_user(&directory, key)
                        .map(|u| Identity::user(u).with_credential(Credential::api_key(key)))
                }
                Some(token) => service_account_user(&directory, reviewer.review(token).await?)
                    .map(|u| Identity::user(u).with_credential(Credential::ServiceAccount)),
                None => self.without_credential(CredentialKind::ApiKey),
            },
        }
    }

    /// A request with no credential at all: anonymous if allowed, else refused.
    fn without_credential(&self, kind: CredentialKind) -> Result<Identity, AuthError> {
        if self.inner.allow_anonymous {
            Ok(Identity::anonymous())
        } else {
            Err(AuthError::Missing(kind.hint()))
        }
    }

    pub(crate) fn realm(&self) -> &str {
        &self.inner.realm
    }

    pub(crate) fn resource_metadata_url(&self) -> Option<&str> {
        self.inner.resource_metadata_url.as_deref()
    }

    pub(crate) fn challenge_scope(&self) -> Option<&str> {
        self.inner.challenge_scope.as_deref()
    }

    /// Whether and what OAuth discovery serves (the routes: [`oauth::routes`]).
    pub fn oauth(&self) -> &OAuthDiscovery {
        &self.inner.oauth
    }
}

fn dev_user(directory: &Directory, dev: Dev) -> User {
    let (group, stand_in) = match dev {
        Dev::Admin => ("admin", "dev-admin"),
        Dev::Public => ("public", "dev-public"),
    };
    directory
        .first_in_group(group)
        .cloned()
        .unwrap_or_else(|| User {
            username: stand_in.into(),
            groups: vec![group.into()],
            ..User::default()
        })
}

fn api_key_user(directory: &Directory, raw: &str) -> Result<User, AuthError> {
    let username = api_key::verify(directory, raw, chrono::Utc::now())?;
    // A key whose user is gone from the directory cannot exist (keys live under their
    // user), but stay strict rather than invent an identity.
    directory
        .by_username(username)
        .cloned()
        .ok_or_else(|| AuthError::InvalidToken("invalid API key".into()))
}

/// The user a reviewed ServiceAccount acts as; an unbound one is refused by name.
fn service_account_user(directory: &Directory, sa: ServiceAccount) -> Result<User, AuthError> {
    directory
        .by_service_account(&sa.namespace, &sa.name)
        .cloned()
        .ok_or_else(|| {
            AuthError::Forbidden(format!(
                "ServiceAccount {}/{} is not bound to any MCC user (list it under a UserGrant's serviceAccounts)",
                sa.namespace, sa.name
            ))
        })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CredentialKind {
    Jwt,
    ApiKey,
}

impl CredentialKind {
    fn hint(self) -> &'static str {
        match self {
            CredentialKind::Jwt => "",
            CredentialKind::ApiKey => " or 'X-API-Key: <key>'",
        }
    }
}

/// The credential of a request, if any. `Authorization: Bearer` carries a JWT or an API
/// key; `X-API-Key` an API key only. Two different credentials, a non-Bearer scheme or
/// an unreadable header are refused rather than guessed at.
fn credential(headers: &HeaderMap, kind: CredentialKind) -> Result<Option<&str>, AuthError> {
    let bearer = header_text(headers, http::header::AUTHORIZATION)?
        .map(|value| {
            let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
            if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() {
                Ok(token.trim())
            } else {
                Err(AuthError::InvalidToken(
                    "the Authorization header must be 'Bearer <token>'".into(),
                ))
            }
        })
        .transpose()?;
    let api_key = header_text(headers, http::HeaderName::from_static("x-api-key"))?
        .map(str::trim)
        .filter(|k| !k.is_empty());
    if api_key.is_some() && kind == CredentialKind::Jwt {
        return Err(AuthError::InvalidToken(
            "X-API-Key is not accepted here; send 'Authorization: Bearer <JWT>'".into(),
        ));
    }
    match (bearer, api_key) {
        (Some(b), Some(k)) if b != k => Err(AuthError::InvalidToken(
            "send one credential, not both Authorization and X-API-Key".into(),
        )),
        (b, k) => Ok(b.or(k)),
    }
}

fn header_text(headers: &HeaderMap, name: http::HeaderName) -> Result<Option<&str>, AuthError> {
    let mut values = headers.get_all(&name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(AuthError::InvalidToken(format!(
            "more than one {name} header"
        )));
    }
    value
        .to_str()
        .map(Some)
        .map_err(|_| AuthError::InvalidToken(format!("the {name} header is not ASCII text")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn credential_forms() {
        let api = CredentialKind::ApiKey;
        assert_eq!(credential(&headers(&[]), api), Ok(None));
        let h = headers(&[("authorization", "bearer  abc ")]);
        assert_eq!(credential(&h, api), Ok(Some("abc")));
        assert_eq!(
            credential(&headers(&[("x-api-key", "k")]), api),
            Ok(Some("k"))
        );
        let both_same = headers(&[("authorization", "Bearer k"), ("x-api-key", "k")]);
        assert_eq!(credential(&both_same, api), Ok(Some("k")));
        for bad in [
            headers(&[("authorization", "Basic dXNlcjpw")]),
            headers(&[("authorization", "Bearer")]),
            headers(&[("authorization", "Bearer a"), ("x-api-key", "b")]),
            headers(&[("authorization", "Bearer a"), ("authorization", "Bearer a")]),
        ] {
            assert!(credential(&bad, api).is_err(), "{bad:?}");
        }
        let jwt_with_key = headers(&[("x-api-key", "k")]);
        assert!(credential(&jwt_with_key, CredentialKind::Jwt).is_err());
    }

    #[test]
    fn settings_accept_a_bare_backend_name() {
        #[derive(Deserialize)]
        struct Top {
            #[serde(deserialize_with = "deserialize_auth_settings")]
            auth: AuthSettings,
        }
        let top: Top = serde_json::from_str(r#"{"auth": "dev-public"}"#).unwrap();
        assert_eq!(top.auth.backend, "dev-public");
        let top: Top =
            serde_json::from_str(r#"{"auth": {"backend": "jwt", "jwt": {"audience": "mcc"}}}"#)
                .unwrap();
        assert_eq!(top.auth.jwt.audience, vec!["mcc".to_string()]);
        let err = serde_json::from_str::<Top>(r#"{"auth": {"backend": "jwt", "bogus": 1}}"#)
            .err()
            .unwrap();
        assert!(err.to_string().contains("bogus"), "{err}");
    }

    #[test]
    fn unknown_backend_is_named() {
        let settings = AuthSettings {
            backend: "kerberos".into(),
            ..AuthSettings::default()
        };
        let err = Authenticator::new(&settings, SharedDirectory::default())
            .err()
            .unwrap();
        assert_eq!(err.to_string(), "Unknown auth backend: 'kerberos'");
    }
}
