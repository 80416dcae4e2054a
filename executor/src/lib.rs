//! Running tool processes, and the boundary that keeps them away from the gateway.
//!
//! - [`process`]: one process to its end — own process group, explicit environment,
//!   rlimits ([`limits`]), stdin fed concurrently, bounded stdout/stderr, the whole group
//!   killed on timeout, cancellation and exit.
//! - [`runtime`]: the [`Runtime`] trait the gateway's engine runs every tool through,
//!   and [`InProcess`], which spawns in the calling process with that process's
//!   environment as the source of the env floor and passthrough.
//! - [`client`] and [`server`]: the same trait across a Unix socket ([`address`]: an
//!   abstract name by default, which no tool can take over). The `mcc-executor`
//!   binary serves [`InProcess`] from its own container (no ServiceAccount token, none of
//!   the gateway's environment, no view of its processes); [`ExecutorClient`] is the
//!   gateway's side. [`server`] serves only the gateway's uid, bounds how long a request
//!   may take to arrive, and runs each call in a session of its own; [`wire`] is the
//!   framing both speak; [`reaper`] kills and reaps what a call left behind.
//! - [`session`]: a long-lived process whose stdin and stdout are a byte stream to the
//!   caller (a stdio MCP server), with the same group, environment and bounds rules;
//! - [`progress`]: a tool's own progress reports (`MCC_PROGRESS_FILE`), apart from its
//!   output, for a caller that set a sink around the run;
//! - [`podio`]: the pod runtime's boundary — the call in a per-call Secret, the result
//!   as one line of the container log; `mcc-executor pod-run` is the runner in the Pod.
//!
//! What a tool is, how its command is rendered and what its output means belong to the
//! gateway; this crate only runs a prepared [`Request`].

pub mod address;
pub mod client;
pub mod limits;
pub mod podio;
pub mod process;
pub mod progress;
pub mod reaper;
pub mod runtime;
pub mod server;
pub mod session;
pub mod wire;

pub use address::Address;
pub use client::ExecutorClient;
pub use process::{Captured, Ending, Finished};
pub use runtime::{InProcess, Request, RunError, Runtime};
pub use session::{SessionRequest, SessionStream};
