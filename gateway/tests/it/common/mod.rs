//! Helpers shared by the execution engine tests: tools built from JSON, engine settings
//! with a controlled parent environment, and small process checks.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use mcc_catalog::Tool;
use mcc_gateway::exec::{Call, Engine, EngineSettings, ExecError, Execution};

pub const MAX_OUTPUT: usize = 100_000;

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

pub fn obj(v: Value) -> Map<String, Value> {
    v.as_object().expect("an object").clone()
}

/// The real `PATH` (so `sh`, `python3`, `curl` are found) plus the given variables.
pub fn parent_env(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut env = vec![(
        "PATH".to_string(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
    )];
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    env
}

pub fn settings(parent: Vec<(String, String)>) -> EngineSettings {
    EngineSettings {
        env_floor: mcc_catalog::env::DEFAULT_FLOOR
            .iter()
            .map(|s| s.to_string())
            .collect(),
        runtime: std::sync::Arc::new(mcc_executor::InProcess::new(parent)),
        max_output_bytes: MAX_OUTPUT,
        debug: false,
        default_timeout: None,
        max_timeout: None,
    }
}

pub fn engine() -> Engine {
    Engine::new(settings(parent_env(&[("HOME", "/home/test")])))
}

/// A tool from JSON fields laid over `{"key": "t", "name": "t"}`.
pub fn tool(fields: Value) -> Tool {
    let mut v = json!({"key": "t", "name": "t"});
    v.as_object_mut().unwrap().extend(obj(fields));
    serde_json::from_value(v).expect("a valid tool")
}

pub fn exec_tool(command: &str) -> Tool {
    tool(json!({"kind": "exec", "command": command}))
}

/// An fn tool over a callable of `mcc_fixture_tools`, run from the fixtures directory.
pub fn fn_tool(func: &str, params: Value) -> Tool {
    tool(json!({
        "kind": "fn",
        "path": format!("mcc_fixture_tools:{func}"),
        "params": params,
        "cwd": fixtures(),
    }))
}

pub fn str_param(name: &str) -> Value {
    json!({"name": name, "type": "str", "required": true})
}

pub fn alice() -> Map<String, Value> {
    obj(json!({"user": "alice", "groups": ["ops"], "tools": []}))
}

/// Runs `tool` for `caller` with `context`.
pub async fn call_as(
    engine: &Engine,
    tool: &Tool,
    params: Value,
    context: Map<String, Value>,
    caller: &str,
) -> Result<Execution, ExecError> {
    engine
        .execute(Call {
            refs: None,
            tool,
            params: obj(params),
            context,
            caller,
        })
        .await
}

/// Runs `tool` as alice.
pub async fn call(
    engine: &Engine,
    tool: &Tool,
    params: Value,
    context: Map<String, Value>,
) -> Result<Execution, ExecError> {
    call_as(engine, tool, params, context, "alice").await
}

pub async fn run(engine: &Engine, tool: &Tool, params: Value) -> Execution {
    call(engine, tool, params, alice())
        .await
        .expect("the tool runs")
}

/// Whether a process is gone (or a zombie nobody has reaped yet).
pub fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// Waits up to `within` for `pid` to be gone.
pub fn gone_within(pid: i32, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if process_gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    process_gone(pid)
}

/// The `KEY=value` lines of `env` output as pairs.
pub fn env_lines(text: &str) -> std::collections::BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
