//! What a tool produced, as the engine and everything after it reads it: a success value
//! or MCC's failure triple, and the text a client sees. Below the engine and the
//! upstream proxy alike (an upstream reply is read as one), so neither imports the other
//! for it.

use serde_json::Value;

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

    pub fn is_success(&self) -> bool {
        matches!(self, Outcome::Success(_))
    }
}
