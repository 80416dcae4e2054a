//! What goes into the engine and what comes out of it: one [`Call`], its [`Execution`],
//! and [`ExecError`], why a tool could not be run at all. The engine itself
//! ([`super::Engine`]) only runs them.

use std::path::PathBuf;

use mcc_catalog::Tool;
use mcc_executor::RunError;
use serde_json::{Map, Value};

use super::command::Part;
use super::limiter::Busy;
use super::limits::LimitError;
use super::outcome::Outcome;

/// One execution request.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    pub tool: &'a Tool,
    /// Kubernetes mode: what the tool takes from the Kubernetes API (see
    /// [`crate::catalog::Catalog::refs`]); `None` for file-mode tools.
    pub refs: Option<&'a crate::catalog::ToolRefs>,
    pub params: Map<String, Value>,
    pub context: Map<String, Value>,
    pub caller: &'a str,
}
/// An execution's result as the gateway needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    pub outcome: Outcome,
    /// An upstream tool's result as the upstream sent it (`outcome` is read from it).
    pub upstream: Option<crate::upstream::UpstreamReply>,
    /// The context an fn tool that declares `context` left behind (not yet sanitized).
    pub write_back: Option<Map<String, Value>>,
    pub cached: bool,
}
/// Why a tool could not be run at all (the process never started or could not be read).
/// Each names the tool and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("tool '{tool}': parameter '{param}' {problem}")]
    Params {
        tool: String,
        param: String,
        problem: String,
    },
    #[error("tool '{tool}': cannot render its {part}: {error}")]
    Template {
        tool: String,
        part: Part,
        error: String,
    },
    #[error("tool '{tool}': cannot read env_file {path}: {reason}")]
    EnvFile {
        tool: String,
        path: PathBuf,
        reason: String,
    },
    #[error("tool '{tool}': cwd {path} is not a directory")]
    Cwd { tool: String, path: PathBuf },
    #[error("tool '{tool}': Python interpreter not found: {python}")]
    NoInterpreter { tool: String, python: String },
    #[error("tool '{tool}': {source}")]
    Limits { tool: String, source: LimitError },
    #[error("tool '{tool}': cannot start {program}: {reason}")]
    Spawn {
        tool: String,
        program: String,
        reason: String,
    },
    /// The runtime itself failed (e.g. the executor is unreachable or restarted mid-call).
    #[error("tool '{tool}': {source}")]
    Runtime { tool: String, source: RunError },
    #[error("tool '{tool}': the fn runner's output is not a JSON [result, context] pair: {reason}")]
    RunnerOutput { tool: String, reason: String },
    #[error("tool '{tool}': environment from Kubernetes: {reason}")]
    EnvRefs { tool: String, reason: String },
    #[error(
        "tool '{tool}': runtime 'pod' is not enabled on this gateway (set execution.pod.enabled \
         (MCC_EXECUTION__POD__ENABLED=true); with the Helm chart: podRuntime.enabled=true)"
    )]
    PodRuntime { tool: String },
    /// No execution slot within the wait ([`limiter`]).
    #[error("tool '{tool}': {source}")]
    Busy { tool: String, source: Busy },
    /// An upstream MCP server's tool could not be called ([`crate::upstream`]).
    #[error("tool '{tool}': {source}")]
    Upstream {
        tool: String,
        source: crate::upstream::UpstreamError,
    },
}
