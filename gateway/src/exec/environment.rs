//! The environment and working directory of a tool process. The layering rule itself
//! (floor → passthrough → env_file / envFrom → env → valueFrom → context) lives in
//! [`mcc_catalog::env`]; this module reads the tool's env_file, takes the values an
//! [`EnvResolver`] fetched for a Kubernetes `Tool`'s references, and hands the runtime an
//! [`EnvSpec`]: the runtime adds the floor and passthrough from its own environment (and
//! `PYTHONPATH` for fn tools), so they never come from the gateway's in Kubernetes mode.

use std::path::PathBuf;

use serde_json::{Map, Value};

use mcc_catalog::Tool;
use mcc_catalog::env::{EnvSpec, build_env, parse_dotenv};

use super::{EngineSettings, ExecError};
use crate::catalog::ToolRefs;

/// Values a tool takes from outside the catalog at execution time: its `envFrom` sources
/// and `valueFrom` entries, resolved. Holds secret values: its `Debug` shows names only.
#[derive(Default, Clone, PartialEq)]
pub struct ReferencedEnv {
    /// `envFrom` pairs, sources in declared order (the place of `env_file`).
    pub env_from: Vec<(String, String)>,
    /// `valueFrom` pairs, in declared order (after `env`).
    pub value_from: Vec<(String, String)>,
}

impl std::fmt::Debug for ReferencedEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |pairs: &[(String, String)]| -> Vec<String> {
            pairs.iter().map(|(k, _)| k.clone()).collect()
        };
        f.debug_struct("ReferencedEnv")
            .field("env_from (names only)", &names(&self.env_from))
            .field("value_from (names only)", &names(&self.value_from))
            .finish()
    }
}

/// Fetches the values a tool's references name (the Kubernetes implementation reads
/// Secrets and ConfigMaps). Errors name the object and key, never a value.
#[async_trait::async_trait]
pub trait EnvResolver: Send + Sync {
    async fn resolve(&self, refs: &ToolRefs) -> Result<ReferencedEnv, String>;
}

/// Where and with what a tool process runs, as the runtime receives it.
#[derive(Debug)]
pub struct ProcessEnv {
    /// What the runtime inherits from its own environment and sets over it.
    pub spec: EnvSpec,
    /// The tool's `cwd`; `None`: the runtime's working directory (checked there: it is the
    /// runtime's filesystem that counts).
    pub cwd: Option<PathBuf>,
}

/// Builds the environment a tool runs with, `context` applied last. The floor and
/// passthrough layers are left to the runtime (see [`EnvSpec`]).
pub fn for_tool(
    tool: &Tool,
    settings: &EngineSettings,
    referenced: &ReferencedEnv,
    context: &Map<String, Value>,
) -> Result<ProcessEnv, ExecError> {
    let mut file_vars = read_env_file(tool)?;
    file_vars.extend(referenced.env_from.iter().cloned());
    let set = build_env(
        tool,
        &[],
        &settings.env_floor,
        &file_vars,
        &referenced.value_from,
        context,
    );
    Ok(ProcessEnv {
        spec: EnvSpec::for_tool(tool, &settings.env_floor, set),
        cwd: tool.cwd.clone(),
    })
}

/// The tool's dotenv pairs, read on every call so a rotated secret file takes effect.
fn read_env_file(tool: &Tool) -> Result<Vec<(String, String)>, ExecError> {
    let Some(path) = &tool.env_file else {
        return Ok(vec![]);
    };
    let err = |reason: String| ExecError::EnvFile {
        tool: tool.key.clone(),
        path: path.clone(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    parse_dotenv(&text).map_err(|e| err(e.to_string()))
}
