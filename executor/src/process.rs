//! Running one tool process to its end: spawn in a new process group (or, for the
//! executor, a new session: [`Leader::Session`]) with an explicit environment, rlimits
//! applied in the child before `exec`, stdin fed concurrently, stdout/stderr captured up
//! to a bound (the rest read and discarded so the child never blocks), and the whole group
//! killed with SIGKILL on timeout, on cancellation and when the main process exits (so
//! background children cannot outlive the call). A process that leaves the group is the
//! business of whoever adopts orphans ([`crate::reaper`]).
//!
//! It knows nothing about tool kinds or result shapes (the gateway's business), nor
//! where the program, environment and working directory come from ([`crate::runtime`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::pin::pin;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::limits::Rlimits;
use crate::reaper::Spawned;

/// How long the pipes may stay open after the main process is gone (and its group has
/// been killed): only a process that left the group (`setsid`) can hold them that long.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// Read size of the capture loop.
const CHUNK: usize = 64 * 1024;

/// How much of the end of a stream longer than its capture is kept (where a Python
/// traceback's last line is).
pub const TAIL: usize = 4096;

/// What to run.
pub struct Spec<'a> {
    /// An absolute path: a bare name would be looked up in this process's `PATH`.
    pub program: &'a Path,
    pub args: &'a [&'a str],
    /// The complete environment; nothing of this process's is inherited.
    pub env: &'a BTreeMap<String, String>,
    pub cwd: Option<&'a Path>,
    /// Bytes written to stdin (then closed); `None` connects stdin to `/dev/null`.
    pub stdin: Option<&'a [u8]>,
    pub rlimits: Rlimits,
    pub timeout: Option<Duration>,
    /// Each of stdout and stderr keeps at most this many bytes.
    pub max_output: usize,
}

/// What the main process leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Leader {
    /// A process group of its own (`setpgid`), in this process's session: spawned with
    /// `posix_spawn`, the cheapest way.
    #[default]
    Group,
    /// A session of its own (`setsid`; also a group of its own), so the session id of
    /// every process of the call is the main process's pid: no process can join another
    /// call's session, which is what lets the executor tell whose an orphan is
    /// ([`crate::reaper::sweep`]). Costs a `fork` instead of a `posix_spawn`.
    Session,
}

/// How the main process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Ending {
    Exited(i32),
    /// Killed by this signal number.
    Signaled(i32),
    /// Still running at the deadline; the group was killed.
    TimedOut,
}

/// At most `limit` bytes of a stream, how many bytes it carried in all, and, when it
/// was longer, its last [`TAIL`] bytes.
#[derive(Debug, Default, Clone)]
pub struct Captured {
    pub bytes: Vec<u8>,
    pub total: u64,
    pub tail: Vec<u8>,
}

impl Captured {
    pub fn truncated(&self) -> bool {
        self.total > self.bytes.len() as u64
    }

    fn keep(&mut self, chunk: &[u8], limit: usize) {
        let room = limit.saturating_sub(self.bytes.len()).min(chunk.len());
        self.bytes.extend_from_slice(&chunk[..room]);
        self.total += chunk.len() as u64;
        let discarded = &chunk[room..];
        if !discarded.is_empty() {
            self.tail
                .extend_from_slice(&discarded[discarded.len().saturating_sub(TAIL)..]);
            let excess = self.tail.len().saturating_sub(TAIL);
            self.tail.drain(..excess);
        }
    }
}

/// A finished process.
#[derive(Debug)]
pub struct Finished {
    pub ending: Ending,
    pub stdout: Captured,
    pub stderr: Captured,
}

/// Spawns `spec` leading its own process group and runs it to its end. An `Err` means the
/// process could not be started.
pub async fn run(spec: &Spec<'_>) -> std::io::Result<Finished> {
    run_as(spec, Leader::Group).await
}

/// [`run`], with the main process leading `leader`.
pub async fn run_as(spec: &Spec<'_>, leader: Leader) -> std::io::Result<Finished> {
    let started = Instant::now();
    let (mut child, _registered) = Spawned::register(|| {
        let child = command(spec, leader).spawn()?;
        let pid = child.id();
        Ok((child, pid))
    })?;
    let mut group = GroupKill(child.id().map(|pid| pid as i32));
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let mut out = Captured::default();
    let mut err = Captured::default();
    let ending = {
        let io = async {
            tokio::join!(
                feed(stdin, spec.stdin),
                capture(stdout, spec.max_output, &mut out),
                capture(stderr, spec.max_output, &mut err),
            )
        };
        let mut io = pin!(io);
        let mut io_done = false;
        let deadline = spec
            .timeout
            .map(|t| tokio::time::Instant::from_std(started + t));
        let ending = loop {
            tokio::select! {
                _ = &mut io, if !io_done => io_done = true,
                status = child.wait() => break ending_of(status?),
                _ = sleep_until(deadline) => break Ending::TimedOut,
            }
        };
        // Whatever is left of the group (background children, a timed-out tree) dies now,
        // which also closes the pipes they hold.
        group.kill();
        if ending == Ending::TimedOut {
            let _ = child.wait().await;
        } else if !io_done {
            let _ = tokio::time::timeout(DRAIN_GRACE, &mut io).await;
        }
        ending
    };
    Ok(Finished {
        ending,
        stdout: out,
        stderr: err,
    })
}

pub(crate) fn command(spec: &Spec<'_>, leader: Leader) -> Command {
    let mut cmd = Command::new(spec.program);
    cmd.args(spec.args)
        .env_clear()
        .envs(spec.env)
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if leader == Leader::Group {
        // The child leads its own group, so one kill reaches the shell's children too.
        cmd.process_group(0);
    }
    if let Some(cwd) = spec.cwd {
        cmd.current_dir(cwd);
    }
    // Only what needs a pre_exec hook pays for one: without one, std can use posix_spawn
    // instead of fork.
    let rlimits = spec.rlimits;
    match (leader, rlimits.is_empty()) {
        (Leader::Group, true) => {}
        (Leader::Group, false) => {
            // SAFETY: the closure only calls setrlimit(2), which is async-signal-safe,
            // and allocates nothing.
            unsafe {
                cmd.pre_exec(move || rlimits.apply());
            }
        }
        (Leader::Session, _) => {
            // SAFETY: setsid(2) and setrlimit(2) are async-signal-safe; nothing here
            // allocates. setsid cannot fail in a fresh child (it leads no group yet).
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setsid() < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    rlimits.apply()
                });
            }
        }
    }
    cmd
}

pub(crate) fn ending_of(status: ExitStatus) -> Ending {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Ending::Exited(code),
        (None, Some(sig)) => Ending::Signaled(sig),
        (None, None) => Ending::Exited(-1),
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Writes `bytes` to the child's stdin and closes it. A child that exits or closes its
/// stdin without reading is not an error.
async fn feed(stdin: Option<tokio::process::ChildStdin>, bytes: Option<&[u8]>) {
    if let (Some(mut pipe), Some(bytes)) = (stdin, bytes) {
        let _ = pipe.write_all(bytes).await;
        let _ = pipe.shutdown().await;
    }
}

/// Reads `pipe` to its end, keeping the first `limit` bytes and counting the rest.
async fn capture(pipe: Option<impl AsyncRead + Unpin>, limit: usize, into: &mut Captured) {
    let Some(mut pipe) = pipe else { return };
    // Read into spare capacity (`read_buf`): a zeroed 64 KiB buffer per stream and call
    // was a 128 KiB memset for what is usually a few bytes of output.
    let mut chunk = Vec::with_capacity(CHUNK);
    loop {
        chunk.clear();
        match pipe.read_buf(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(_) => into.keep(&chunk, limit),
        }
    }
}

/// Kills the child's whole process group when told to, or when dropped untold (the call
/// was cancelled), so no path leaves processes behind. Only once: after the group has
/// emptied, its id is free for a new group that a second signal would reach.
pub(crate) struct GroupKill(pub(crate) Option<i32>);

impl GroupKill {
    pub(crate) fn kill(&mut self) {
        if let Some(pgid) = self.0.take().filter(|&p| p > 0) {
            // SAFETY: kill(2) with a negative pid signals that process group; no memory
            // is involved. ESRCH (group already empty) is expected and ignored.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_the_head_counts_all_and_keeps_the_tail() {
        let mut c = Captured::default();
        c.keep(b"abc", 5);
        c.keep(b"defg", 5);
        assert_eq!(
            (c.bytes.as_slice(), c.total, c.tail.as_slice()),
            (&b"abcde"[..], 7, &b"fg"[..])
        );
        c.keep(&vec![b'x'; TAIL + 10], 5);
        c.keep(b"end", 5);
        assert_eq!(c.tail.len(), TAIL);
        assert!(c.tail.ends_with(b"xend"));
        assert_eq!(c.total, 7 + TAIL as u64 + 13);
    }
}
