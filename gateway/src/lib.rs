//! The MCC gateway: an MCP server over streamable HTTP that serves a permission-controlled
//! catalog of tools.
//!
//! Request path of `execute`, one module per step: [`auth`] (who is calling) → RBAC
//! ([`mcc_catalog::rbac`]) → params ([`mcc_catalog::params`], [`mcp::ask`]) → context
//! ([`mcc_catalog::context`], [`session`]) → [`ratelimit`] → [`exec`] (environment,
//! process, limits, transform, cache) → result → write-back → [`audit`]; all of it in
//! [`calls::execute`], the one pipeline both surfaces run: MCP ([`mcp`]) and REST
//! ([`rest`]).
//!
//! Around it: [`config`] (loads the settings and assembles the sections, each owned by
//! the module it configures), [`catalog`] (the live catalog, its sources and hot
//! reload), [`upstream`] (upstream MCP servers' tools, discovered and proxied), search
//! ([`mcc_search`]: hybrid ranking behind the `search` tool), [`metrics`], [`http`]
//! (routes and the transport layers), [`tls`] (the rustls setup of the gateway's own
//! HTTP clients: JWKS, OTLP, Redis), [`telemetry`] (the log,
//! OpenTelemetry spans), [`app`] (wiring for `serve`), [`alloc`] (the binary's
//! allocator).

pub mod alloc;
pub mod app;
pub mod audit;
pub mod auth;
pub mod calls;
pub mod catalog;
pub mod check;
pub mod config;
pub mod drain;
pub mod exec;
pub mod http;
#[cfg(feature = "kubernetes")]
pub mod kube;
pub mod mcp;
pub mod metrics;
pub mod ratelimit;
pub mod redis_conn;
pub mod rest;
pub mod session;
pub mod telemetry;
pub mod tls;
// For the crate's tests and its integration tests alike (one capturing writer).
#[doc(hidden)]
pub mod test_writer;
pub mod upstream;
