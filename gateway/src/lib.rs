//! The MCC gateway: an MCP server over streamable HTTP that serves a permission-controlled
//! catalog of tools.
//!
//! Request path of `execute`, one module per step: [`auth`] → RBAC ([`mcc_catalog::rbac`])
//! → params ([`mcc_catalog::params`]) → context ([`mcc_catalog::context`], [`session`]) →
//! [`exec`] (environment, process, limits, transform, cache) → result → write-back.

pub mod auth;
pub mod check;
pub mod exec;
pub mod session;
