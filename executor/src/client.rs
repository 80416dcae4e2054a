//! The gateway's side of the executor socket: a [`Runtime`] that sends each run to the
//! executor container and reads its result back. One connection per call: a slow tool
//! holds only its own, and dropping the call closes it, which makes the executor kill the
//! tool's process group. Why the socket cannot be hijacked by a tool: [`crate::address`].

use tokio::net::UnixStream;

use crate::address::Address;
use crate::process::Finished;
use crate::runtime::{Request, RunError, Runtime};
use crate::session::{SessionRequest, SessionStream};
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

    /// Why a call of this process is refused: its uid is not one the executor serves.
    fn refused(&self, uid: u32) -> RunError {
        self.error(format!(
            "refuses this process (uid {uid}): it serves only the uids given to \
             `mcc-executor serve --allow-uid` (MCC_EXECUTOR_ALLOW_UID)"
        ))
    }

    /// Sends a ping and reads the answer, within 2 s.
    async fn ping(&self) -> Result<wire::Answer, String> {
        let ping = async {
            let mut stream = self.connect().await?;
            // A refused ping is answered before the executor reads anything, and then
            // closed: a failed write is no reason not to read that answer.
            let sent = wire::write_ping(&mut stream).await;
            match wire::read_reply(&mut stream, 0).await {
                Ok(answer) => Ok(answer),
                Err(e) => Err(self.error(sent.err().unwrap_or(e))),
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

    /// `Ok` when an executor answers at the address, serving this process or refusing it:
    /// whether the executor is alive (the `probe` command, which runs as the executor's
    /// own uid and is refused).
    pub async fn answers(&self) -> Result<(), String> {
        match self.ping().await? {
            wire::Answer::Pong | wire::Answer::Refused { .. } => Ok(()),
            _ => Err(self.error("unexpected answer to a ping").to_string()),
        }
    }
}

#[async_trait::async_trait]
impl Runtime for ExecutorClient {
    fn kind(&self) -> &'static str {
        "executor"
    }

    async fn run(&self, request: &Request) -> Result<Finished, RunError> {
        let stream = self.connect().await?;
        let broken = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::BrokenPipe => self.error(
                "the executor closed the connection before the tool finished (did it restart?)",
            ),
            _ => self.error(e),
        };
        let mut stream = tokio::io::BufReader::new(stream);
        // A refusal is written before the executor reads anything: when the request does
        // not fit the socket's buffer the write fails, and the answer says why.
        let sink = crate::progress::current_sink();
        let sent = wire::write_run(stream.get_mut(), request, sink.is_some()).await;
        let answer = loop {
            match (
                wire::read_reply(&mut stream, request.max_output).await,
                &sent,
            ) {
                (Ok(wire::Answer::Progress(report)), _) => {
                    if let Some(sink) = &sink {
                        sink.send_replace(Some(report));
                    }
                }
                (Ok(answer), _) => break answer,
                (Err(_), Err(e)) => {
                    return Err(broken(std::io::Error::new(e.kind(), e.to_string())));
                }
                (Err(e), Ok(())) => return Err(broken(e)),
            }
        };
        match answer {
            wire::Answer::Progress(_) => unreachable!("read on above"),
            wire::Answer::Finished(finished) => Ok(finished),
            wire::Answer::Failed(e) => Err(e),
            wire::Answer::Refused { uid } => Err(self.refused(uid)),
            wire::Answer::Pong => Err(self.error("answered a run with a pong")),
            wire::Answer::SessionStarted => Err(self.error("answered a run with a session")),
        }
    }

    /// Asks for a session; once the executor answers that its process runs, the
    /// connection is the process's stdin and stdout. Closing it ends the session.
    async fn open_session(&self, request: &SessionRequest) -> Result<SessionStream, RunError> {
        let stream = self.connect().await?;
        let mut stream = tokio::io::BufReader::new(stream);
        let sent = wire::write_session(stream.get_mut(), request).await;
        // Read through the buffer that is returned: bytes the process wrote right after
        // the answer stay in it.
        let answer = match (wire::read_reply(&mut stream, 0).await, sent) {
            (Ok(answer), _) => answer,
            (Err(_), Err(e)) | (Err(e), Ok(())) => return Err(self.error(e)),
        };
        match answer {
            wire::Answer::SessionStarted => Ok(Box::new(stream)),
            wire::Answer::Failed(e) => Err(e),
            wire::Answer::Refused { uid } => Err(self.refused(uid)),
            _ => Err(self.error("unexpected answer to a session request")),
        }
    }

    /// `Ok` when the executor answers a ping from this process; a refusal is an error
    /// (this process's uid is not allowed: no call would run).
    async fn check(&self) -> Result<(), String> {
        match self.ping().await? {
            wire::Answer::Pong => Ok(()),
            wire::Answer::Refused { uid } => Err(self.refused(uid).to_string()),
            _ => Err(self.error("unexpected answer to a ping").to_string()),
        }
    }
}
