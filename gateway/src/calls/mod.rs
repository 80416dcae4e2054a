//! The calls both surfaces make — MCP's tools (`mcp`) and the REST routes (`rest`) —
//! each defined once, returning a typed outcome that each surface
//! renders in its own way:
//!
//! - [`execute`]: the execute pipeline (look up → authorize → ask for missing params →
//!   validate → approval ([`approval`]) → rate limits → context → run → shape → write
//!   back → audit, metrics), and an upstream's question to a 2026-07-28 caller, asked
//!   and resumed across requests ([`held`]);
//! - [`search`]: ranking for the caller, audited, as a list of hits;
//! - [`view`]: what the caller may see of the catalog (the tools they may run, who they
//!   are);
//! - [`text`]: MCC's texts for them, which MCP returns and REST shares where it words
//!   the same thing.
//!
//! [`Shared`] is what every call shares (catalog, sessions, engine, search, limits,
//! audit); [`CallCtx`] who is calling.
//!
//! What differs between the surfaces is not here: how a typed outcome becomes an MCP
//! result, status codes and JSON shapes (`rest`), and asking
//! the client for missing params (MCP only: [`executed::Ask`]). Who the caller is comes
//! from [`crate::auth`]'s middleware on both.

pub mod approval;
pub mod execute;
pub mod executed;
pub mod held;
pub mod search;
pub mod text;
pub mod view;

use std::sync::Arc;

use crate::auth::Identity;
use crate::catalog::LiveCatalog;
use crate::exec::Engine;
use crate::metrics::Metrics;
use crate::session::{Scope, SessionError, SessionStore};
use executed::SessionFailure;
use mcc_search::SearchService;

/// What every call shares, whichever surface it came from.
pub struct Shared {
    /// The catalog snapshot source.
    pub catalog: Arc<LiveCatalog>,
    /// Session variables and handles.
    pub sessions: SessionStore,
    /// Runs tools.
    pub engine: Engine,
    /// Ranks tools for `search` (its index follows catalog reloads).
    pub search: SearchService,
    pub metrics: Metrics,
    /// Results longer than this many bytes are cut.
    pub response_max_size: usize,
    /// Admits `execute` calls within the rate limits.
    pub rate_limits: crate::ratelimit::RateLimits,
    /// The audit trail of every `search` and `execute`.
    pub audit: crate::audit::Auditor,
    /// Which calls need approval, and the tickets of asked approvals.
    pub approvals: approval::Approvals,
}

/// Who is calling and from which MCP session (legacy MCP clients only; never on REST).
pub struct CallCtx {
    pub caller: Identity,
    pub mcp_session: Option<String>,
}

impl Shared {
    /// The session scope of a call: an explicit handle (must be one this user minted),
    /// else the MCP session id, else the caller's default bucket.
    pub async fn scope(
        &self,
        call: &CallCtx,
        handle: Option<&str>,
    ) -> Result<Scope, SessionFailure> {
        let username = call.caller.username();
        let scope = match (handle, &call.mcp_session) {
            (Some(handle), _) => self.sessions.scope_for_handle(handle, username).await,
            (None, Some(id)) => Scope::new(id, username),
            (None, None) => Ok(Scope::default_for(username)),
        };
        scope.map_err(|e| self.session_failure("scope", e))
    }

    /// A failed session-store call as the surfaces report it; counts outages.
    pub fn session_failure(&self, operation: &str, e: SessionError) -> SessionFailure {
        let caller_error = !matches!(
            e,
            SessionError::Unavailable(_) | SessionError::Corrupt { .. }
        );
        if !caller_error {
            self.metrics.store_error(operation);
        }
        SessionFailure {
            message: e.to_string(),
            caller_error,
        }
    }

    /// The text for a failed session-store call; counts outages.
    pub fn store_failure(&self, operation: &str, e: SessionError) -> String {
        self.session_failure(operation, e).message
    }
}
