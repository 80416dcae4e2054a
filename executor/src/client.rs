//! The gateway's side of the executor socket: a [`Runtime`] that sends each run to the
//! executor container and reads its result back.
//!
//! The socket lives on a volume both containers share, so the tools (which run as the
//! executor's user) could unlink it and listen at its path themselves, to read the
//! requests of later calls. The client therefore never trusts the path after first
//! contact: it hard-links the socket into a directory of its own (`gateway/` beside the
//! socket, created `0755` by the gateway's user, refused when anyone else owns it or can
//! write it) and connects there. It re-pins only when the pinned socket is dead — which
//! happens only when the executor itself is gone, and every tool with it (the executor
//! is its container's PID 1).

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tokio::net::UnixStream;

use crate::process::Finished;
use crate::runtime::{Request, RunError, Runtime};
use crate::wire;

/// Runs tools in the executor listening on `socket`.
#[derive(Debug)]
pub struct ExecutorClient {
    socket: PathBuf,
    /// Where calls connect: the pinned link, or the socket itself for [`Self::direct`].
    pinned: PathBuf,
    repin: Mutex<()>,
}

impl ExecutorClient {
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        let socket = socket.into();
        let dir = socket.parent().unwrap_or(Path::new("/"));
        let name = socket.file_name().unwrap_or("executor.sock".as_ref());
        let pinned = dir.join("gateway").join(name);
        Self {
            socket,
            pinned,
            repin: Mutex::new(()),
        }
    }

    /// Connects to `socket` as is, never pinning: for the executor's own probe, which
    /// runs as the executor's user and must not create the gateway's directory.
    pub fn direct(socket: impl Into<PathBuf>) -> Self {
        let socket = socket.into();
        Self {
            pinned: socket.clone(),
            socket,
            repin: Mutex::new(()),
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    fn error(&self, reason: impl std::fmt::Display) -> RunError {
        RunError::Executor {
            socket: self.socket.display().to_string(),
            reason: reason.to_string(),
        }
    }

    async fn connect(&self) -> Result<UnixStream, RunError> {
        match UnixStream::connect(&self.pinned).await {
            Ok(stream) => return Ok(stream),
            Err(e) if self.pinned == self.socket => {
                return Err(self.error(format!("unreachable ({e}); is the executor running?")));
            }
            Err(_) => {}
        }
        self.pin().map_err(|e| self.error(e))?;
        UnixStream::connect(&self.pinned).await.map_err(|e| {
            self.error(format!(
                "unreachable ({e}); is the executor container running?"
            ))
        })
    }

    /// Links the socket into the gateway's own directory (see the module docs).
    fn pin(&self) -> Result<(), String> {
        let _one_at_a_time = self.repin.lock().unwrap_or_else(|e| e.into_inner());
        if std::os::unix::net::UnixStream::connect(&self.pinned).is_ok() {
            return Ok(()); // another call re-pinned meanwhile
        }
        let dir = self.pinned.parent().unwrap_or(Path::new("/"));
        match std::fs::DirBuilder::new().mode(0o755).create(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(format!("cannot create {}: {e}", dir.display()));
            }
            _ => {}
        }
        let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if !meta.is_dir() || meta.uid() != me || meta.permissions().mode() & 0o022 != 0 {
            return Err(format!(
                "{} must be a directory owned by this process's user ({me}) and writable by \
                 no one else; refusing to use the executor socket through it",
                dir.display()
            ));
        }
        match std::fs::remove_file(&self.pinned) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("cannot replace {}: {e}", self.pinned.display()));
            }
            _ => {}
        }
        std::fs::hard_link(&self.socket, &self.pinned).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                "unreachable (no socket yet); is the executor container running?".into()
            }
            _ => format!("cannot pin the socket into {}: {e}", dir.display()),
        })
    }
}

#[async_trait::async_trait]
impl Runtime for ExecutorClient {
    async fn run(&self, request: &Request) -> Result<Finished, RunError> {
        let mut stream = self.connect().await?;
        let broken = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::BrokenPipe => self.error(
                "the executor closed the connection before the tool finished (did it restart?)",
            ),
            _ => self.error(e),
        };
        wire::write_run(&mut stream, request)
            .await
            .map_err(broken)?;
        let mut stream = tokio::io::BufReader::new(stream);
        match wire::read_reply(&mut stream, request.max_output)
            .await
            .map_err(broken)?
        {
            Ok(Some(finished)) => Ok(finished),
            Ok(None) => Err(self.error("answered a run with a pong")),
            Err(e) => Err(e),
        }
    }

    async fn check(&self) -> Result<(), String> {
        let ping = async {
            let mut stream = self.connect().await?;
            wire::write_ping(&mut stream)
                .await
                .map_err(|e| self.error(e))?;
            match wire::read_reply(&mut stream, 0)
                .await
                .map_err(|e| self.error(e))?
            {
                Ok(None) => Ok(()),
                _ => Err(self.error("unexpected answer to a ping")),
            }
        };
        match tokio::time::timeout(std::time::Duration::from_secs(2), ping).await {
            Ok(result) => result.map_err(|e| e.to_string()),
            Err(_) => Err(format!(
                "executor at {}: no answer to a ping within 2 s",
                self.socket.display()
            )),
        }
    }
}
