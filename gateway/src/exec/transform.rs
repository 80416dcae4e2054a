//! `transform`: a shell pipeline (already rendered with the call's params) that reads a
//! successful result on stdin and whose output replaces it. Unlike MCC, it runs with the
//! tool's own environment, working directory and limits, never the gateway's.

use serde_json::Value;

use mcc_catalog::Tool;

use super::ExecError;
use super::command::{SHELL, shell_args};
use super::environment::ProcessEnv;
use super::limits::Rlimits;
use super::process::{self, Finished, Spec};

/// The text a transform reads: an exec tool's stdout as is; an fn tool's result as JSON
/// as Python's `json.dumps` writes it (as MCC does, so a string result arrives quoted).
pub fn input(tool: &Tool, result: &Value) -> String {
    match result {
        Value::String(s) if !tool.kind.is_fn() => s.clone(),
        other => mcc_catalog::pyfmt::json_dumps(other),
    }
}

/// Runs the rendered pipeline `line` over `input`.
pub async fn run(
    tool: &Tool,
    line: &str,
    input: &str,
    env: &ProcessEnv,
    rlimits: Rlimits,
    timeout: Option<std::time::Duration>,
    max_output: usize,
) -> Result<Finished, ExecError> {
    let args = shell_args(line);
    let spec = Spec {
        program: SHELL.as_ref(),
        args: &args,
        env: &env.vars,
        cwd: env.cwd.as_deref(),
        stdin: Some(input.as_bytes()),
        rlimits,
        timeout,
        max_output,
    };
    process::run(&spec)
        .await
        .map_err(|source| ExecError::Spawn {
            tool: tool.key.clone(),
            program: SHELL.into(),
            source,
        })
}
