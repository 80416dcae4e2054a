//! One structured `tracing` event per execution (target `mcc::audit`): who ran which
//! tool, a hash of the params the caller chose, how it ended, how long it took and how
//! much it wrote. Never a value: overridden params are left out of the hash (their
//! values are deployment secrets), the environment is never logged.

use std::time::Duration;

use serde_json::{Map, Value};

use mcc_catalog::Tool;

use super::cache::canonical_hash;

/// The `tracing` target of audit events.
pub const TARGET: &str = "mcc::audit";

/// What one execution reports.
#[derive(Debug)]
pub struct Record<'a> {
    pub caller: &'a str,
    pub tool: &'a str,
    pub params_hash: String,
    /// `None` when nothing ran (a cache hit or a call that could not start).
    pub exit_code: Option<i32>,
    pub duration: Duration,
    /// Bytes the tool wrote to stdout (all of them, including any cut off).
    pub bytes_out: u64,
    pub cached: bool,
    pub truncated: bool,
    /// `success`, `failure` or `error` (the tool could not be run).
    pub status: &'static str,
}

/// Emits the event.
pub fn emit(r: &Record<'_>) {
    tracing::info!(
        target: TARGET,
        caller = r.caller,
        tool = r.tool,
        params_hash = %r.params_hash,
        exit_code = r.exit_code,
        duration_ms = r.duration.as_secs_f64() * 1000.0,
        bytes_out = r.bytes_out,
        cached = r.cached,
        truncated = r.truncated,
        status = r.status,
        "tool execution"
    );
}

/// SHA-256 of the params the caller could choose (overridden params excluded).
pub fn params_hash(tool: &Tool, params: &Map<String, Value>) -> String {
    let chosen: Map<String, Value> = params
        .iter()
        .filter(|(name, _)| {
            tool.params
                .iter()
                .find(|p| &p.name == *name)
                .is_none_or(|p| p.override_value.is_none())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    canonical_hash(&chosen)
}
