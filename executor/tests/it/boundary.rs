//! The executor's trust boundary, end to end with the real binary: who may call it
//! (`--allow-uid`, by `SO_PEERCRED`), how long a connection may hold it without a
//! request, and that no process of a call outlives it, `setsid` or double fork.

use crate::common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Executor, alive, out, own_uid, shell};
use mcc_executor::{Address, ExecutorClient, RunError, Runtime};

/// The executor's read timeout (`server::READ_TIMEOUT`) and a margin for a loaded machine.
const READ_TIMEOUT: Duration = mcc_executor::server::READ_TIMEOUT;
const MARGIN: Duration = Duration::from_secs(3);

fn setup() -> (tempfile::TempDir, PathBuf, Address) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("executor.sock");
    let address = Address::Path(socket.clone());
    (dir, socket, address)
}

/// `/proc/<pid>` exists and is not a zombie.
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

fn pids(text: &str) -> Vec<i32> {
    text.split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// A process of this test that kills `pids` when dropped (whatever the assertions did).
struct KillOnDrop(Vec<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if pid > 1 {
                // SAFETY: kill(2) touches no memory.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

#[tokio::test]
async fn a_uid_not_allowed_is_refused_unread_and_nothing_runs() {
    let (dir, _socket, address) = setup();
    let other = own_uid().wrapping_add(4242).to_string();
    let log = dir.path().join("executor.log");
    let _executor =
        Executor::start_logging(&address, &[], &["--allow-uid", &other], Some(log.as_path()));
    let client = ExecutorClient::new(address.clone());

    let marker = dir.path().join("ran");
    let err = client
        .run(&shell(&format!("touch {}", marker.display())))
        .await
        .unwrap_err();
    let uid = own_uid();
    assert!(
        matches!(&err, RunError::Executor { reason, .. }
            if reason.contains(&format!("refuses this process (uid {uid})"))),
        "{err}"
    );
    assert!(!marker.exists(), "the refused call ran");
    let err = client.check().await.unwrap_err();
    assert!(err.contains("refuses this process"), "{err}");

    // A request larger than the socket buffer: the write fails, the answer still says why.
    let mut big = shell("true");
    big.stdin = Some(vec![b'x'; 8 << 20]);
    let err = client.run(&big).await.unwrap_err();
    assert!(err.to_string().contains("refuses this process"), "{err}");

    // The exec probe runs as the executor's uid and is refused too: refusing is answering.
    // Past the one-a-second bound of the refusal warning, so that a warning for it would
    // show: the probe's own refusal is expected every few seconds and logs none.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let probe = Command::new(env!("CARGO_BIN_EXE_mcc-executor"))
        .args(["probe", "--socket", &address.to_string()])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(probe.success());
    std::thread::sleep(std::time::Duration::from_millis(200));
    let logged = std::fs::read_to_string(&log).unwrap();
    let warnings = logged.matches("refused a connection").count();
    assert_eq!(warnings, 1, "only this test's refusals warn:\n{logged}");
}

#[test]
fn serve_requires_the_allowed_uid() {
    let (_dir, _socket, address) = setup();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcc-executor"))
        .args(["serve", "--socket", &address.to_string()])
        .env_remove("MCC_EXECUTOR_ALLOW_UID")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve started without --allow-uid");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(stderr.contains("--allow-uid"), "{stderr}");
}

#[tokio::test]
async fn idle_connections_hold_no_call_permit_and_are_dropped() {
    let (_dir, socket, address) = setup();
    let max_calls = 2;
    let _executor = Executor::start_with(
        &address,
        &[],
        &[
            "--allow-uid",
            &own_uid().to_string(),
            "--max-calls",
            &max_calls.to_string(),
        ],
    );
    // As many connections as there are permits, sending nothing or half a header.
    let mut idle: Vec<UnixStream> = (0..max_calls)
        .map(|_| UnixStream::connect(&socket).unwrap())
        .collect();
    idle[0].write_all(&[0, 0]).unwrap();
    std::thread::sleep(Duration::from_millis(200));

    let client = ExecutorClient::new(address);
    let started = Instant::now();
    let served = tokio::time::timeout(READ_TIMEOUT + MARGIN, client.run(&shell("echo served")))
        .await
        .expect("a real call is served while idle connections are open")
        .unwrap();
    assert_eq!(out(&served), "served\n");
    assert!(started.elapsed() < READ_TIMEOUT + MARGIN);

    // Each idle connection is closed by the executor after the read timeout.
    for stream in &mut idle {
        stream
            .set_read_timeout(Some(READ_TIMEOUT + MARGIN))
            .unwrap();
        let mut byte = [0u8; 1];
        // Other tests of this harness share the process: a signal they cause (a child's
        // SIGCHLD) can interrupt the blocking read, which is then simply read again.
        let read = loop {
            match stream.read(&mut byte) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        assert_eq!(
            read.expect("closed, not timed out"),
            0,
            "the executor closed the idle connection"
        );
    }
}

/// The tool's script: starts processes that leave its process group in every way a shell
/// can, each writing its pid to a file, and prints those pids once all are running.
fn escaping_script(dir: &Path) -> String {
    let d = dir.display();
    format!(
        r#"
# A new session, its parent (this shell) alive until the call ends.
setsid sh -c 'echo $$ > {d}/p1; exec sleep 30' </dev/null >/dev/null 2>&1 &
# A double fork into a new session: an orphan at once.
( setsid sh -c 'echo $$ > {d}/p2; exec sleep 30' </dev/null >/dev/null 2>&1 & )
# A double fork staying in the call's session and group.
( sh -c 'echo $$ > {d}/p3; exec sleep 30' </dev/null >/dev/null 2>&1 & )
# A new session whose own child stays behind it.
setsid sh -c 'sh -c "echo \$\$ > {d}/p4; exec sleep 30" </dev/null >/dev/null 2>&1 & exec sleep 30' </dev/null >/dev/null 2>&1 &
for f in p1 p2 p3 p4; do
  while [ ! -s {d}/$f ]; do sleep 0.01; done
done
cat {d}/p1 {d}/p2 {d}/p3 {d}/p4
"#
    )
}

#[tokio::test]
async fn no_process_of_a_call_outlives_it() {
    let (dir, _socket, address) = setup();
    let _executor = Executor::start_at(&address, &[]);
    let client = ExecutorClient::new(address);
    let script = dir.path().join("escape.sh");
    std::fs::write(&script, escaping_script(dir.path())).unwrap();
    let finished = client
        .run(&shell(&format!("sh {}", script.display())))
        .await
        .unwrap();
    let escaped = pids(&out(&finished));
    let _cleanup = KillOnDrop(escaped.clone());
    assert_eq!(escaped.len(), 4, "{}", out(&finished));
    // Killed before the answer was written: none runs once the call has returned.
    let survivors: Vec<i32> = escaped.iter().copied().filter(|&p| running(p)).collect();
    assert!(
        survivors.is_empty(),
        "still running after the call: {survivors:?}"
    );
    // And reaped: no zombie is left for the pid limit either.
    let zombies: Vec<i32> = escaped.iter().copied().filter(|&p| alive(p)).collect();
    assert!(zombies.is_empty(), "not reaped: {zombies:?}");
}

/// While a call runs, what stays in its session lives (other calls ending meanwhile do not
/// touch it); what left the session and lost its parent is killed within the sweep period.
#[tokio::test]
async fn a_running_call_keeps_its_session_and_loses_what_left_it() {
    let (dir, _socket, address) = setup();
    let _executor = Executor::start_at(&address, &[]);
    let client = std::sync::Arc::new(ExecutorClient::new(address));
    let d = dir.path().display();
    let line = format!(
        r#"( sh -c 'echo $$ > {d}/in; exec sleep 30' </dev/null >/dev/null 2>&1 & )
( setsid sh -c 'echo $$ > {d}/out; exec sleep 30' </dev/null >/dev/null 2>&1 & )
while [ ! -s {d}/in ] || [ ! -s {d}/out ]; do sleep 0.01; done
sleep 2.5
kill -0 $(cat {d}/in) && echo in-session:alive
kill -0 $(cat {d}/out) 2>/dev/null || echo left-session:killed
cat {d}/in"#
    );
    let long = tokio::spawn({
        let client = client.clone();
        async move { client.run(&shell(&line)).await }
    });
    // Other calls end meanwhile: each end sweeps.
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        client.run(&shell("true")).await.unwrap();
    }
    let finished = long.await.unwrap().unwrap();
    let text = out(&finished);
    let in_session = pids(&text);
    let _cleanup = KillOnDrop(in_session.clone());
    assert!(text.contains("in-session:alive"), "{text}");
    assert!(text.contains("left-session:killed"), "{text}");
    assert!(
        in_session.iter().all(|&p| !running(p)),
        "the in-session orphan outlived its call: {text}"
    );
}
