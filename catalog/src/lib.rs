//! The one definition of an MCC catalog, shared by the gateway and the operator.
//!
//! - [`tool`]: the data model (tools, params, limits, users);
//! - [`annotations`]: MCP's title and hints, and output schemas (checked at load and on
//!   every result);
//! - [`approval`]: which calls need a person's approval before they run;
//! - [`key`], [`rbac`], [`rate`], [`params`], [`context`], [`signature`], [`env`], [`template`]: the
//!   catalog's rules, each in one place and free of I/O;
//! - [`spec`], [`load`], [`introspect`]: MCC YAML tool files into tools (these read files
//!   and run Python for fn introspection);
//! - [`document`], [`shards`], [`apikey`]: the catalog document the operator publishes (in
//!   one ConfigMap, or split across several when large) and gateways
//!   in Kubernetes mode load, and the API-key format it carries;
//! - [`upstream`]: upstream MCP servers (`mcp_servers:`) and their tools as catalog tools;
//! - [`users`]: the users file (entries, OIDC subject bindings, its one reader);
//! - [`snapshot`]: the immutable [`snapshot::Catalog`] a request reads (tools, users,
//!   each tool's Kubernetes references), swapped whole by the gateway;
//! - [`secret`]: [`Secret`], the one type for a credential that must never be printed;
//! - [`error_chain`]: an error and its causes in one line, as every binary shows them;
//! - `crd` (feature `crd`): the `Tool` and `UserGrant` custom resources, and [`limits`]:
//!   the size limits of a Tool's text and lists, for its schema and the operator alike.

pub mod annotations;
pub mod apikey;
pub mod approval;
pub mod context;
#[cfg(feature = "crd")]
pub mod crd;
pub mod document;
pub mod env;
pub mod error_chain;
pub mod input_schema;
pub mod introspect;
pub mod key;
#[cfg(feature = "kube-mock")]
pub mod kube_mock;
pub mod limits;
pub mod load;
pub mod params;
pub mod pattern;
pub mod pyfmt;
pub mod rate;
pub mod rbac;
pub mod secret;
pub mod shards;
#[cfg(feature = "signal")]
pub mod shutdown;
pub mod signature;
pub mod snapshot;
pub mod spec;
pub mod template;
pub mod tool;
pub mod upstream;
pub mod users;

pub use load::{LoadError, Loaded, load};
pub use secret::Secret;
pub use signature::signature;
pub use tool::{EnvPassthrough, Limits, Param, ParamType, Tool, ToolKind, User};
