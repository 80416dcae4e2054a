//! The execution engine: runs exec, fn and curl tools as local subprocesses.
//!
//! Interface (implemented by the engine issue):
//! - [`Engine::execute`] takes a [`Call`]: the tool, its validated params (see
//!   [`mcc_catalog::params::validate`]), the assembled context (see
//!   [`mcc_catalog::context::assemble`]) and the caller's username;
//! - it returns an [`Execution`]: the [`Outcome`] (success value or failure triple), the
//!   context an fn tool left behind (for write-back) and whether it came from the cache.

use serde_json::{Map, Value};

use mcc_catalog::Tool;

/// Deployment-wide settings of the engine.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// Names of the env floor (`env_floor` / `MCC_ENV_FLOOR`).
    pub env_floor: Vec<String>,
    /// The gateway's own environment, the source of the floor and passthrough.
    pub parent_env: Vec<(String, String)>,
    /// Results longer than this are cut, ending with `[Response truncated due to size limit]`.
    pub max_output_bytes: usize,
    /// Keep full Python tracebacks in fn tool errors.
    pub debug: bool,
}

/// One execution request.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    pub tool: &'a Tool,
    pub params: Map<String, Value>,
    pub context: Map<String, Value>,
    pub caller: &'a str,
}

/// What the tool produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Exit code 0: stdout (exec) or the callable's JSON result (fn).
    Success(Value),
    /// Non-zero exit, timeout (`code` -1) or a failed callable.
    Failure {
        code: i32,
        stdout: String,
        stderr: String,
    },
}

/// An execution's result as the gateway needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    pub outcome: Outcome,
    /// The context an fn tool that declares `context` left behind (not yet sanitized).
    pub write_back: Option<Map<String, Value>>,
    pub cached: bool,
}

impl Outcome {
    /// The text a client sees: a string result as is, any other value as compact JSON,
    /// a failure as the JSON array `[code, stdout, stderr]` (as MCC's FastMCP renders it).
    pub fn to_text(&self) -> String {
        match self {
            Outcome::Success(Value::String(s)) => s.clone(),
            Outcome::Success(v) => v.to_string(),
            Outcome::Failure {
                code,
                stdout,
                stderr,
            } => Value::from(vec![
                Value::from(*code),
                Value::from(stdout.as_str()),
                Value::from(stderr.as_str()),
            ])
            .to_string(),
        }
    }
}

/// Why a tool could not be run at all (the process never started or could not be read).
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("the execution engine is not built yet")]
    NotBuilt,
}

/// Runs tools. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Engine {
    settings: std::sync::Arc<EngineSettings>,
}

impl Engine {
    pub fn new(settings: EngineSettings) -> Self {
        Self {
            settings: std::sync::Arc::new(settings),
        }
    }

    pub fn settings(&self) -> &EngineSettings {
        &self.settings
    }

    /// Runs one call to completion.
    pub async fn execute(&self, _call: Call<'_>) -> Result<Execution, ExecError> {
        Err(ExecError::NotBuilt)
    }
}
