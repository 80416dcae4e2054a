//! The environment and working directory of a tool process. The layering rule itself
//! (floor → passthrough → env_file / envFrom → env → valueFrom → context) lives in
//! [`mcc_catalog::env`]; this module reads the tool's env_file, takes the values an
//! [`EnvResolver`] fetched for a Kubernetes `Tool`'s references, checks its cwd, and adds
//! `PYTHONPATH` for fn tools.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use mcc_catalog::Tool;
use mcc_catalog::env::{build_env, parse_dotenv, prepend_pythonpath};

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

/// Where and with what a tool process runs.
#[derive(Debug)]
pub struct ProcessEnv {
    pub vars: BTreeMap<String, String>,
    /// `None`: the gateway's working directory (exec and curl tools without `cwd`).
    pub cwd: Option<PathBuf>,
}

/// Builds the environment a tool runs with, `context` applied last.
pub fn for_tool(
    tool: &Tool,
    settings: &EngineSettings,
    referenced: &ReferencedEnv,
    context: &Map<String, Value>,
) -> Result<ProcessEnv, ExecError> {
    let mut file_vars = read_env_file(tool)?;
    file_vars.extend(referenced.env_from.iter().cloned());
    let mut vars = build_env(
        tool,
        &settings.parent_env,
        &settings.env_floor,
        &file_vars,
        &referenced.value_from,
        context,
    );
    let cwd = working_dir(tool)?;
    if tool.kind.is_fn() {
        // The callable's module is imported from the tool's cwd (the gateway's when unset).
        let dir = match &cwd {
            Some(dir) => dir.clone(),
            None => gateway_dir(tool)?,
        };
        let pythonpath = prepend_pythonpath(
            &dir.display().to_string(),
            vars.get("PYTHONPATH").map(String::as_str),
        );
        vars.insert("PYTHONPATH".into(), pythonpath);
        return Ok(ProcessEnv {
            vars,
            cwd: Some(dir),
        });
    }
    Ok(ProcessEnv { vars, cwd })
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

/// The tool's `cwd`, made absolute, after checking it is a directory.
fn working_dir(tool: &Tool) -> Result<Option<PathBuf>, ExecError> {
    let Some(cwd) = &tool.cwd else {
        return Ok(None);
    };
    if !cwd.is_dir() {
        return Err(ExecError::Cwd {
            tool: tool.key.clone(),
            path: cwd.clone(),
        });
    }
    Ok(Some(absolute(cwd, tool)?))
}

fn absolute(path: &Path, tool: &Tool) -> Result<PathBuf, ExecError> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    Ok(gateway_dir(tool)?.join(path))
}

fn gateway_dir(tool: &Tool) -> Result<PathBuf, ExecError> {
    std::env::current_dir().map_err(|e| ExecError::Cwd {
        tool: tool.key.clone(),
        path: PathBuf::from(format!("(the gateway's working directory: {e})")),
    })
}
