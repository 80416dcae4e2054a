//! Where command templates render: in worker processes of the gateway's own binary
//! (`mcc-gateway render-worker`), each held to a memory limit, or — where no worker program
//! is configured (the `mcc` CLI, unit tests) — in the caller's process.
//!
//! A template is code its tool's author wrote; in Kubernetes mode, that is any tenant
//! allowed to create Tools. minijinja's fuel bounds its work and the render bounds its text
//! ([`mcc_catalog::template`]), but nothing in minijinja bounds what a template holds in its
//! variables: `{% set s = s ~ s %}` doubles a string per instruction. Only a process can be
//! held to a memory limit, and only a process can be stopped mid-render (a thread cannot:
//! `spawn_blocking` is not cancellable). So the gateway keeps a few workers: a render
//! waits for a free one (the count bounds the CPU and memory renders take together), a
//! worker that passes its limit dies alone and is replaced, and a render whose caller goes
//! away or that outlives [`DEADLINE`] kills its worker.
//!
//! The wire is one request, one reply: a 4-byte big-endian length, then JSON.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use minijinja::Environment;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Semaphore;

/// The longest a render may take in a worker before the worker is killed. Fuel stops a
/// template long before this; the deadline covers what fuel does not count (one huge
/// string operation, a worker swapped out).
pub const DEADLINE: Duration = Duration::from_secs(5);

/// The largest request or reply frame: params arrive already bounded by the request size;
/// this only keeps a corrupt length from allocating.
const MAX_FRAME: usize = 256 << 20;

/// The hidden subcommand of `mcc-gateway` that runs a worker.
pub const WORKER_SUBCOMMAND: &str = "render-worker";

/// Which renderer a template goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// MCC's Jinja, as written ([`mcc_catalog::template::render`]).
    Jinja,
    /// A curl command: no value leaves its shell word ([`mcc_catalog::template::render_curl`]).
    Curl,
}

#[derive(Serialize)]
struct Request<'a> {
    kind: Kind,
    source: &'a str,
    params: &'a Map<String, Value>,
}

#[derive(Deserialize)]
struct OwnedRequest {
    kind: Kind,
    source: String,
    params: Map<String, Value>,
}

/// Renders one template in this process (what a worker does with each request).
pub fn render_here(
    env: &Environment<'_>,
    kind: Kind,
    source: &str,
    params: &Map<String, Value>,
) -> Result<String, String> {
    match kind {
        Kind::Jinja => mcc_catalog::template::render(env, source, params),
        Kind::Curl => mcc_catalog::template::render_curl(source, params),
    }
    .map_err(|e| e.to_string())
}

/// `execution.render`: how many templates render at once and how much memory each may
/// hold.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RenderSettings {
    /// Renders at once on this replica (each in its own worker process); more wait.
    pub workers: usize,
    /// The memory one worker may map for its data (`RLIMIT_DATA`), in MiB: its params, its
    /// variables and its text. Worst case of all renders together: `workers` times this.
    pub memory_mib: u64,
    /// The program whose `render-worker` subcommand runs a worker: `mcc-gateway serve`
    /// sets its own binary (not a setting). Unset: templates render in the caller's process,
    /// bounded in work and text but not in memory.
    #[serde(skip)]
    pub program: Option<PathBuf>,
}

impl Default for RenderSettings {
    fn default() -> Self {
        Self {
            workers: 2,
            memory_mib: 128,
            program: None,
        }
    }
}

impl RenderSettings {
    /// The bounds: a worker needs some memory to start at all, and the count is a semaphore.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(1..=64).contains(&self.workers) {
            return Err((
                "execution.render.workers",
                format!("must be between 1 and 64, got {}", self.workers),
            ));
        }
        if !(MIN_MEMORY_MIB..=1 << 20).contains(&self.memory_mib) {
            return Err((
                "execution.render.memory_mib",
                format!(
                    "must be between {MIN_MEMORY_MIB} and 1048576 MiB, got {}",
                    self.memory_mib
                ),
            ));
        }
        Ok(())
    }
}

/// The least memory a worker is given: what the gateway's binary maps before it reads its
/// first request, with room for an ordinary render.
const MIN_MEMORY_MIB: u64 = 32;

/// Renders templates, in workers or here.
#[derive(Debug, Clone)]
pub enum Renderer {
    /// In the caller's process and thread: fuel and the text bound apply, no memory bound.
    InProcess(Arc<Environment<'static>>),
    /// In worker processes with a memory limit.
    Workers(Arc<WorkerPool>),
}

impl Renderer {
    /// A renderer in this process.
    pub fn in_process() -> Self {
        Self::InProcess(Arc::new(mcc_catalog::template::environment()))
    }

    /// Workers when `settings` name a program, else this process (with a warning: the
    /// memory a template holds is then unbounded).
    pub fn from_settings(settings: &RenderSettings) -> Self {
        match &settings.program {
            Some(program) => Self::Workers(Arc::new(WorkerPool::new(
                program.clone(),
                settings.workers,
                settings.memory_mib << 20,
            ))),
            _ => {
                tracing::warn!(
                    "templates render in the gateway's process (no render worker program): \
                     their work and text are bounded, the memory they hold is not"
                );
                Self::in_process()
            }
        }
    }

    /// Renders `source` with `params`; the error says what went wrong.
    pub async fn render(
        &self,
        kind: Kind,
        source: &str,
        params: &Map<String, Value>,
    ) -> Result<String, String> {
        match self {
            Self::InProcess(env) => render_here(env, kind, source, params),
            Self::Workers(pool) => pool.render(kind, source, params).await,
        }
    }
}

/// Worker processes, started on demand, at most `workers` at once.
#[derive(Debug)]
pub struct WorkerPool {
    program: PathBuf,
    memory_bytes: u64,
    slots: Semaphore,
    idle: Mutex<Vec<Worker>>,
}

#[derive(Debug)]
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
}

impl WorkerPool {
    pub fn new(program: PathBuf, workers: usize, memory_bytes: u64) -> Self {
        Self {
            program,
            memory_bytes,
            slots: Semaphore::new(workers.max(1)),
            idle: Mutex::new(Vec::new()),
        }
    }

    async fn render(
        &self,
        kind: Kind,
        source: &str,
        params: &Map<String, Value>,
    ) -> Result<String, String> {
        let frame = serde_json::to_vec(&Request {
            kind,
            source,
            params,
        })
        .map_err(|e| format!("cannot encode the render request: {e}"))?;
        let _slot = self.slots.acquire().await.map_err(|e| e.to_string())?;
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut worker = match idle {
            Some(worker) => worker,
            None => self.spawn()?,
        };
        // Dropping `worker` (the deadline, or the caller going away) kills the process.
        match tokio::time::timeout(DEADLINE, worker.exchange(&frame)).await {
            Ok(Ok(reply)) => {
                self.idle
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(worker);
                reply
            }
            Ok(Err(_)) => Err(self.died(worker).await),
            Err(_) => Err(format!(
                "the template did not finish rendering within {} s and was stopped",
                DEADLINE.as_secs()
            )),
        }
    }

    fn spawn(&self) -> Result<Worker, String> {
        let mut child = Command::new(&self.program)
            .arg(WORKER_SUBCOMMAND)
            .arg("--memory-bytes")
            .arg(self.memory_bytes.to_string())
            // A worker needs nothing of the gateway's environment (its credentials least).
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start a render worker ({} {WORKER_SUBCOMMAND}): {e}",
                    self.program.display()
                )
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("a render worker started without its pipes".into());
        };
        Ok(Worker {
            child,
            stdin,
            stdout,
        })
    }

    /// What a worker that stopped answering ran into.
    async fn died(&self, mut worker: Worker) -> String {
        drop(worker.stdin);
        let status = tokio::time::timeout(Duration::from_secs(1), worker.child.wait()).await;
        match status {
            // An allocation refused by the limit aborts the worker (SIGABRT).
            Ok(Ok(status))
                if std::os::unix::process::ExitStatusExt::signal(&status)
                    == Some(libc::SIGABRT) =>
            {
                format!(
                    "the template needed more than {} MiB of memory while rendering and was \
                     stopped",
                    self.memory_bytes >> 20
                )
            }
            Ok(Ok(status)) => format!("the render worker stopped ({status})"),
            _ => "the render worker stopped answering".into(),
        }
    }
}

impl Worker {
    async fn exchange(&mut self, frame: &[u8]) -> std::io::Result<Result<String, String>> {
        let len = u32::try_from(frame.len()).map_err(std::io::Error::other)?;
        self.stdin.write_all(&len.to_be_bytes()).await?;
        self.stdin.write_all(frame).await?;
        self.stdin.flush().await?;
        let mut len = [0u8; 4];
        self.stdout.read_exact(&mut len).await?;
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_FRAME {
            return Err(std::io::Error::other("reply frame too large"));
        }
        let mut reply = vec![0u8; len];
        self.stdout.read_exact(&mut reply).await?;
        serde_json::from_slice(&reply).map_err(std::io::Error::other)
    }
}

/// A worker's life: limits itself, then answers requests on stdin until it closes.
pub fn worker_main(memory_bytes: u64) -> std::io::Result<()> {
    limit_self(memory_bytes)?;
    let env = mcc_catalog::template::environment();
    let mut stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    loop {
        let mut len = [0u8; 4];
        match stdin.read_exact(&mut len) {
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            other => other?,
        }
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_FRAME {
            return Err(std::io::Error::other("request frame too large"));
        }
        let mut frame = vec![0u8; len];
        stdin.read_exact(&mut frame)?;
        let reply: Result<String, String> = match serde_json::from_slice::<OwnedRequest>(&frame) {
            Ok(req) => render_here(&env, req.kind, &req.source, &req.params),
            Err(e) => Err(format!("bad render request: {e}")),
        };
        drop(frame);
        let reply = serde_json::to_vec(&reply).map_err(std::io::Error::other)?;
        stdout.write_all(&(reply.len() as u32).to_be_bytes())?;
        stdout.write_all(&reply)?;
        stdout.flush()?;
    }
}

/// The worker's limits: `memory_bytes` of data (heap and anonymous mappings: an
/// allocation past it fails and the worker aborts), no core file, and a lower priority
/// than the gateway's own threads so that renders cannot slow its answers.
fn limit_self(memory_bytes: u64) -> std::io::Result<()> {
    let set = |resource, value: u64| {
        let limit = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: setrlimit reads the struct passed by reference.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    };
    set(libc::RLIMIT_DATA, memory_bytes)?;
    set(libc::RLIMIT_CORE, 0)?;
    // SAFETY: plain syscall on this process; a failure (already lower) is harmless.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 5) };
    Ok(())
}
