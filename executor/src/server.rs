//! The executor's side of the socket: accept a connection, check who is calling, read one
//! [`Message`], run it with this process's [`InProcess`] runtime, answer. What it
//! guarantees (docs/security.md, "The executor"):
//!
//! - only the uids of [`Policy::allowed_uids`] are served, by the kernel's account of
//!   the connecting process (`SO_PEERCRED`). Tools run as the executor's own uid, so it
//!   is not served unless listed. Anyone else gets [`wire::Reply::Refused`] and the
//!   connection is closed, before anything it sent is read;
//! - a request must arrive whole within [`Policy::read_timeout`], and a call takes one of
//!   the [`Policy::max_calls`] permits only once its request is read: an idle or slow
//!   connection holds no permit, and is dropped at the timeout;
//! - a caller that hangs up before the answer (its call was cancelled, or timed out on
//!   its side) gets its process group killed: the run future is dropped;
//! - when a call ends, before its answer is written, every process it left behind is
//!   killed ([`reaper::sweep`]; each call runs in a session of its own);
//! - told to stop ([`serve_draining`], SIGTERM in a Pod), it keeps serving until no call
//!   has run for a quiet period: the gateway beside it is draining its own requests then,
//!   and a call it sends meanwhile is answered, not cut off;
//! - a session ([`Message::Session`], a stdio MCP server) passes the same checks (uid,
//!   read deadline, a permit, held for its whole life), and ends — its process group
//!   killed — when the gateway closes the connection, on its bounds
//!   ([`crate::session`]), and when the executor stops: an open session is not a call
//!   that draining waits for.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Semaphore, watch};

use crate::address::Address;
use crate::reaper;
use crate::runtime::{InProcess, Runtime};
use crate::session::{self, SessionRequest};
use crate::wire::{self, Message};

/// How long a connection may take to send its whole request (header and stdin).
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How often orphans that left a running call's session are looked for.
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Who is served and how much at once.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The uids whose processes may call (the gateway's); every other is refused.
    pub allowed_uids: BTreeSet<u32>,
    /// Calls run at once; more wait (with their request read).
    pub max_calls: usize,
    /// See [`READ_TIMEOUT`].
    pub read_timeout: Duration,
}

/// Listens at `address`. A path replaces a stale socket file left by an earlier run and
/// is made connectable by the gateway's user (`0666`: it runs as another user; who may
/// call is checked per connection); an abstract name needs neither (see
/// [`crate::address`]).
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

/// [`serve_with`], serving this process's own uid only, at most `max_calls` at once: for
/// a caller in this process (tests, a gateway embedding its executor). The `mcc-executor`
/// binary serves the gateway's uid instead, and refuses its own (tools run as it).
pub async fn serve(listener: UnixListener, runtime: InProcess, max_calls: usize) {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let policy = Policy {
        allowed_uids: BTreeSet::from([me]),
        max_calls,
        read_timeout: READ_TIMEOUT,
    };
    serve_with(listener, runtime, policy).await;
}

/// Serves connections until the future is dropped. Makes this process the subreaper of
/// its tools (PID 1 in a container is anyway; see [`reaper`]) and runs `runtime` with
/// each call in a session of its own, which is what lets a sweep tell whose an orphan
/// is; sweeps every [`SWEEP_EVERY`] and at the end of each call. Children of this
/// process in its own session (not a tool's: an embedding process's) are left alone.
pub async fn serve_with(listener: UnixListener, runtime: InProcess, policy: Policy) {
    serve_tracked(listener, runtime, policy, Arc::default()).await;
}

/// [`serve_with`] until `stop` resolves, then on until no call has been in progress for
/// `quiet` (calls accepted meanwhile are served; the process's end, e.g. the kubelet's
/// SIGKILL at the end of the grace period, bounds it).
pub async fn serve_draining(
    listener: UnixListener,
    runtime: InProcess,
    policy: Policy,
    stop: impl std::future::Future<Output = ()>,
    quiet: Duration,
) {
    let activity = Arc::new(Activity::default());
    let serving = serve_tracked(listener, runtime, policy, activity.clone());
    tokio::pin!(serving);
    tokio::select! {
        () = &mut serving => return,
        () = stop => {}
    }
    tracing::info!(
        calls = activity.calls.load(Ordering::SeqCst),
        quiet_ms = quiet.as_millis() as u64,
        "executor draining: serving until no call has run for the quiet period"
    );
    let drained = async {
        loop {
            match activity.quiet_for() {
                Some(q) if q >= quiet => return,
                Some(q) => tokio::time::sleep(quiet - q).await,
                None => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    };
    tokio::select! {
        () = serving => {}
        () = drained => {}
    }
}

/// Calls in progress (from the accepted connection to the answer) and when the last one
/// began or ended: what draining waits on.
#[derive(Debug)]
struct Activity {
    calls: AtomicUsize,
    last: Mutex<Instant>,
}

impl Default for Activity {
    fn default() -> Self {
        Self {
            calls: AtomicUsize::new(0),
            last: Mutex::new(Instant::now()),
        }
    }
}

impl Activity {
    fn touch(&self) {
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    fn begin(self: &Arc<Self>) -> CallInProgress {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.touch();
        CallInProgress(self.clone())
    }

    /// How long no call has been in progress; `None` while one is.
    fn quiet_for(&self) -> Option<Duration> {
        if self.calls.load(Ordering::SeqCst) > 0 {
            return None;
        }
        Some(
            self.last
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .elapsed(),
        )
    }
}

/// Counts one call as in progress while it lives.
struct CallInProgress(Arc<Activity>);

impl Drop for CallInProgress {
    fn drop(&mut self) {
        self.0.touch();
        self.0.calls.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn serve_tracked(
    listener: UnixListener,
    runtime: InProcess,
    policy: Policy,
    activity: Arc<Activity>,
) {
    if let Err(e) = reaper::adopt_orphans() {
        tracing::warn!(error = %e, "executor: cannot become the tools' subreaper; \
            orphans of tools are swept only when this is PID 1");
    }
    let runtime = Arc::new(runtime.in_own_sessions());
    let slots = Arc::new(Semaphore::new(policy.max_calls.max(1)));
    let mut refusals = RefusalLog::default();
    // Never sent: dropped with this future, which ends every open session.
    let (stopping, _) = watch::channel(());
    let accepting = async {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "executor: accept failed");
                    // Out of descriptors, most likely: give calls time to end.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let peer = match stream.peer_cred() {
                Ok(peer) => peer,
                Err(e) => {
                    tracing::warn!(error = %e, "executor: no credentials for a connection: closed");
                    continue;
                }
            };
            if !policy.allowed_uids.contains(&peer.uid()) {
                if is_own_probe(peer.pid()) {
                    // The container's exec probes run this binary as the executor's uid:
                    // refused like anyone else, but expected every few seconds.
                    tracing::debug!(pid = peer.pid(), "executor: probe answered (refused)");
                } else {
                    refusals.note(peer.uid(), peer.pid());
                }
                refuse(stream, peer.uid());
                continue;
            }
            let (runtime, slots) = (runtime.clone(), slots.clone());
            let read_timeout = policy.read_timeout;
            let in_progress = activity.begin();
            let stopping = stopping.subscribe();
            tokio::spawn(async move {
                handle(
                    stream,
                    &runtime,
                    &slots,
                    read_timeout,
                    in_progress,
                    stopping,
                )
                .await;
            });
        }
    };
    tokio::select! {
        () = accepting => {}
        () = reaper::run(SWEEP_EVERY) => {}
    }
}

/// Answers [`wire::Reply::Refused`] without reading or waiting, and closes.
fn refuse(stream: UnixStream, uid: u32) {
    use std::io::Write as _;
    // The std stream stays non-blocking: a peer whose buffer is full gets no answer.
    if let Ok(stream) = stream.into_std() {
        let _ = (&stream).write(&wire::refusal(uid));
    }
}

/// Whether the peer `pid` runs this very program (`mcc-executor probe`, the chart's
/// readiness and liveness checks): its refusal is not worth a warning. A tool that runs
/// the executor's binary itself gains nothing by it (it is refused all the same); it
/// only goes unmentioned.
fn is_own_probe(pid: Option<i32>) -> bool {
    let Some(pid) = pid else {
        return false;
    };
    match (
        std::fs::read_link(format!("/proc/{pid}/exe")),
        std::fs::read_link("/proc/self/exe"),
    ) {
        (Ok(peer), Ok(own)) => peer == own,
        _ => false,
    }
}

/// One warning per refused connection, at most one a second (a tool could connect in a
/// loop): the rest are counted into the next.
#[derive(Default)]
struct RefusalLog {
    last: Option<Instant>,
    unlogged: u64,
}

impl RefusalLog {
    fn note(&mut self, uid: u32, pid: Option<i32>) {
        if self
            .last
            .is_some_and(|at| at.elapsed() < Duration::from_secs(1))
        {
            self.unlogged += 1;
            return;
        }
        tracing::warn!(
            uid,
            pid,
            also_refused_since_last_warning = self.unlogged,
            "executor: refused a connection from a uid it does not serve (--allow-uid)"
        );
        self.last = Some(Instant::now());
        self.unlogged = 0;
    }
}

async fn handle(
    stream: UnixStream,
    runtime: &InProcess,
    slots: &Arc<Semaphore>,
    wait: Duration,
    in_progress: CallInProgress,
    stopping: watch::Receiver<()>,
) {
    let (rd, mut wr) = stream.into_split();
    // Frames are read in small pieces: buffer them into few syscalls.
    let mut rd = tokio::io::BufReader::new(rd);
    let (request, reporting) = match tokio::time::timeout(wait, wire::read_message(&mut rd)).await {
        Ok(Ok(Message::Run(request))) => (*request, false),
        Ok(Ok(Message::RunReporting(request))) => (*request, true),
        Ok(Ok(Message::Ping)) => {
            let _ = wire::write_pong(&mut wr).await;
            return;
        }
        Ok(Ok(Message::Session(request))) => {
            let session = Session {
                request: *request,
                in_progress,
                stopping,
            };
            return serve_session(session, rd, wr, runtime, slots).await;
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "executor: unreadable request");
            return;
        }
        Err(_) => {
            tracing::warn!(
                ?wait,
                "executor: no complete request in time: connection dropped"
            );
            return;
        }
    };
    // Only a complete request waits for a permit, and gives it up if its caller leaves.
    let permit = tokio::select! {
        permit = slots.clone().acquire_owned() => match permit {
            Ok(permit) => permit,
            Err(_) => return,
        },
        () = hangup(&mut rd) => return,
    };
    let result = match reporting {
        false => tokio::select! {
            result = runtime.run(&request) => Some(result),
            () = hangup(&mut rd) => None,
        },
        true => run_reporting(runtime, &request, &mut rd, &mut wr).await,
    };
    // What the call left outside its process group dies before the answer, so a caller
    // that has its answer knows nothing of the call runs any more.
    let swept = tokio::task::spawn_blocking(|| reaper::sweep(reaper::SWEEP_BUDGET))
        .await
        .unwrap_or_default();
    drop(permit);
    if swept.killed > 0 {
        tracing::debug!(killed = swept.killed, program = %request.program, "killed escaped processes");
    }
    let Some(result) = result else {
        tracing::debug!(program = %request.program, "caller hung up: process group killed");
        return;
    };
    if let Err(e) = wire::write_reply(&mut wr, result.as_ref()).await {
        tracing::debug!(error = %e, "executor: the caller left before the reply");
    }
    drop(in_progress);
}

/// A session request read from a connection, with what ends it.
struct Session {
    request: SessionRequest,
    /// Released once the process runs: draining does not wait for sessions.
    in_progress: CallInProgress,
    /// Changes (its sender dropped) when the executor stops serving.
    stopping: watch::Receiver<()>,
}

/// Takes a permit, starts the process, answers, then carries the stream until the
/// session ends ([`session::pump`]); sweeps what it left behind.
async fn serve_session(
    session: Session,
    mut rd: tokio::io::BufReader<tokio::net::unix::OwnedReadHalf>,
    mut wr: tokio::net::unix::OwnedWriteHalf,
    runtime: &InProcess,
    slots: &Arc<Semaphore>,
) {
    let Session {
        request,
        in_progress,
        mut stopping,
    } = session;
    // The gateway sends nothing before the answer: a byte here is its hang-up.
    let permit = tokio::select! {
        permit = slots.clone().acquire_owned() => match permit {
            Ok(permit) => permit,
            Err(_) => return,
        },
        () = hangup(&mut rd) => return,
    };
    let process = match runtime.start_session(&request) {
        Ok(process) => process,
        Err(e) => {
            let _ = wire::write_failed(&mut wr, &e).await;
            return;
        }
    };
    if wire::write_session_started(&mut wr).await.is_err() {
        return;
    }
    drop(in_progress);
    let stop = async move {
        let _ = stopping.changed().await;
    };
    let end = session::pump(process, rd, wr, &request, stop).await;
    let swept = tokio::task::spawn_blocking(|| reaper::sweep(reaper::SWEEP_BUDGET))
        .await
        .unwrap_or_default();
    drop(permit);
    tracing::debug!(program = %request.program, ?end, killed = swept.killed, "session ended");
}

/// Runs `request` with its tool's progress reports written to the caller as they come;
/// `None` when the caller hung up.
async fn run_reporting(
    runtime: &InProcess,
    request: &crate::runtime::Request,
    rd: &mut (impl AsyncReadExt + Unpin),
    wr: &mut (impl tokio::io::AsyncWrite + Unpin),
) -> Option<Result<crate::process::Finished, crate::runtime::RunError>> {
    let (sink, mut reports) = tokio::sync::watch::channel(None);
    let run = crate::progress::SINK.scope(sink, runtime.run(request));
    tokio::pin!(run);
    let mut hung_up = std::pin::pin!(hangup(rd));
    loop {
        tokio::select! {
            result = &mut run => return Some(result),
            () = &mut hung_up => return None,
            Ok(()) = reports.changed() => {
                let report = reports.borrow_and_update().clone();
                if let Some(report) = report
                    && wire::write_progress(wr, &report).await.is_err()
                {
                    return None;
                }
            }
        }
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
