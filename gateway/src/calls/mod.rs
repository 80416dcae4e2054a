//! The calls both surfaces make — MCP's tools ([`crate::mcp`]) and the REST routes
//! ([`crate::rest`]) — each defined once, returning a typed outcome that each surface
//! renders in its own way:
//!
//! - [`execute`]: the execute pipeline (look up → authorize → ask for missing params →
//!   validate → rate limits → context → run → shape → write back → audit, metrics);
//! - [`search`]: ranking for the caller, audited, as a list of hits;
//! - [`view`]: what the caller may see of the catalog (the tools they may run, who they
//!   are).
//!
//! What differs between the surfaces is not here: texts (MCC's strings are
//! [`crate::mcp::text`]'s), status codes and JSON shapes ([`crate::rest`]), and asking
//! the client for missing params (MCP only: [`execute::Ask`]). Who the caller is comes
//! from [`crate::auth`]'s middleware on both.

pub mod execute;
pub mod search;
pub mod view;
