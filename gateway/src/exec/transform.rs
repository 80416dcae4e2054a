//! `transform`: a shell pipeline (already rendered with the call's params) that reads a
//! successful result on stdin and whose output replaces it. Unlike MCC, it runs with the
//! tool's own environment, working directory and limits, never the gateway's (the engine
//! runs it through the same runtime as the tool).

use serde_json::Value;

use mcc_catalog::Tool;

/// The text a transform reads: an exec tool's stdout as is; an fn tool's result as JSON
/// as Python's `json.dumps` writes it (as MCC does, so a string result arrives quoted).
pub fn input(tool: &Tool, result: &Value) -> String {
    match result {
        Value::String(s) if !tool.kind.is_fn() => s.clone(),
        other => mcc_catalog::pyfmt::json_dumps(other),
    }
}
