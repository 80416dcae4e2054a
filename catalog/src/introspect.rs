//! Filling in fn tools from their Python source: name, docstring, params and return type,
//! read by the stdlib-only runner ([`PYRUNNER`]) in one interpreter run per batch of tools
//! sharing (interpreter, cwd, env_file, env). Declared params are never overwritten.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::env::{build_env, parse_dotenv, prepend_pythonpath};
use crate::tool::{Param, ParamType, Tool, ToolKind};

/// The runner script, shipped inside this crate and passed to the interpreter with `-c`.
pub const PYRUNNER: &str = include_str!("pyrunner.py");

/// The interpreter used when a tool does not name one.
pub const DEFAULT_PYTHON: &str = "python3";

/// Why introspection failed, naming the file and callable.
#[derive(Debug, thiserror::Error)]
pub enum IntrospectError {
    #[error("{source_file}: Python interpreter not found: {python}")]
    NoInterpreter { source_file: String, python: String },
    #[error("{source_file}: cannot read env_file {path}: {reason}")]
    EnvFile {
        source_file: String,
        path: PathBuf,
        reason: String,
    },
    #[error("{source_file}: cwd {path} is not a directory")]
    Cwd { source_file: String, path: PathBuf },
    #[error("Introspection subprocess failed for {source_file}:\n{stderr}")]
    Subprocess { source_file: String, stderr: String },
    #[error("Failed to load tool '{func}' from {source_file}: {error}")]
    Import {
        func: String,
        source_file: String,
        error: String,
    },
    #[error("{source_file}: Unable to parse JSON output of the introspection runner: {reason}")]
    Output { source_file: String, reason: String },
}

/// Runs introspection batches: the deployment's env floor and the gateway's environment
/// decide what the interpreter sees, exactly as at execution time.
#[derive(Debug, Clone)]
pub struct Introspector {
    pub floor: Vec<String>,
    pub parent_env: Vec<(String, String)>,
    pub timeout: Duration,
}

impl Default for Introspector {
    fn default() -> Self {
        Self {
            floor: crate::env::DEFAULT_FLOOR
                .iter()
                .map(|s| s.to_string())
                .collect(),
            parent_env: std::env::vars().collect(),
            timeout: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Deserialize)]
struct Report {
    #[serde(rename = "fn")]
    func: String,
    ok: bool,
    #[serde(default)]
    doc: String,
    #[serde(default)]
    params: Vec<ReportParam>,
    return_type: Option<String>,
    #[serde(default)]
    error: String,
}

#[derive(Debug, Deserialize)]
struct ReportParam {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    required: bool,
    default: Option<Value>,
}

/// Finds an interpreter by name on `PATH` (or takes a path as is).
pub fn find_python(name: &str, path_var: Option<&str>) -> Option<PathBuf> {
    if name.contains('/') {
        return Path::new(name).is_file().then(|| PathBuf::from(name));
    }
    std::env::split_paths(path_var?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The arguments that make an interpreter run the runner in `mode` on `paths`.
pub fn runner_args<'a>(mode: &'a str, paths: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut args = vec!["-c", PYRUNNER, mode];
    args.extend(paths);
    args
}

impl Introspector {
    /// The environment an fn tool's interpreter runs with (no session context).
    pub fn process_env(
        &self,
        tool: &Tool,
        cwd: &Path,
    ) -> Result<BTreeMap<String, String>, IntrospectError> {
        let file_vars = match &tool.env_file {
            None => vec![],
            Some(path) => {
                let err = |reason: String| IntrospectError::EnvFile {
                    source_file: tool.source.clone(),
                    path: path.clone(),
                    reason,
                };
                let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
                parse_dotenv(&text).map_err(|e| err(e.to_string()))?
            }
        };
        let mut env = build_env(tool, &self.parent_env, &self.floor, &file_vars, &Map::new());
        env.remove("MCC_CTX");
        let pythonpath = prepend_pythonpath(
            &cwd.display().to_string(),
            env.get("PYTHONPATH").map(String::as_str),
        );
        env.insert("PYTHONPATH".into(), pythonpath);
        Ok(env)
    }

    /// Introspects the tools at `indices` and fills in what their entries left out.
    pub fn fill(&self, tools: &mut [Tool], indices: &[usize]) -> Result<(), IntrospectError> {
        let mut batches: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for &i in indices {
            let t = &tools[i];
            let ToolKind::Fn { python, .. } = &t.kind else {
                continue;
            };
            let batch =
                serde_json::to_string(&(python, &t.cwd, &t.env_file, &t.env, &t.env_passthrough))
                    .unwrap_or_default();
            batches.entry(batch).or_default().push(i);
        }
        for members in batches.values() {
            let reports = self.run_batch(tools, members)?;
            for (&i, report) in members.iter().zip(reports) {
                apply(&mut tools[i], report)?;
            }
        }
        Ok(())
    }

    fn run_batch(&self, tools: &[Tool], members: &[usize]) -> Result<Vec<Report>, IntrospectError> {
        let first = &tools[members[0]];
        let source_file = first.source.clone();
        let ToolKind::Fn { python, .. } = &first.kind else {
            unreachable!("batches hold fn tools only")
        };
        let python = python.as_deref().unwrap_or(DEFAULT_PYTHON);
        let cwd = match &first.cwd {
            Some(c) => c.clone(),
            None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
        };
        if !cwd.is_dir() {
            return Err(IntrospectError::Cwd {
                source_file,
                path: cwd,
            });
        }
        let cwd = cwd.canonicalize().unwrap_or(cwd);
        let env = self.process_env(first, &cwd)?;
        let interpreter =
            find_python(python, env.get("PATH").map(String::as_str)).ok_or_else(|| {
                IntrospectError::NoInterpreter {
                    source_file: source_file.clone(),
                    python: python.to_string(),
                }
            })?;
        let paths: Vec<&str> = members
            .iter()
            .map(|&i| match &tools[i].kind {
                ToolKind::Fn { path, .. } => path.as_str(),
                _ => "",
            })
            .collect();
        let output = run_with_timeout(
            Command::new(&interpreter)
                .args(runner_args("introspect", paths.iter().copied()))
                .current_dir(&cwd)
                .env_clear()
                .envs(&env),
            self.timeout,
        )
        .map_err(|stderr| IntrospectError::Subprocess {
            source_file: source_file.clone(),
            stderr,
        })?;
        let reports: Vec<Report> =
            serde_json::from_slice(&output).map_err(|e| IntrospectError::Output {
                source_file: source_file.clone(),
                reason: e.to_string(),
            })?;
        if reports.len() != members.len() {
            return Err(IntrospectError::Output {
                source_file,
                reason: "report count does not match".into(),
            });
        }
        Ok(reports)
    }
}

/// Runs a command to completion within `timeout`, returning stdout or a reason.
fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Result<Vec<u8>, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the interpreter: {e}"))?;
    let (tx, rx) = std::sync::mpsc::channel();
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    std::thread::spawn(move || {
        use std::io::Read;
        let mut out = Vec::new();
        let mut err = Vec::new();
        if let Some(s) = stdout.as_mut() {
            let _ = s.read_to_end(&mut out);
        }
        if let Some(s) = stderr.as_mut() {
            let _ = s.read_to_end(&mut err);
        }
        let _ = tx.send((out, err));
    });
    match rx.recv_timeout(timeout) {
        Ok((out, err)) => {
            let status = child.wait().map_err(|e| e.to_string())?;
            if status.success() {
                Ok(out)
            } else {
                Err(String::from_utf8_lossy(&err).trim().to_string())
            }
        }
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!("timed out after {}s", timeout.as_secs()))
        }
    }
}

fn apply(tool: &mut Tool, report: Report) -> Result<(), IntrospectError> {
    if !report.ok {
        let error = report.error.lines().last().unwrap_or("").to_string();
        return Err(IntrospectError::Import {
            func: report.func,
            source_file: tool.source.clone(),
            error,
        });
    }
    if tool.params.is_empty() && !report.params.is_empty() {
        tool.params = report
            .params
            .into_iter()
            .map(|p| Param {
                name: p.name,
                ty: ParamType::parse(&p.ty).unwrap_or_default(),
                required: p.required,
                default: p.default,
                ..Param::default()
            })
            .collect();
    }
    if tool.return_type.is_none() {
        tool.return_type = report.return_type;
    }
    if tool.description.is_empty() {
        tool.description = report.doc;
    }
    Ok(())
}
