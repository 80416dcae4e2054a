//! Filling in fn tools from their Python source: name, docstring, params and return type,
//! read by the stdlib-only runner ([`PYRUNNER`]) in one interpreter run per batch of tools
//! sharing (interpreter, cwd, env_file, env, env_passthrough). Declared params are never
//! overwritten. Failures are per tool ([`Introspector::fill_each`]): a run that fails as
//! a whole is retried member by member, so one bad module never takes its batch-mates
//! with it; whether a failure stops the load is the caller's choice.
//!
//! Unlike MCC, which introspects with `env_passthrough: false`, the interpreter gets the
//! same environment as at execution time: the seeds promise "the same environment is used
//! at load-time introspection and at call time", and an allowlisted variable an import
//! relies on (`env_passthrough: ["VIRTUAL_ENV"]`) must be there when the module is read.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::env::{EnvSpec, build_env, parse_dotenv, prepend_pythonpath};
use crate::key::tool_key;
use crate::spec::check_name;
use crate::tool::{Param, ParamType, Tool, ToolKind};

/// The runner script, shipped inside this crate and passed to the interpreter with `-c`.
pub const PYRUNNER: &str = include_str!("pyrunner.py");

/// The interpreter used when a tool does not name one.
pub const DEFAULT_PYTHON: &str = "python3";

/// Why introspection failed. `place` names the file and the tool (`a.yaml: tools[2]
/// 'm:f'`); each message then names the field it concerns.
#[derive(Debug, thiserror::Error)]
pub enum IntrospectError {
    #[error("{place}: python: Python interpreter not found: {python}")]
    NoInterpreter { place: String, python: String },
    #[error("{place}: env_file: cannot read {path}: {reason}")]
    EnvFile {
        place: String,
        path: PathBuf,
        reason: String,
    },
    #[error("{place}: cwd: {path} is not a directory")]
    Cwd { place: String, path: PathBuf },
    #[error("{place}: fn: Introspection subprocess failed:\n{stderr}")]
    Subprocess { place: String, stderr: String },
    #[error("{place}: fn: Failed to load tool '{func}': {error}")]
    Import {
        place: String,
        func: String,
        error: String,
    },
    #[error("{place}: name: the callable's __name__ is not a usable tool name: {reason}")]
    Name { place: String, reason: String },
    #[error("{place}: fn: Unable to parse JSON output of the introspection runner: {reason}")]
    Output { place: String, reason: String },
}

/// One tool waiting for introspection: its index in the slice given to
/// [`Introspector::fill`], and whether its name comes from the callable's `__name__`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    pub index: usize,
    pub name_from_callable: bool,
}

/// A pending tool that could not be introspected ([`Introspector::fill_each`]).
#[derive(Debug)]
pub struct Failure {
    /// The tool's index in the slice given to [`Introspector::fill_each`].
    pub index: usize,
    pub error: IntrospectError,
}

/// Runs introspection batches: the deployment's env floor and the spawning environment
/// decide what the interpreter sees, exactly as at execution time.
#[derive(Debug, Clone)]
pub struct Introspector {
    /// Names of the env floor (the deployment's `env_floor`).
    pub floor: Vec<String>,
    /// The gateway's environment: the source of the floor and of `env_passthrough` when
    /// the interpreter runs here (no [`Self::runner`]).
    pub parent_env: Vec<(String, String)>,
    /// How long one interpreter run may take before its process group is killed.
    pub timeout: Duration,
    /// Where the interpreter runs instead of here: the gateway's runtime (the executor
    /// container in Kubernetes mode), so importing a tool's module never runs code beside
    /// the gateway's credentials, and the floor comes from that runtime's environment.
    pub runner: Option<Arc<dyn RunInterpreter>>,
}

/// Runs an introspection interpreter in another runtime. Blocking: called from the
/// blocking threads introspection runs on.
pub trait RunInterpreter: Send + Sync + std::fmt::Debug {
    /// Runs `python` (a name looked up on the resolved `PATH`, or a path) with `args` in
    /// `cwd` (`None`: the runtime's) with the environment `env`; the interpreter's stdout,
    /// or why it failed.
    fn run(
        &self,
        python: &str,
        args: &[&str],
        cwd: Option<&Path>,
        env: EnvSpec,
        timeout: Duration,
    ) -> Result<Vec<u8>, RunInterpreterError>;
}

/// Why [`RunInterpreter::run`] produced no output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunInterpreterError {
    NoInterpreter,
    Cwd(PathBuf),
    /// Did not start, failed, or timed out: stderr or a reason.
    Failed(String),
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
            runner: None,
        }
    }
}

#[derive(Debug, Deserialize)]
struct Report {
    #[serde(rename = "fn")]
    func: String,
    ok: bool,
    #[serde(default)]
    name: String,
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
    /// The environment an fn tool's interpreter runs with (no session context): the same
    /// floor → `env_passthrough` → `env_file` → `env` layering as at execution time, with
    /// the tool's cwd first on `PYTHONPATH`.
    pub fn process_env(
        &self,
        tool: &Tool,
        cwd: &Path,
    ) -> Result<BTreeMap<String, String>, IntrospectError> {
        let mut env = build_env(
            tool,
            &self.parent_env,
            &self.floor,
            &self.env_file(tool)?,
            &[],
            &Map::new(),
        );
        env.remove("MCC_CTX");
        let pythonpath = prepend_pythonpath(
            &cwd.display().to_string(),
            env.get("PYTHONPATH").map(String::as_str),
        );
        env.insert("PYTHONPATH".into(), pythonpath);
        Ok(env)
    }

    /// The tool's dotenv pairs.
    fn env_file(&self, tool: &Tool) -> Result<Vec<(String, String)>, IntrospectError> {
        let Some(path) = &tool.env_file else {
            return Ok(vec![]);
        };
        let err = |reason: String| IntrospectError::EnvFile {
            place: tool.source.clone(),
            path: path.clone(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        parse_dotenv(&text).map_err(|e| err(e.to_string()))
    }

    /// Introspects the `pending` tools and fills in what their entries left out: params
    /// (only when none are declared), return type, description (from the docstring) and,
    /// where the entry gave no name, the name (from `__name__`, key recomputed). One
    /// interpreter run per batch of tools sharing interpreter, cwd, env_file, env and
    /// env_passthrough, i.e. the same process environment.
    ///
    /// Fails on the first tool (in slice order) that cannot be introspected; see
    /// [`Self::fill_each`] for the form that leaves such tools out instead.
    pub fn fill(&self, tools: &mut [Tool], pending: &[Pending]) -> Result<(), IntrospectError> {
        match self.fill_each(tools, pending).into_iter().next() {
            Some(failure) => Err(failure.error),
            None => Ok(()),
        }
    }

    /// [`Self::fill`], tool by tool: every pending tool that could be introspected is
    /// filled in, and each one that could not is returned with its own error (sorted by
    /// index). Batching is kept; when a batch's interpreter run fails as a whole (a
    /// module that exits or hangs on import, garbled output), its members are run again
    /// one by one, so only the culprit is reported and its batch-mates are filled in.
    pub fn fill_each(&self, tools: &mut [Tool], pending: &[Pending]) -> Vec<Failure> {
        let mut batches: BTreeMap<String, Vec<Pending>> = BTreeMap::new();
        for p in pending {
            let t = &tools[p.index];
            let ToolKind::Fn { python, .. } = &t.kind else {
                continue;
            };
            // Everything that shapes the interpreter's process environment.
            let batch = format!(
                "{:?}",
                (python, &t.cwd, &t.env_file, &t.env, &t.env_passthrough)
            );
            batches.entry(batch).or_default().push(*p);
        }
        let mut failures = Vec::new();
        let mut fill_one =
            |tools: &mut [Tool], p: &Pending, run: Result<Report, IntrospectError>| {
                if let Err(error) =
                    run.and_then(|r| apply(&mut tools[p.index], r, p.name_from_callable))
                {
                    failures.push(Failure {
                        index: p.index,
                        error,
                    });
                }
            };
        for members in batches.values() {
            let indices: Vec<usize> = members.iter().map(|p| p.index).collect();
            match self.run_batch(tools, &indices) {
                Ok(reports) => {
                    for (p, report) in members.iter().zip(reports) {
                        fill_one(tools, p, Ok(report));
                    }
                }
                Err(error) if members.len() == 1 => fill_one(tools, &members[0], Err(error)),
                Err(_) => {
                    // Which member broke the run is unknown (and errors found before the
                    // run, such as a missing cwd, must name each tool): one run each.
                    for p in members {
                        let run = self
                            .run_batch(tools, &[p.index])
                            .map(|mut reports| reports.remove(0));
                        fill_one(tools, p, run);
                    }
                }
            }
        }
        failures.sort_by_key(|f| f.index);
        failures
    }

    fn run_batch(&self, tools: &[Tool], members: &[usize]) -> Result<Vec<Report>, IntrospectError> {
        let first = &tools[members[0]];
        let place = first.source.clone();
        let ToolKind::Fn { python, .. } = &first.kind else {
            unreachable!("batches hold fn tools only")
        };
        let python = python.as_deref().unwrap_or(DEFAULT_PYTHON);
        let paths: Vec<&str> = members
            .iter()
            .map(|&i| match &tools[i].kind {
                ToolKind::Fn { path, .. } => path.as_str(),
                _ => "",
            })
            .collect();
        let output = match &self.runner {
            Some(runner) => self.run_elsewhere(runner.as_ref(), first, python, &paths)?,
            None => self.run_here(first, python, &paths)?,
        };
        let reports: Vec<Report> =
            serde_json::from_slice(&output).map_err(|e| IntrospectError::Output {
                place: place.clone(),
                reason: e.to_string(),
            })?;
        if reports.len() != members.len() {
            return Err(IntrospectError::Output {
                place,
                reason: format!("{} reports for {} callables", reports.len(), members.len()),
            });
        }
        Ok(reports)
    }

    /// The interpreter run through [`Self::runner`]: the env layers that come from the
    /// runtime's own environment (floor, passthrough) are added there.
    fn run_elsewhere(
        &self,
        runner: &dyn RunInterpreter,
        first: &Tool,
        python: &str,
        paths: &[&str],
    ) -> Result<Vec<u8>, IntrospectError> {
        let place = first.source.clone();
        let mut set = build_env(
            first,
            &[],
            &self.floor,
            &self.env_file(first)?,
            &[],
            &Map::new(),
        );
        set.remove("MCC_CTX");
        let spec = EnvSpec::for_tool(first, &self.floor, set);
        let args = runner_args("introspect", paths.iter().copied());
        runner
            .run(python, &args, first.cwd.as_deref(), spec, self.timeout)
            .map_err(|e| match e {
                RunInterpreterError::NoInterpreter => IntrospectError::NoInterpreter {
                    place,
                    python: python.to_string(),
                },
                RunInterpreterError::Cwd(path) => IntrospectError::Cwd { place, path },
                RunInterpreterError::Failed(stderr) => {
                    IntrospectError::Subprocess { place, stderr }
                }
            })
    }

    fn run_here(
        &self,
        first: &Tool,
        python: &str,
        paths: &[&str],
    ) -> Result<Vec<u8>, IntrospectError> {
        let place = first.source.clone();
        let cwd = match &first.cwd {
            Some(c) => c.clone(),
            None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
        };
        if !cwd.is_dir() {
            return Err(IntrospectError::Cwd { place, path: cwd });
        }
        let cwd = cwd.canonicalize().unwrap_or(cwd);
        let env = self.process_env(first, &cwd)?;
        let interpreter =
            find_python(python, env.get("PATH").map(String::as_str)).ok_or_else(|| {
                IntrospectError::NoInterpreter {
                    place: place.clone(),
                    python: python.to_string(),
                }
            })?;
        run_with_timeout(
            Command::new(&interpreter)
                .args(runner_args("introspect", paths.iter().copied()))
                .current_dir(&cwd)
                .env_clear()
                .envs(&env),
            self.timeout,
        )
        .map_err(|stderr| IntrospectError::Subprocess { place, stderr })
    }
}

/// Runs a command in its own process group to completion within `timeout`, returning
/// stdout, or stderr (or a reason) on failure. On timeout the whole group is killed, so
/// a module that starts processes on import cannot leave them behind.
fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Result<Vec<u8>, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start the interpreter: {e}"))?;
    // Each pipe gets its own reader: a module printing a lot on import (sent to stderr by
    // the runner) must not block while stdout is being read.
    let stdout = read_in_thread(child.stdout.take());
    let stderr = read_in_thread(child.stderr.take());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send((stdout.join(), stderr.join()));
    });
    match rx.recv_timeout(timeout) {
        Ok((out, err)) => {
            let status = child.wait().map_err(|e| e.to_string())?;
            let out = out.unwrap_or_default();
            let err = err.unwrap_or_default();
            if status.success() {
                Ok(out)
            } else {
                Err(String::from_utf8_lossy(&err).trim().to_string())
            }
        }
        Err(_) => {
            kill_group(child.id());
            let _ = child.kill();
            let _ = child.wait();
            Err(format!("timed out after {}s", timeout.as_secs_f64()))
        }
    }
}

fn read_in_thread(
    pipe: Option<impl std::io::Read + Send + 'static>,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        buf
    })
}

/// SIGKILL to the process group led by `pid` (the child was started with
/// `process_group(0)`, so its pid is the group id).
fn kill_group(pid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) takes plain integers; a negative pid addresses the process group we
    // created, and a stale group only yields ESRCH.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

fn apply(tool: &mut Tool, report: Report, name_from_callable: bool) -> Result<(), IntrospectError> {
    if !report.ok {
        let error = report
            .error
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .to_string();
        return Err(IntrospectError::Import {
            place: tool.source.clone(),
            func: report.func,
            error,
        });
    }
    if name_from_callable && !report.name.is_empty() && report.name != tool.name {
        check_name(&report.name).map_err(|reason| IntrospectError::Name {
            place: tool.source.clone(),
            reason,
        })?;
        tool.name = report.name;
        tool.key = tool_key(&tool.groups, &tool.name);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::Param;

    fn fn_tool(cwd: &Path, index: usize, path: &str) -> Tool {
        let mut entry = serde_json::json!({"fn": path});
        entry["cwd"] = serde_json::json!(cwd.display().to_string());
        let built = crate::spec::build_tool(
            crate::spec::parse_entry(entry).unwrap(),
            &format!("t.yaml: tools[{index}]"),
        )
        .unwrap();
        built.tool
    }

    /// A batch of four tools in one environment: a good module, a missing one, one that
    /// kills its interpreter on import and one that hangs. Only the three culprits fail,
    /// each with its own error; the good tool is filled in.
    #[test]
    fn a_failing_run_is_retried_tool_by_tool() {
        let dir = tempfile::tempdir().unwrap();
        let module = |name: &str, src: &str| {
            std::fs::write(dir.path().join(format!("{name}.py")), src).unwrap();
        };
        module(
            "good",
            "def add(a: int, b: int = 2) -> int:\n    \"\"\"Adds.\"\"\"\n    return a + b\n",
        );
        module("exits", "import os\nos._exit(3)\n");
        module("hangs", "import time\ntime.sleep(30)\n");
        let paths = ["good:add", "nowhere:f", "exits:f", "hangs:f"];
        let mut tools: Vec<Tool> = paths
            .iter()
            .enumerate()
            .map(|(i, p)| fn_tool(dir.path(), i, p))
            .collect();
        let pending: Vec<Pending> = (0..tools.len())
            .map(|index| Pending {
                index,
                name_from_callable: false,
            })
            .collect();
        let introspector = Introspector {
            timeout: Duration::from_millis(1500),
            ..Introspector::default()
        };
        let failures = introspector.fill_each(&mut tools, &pending);
        let failed: Vec<(usize, String)> = failures
            .iter()
            .map(|f| (f.index, f.error.to_string()))
            .collect();
        assert_eq!(failed.len(), 3, "{failed:#?}");
        assert_eq!(failed[0].0, 1);
        assert!(
            failed[0].1.starts_with("t.yaml: tools[1]")
                && failed[0].1.contains("No module named 'nowhere'"),
            "{failed:#?}"
        );
        assert_eq!(failed[1].0, 2);
        assert!(
            failed[1].1.starts_with("t.yaml: tools[2]")
                && failed[1].1.contains("Introspection subprocess failed"),
            "{failed:#?}"
        );
        assert_eq!(failed[2].0, 3);
        assert!(failed[2].1.contains("timed out after 1.5s"), "{failed:#?}");
        let good = &tools[0];
        assert_eq!(good.description, "Adds.");
        let names: Vec<&str> = good
            .params
            .iter()
            .map(|p: &Param| p.name.as_str())
            .collect();
        assert_eq!(names, ["a", "b"]);

        // The strict form reports the first failure in slice order.
        let mut again: Vec<Tool> = paths
            .iter()
            .take(2)
            .enumerate()
            .map(|(i, p)| fn_tool(dir.path(), i, p))
            .collect();
        let e = introspector.fill(&mut again, &pending[..2]).unwrap_err();
        assert!(e.to_string().contains("nowhere"), "{e}");
    }
}
