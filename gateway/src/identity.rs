//! Who is calling: the tower layer that resolves the caller of every `/mcp` request and
//! puts a [`Caller`] into the request extensions, where the MCP handler reads it.
//!
//! This is the gateway's adapter to authentication. In this build it knows the two dev
//! backends (`dev-admin`, `dev-public`: no credential, act as the first users-file user in
//! that group, else a stand-in user); the credential backends (`jwt`, `api_key`) are the
//! auth module's and are refused at startup until it is wired in here.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use mcc_catalog::User;

use crate::catalog::LiveCatalog;
use crate::config::AuthBackend;

/// The resolved caller of one request; `None` is an anonymous caller.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Caller(pub Option<User>);

impl Caller {
    pub fn user(&self) -> Option<&User> {
        self.0.as_ref()
    }

    /// The username sessions are keyed by (`anonymous` for anonymous callers).
    pub fn username(&self) -> &str {
        self.0
            .as_ref()
            .map(|u| u.username.as_str())
            .unwrap_or(mcc_catalog::context::ANONYMOUS)
    }
}

/// Why the configured backend cannot run in this build.
#[derive(Debug, thiserror::Error)]
#[error(
    "auth backend '{0}' is not built into this gateway yet (it lands with the auth module); use dev-admin or dev-public"
)]
pub struct UnsupportedBackend(pub &'static str);

/// Resolves callers for one auth backend.
#[derive(Clone)]
pub struct Authenticator {
    backend: AuthBackend,
    catalog: Arc<LiveCatalog>,
}

impl Authenticator {
    pub fn new(
        backend: AuthBackend,
        catalog: Arc<LiveCatalog>,
    ) -> Result<Self, UnsupportedBackend> {
        match backend {
            AuthBackend::DevAdmin | AuthBackend::DevPublic => Ok(Self { backend, catalog }),
            other => Err(UnsupportedBackend(other.as_str())),
        }
    }

    /// The caller of a request. Dev backends ignore credentials.
    pub fn resolve(&self, _headers: &http::HeaderMap) -> Caller {
        let (group, stand_in) = match self.backend {
            AuthBackend::DevPublic => ("public", "dev-public"),
            _ => ("admin", "dev-admin"),
        };
        let catalog = self.catalog.snapshot();
        let user = catalog
            .first_user_in(group)
            .cloned()
            .unwrap_or_else(|| User {
                username: stand_in.into(),
                email: None,
                groups: vec![group.into()],
                tools: vec![],
            });
        Caller(Some(user))
    }
}

/// The axum middleware: resolves the caller and stores it in the request extensions.
pub async fn layer(
    State(auth): State<Authenticator>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = auth.resolve(request.headers());
    request.extensions_mut().insert(caller);
    next.run(request).await
}
