//! `process::run` itself, on both runtime flavors the binaries and tests use (the
//! gateway's and the executor's multi-thread runtimes, tests' current-thread one): what
//! the engine's tests (gateway/tests/it/exec_process.rs) do not reach through a tool — stdin
//! larger than a pipe, a flood's count and tail, a cancelled call's process reaped (not
//! only killed), concurrent calls kept apart.

use std::collections::BTreeMap;
use std::time::Duration;

use mcc_executor::process::{self, Ending, Finished, Spec};

/// Runs `sh -c line` with `stdin`, a `timeout` and a `max_output` cap.
async fn sh(
    line: &str,
    stdin: Option<&[u8]>,
    timeout: Option<Duration>,
    max_output: usize,
) -> Finished {
    let env = BTreeMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]);
    let args = ["-c", line];
    let spec = Spec {
        program: "/bin/sh".as_ref(),
        args: &args,
        env: &env,
        cwd: None,
        stdin,
        rlimits: Default::default(),
        timeout,
        max_output,
    };
    process::run(&spec).await.expect("sh starts")
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Defines `$name` twice: on a current-thread runtime and on a two-worker one.
macro_rules! on_both_runtimes {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "current_thread")]
            async fn current_thread() {
                $body.await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn multi_thread() {
                $body.await
            }
        }
    };
}

on_both_runtimes!(stdin_larger_than_a_pipe_is_fed_whole, async {
    let input = vec![b'x'; 1 << 20];
    let done = sh("wc -c", Some(&input), None, 1024).await;
    assert_eq!(done.ending, Ending::Exited(0));
    assert_eq!(
        String::from_utf8_lossy(&done.stdout.bytes).trim(),
        "1048576"
    );
});

on_both_runtimes!(a_child_that_never_reads_stdin_does_not_block, async {
    let input = vec![b'x'; 1 << 20];
    let done = sh("exit 0", Some(&input), Some(Duration::from_secs(5)), 1024).await;
    assert_eq!(done.ending, Ending::Exited(0));
});

on_both_runtimes!(a_flood_is_capped_counted_and_its_tail_kept, async {
    let done = sh("head -c 3000000 /dev/zero; echo END", None, None, 1000).await;
    assert_eq!(done.ending, Ending::Exited(0));
    assert_eq!(done.stdout.bytes.len(), 1000);
    assert_eq!(done.stdout.total, 3_000_004);
    assert!(done.stdout.truncated());
    assert!(done.stdout.tail.ends_with(b"END\n"));
});

on_both_runtimes!(dropping_the_call_kills_and_reaps_the_process, async {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let line = format!("echo $$ > {}; exec sleep 30", pid_file.display());
    let call = sh(&line, None, None, 1024);
    // Long enough to start, then cancelled.
    let _ = tokio::time::timeout(Duration::from_millis(300), call).await;
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Polled without blocking the runtime, which may be the one that reaps.
    let mut reaped = false;
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        if !alive(pid) {
            reaped = true;
            break;
        }
    }
    assert!(
        reaped,
        "process {pid} was not killed and reaped after the call was dropped"
    );
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_each_get_their_own_output() {
    // Collected first: all sixteen are spawned before any is awaited.
    let calls: Vec<_> = (0..16)
        .map(|i| {
            tokio::spawn(async move {
                let done = sh(&format!("echo {i}"), None, None, 64).await;
                (i, done)
            })
        })
        .collect();
    for call in calls {
        let (i, done) = call.await.unwrap();
        assert_eq!(done.ending, Ending::Exited(0));
        assert_eq!(done.stdout.bytes, format!("{i}\n").as_bytes());
    }
}
