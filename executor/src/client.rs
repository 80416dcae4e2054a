//! The gateway's side of the executor socket: a [`Runtime`] that sends each run to the
//! executor container and reads its result back. One connection per call: a slow tool
//! holds only its own, and dropping the call closes it, which makes the executor kill the
//! tool's process group. Why the socket cannot be hijacked by a tool: [`crate::address`].

use tokio::net::UnixStream;

use crate::address::Address;
use crate::process::Finished;
use crate::runtime::{Request, RunError, Runtime};
use crate::wire;

/// Runs tools in the executor listening at an [`Address`].
#[derive(Debug)]
pub struct ExecutorClient {
    address: Address,
}

impl ExecutorClient {
    pub fn new(address: Address) -> Self {
        Self { address }
    }

    fn error(&self, reason: impl std::fmt::Display) -> RunError {
        RunError::Executor {
            socket: self.address.to_string(),
            reason: reason.to_string(),
        }
    }

    async fn connect(&self) -> Result<UnixStream, RunError> {
        UnixStream::connect(self.address.to_socket_path())
            .await
            .map_err(|e| RunError::Unreachable {
                socket: self.address.to_string(),
                reason: e.to_string(),
            })
    }
}

#[async_trait::async_trait]
impl Runtime for ExecutorClient {
    fn kind(&self) -> &'static str {
        "executor"
    }

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
                self.address
            )),
        }
    }
}
