//! The executor's side of the socket: accept a connection, read one [`Message`], run it
//! with this process's [`InProcess`] runtime, answer. A caller that hangs up before the
//! answer (its call was cancelled, or timed out on its side) gets its process group
//! killed: the run future is dropped.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use tokio::io::AsyncReadExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;

use crate::address::Address;
use crate::runtime::{InProcess, Runtime};
use crate::wire::{self, Message};

/// Listens at `address`. A path replaces a stale socket file left by an earlier run and
/// is made connectable by the gateway's user (`0666`: it runs as another user); an
/// abstract name needs neither (see [`crate::address`]).
pub fn bind(address: &Address) -> std::io::Result<UnixListener> {
    let Address::Path(path) = address else {
        return UnixListener::bind(address.to_socket_path());
    };
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(listener)
}

/// Serves connections until the task is dropped; at most `max_calls` at once (the rest
/// wait in the listen backlog).
pub async fn serve(listener: UnixListener, runtime: InProcess, max_calls: usize) {
    let runtime = Arc::new(runtime);
    let slots = Arc::new(Semaphore::new(max_calls.max(1)));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok((stream, _)) => {
                let runtime = runtime.clone();
                tokio::spawn(async move {
                    handle(stream, &runtime).await;
                    drop(permit);
                });
            }
            Err(e) => tracing::warn!(error = %e, "executor: accept failed"),
        }
    }
}

async fn handle(stream: UnixStream, runtime: &InProcess) {
    let (rd, mut wr) = stream.into_split();
    // Frames are read in small pieces: buffer them into few syscalls.
    let mut rd = tokio::io::BufReader::new(rd);
    let request = match wire::read_message(&mut rd).await {
        Ok(Message::Run(request)) => *request,
        Ok(Message::Ping) => {
            let _ = wire::write_pong(&mut wr).await;
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, "executor: unreadable request");
            return;
        }
    };
    let result = tokio::select! {
        result = runtime.run(&request) => result,
        () = hangup(&mut rd) => {
            tracing::debug!(program = %request.program, "caller hung up: process group killed");
            return;
        }
    };
    if let Err(e) = wire::write_reply(&mut wr, result.as_ref()).await {
        tracing::debug!(error = %e, "executor: the caller left before the reply");
    }
}

/// Resolves when the caller closes its side (it sends nothing after its request).
async fn hangup(rd: &mut (impl AsyncReadExt + Unpin)) {
    let mut byte = [0u8; 1];
    while let Ok(n) = rd.read(&mut byte).await {
        if n == 0 {
            return;
        }
    }
}
