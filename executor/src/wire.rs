//! The executor socket's framing. One connection carries one call:
//!
//! ```text
//! gateway → executor   frame(JSON Message)  frame(stdin bytes | none)
//! executor → gateway   frame(JSON Reply)    [stdout, stdout tail, stderr, stderr tail]
//! ```
//!
//! or one session ([`Message::Session`], a stdio MCP server; [`crate::session`]):
//!
//! ```text
//! gateway → executor   frame(JSON Message::Session)  frame(none)  then the process's stdin bytes
//! executor → gateway   frame(JSON Reply::SessionStarted)          then the process's stdout bytes
//! ```
//!
//! After `SessionStarted` the connection is the process's byte stream both ways, unframed,
//! until either side closes it (the executor then kills the process group); a start that
//! fails is answered `Failed`, a refused peer `Refused`, as for a run.
//!
//! A run asked with [`Message::RunReporting`] may be answered with any number of
//! [`Reply::Progress`] frames (the tool's own reports, [`crate::progress`]) before its
//! final reply.
//!
//! A frame is a big-endian `u32` length and that many bytes (`u32::MAX`: no frame, for
//! a missing stdin). The four output frames follow a `Finished` reply only. Closing the
//! connection before the reply cancels the call: the executor kills the process group.
//! Every length is bounded before anything is allocated. A peer the executor does not
//! serve gets [`Reply::Refused`] at once, before anything it sent is read.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::process::{Captured, Ending, Finished, TAIL};
use crate::progress::Report;
use crate::runtime::{Request, RunError};
use crate::session::SessionRequest;

/// Largest JSON header (the environment, with the session context, is its bulk).
pub const MAX_HEADER: usize = 8 * 1024 * 1024;
/// Largest stdin (the params, bounded by the gateway's request body limit).
pub const MAX_STDIN: usize = 64 * 1024 * 1024;
const NO_FRAME: u32 = u32::MAX;

/// What the gateway asks.
#[derive(Debug, Serialize, Deserialize)]
pub enum Message {
    Run(Box<Request>),
    /// A run whose tool's progress reports are wanted ([`Reply::Progress`]).
    RunReporting(Box<Request>),
    /// Readiness and the `probe` command: answered with [`Reply::Pong`].
    Ping,
    /// A long-lived process whose stdin and stdout become the connection:
    /// answered with [`Reply::SessionStarted`] (or `Failed`).
    Session(Box<SessionRequest>),
}

/// What the executor answers.
#[derive(Debug, Serialize, Deserialize)]
pub enum Reply {
    /// The tool's newest progress report; the call goes on.
    Progress(Report),
    Finished {
        ending: Ending,
        stdout_total: u64,
        stderr_total: u64,
    },
    Failed(RunError),
    Pong,
    /// The connecting process's uid is not one the executor serves (`--allow-uid`).
    Refused {
        uid: u32,
    },
    /// The session's process runs; the connection is its byte stream from now on.
    SessionStarted,
}

/// A [`Reply`] as the client uses it, the output frames read.
#[derive(Debug)]
pub enum Answer {
    Progress(Report),
    Finished(Finished),
    Failed(RunError),
    Pong,
    Refused { uid: u32 },
    SessionStarted,
}

fn frame(buf: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        Some(b) => {
            buf.extend_from_slice(&(b.len() as u32).to_be_bytes());
            buf.extend_from_slice(b);
        }
        None => buf.extend_from_slice(&NO_FRAME.to_be_bytes()),
    }
}

async fn read_frame(
    r: &mut (impl AsyncRead + Unpin),
    max: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    let len = r.read_u32().await?;
    if len == NO_FRAME {
        return Ok(None);
    }
    let len = len as usize;
    if len > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame of {len} bytes exceeds the limit of {max}"),
        ));
    }
    let mut bytes = vec![0; len];
    r.read_exact(&mut bytes).await?;
    Ok(Some(bytes))
}

async fn read_json<T: for<'de> Deserialize<'de>>(
    r: &mut (impl AsyncRead + Unpin),
) -> std::io::Result<T> {
    let bytes = read_frame(r, MAX_HEADER)
        .await?
        .ok_or_else(|| invalid("missing header"))?;
    serde_json::from_slice(&bytes).map_err(|e| invalid(&format!("bad header: {e}")))
}

fn invalid(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string())
}

/// [`Message`] by reference, so a run is serialized without copying the request.
#[derive(Serialize)]
enum MessageRef<'a> {
    Run(&'a Request),
    RunReporting(&'a Request),
    Ping,
    Session(&'a SessionRequest),
}

/// Sends a run and its stdin in one write; `reporting`: with the tool's progress.
pub async fn write_run(
    w: &mut (impl AsyncWrite + Unpin),
    request: &Request,
    reporting: bool,
) -> std::io::Result<()> {
    let message = match reporting {
        true => MessageRef::RunReporting(request),
        false => MessageRef::Run(request),
    };
    write(w, &message, request.stdin.as_deref()).await
}

/// Sends one progress report of a running call.
pub async fn write_progress(
    w: &mut (impl AsyncWrite + Unpin),
    report: &Report,
) -> std::io::Result<()> {
    w.write_all(&encode(&Reply::Progress(report.clone())))
        .await?;
    w.flush().await
}

pub async fn write_ping(w: &mut (impl AsyncWrite + Unpin)) -> std::io::Result<()> {
    write(w, &MessageRef::Ping, None).await
}

/// Asks for a session (no stdin frame: the stream follows the answer).
pub async fn write_session(
    w: &mut (impl AsyncWrite + Unpin),
    request: &SessionRequest,
) -> std::io::Result<()> {
    write(w, &MessageRef::Session(request), None).await
}

/// Answers a session request: its process runs.
pub async fn write_session_started(w: &mut (impl AsyncWrite + Unpin)) -> std::io::Result<()> {
    w.write_all(&encode(&Reply::SessionStarted)).await?;
    w.flush().await
}

/// Answers a request with `error`, no output.
pub async fn write_failed(
    w: &mut (impl AsyncWrite + Unpin),
    error: &RunError,
) -> std::io::Result<()> {
    w.write_all(&encode(&Reply::Failed(error.clone()))).await?;
    w.flush().await
}

async fn write(
    w: &mut (impl AsyncWrite + Unpin),
    message: &MessageRef<'_>,
    stdin: Option<&[u8]>,
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024 + stdin.map_or(0, <[u8]>::len));
    frame(&mut buf, Some(&serde_json::to_vec(message)?));
    frame(&mut buf, stdin);
    w.write_all(&buf).await?;
    w.flush().await
}

pub async fn read_message(r: &mut (impl AsyncRead + Unpin)) -> std::io::Result<Message> {
    let mut message: Message = read_json(r).await?;
    let stdin = read_frame(r, MAX_STDIN).await?;
    if let Message::Run(request) | Message::RunReporting(request) = &mut message {
        request.stdin = stdin;
    }
    Ok(message)
}

/// Sends the result of a run (or a pong) in one write.
pub async fn write_reply(
    w: &mut (impl AsyncWrite + Unpin),
    result: Result<&Finished, &RunError>,
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    match result {
        Ok(f) => {
            let header = Reply::Finished {
                ending: f.ending,
                stdout_total: f.stdout.total,
                stderr_total: f.stderr.total,
            };
            frame(&mut buf, Some(&serde_json::to_vec(&header)?));
            for bytes in [
                &f.stdout.bytes,
                &f.stdout.tail,
                &f.stderr.bytes,
                &f.stderr.tail,
            ] {
                frame(&mut buf, Some(bytes));
            }
        }
        Err(e) => frame(
            &mut buf,
            Some(&serde_json::to_vec(&Reply::Failed(e.clone()))?),
        ),
    }
    w.write_all(&buf).await?;
    w.flush().await
}

pub async fn write_pong(w: &mut (impl AsyncWrite + Unpin)) -> std::io::Result<()> {
    w.write_all(&encode(&Reply::Pong)).await
}

/// The whole [`Reply::Refused`] for `uid`, to be written without waiting.
pub fn refusal(uid: u32) -> Vec<u8> {
    encode(&Reply::Refused { uid })
}

fn encode(reply: &Reply) -> Vec<u8> {
    let mut buf = Vec::new();
    // A reply without output cannot fail to serialize (no maps with non-string keys).
    frame(
        &mut buf,
        Some(&serde_json::to_vec(reply).unwrap_or_default()),
    );
    buf
}

/// Reads a reply whose streams were captured with `max_output`.
pub async fn read_reply(
    r: &mut (impl AsyncRead + Unpin),
    max_output: usize,
) -> std::io::Result<Answer> {
    match read_json::<Reply>(r).await? {
        Reply::Progress(report) => Ok(Answer::Progress(report)),
        Reply::Pong => Ok(Answer::Pong),
        Reply::SessionStarted => Ok(Answer::SessionStarted),
        Reply::Refused { uid } => Ok(Answer::Refused { uid }),
        Reply::Failed(e) => Ok(Answer::Failed(e)),
        Reply::Finished {
            ending,
            stdout_total,
            stderr_total,
        } => {
            let stdout = Captured {
                bytes: read_frame(r, max_output).await?.unwrap_or_default(),
                tail: read_frame(r, TAIL).await?.unwrap_or_default(),
                total: stdout_total,
            };
            let stderr = Captured {
                bytes: read_frame(r, max_output).await?.unwrap_or_default(),
                tail: read_frame(r, TAIL).await?.unwrap_or_default(),
                total: stderr_total,
            };
            Ok(Answer::Finished(Finished {
                ending,
                stdout,
                stderr,
            }))
        }
    }
}
