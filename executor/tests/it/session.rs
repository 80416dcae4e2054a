//! Sessions (`Message::Session`, a stdio MCP server's process) through the real
//! `mcc-executor serve`: bytes both ways, the process group killed when the gateway
//! closes the connection, when a line passes the bound, when the session is idle and
//! when the executor stops; the environment is the floor and what was granted; a uid
//! the executor does not serve gets no session.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{Executor, own_uid};
use mcc_catalog::EnvPassthrough;
use mcc_catalog::env::EnvSpec;
use mcc_executor::{Address, ExecutorClient, RunError, Runtime, SessionRequest, SessionStream};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

fn setup() -> (tempfile::TempDir, Address) {
    let dir = tempfile::tempdir().unwrap();
    let address = Address::Path(dir.path().join("executor.sock"));
    (dir, address)
}

fn session(script: &str) -> SessionRequest {
    SessionRequest {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        env: EnvSpec {
            floor: vec!["PATH".into(), "HOME".into()],
            passthrough: EnvPassthrough::All(false),
            set: BTreeMap::from([("GRANTED".into(), "yes".into())]),
            ..EnvSpec::default()
        },
        rlimits: Default::default(),
        idle: Duration::from_secs(60),
        lifetime: Duration::from_secs(300),
        max_message: 1024,
    }
}

/// The next line the process wrote, within 10 s.
async fn line(stream: &mut BufReader<SessionStream>) -> String {
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_line(&mut line))
        .await
        .expect("a line within 10 s")
        .expect("readable");
    line.trim_end().to_string()
}

/// `/proc/<pid>` exists and is not a zombie.
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

async fn gone_within(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if !running(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Kills `pid` on drop, whatever the assertions did (a process this test caused).
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.0 > 1 {
            // SAFETY: kill(2) touches no memory.
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
}

/// The background child's pid the script printed first (`bg <pid>`), killed on drop.
async fn background(stream: &mut BufReader<SessionStream>) -> KillOnDrop {
    let bg: i32 = line(stream)
        .await
        .strip_prefix("bg ")
        .expect("a `bg <pid>` line")
        .parse()
        .unwrap();
    assert!(running(bg));
    KillOnDrop(bg)
}

/// A session whose script prints its background child's pid, then echoes each line.
const ECHO: &str = "sleep 300 & echo \"bg $!\"; while read l; do echo \"got $l\"; done";

async fn open_echo(client: &ExecutorClient) -> (BufReader<SessionStream>, KillOnDrop) {
    let mut stream = BufReader::new(client.open_session(&session(ECHO)).await.unwrap());
    let bg = background(&mut stream).await;
    (stream, bg)
}

#[tokio::test]
async fn a_session_carries_bytes_both_ways_and_dies_with_its_connection() {
    let (_dir, address) = setup();
    let _executor = Executor::start_at(&address, &[]);
    let client = ExecutorClient::new(address);
    let (mut stream, bg) = open_echo(&client).await;
    stream.get_mut().write_all(b"hello\n").await.unwrap();
    assert_eq!(line(&mut stream).await, "got hello");
    stream.get_mut().write_all(b"again\n").await.unwrap();
    assert_eq!(line(&mut stream).await, "got again");
    // The gateway closes the connection: the whole group dies, background child too.
    drop(stream);
    assert!(
        gone_within(bg.0, Duration::from_secs(5)).await,
        "the session's background process outlived the connection"
    );
    // The one-request-one-reply kind is unchanged beside it.
    let ran = client.run(&common::shell("echo run")).await.unwrap();
    assert_eq!(common::out(&ran), "run\n");
}

#[tokio::test]
async fn the_environment_is_the_floor_and_what_was_granted() {
    let (_dir, address) = setup();
    let _executor = Executor::start_at(
        &address,
        &[("EXECUTOR_SECRET", "s3cret"), ("HOME", "/home/tools")],
    );
    let client = ExecutorClient::new(address);
    let stream = client
        .open_session(&session("env; echo END; cat"))
        .await
        .unwrap();
    let mut stream = BufReader::new(stream);
    let mut names = Vec::new();
    loop {
        let l = line(&mut stream).await;
        if l == "END" {
            break;
        }
        names.push(l);
    }
    // What /bin/sh adds itself (PWD; bash also SHLVL and _) is the shell's, not ours.
    let ours: Vec<&String> = names
        .iter()
        .filter(|l| {
            !["PWD=", "SHLVL=", "_=", "OLDPWD="]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .collect();
    let mut keys: Vec<&str> = ours.iter().map(|l| l.split_once('=').unwrap().0).collect();
    keys.sort();
    assert_eq!(keys, ["GRANTED", "HOME", "PATH"], "{names:?}");
    assert!(names.contains(&"HOME=/home/tools".to_string()), "{names:?}");
    assert!(names.contains(&"GRANTED=yes".to_string()), "{names:?}");
}

#[tokio::test]
async fn a_uid_not_allowed_gets_no_session_and_nothing_runs() {
    let (dir, address) = setup();
    let other = own_uid().wrapping_add(4242).to_string();
    let _executor = Executor::start_with(&address, &[], &["--allow-uid", &other]);
    let client = ExecutorClient::new(address);
    let marker = dir.path().join("ran");
    let err = client
        .open_session(&session(&format!("touch {}; cat", marker.display())))
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(&err, RunError::Executor { reason, .. }
            if reason.contains(&format!("refuses this process (uid {})", own_uid()))),
        "{err}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!marker.exists(), "the refused session ran");
}

#[tokio::test]
async fn a_line_longer_than_the_bound_ends_the_session_and_its_group() {
    let (_dir, address) = setup();
    let _executor = Executor::start_at(&address, &[]);
    let client = ExecutorClient::new(address);
    // 1024 is the bound: a 1023-byte line passes, then one of 4000 bytes ends it.
    let script = "sleep 300 & echo \"bg $!\"; read l; head -c 1023 /dev/zero | tr '\\0' a; echo; \
                  read l; head -c 4000 /dev/zero | tr '\\0' b; echo; cat";
    let mut stream = BufReader::new(client.open_session(&session(script)).await.unwrap());
    let guard = background(&mut stream).await;
    let bg = guard.0;
    stream.get_mut().write_all(b"1\n").await.unwrap();
    assert_eq!(line(&mut stream).await.len(), 1023);
    stream.get_mut().write_all(b"2\n").await.unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest))
        .await
        .expect("the executor closes the connection")
        .unwrap();
    assert!(
        rest.len() <= 1024,
        "{} bytes passed the 1024-byte bound",
        rest.len()
    );
    assert!(!rest.contains(&b'\n'), "the long line was not delivered");
    assert!(gone_within(bg, Duration::from_secs(5)).await);
}

#[tokio::test]
async fn an_idle_session_ends_and_so_does_its_group() {
    let (_dir, address) = setup();
    let _executor = Executor::start_at(&address, &[]);
    let client = ExecutorClient::new(address);
    let mut request = session(ECHO);
    request.idle = Duration::from_millis(500);
    let mut stream = BufReader::new(client.open_session(&request).await.unwrap());
    let guard = background(&mut stream).await;
    let bg = guard.0;
    let mut rest = Vec::new();
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest))
        .await
        .expect("closed after the idle bound")
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert!(gone_within(bg, Duration::from_secs(5)).await);
}

#[tokio::test]
async fn the_executor_stopping_kills_open_sessions() {
    let (_dir, address) = setup();
    let mut executor = Executor::start_at(&address, &[]);
    let client = ExecutorClient::new(address);
    let (mut stream, bg) = open_echo(&client).await;
    // SIGTERM: the executor drains (no call runs: a session is not one) and stops.
    // SAFETY: kill(2) touches no memory; the pid is the executor this test started.
    unsafe { libc::kill(executor.pid(), libc::SIGTERM) };
    assert!(
        executor.wait_timeout(Duration::from_secs(10)).is_some(),
        "the executor did not stop with a session open"
    );
    assert!(gone_within(bg.0, Duration::from_secs(5)).await);
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await;
}

/// Without an executor (the gateway's embedded default) a session runs in this process's
/// runtime with the same rules: the environment from the floor and what was granted (not
/// the rest of this process's), and the group killed when the stream is dropped.
#[tokio::test]
async fn in_process_sessions_follow_the_same_rules() {
    let runtime = mcc_executor::InProcess::new(vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ("GATEWAY_SECRET".into(), "s3cret".into()),
    ]);
    let stream = runtime
        .open_session(&session(&format!("env; echo END; {ECHO}")))
        .await
        .unwrap();
    let mut stream = BufReader::new(stream);
    let mut env = Vec::new();
    loop {
        let l = line(&mut stream).await;
        if l == "END" {
            break;
        }
        env.push(l);
    }
    assert!(env.contains(&"GRANTED=yes".to_string()), "{env:?}");
    assert!(env.iter().any(|l| l.starts_with("PATH=")), "{env:?}");
    assert!(!env.iter().any(|l| l.contains("s3cret")), "{env:?}");
    let guard = background(&mut stream).await;
    let bg = guard.0;
    stream.get_mut().write_all(b"hi\n").await.unwrap();
    assert_eq!(line(&mut stream).await, "got hi");
    drop(stream);
    assert!(gone_within(bg, Duration::from_secs(5)).await);
}

#[tokio::test]
async fn a_busy_session_still_ends_at_its_lifetime() {
    let (_dir, address) = setup();
    let _executor = Executor::start_at(&address, &[]);
    let client = ExecutorClient::new(address);
    let mut request =
        session("sleep 300 & echo \"bg $!\"; while true; do echo tick; sleep 0.1; done");
    request.lifetime = Duration::from_millis(800);
    let started = Instant::now();
    let mut stream = BufReader::new(client.open_session(&request).await.unwrap());
    let guard = background(&mut stream).await;
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest))
        .await
        .expect("closed at the lifetime, never idle")
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(700));
    assert!(String::from_utf8_lossy(&rest).contains("tick"));
    assert!(gone_within(guard.0, Duration::from_secs(5)).await);
}
