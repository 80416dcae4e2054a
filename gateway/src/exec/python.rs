//! fn tools: the interpreter that runs them and the meaning of the runner's output.
//!
//! The interpreter (the tool's `python`, default `python3`) runs the catalog's stdlib-only
//! runner ([`mcc_catalog::introspect::PYRUNNER`]) in `exec` mode with the params as JSON on
//! stdin. On success the runner prints `[result, context_or_null]` on its private stdout
//! (anything the callable prints goes to stderr); on failure Python's traceback is on
//! stderr and is reduced to its last line unless the engine runs with `debug`.

use serde_json::{Map, Value};

use mcc_catalog::Tool;

use super::process::{Captured, Ending, Finished};
use super::result::{failure, text};
use super::{ExecError, Outcome};

const TRACEBACK_HEADER: &str = "Traceback (most recent call last):";

/// The outcome of an fn tool and the context it left behind (when it takes one).
pub fn outcome(
    finished: &Finished,
    tool: &Tool,
    timeout: Option<std::time::Duration>,
    max: usize,
    debug: bool,
) -> Result<(Outcome, Option<Map<String, Value>>), ExecError> {
    if finished.ending != Ending::Exited(0) {
        let stderr = if debug {
            text(&finished.stderr, max)
        } else {
            error_line(&finished.stderr, max)
        };
        return Ok((failure(finished, &tool.limits, timeout, max, stderr), None));
    }
    if finished.stdout.truncated() {
        // A cut envelope cannot be parsed: the client gets the cut text, no write-back.
        return Ok((Outcome::Success(text(&finished.stdout, max).into()), None));
    }
    let (result, context): (Value, Value) = serde_json::from_slice(&finished.stdout.bytes)
        .map_err(|e| ExecError::RunnerOutput {
            tool: tool.key.clone(),
            reason: e.to_string(),
        })?;
    let write_back = match context {
        Value::Object(ctx) if tool.takes_context() => Some(ctx),
        _ => None,
    };
    Ok((Outcome::Success(result), write_back))
}

/// What a failed callable reports without `debug`: the traceback's last line. When
/// stderr overflowed its capture, that line is at the end of the kept tail.
fn error_line(stderr: &Captured, max: usize) -> String {
    if !stderr.truncated() {
        return last_line(text(stderr, max));
    }
    let tail = String::from_utf8_lossy(&stderr.tail);
    match tail.lines().rev().find(|l| !l.trim().is_empty()) {
        Some(line) => line.to_string(),
        None => text(stderr, max),
    }
}

/// A Python traceback reduced to its last non-blank line (`ValueError: boom`); other
/// stderr is kept whole.
fn last_line(stderr: String) -> String {
    if !stderr.contains(TRACEBACK_HEADER) {
        return stderr;
    }
    stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracebacks_keep_their_last_line_only() {
        let tb = "noise\nTraceback (most recent call last):\n  File \"m.py\", line 1\nValueError: boom 3\n\n";
        assert_eq!(last_line(tb.into()), "ValueError: boom 3");
        assert_eq!(last_line("plain\nerror\n".into()), "plain\nerror\n");
    }
}
