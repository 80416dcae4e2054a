//! The orphan reaper, with this test process as the subreaper that PID 1 is in a
//! container: a tool's escaped (`setsid`) child that outlives the call ends up as our
//! zombie, and the reaper collects it. (Its own test binary: the subreaper flag and the
//! reaping are process-wide.)

use std::collections::BTreeMap;
use std::time::Duration;

use mcc_executor::process::{self, Spec};
use mcc_executor::reaper;

fn zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

#[tokio::test]
async fn escaped_orphans_are_reaped_and_running_tools_are_not() {
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER) takes integers only.
    assert_eq!(
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) },
        0
    );
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("escaped.pid");
    let env = BTreeMap::from([("PATH".to_string(), std::env::var("PATH").unwrap())]);
    // The tool waits until its child has left the group, then exits (the group kill
    // then misses the child, which lives on as an orphan).
    let line = format!(
        "setsid sh -c 'echo $$ > {f}; exec sleep 0.3' </dev/null >/dev/null 2>&1 & \
         while [ ! -s {f} ]; do sleep 0.01; done",
        f = pid_file.display()
    );
    let args = ["-c", line.as_str()];
    let spec = Spec {
        program: "/bin/sh".as_ref(),
        args: &args,
        env: &env,
        cwd: None,
        stdin: None,
        rlimits: Default::default(),
        timeout: Some(Duration::from_secs(5)),
        max_output: 100,
    };
    process::run(&spec).await.unwrap();
    let mut pid = None;
    for _ in 0..200 {
        if let Ok(text) = std::fs::read_to_string(&pid_file)
            && let Ok(p) = text.trim().parse::<i32>()
        {
            pid = Some(p);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let pid = pid.expect("the escaped process wrote its pid");
    // A tool still running meanwhile is this process's child too, and tokio's to wait for.
    let running = tokio::spawn(async move {
        let env = BTreeMap::from([("PATH".to_string(), std::env::var("PATH").unwrap())]);
        let spec = Spec {
            program: "/bin/sh".as_ref(),
            args: &["-c", "sleep 1; echo done"],
            env: &env,
            cwd: None,
            stdin: None,
            rlimits: Default::default(),
            timeout: Some(Duration::from_secs(5)),
            max_output: 100,
        };
        process::run(&spec).await
    });
    let mut waited = 0;
    while !zombie(pid) {
        waited += 1;
        assert!(waited < 300, "the escaped process never became our zombie");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(reaper::reap_orphans() >= 1);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "reaped"
    );
    let finished = running
        .await
        .unwrap()
        .expect("the running tool was left to tokio");
    assert_eq!(finished.stdout.bytes, b"done\n");
}
