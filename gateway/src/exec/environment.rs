//! The environment and working directory of a tool process. The layering rule itself
//! (floor → passthrough → env_file → env → context) lives in [`mcc_catalog::env`]; this
//! module reads the tool's env_file, checks its cwd, and adds `PYTHONPATH` for fn tools.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use mcc_catalog::Tool;
use mcc_catalog::env::{build_env, parse_dotenv, prepend_pythonpath};

use super::{EngineSettings, ExecError};

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
    context: &Map<String, Value>,
) -> Result<ProcessEnv, ExecError> {
    let file_vars = read_env_file(tool)?;
    let mut vars = build_env(
        tool,
        &settings.parent_env,
        &settings.env_floor,
        &file_vars,
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
