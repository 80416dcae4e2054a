//! Sessions: one long-lived process (an upstream MCP server speaking stdio) whose stdin
//! and stdout are a byte stream to the caller, both ways, for as long as both sides keep
//! it open. A tool call is one request and one reply ([`crate::runtime::Request`]); a
//! session is what a stdio MCP server needs instead.
//!
//! Started like a tool ([`crate::runtime::InProcess::start_session`]): its own process
//! group (the executor: its own session), the environment of an [`EnvSpec`] and nothing
//! else, rlimits. [`pump`] carries the bytes and ends the session — killing the whole
//! process group — when the caller closes its side, the process exits or closes its
//! stdout, a line the process writes (one JSON-RPC message) passes
//! [`SessionRequest::max_message`], nothing moved either way for
//! [`SessionRequest::idle`], [`SessionRequest::lifetime`] passed, or `stop` resolved (the
//! executor stopping). Dropping a [`Process`] kills its group too.
//!
//! The server's stderr is read (so it never blocks) and only its last lines are kept,
//! for the executor's debug log when the session ends.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};

use mcc_catalog::env::EnvSpec;

use crate::limits::Rlimits;
use crate::process::{Ending, GroupKill};
use crate::reaper::Spawned;

/// The largest message bound a session may ask for.
pub const MAX_MESSAGE: usize = 64 * 1024 * 1024;
/// How much of a server's stderr is kept for the log.
const STDERR_TAIL: usize = 2048;
/// Read size of both directions.
const CHUNK: usize = 64 * 1024;
/// How long the rest of stdout is forwarded after the main process exited.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// A process to run as a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRequest {
    /// An absolute path, or a bare name looked up on the process's own `PATH`.
    pub program: String,
    pub args: Vec<String>,
    pub env: EnvSpec,
    pub rlimits: Rlimits,
    /// The session ends when no byte moved either way for this long.
    pub idle: Duration,
    /// The session ends this long after it started, whatever happens.
    pub lifetime: Duration,
    /// The longest line the process may write (at most [`MAX_MESSAGE`]); a longer one
    /// ends the session before any of it is forwarded past the bound.
    pub max_message: usize,
}

/// Anything that reads and writes: what a session is to the caller.
pub trait Duplex: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Duplex for T {}

/// The caller's end of a session.
pub type SessionStream = Box<dyn Duplex>;

/// A started session process; its process group is killed when it is dropped.
pub struct Process {
    pub(crate) child: Child,
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: ChildStdout,
    pub(crate) stderr: ChildStderr,
    pub(crate) group: GroupKill,
    /// Keeps the executor's sweep away from the session's processes while it runs.
    pub(crate) _registered: Spawned,
    pub(crate) program: String,
}

/// Why a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// The caller closed its side (or its connection broke).
    CallerClosed,
    /// The main process ended (or closed its stdout or stdin).
    Exited(Option<Ending>),
    Idle,
    Lifetime,
    /// A line longer than the bound.
    MessageTooLarge,
    /// The executor is stopping.
    Stopped,
}

impl SessionRequest {
    /// What is wrong with the bounds, if anything (the executor refuses such a request).
    pub fn check(&self) -> Result<(), String> {
        if self.max_message == 0 || self.max_message > MAX_MESSAGE {
            return Err(format!(
                "max_message must be 1..={MAX_MESSAGE} bytes, got {}",
                self.max_message
            ));
        }
        if self.idle.is_zero() || self.lifetime.is_zero() {
            return Err("idle and lifetime must be longer than 0".into());
        }
        Ok(())
    }
}

/// Carries bytes between the caller (`from_caller`, `to_caller`) and `process` until one
/// of the ends in the module's list; then kills the process group, waits for the main
/// process and closes the caller's side.
pub async fn pump(
    mut process: Process,
    mut from_caller: impl AsyncRead + Unpin,
    mut to_caller: impl AsyncWrite + Unpin,
    bounds: &SessionRequest,
    stop: impl std::future::Future<Output = ()>,
) -> End {
    let started = Instant::now();
    let last = AtomicU64::new(0);
    let touch = || last.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
    let stdin = &mut process.stdin;
    let stdout = &mut process.stdout;
    let caller_to_process = async {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match from_caller.read(&mut buf).await {
                Ok(0) | Err(_) => return End::CallerClosed,
                Ok(n) => {
                    touch();
                    if stdin.write_all(&buf[..n]).await.is_err() || stdin.flush().await.is_err() {
                        return End::Exited(None);
                    }
                }
            }
        }
    };
    let mut line = 0usize;
    let process_to_caller = forward(
        stdout,
        &mut to_caller,
        &mut line,
        bounds.max_message,
        &touch,
    );
    let idle = async {
        loop {
            let quiet = started
                .elapsed()
                .saturating_sub(Duration::from_millis(last.load(Ordering::Relaxed)));
            if quiet >= bounds.idle {
                return;
            }
            tokio::time::sleep(bounds.idle - quiet).await;
        }
    };
    let stderr = &mut process.stderr;
    let mut tail = Vec::new();
    let keep_stderr = async {
        let mut buf = vec![0u8; 4096];
        while let Ok(n @ 1..) = stderr.read(&mut buf).await {
            tail.extend_from_slice(&buf[..n]);
            let excess = tail.len().saturating_sub(STDERR_TAIL);
            tail.drain(..excess);
        }
        std::future::pending::<()>().await;
    };
    let child = &mut process.child;
    let mut end = tokio::select! {
        end = caller_to_process => end,
        end = process_to_caller => end,
        status = child.wait() => End::Exited(status.ok().map(crate::process::ending_of)),
        () = idle => End::Idle,
        () = tokio::time::sleep(bounds.lifetime) => End::Lifetime,
        () = stop => End::Stopped,
        () = keep_stderr => unreachable!("pending"),
    };
    // Whatever is left of the group dies now; the main process is reaped.
    process.group.kill();
    if let End::Exited(Some(_)) = end {
        // What it wrote before it exited still reaches the caller.
        let rest = forward(
            &mut process.stdout,
            &mut to_caller,
            &mut line,
            bounds.max_message,
            &touch,
        );
        if let Ok(End::MessageTooLarge) = tokio::time::timeout(DRAIN_GRACE, rest).await {
            end = End::MessageTooLarge;
        }
    }
    let _ = tokio::time::timeout(DRAIN_GRACE, process.child.wait()).await;
    let _ = to_caller.shutdown().await;
    tracing::debug!(
        program = %process.program,
        ?end,
        stderr_tail = %String::from_utf8_lossy(&tail),
        "session ended: process group killed"
    );
    end
}

/// Copies `stdout` to the caller until it ends (`Exited`), the caller goes
/// (`CallerClosed`) or a line passes `max` (`MessageTooLarge`, nothing of that chunk
/// forwarded); `line` is the length of the line in progress.
async fn forward(
    stdout: &mut ChildStdout,
    to_caller: &mut (impl AsyncWrite + Unpin),
    line: &mut usize,
    max: usize,
    touch: &impl Fn(),
) -> End {
    let mut buf = vec![0u8; CHUNK];
    loop {
        match stdout.read(&mut buf).await {
            Ok(0) | Err(_) => return End::Exited(None),
            Ok(n) => {
                touch();
                if !within_bound(&buf[..n], line, max) {
                    return End::MessageTooLarge;
                }
                if to_caller.write_all(&buf[..n]).await.is_err() || to_caller.flush().await.is_err()
                {
                    return End::CallerClosed;
                }
            }
        }
    }
}

/// Whether `chunk` keeps every line within `max` bytes, `line` being the length of the
/// line it continues (updated).
fn within_bound(chunk: &[u8], line: &mut usize, max: usize) -> bool {
    let mut pieces = chunk.split(|&b| b == b'\n').peekable();
    while let Some(piece) = pieces.next() {
        *line += piece.len();
        if *line > max {
            return false;
        }
        if pieces.peek().is_some() {
            *line = 0;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::within_bound;

    #[test]
    fn lines_are_measured_across_chunks() {
        let mut line = 0;
        assert!(within_bound(b"abc\nde", &mut line, 4));
        assert_eq!(line, 2);
        assert!(within_bound(b"f", &mut line, 4));
        assert!(!within_bound(b"gh", &mut line, 4));
        let mut line = 0;
        assert!(within_bound(b"abcd\nabcd\n", &mut line, 4));
        assert_eq!(line, 0);
    }
}
