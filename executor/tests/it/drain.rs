//! Stopping the real `mcc-executor serve` with SIGTERM, as the kubelet does in a rolling
//! update: a call running at that moment, and one sent during the drain, are answered;
//! then the executor exits 0 once no call has run for its quiet period.

use crate::common;

use std::time::{Duration, Instant};

use common::{Executor, out, shell};
use mcc_executor::{Address, ExecutorClient, Runtime};

#[tokio::test]
async fn sigterm_drains_running_calls_then_exits() {
    let dir = tempfile::tempdir().unwrap();
    let address = Address::Path(dir.path().join("executor.sock"));
    let mut executor = Executor::start_at(&address, &[]);
    let client = ExecutorClient::new(address.clone());

    let running = tokio::spawn({
        let client = ExecutorClient::new(address.clone());
        async move { client.run(&shell("sleep 1; echo finished")).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let terminated = Instant::now();
    // SAFETY: kill(2) touches no memory.
    assert_eq!(unsafe { libc::kill(executor.pid(), libc::SIGTERM) }, 0);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Sent after SIGTERM (the gateway still drains requests it had accepted).
    let late = client
        .run(&shell("echo late"))
        .await
        .expect("a call during the drain");
    assert_eq!(out(&late), "late\n");
    let finished = running
        .await
        .unwrap()
        .expect("the running call is answered");
    assert_eq!(out(&finished), "finished\n");

    let status = executor
        .wait_timeout(Duration::from_secs(10))
        .expect("the executor exits after draining");
    assert!(status.success(), "{status:?}");
    let took = terminated.elapsed();
    assert!(
        took >= Duration::from_secs(2),
        "it left before a quiet period: {took:?}"
    );
}
