//! The one way the gateway runs a tool process: a [`Request`] in, a [`Finished`] process
//! (or a [`RunError`]) out, through a [`Runtime`]. Two implementations: [`InProcess`]
//! (spawns here) and [`crate::ExecutorClient`] (asks the executor container over its
//! socket, which serves an [`InProcess`] of its own).
//!
//! Everything that depends on where the process runs is settled by the runtime, not by
//! the caller: the inherited env layers (floor and passthrough, from the runtime's own
//! environment), the working directory, and the program's path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use mcc_catalog::env::EnvSpec;
use mcc_catalog::introspect::find_python;

use crate::limits::Rlimits;
use crate::process::{self, Finished, Leader, Spec};
use crate::progress;
use crate::session::{self, SessionRequest, SessionStream};

/// One process to run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// An absolute path, or a bare name looked up on the tool's own `PATH` (the
    /// resolved environment's, e.g. the tool's `python`).
    pub program: String,
    pub args: Vec<String>,
    pub env: EnvSpec,
    /// The tool's working directory (relative: to the runtime's); `None`: the runtime's.
    pub cwd: Option<PathBuf>,
    /// Written to stdin, then closed; `None` connects stdin to `/dev/null`.
    #[serde(skip)]
    pub stdin: Option<Vec<u8>>,
    pub rlimits: Rlimits,
    /// Wall-clock limit; the whole process group is killed when it passes.
    pub timeout: Option<Duration>,
    /// Each of stdout and stderr keeps at most this many bytes.
    pub max_output: usize,
}

/// Why a process did not run to an end. Serializable: the executor sends it back as is.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum RunError {
    #[error("{program} not found on the tool's PATH")]
    NotFound { program: String },
    #[error("cwd {path} is not a directory")]
    Cwd { path: PathBuf },
    #[error("cannot start {program}: {reason}")]
    Spawn { program: String, reason: String },
    /// Nothing answers at the executor's address (not started yet, restarting).
    #[error("executor at {socket}: unreachable ({reason}); is the executor running?")]
    Unreachable { socket: String, reason: String },
    /// The executor broke off the call or answered nonsense.
    #[error("executor at {socket}: {reason}")]
    Executor { socket: String, reason: String },
    /// The pod runtime could not run the call to an end (the Pod could not be created or
    /// started, or ended without a result): `reason` says what Kubernetes reported.
    #[error("pod {namespace}/{pod}: {reason}")]
    Pod {
        namespace: String,
        pod: String,
        reason: String,
    },
}

/// Runs tool processes. Dropping a `run` future kills the process group it started.
#[async_trait::async_trait]
pub trait Runtime: Send + Sync + std::fmt::Debug {
    async fn run(&self, request: &Request) -> Result<Finished, RunError>;

    /// `Err(reason)` when this runtime cannot run tools now (readiness).
    async fn check(&self) -> Result<(), String>;

    /// Starts `request` as a session ([`crate::session`]): the returned stream is the
    /// process's stdin and stdout; dropping it kills the process group. A runtime that
    /// cannot keep a process running (the pod runtime) says so.
    async fn open_session(&self, request: &SessionRequest) -> Result<SessionStream, RunError> {
        Err(RunError::Spawn {
            program: request.program.clone(),
            reason: format!("the {} runtime cannot run a stdio server", self.kind()),
        })
    }

    /// Where the processes run, as traces name it (`in-process`, `executor`).
    fn kind(&self) -> &'static str {
        "custom"
    }
}

/// Spawns in this process. `parent` is the environment the env floor and passthrough
/// draw from: the gateway's own in file mode, the executor container's behind the socket.
/// Its `Debug` shows the variable names only.
#[derive(Clone)]
pub struct InProcess {
    parent: Arc<[(String, String)]>,
    /// This process's working directory, read once: nothing here changes it.
    here: Arc<Path>,
    /// What each main process leads (the executor: a session; see [`Leader`]).
    leader: Leader,
}

impl std::fmt::Debug for InProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.parent.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("InProcess")
            .field("parent_env (names only)", &names)
            .finish()
    }
}

impl InProcess {
    pub fn new(parent_env: Vec<(String, String)>) -> Self {
        Self {
            parent: parent_env.into(),
            here: std::env::current_dir()
                .unwrap_or_else(|_| PathBuf::from("/"))
                .into(),
            leader: Leader::Group,
        }
    }

    /// Each main process leads a session of its own (the executor's runtime: what lets
    /// it tell a running call's orphans from those of ended calls).
    pub fn in_own_sessions(mut self) -> Self {
        self.leader = Leader::Session;
        self
    }

    /// With this process's environment (read once, here: never after startup).
    pub fn from_environment() -> Self {
        Self::new(std::env::vars().collect())
    }

    /// Starts `request`'s process (its own group or session, as this runtime's tools),
    /// for [`session::pump`] to serve.
    pub fn start_session(&self, request: &SessionRequest) -> Result<session::Process, RunError> {
        request.check().map_err(|reason| RunError::Spawn {
            program: request.program.clone(),
            reason,
        })?;
        let env = request.env.resolve(&self.parent, &self.here);
        let program = locate(&request.program, &env)?;
        let args: Vec<&str> = request.args.iter().map(String::as_str).collect();
        let spec = Spec {
            program: &program,
            args: &args,
            env: &env,
            cwd: None,
            stdin: Some(&[]),
            rlimits: request.rlimits,
            timeout: None,
            max_output: 0,
        };
        let spawned = crate::reaper::Spawned::register(|| {
            let child = process::command(&spec, self.leader).spawn()?;
            let pid = child.id();
            Ok((child, pid))
        });
        let (mut child, registered) =
            spawned.map_err(|e| spawn_error(&request.program, &program, e))?;
        let group = process::GroupKill(child.id().map(|pid| pid as i32));
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            unreachable!("all three are piped by process::command");
        };
        Ok(session::Process {
            child,
            stdin,
            stdout,
            stderr,
            group,
            _registered: registered,
            program: request.program.clone(),
        })
    }

    /// The complete environment and working directory `request` would run with here.
    fn resolve(
        &self,
        request: &Request,
    ) -> Result<(BTreeMap<String, String>, Option<PathBuf>), RunError> {
        let cwd = match &request.cwd {
            Some(dir) => Some(checked_dir(&self.here, dir)?),
            None => None,
        };
        let env = request
            .env
            .resolve(&self.parent, cwd.as_deref().unwrap_or(&self.here));
        // An fn tool imports its module from its working directory: make it explicit.
        let cwd = match cwd {
            None if request.env.cwd_on_pythonpath => Some(self.here.to_path_buf()),
            cwd => cwd,
        };
        Ok((env, cwd))
    }
}

#[async_trait::async_trait]
impl Runtime for InProcess {
    fn kind(&self) -> &'static str {
        "in-process"
    }

    async fn run(&self, request: &Request) -> Result<Finished, RunError> {
        let (mut env, cwd) = self.resolve(request)?;
        // The tool's own progress, when the caller wants it ([`crate::progress`]).
        let sink = crate::progress::current_sink();
        let file = match &sink {
            Some(_) => match progress::File::create(&std::env::temp_dir()) {
                Ok(file) => Some(file),
                Err(e) => {
                    tracing::warn!(error = %e, "no progress file for this call");
                    None
                }
            },
            None => None,
        };
        if let Some(file) = &file {
            env.insert(progress::ENV.to_string(), file.path().display().to_string());
        }
        let program = locate(&request.program, &env)?;
        let args: Vec<&str> = request.args.iter().map(String::as_str).collect();
        let spec = Spec {
            program: &program,
            args: &args,
            env: &env,
            cwd: cwd.as_deref(),
            stdin: request.stdin.as_deref(),
            rlimits: request.rlimits,
            timeout: request.timeout,
            max_output: request.max_output,
        };
        let run = process::run_as(&spec, self.leader);
        let ran = match (&file, &sink) {
            (Some(file), Some(sink)) => {
                let ran = tokio::select! {
                    ran = run => ran,
                    () = file.follow(sink) => unreachable!("follows forever"),
                };
                file.publish(sink);
                ran
            }
            _ => run.await,
        };
        ran.map_err(|e| spawn_error(&request.program, &program, e))
    }

    async fn check(&self) -> Result<(), String> {
        Ok(())
    }

    /// The process runs here, its bytes carried through an in-memory pipe by a task of
    /// this process ([`session::pump`], the same bounds as behind the executor).
    async fn open_session(&self, request: &SessionRequest) -> Result<SessionStream, RunError> {
        let process = self.start_session(request)?;
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let bounds = request.clone();
        tokio::spawn(async move {
            let (from_caller, to_caller) = tokio::io::split(ours);
            session::pump(
                process,
                from_caller,
                to_caller,
                &bounds,
                std::future::pending(),
            )
            .await
        });
        Ok(Box::new(theirs))
    }
}

/// The program to spawn: a bare name is looked up on the process's own `PATH` (`env`'s);
/// a path is spawned as it is: a missing one fails the spawn, reported as the lookup
/// reports it ([`spawn_error`]; no stat first).
fn locate(program: &str, env: &BTreeMap<String, String>) -> Result<PathBuf, RunError> {
    match program.contains('/') {
        true => Ok(PathBuf::from(program)),
        false => find_python(program, env.get("PATH").map(String::as_str)).ok_or_else(|| {
            RunError::NotFound {
                program: program.to_string(),
            }
        }),
    }
}

/// Why spawning `resolved` (located from `requested`) failed.
fn spawn_error(requested: &str, resolved: &Path, e: std::io::Error) -> RunError {
    match e.kind() {
        std::io::ErrorKind::NotFound if requested.contains('/') => RunError::NotFound {
            program: requested.to_string(),
        },
        _ => RunError::Spawn {
            program: resolved.display().to_string(),
            reason: e.to_string(),
        },
    }
}

/// `dir` made absolute against `here` (this process's working directory), if it is a
/// directory.
fn checked_dir(here: &Path, dir: &Path) -> Result<PathBuf, RunError> {
    let absolute = here.join(dir);
    match absolute.is_dir() {
        true => Ok(absolute),
        false => Err(RunError::Cwd {
            path: dir.to_path_buf(),
        }),
    }
}
