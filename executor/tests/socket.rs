//! The executor end to end: the real `mcc-executor` binary serving a real Unix socket,
//! real tool processes, and the gateway's client ([`ExecutorClient`]).

#[path = "it/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{alive, out, shell};
use mcc_catalog::EnvPassthrough;
use mcc_executor::limits::Rlimits;
use mcc_executor::{Address, Ending, ExecutorClient, RunError, Runtime};

struct Executor;

impl Executor {
    fn start(socket: &Path, env: &[(&str, &str)]) -> common::Executor {
        let _ = std::fs::remove_file(socket);
        common::Executor::start_at(&Address::Path(socket.to_path_buf()), env)
    }

    fn start_at(address: &Address, env: &[(&str, &str)]) -> common::Executor {
        common::Executor::start_at(address, env)
    }
}

fn client(socket: &Path) -> ExecutorClient {
    ExecutorClient::new(Address::Path(socket.to_path_buf()))
}

fn setup() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("executor.sock");
    (dir, socket)
}

async fn wait_for_pid(file: &Path) -> i32 {
    for _ in 0..500 {
        if let Ok(text) = std::fs::read_to_string(file)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no pid in {}", file.display());
}

async fn gone(pid: i32) -> bool {
    for _ in 0..300 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn results_stdin_and_bounded_output_cross_the_socket() {
    let (_dir, socket) = setup();
    let _executor = Executor::start(&socket, &[]);
    let client = client(&socket);
    client.check().await.expect("the executor answers a ping");

    let mut request = shell("cat; echo oops >&2; exit 3");
    request.stdin = Some(b"from stdin".to_vec());
    let finished = client.run(&request).await.unwrap();
    assert_eq!(finished.ending, Ending::Exited(3));
    assert_eq!(out(&finished), "from stdin");
    assert_eq!(finished.stderr.bytes, b"oops\n");

    let mut flood = shell("head -c 100000 /dev/zero | tr '\\0' x");
    flood.max_output = 10;
    let finished = client.run(&flood).await.unwrap();
    assert_eq!(finished.stdout.bytes.len(), 10);
    assert_eq!(finished.stdout.total, 100_000);
    assert!(finished.stdout.truncated());
    assert_eq!(finished.stdout.tail.len(), mcc_executor::process::TAIL);
}

#[tokio::test]
async fn limits_and_timeouts_apply_inside_the_executor() {
    let (dir, socket) = setup();
    let _executor = Executor::start(&socket, &[]);
    let client = client(&socket);

    let limits = mcc_catalog::Limits {
        fsize_mb: Some(1),
        ..Default::default()
    };
    let mut big_file = shell("exec head -c 3000000 /dev/zero > big");
    big_file.rlimits = Rlimits::from_limits(&limits).unwrap();
    big_file.cwd = Some(dir.path().to_path_buf());
    let finished = client.run(&big_file).await.unwrap();
    assert_eq!(finished.ending, Ending::Signaled(libc::SIGXFSZ));

    let pid_file = dir.path().join("bg.pid");
    let mut slow = shell(&format!(
        "sleep 30 & echo $! > {}; wait",
        pid_file.display()
    ));
    slow.timeout = Some(Duration::from_millis(300));
    let started = Instant::now();
    let finished = client.run(&slow).await.unwrap();
    assert_eq!(finished.ending, Ending::TimedOut);
    assert!(started.elapsed() < Duration::from_secs(5));
    let background = wait_for_pid(&pid_file).await;
    assert!(gone(background).await, "the whole group was killed");
}

#[tokio::test]
async fn a_cancelled_call_kills_the_process_group_in_the_executor() {
    let (dir, socket) = setup();
    let _executor = Executor::start(&socket, &[]);
    let client = std::sync::Arc::new(client(&socket));
    let pid_file = dir.path().join("bg.pid");
    let request = shell(&format!(
        "sleep 30 & echo $! > {}; wait",
        pid_file.display()
    ));
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.run(&request).await }
    });
    let background = wait_for_pid(&pid_file).await;
    call.abort();
    assert!(gone(background).await, "hanging up killed the group");
}

#[tokio::test]
async fn a_slow_tool_never_blocks_other_calls() {
    let (_dir, socket) = setup();
    let _executor = Executor::start(&socket, &[]);
    let client = std::sync::Arc::new(client(&socket));
    let slow = tokio::spawn({
        let client = client.clone();
        async move { client.run(&shell("sleep 3; echo slow")).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    for i in 0..5 {
        let finished = client.run(&shell(&format!("echo {i}"))).await.unwrap();
        assert_eq!(out(&finished), format!("{i}\n"));
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out(&slow.await.unwrap().unwrap()), "slow\n");
}

#[tokio::test]
async fn the_environment_comes_from_the_executor_never_the_gateway() {
    let (_dir, socket) = setup();
    let _executor = Executor::start(
        &socket,
        &[
            ("HOME", "/home/executor"),
            ("EXECUTOR_EXTRA", "x"),
            ("REDIS_URL", "redis://:pw@r"),
            ("MCC_AUTH__JWT__HS256_SECRET", "gw-secret"),
        ],
    );
    // SAFETY: set before any other thread of this test reads the environment.
    unsafe { std::env::set_var("GATEWAY_ONLY_SECRET", "do-not-leak") };
    let client = client(&socket);
    let mut request = shell("env");
    request.env.passthrough = EnvPassthrough::All(true);
    request.env.set = BTreeMap::from([("MCC_CTX_USER".to_string(), "alice".to_string())]);
    let env = out(&client.run(&request).await.unwrap());
    assert!(env.contains("HOME=/home/executor\n"), "{env}");
    assert!(env.contains("EXECUTOR_EXTRA=x\n"), "{env}");
    assert!(env.contains("MCC_CTX_USER=alice\n"), "{env}");
    for absent in [
        "GATEWAY_ONLY_SECRET",
        "REDIS_URL",
        "MCC_AUTH",
        "MCC_EXECUTOR_SOCKET",
    ] {
        assert!(!env.contains(absent), "{absent} leaked: {env}");
    }
}

#[tokio::test]
async fn an_executor_that_dies_mid_call_is_a_clear_error_and_the_next_call_works_once_back() {
    let (_dir, socket) = setup();
    let mut executor = Executor::start(&socket, &[]);
    let client = std::sync::Arc::new(client(&socket));
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.run(&shell("sleep 5")).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    executor.kill();
    let err = call.await.unwrap().unwrap_err();
    assert!(
        matches!(&err, RunError::Executor { reason, .. } if reason.contains("closed the connection")),
        "{err}"
    );
    let err = client.run(&shell("echo hi")).await.unwrap_err();
    assert!(err.to_string().contains("unreachable"), "{err}");
    assert!(client.check().await.is_err());

    let _back = Executor::start(&socket, &[]);
    let finished = client.run(&shell("echo hi")).await.unwrap();
    assert_eq!(out(&finished), "hi\n");
}

/// The abstract name: no file a tool could replace; while the executor holds it no one
/// else can listen there; once it is gone (and, in a pod, every tool with it) a new
/// executor takes it again and the same client reaches it.
#[tokio::test]
async fn an_abstract_name_cannot_be_taken_while_the_executor_holds_it() {
    let address: Address = format!("@mcc-test-{}-abstract", std::process::id())
        .parse()
        .unwrap();
    let mut executor = Executor::start_at(&address, &[]);
    let client = ExecutorClient::new(address.clone());
    assert_eq!(out(&client.run(&shell("echo one")).await.unwrap()), "one\n");
    let taken = tokio::net::UnixListener::bind(address.to_socket_path());
    assert_eq!(
        taken.unwrap_err().kind(),
        std::io::ErrorKind::AddrInUse,
        "a tool cannot listen at the executor's name"
    );
    executor.kill();
    assert!(client.check().await.is_err());
    let _again = Executor::start_at(&address, &[]);
    assert_eq!(out(&client.run(&shell("echo two")).await.unwrap()), "two\n");
}

#[tokio::test]
async fn missing_programs_and_working_directories_are_named() {
    let (_dir, socket) = setup();
    let _executor = Executor::start(&socket, &[]);
    let client = client(&socket);
    let mut request = shell("true");
    request.program = "python-that-does-not-exist".into();
    let err = client.run(&request).await.unwrap_err();
    assert_eq!(
        err,
        RunError::NotFound {
            program: "python-that-does-not-exist".into()
        }
    );
    // A path is spawned without a look-up; a missing one is named all the same.
    let mut request = shell("true");
    request.program = "/no/such/python3".into();
    let err = client.run(&request).await.unwrap_err();
    assert_eq!(
        err,
        RunError::NotFound {
            program: "/no/such/python3".into()
        }
    );
    let mut request = shell("true");
    request.cwd = Some("/no/such/dir".into());
    let err = client.run(&request).await.unwrap_err();
    assert_eq!(err.to_string(), "cwd /no/such/dir is not a directory");
}

#[test]
fn probe_answers_for_a_live_executor_only() {
    let (_dir, socket) = setup();
    let probe = || {
        Command::new(env!("CARGO_BIN_EXE_mcc-executor"))
            .args(["probe", "--socket"])
            .arg(&socket)
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
    };
    assert!(!probe());
    let _executor = Executor::start(&socket, &[]);
    assert!(probe());
}
