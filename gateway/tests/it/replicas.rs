//! Stateless replicas: two real `mcc-gateway serve` processes sharing one Redis. A legacy
//! client initializes on A, calls tools with the same `Mcp-Session-Id` on B, A is killed
//! (SIGKILL), and the session goes on on B (and on a replica started afterwards) with its
//! variables intact. Also: the binary's startup errors and graceful shutdown.

use crate::mcp_support;

use std::process::Command;
use std::time::Duration;

use mcp_support::replica::*;
use mcp_support::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_survives_its_replica() {
    let dir = tempfile::tempdir().unwrap();
    let a = spawn_replica(dir.path()).await;
    let b = spawn_replica(dir.path()).await;
    let http = mcp_support::http_client();

    let sid = raw_initialize(&http, &a.url).await;
    assert_eq!(
        raw_call(
            &http,
            &a.url,
            &sid,
            2,
            "set_session",
            json!({"name": "target", "value": "10.0.0.5"})
        )
        .await,
        "Set 'target'."
    );
    // The same session on B: restored from Redis, same variables.
    assert_eq!(
        raw_call(
            &http,
            &b.url,
            &sid,
            3,
            "get_session",
            json!({"name": "target"})
        )
        .await,
        "\"10.0.0.5\""
    );
    assert_eq!(
        raw_call(
            &http,
            &b.url,
            &sid,
            4,
            "set_session",
            json!({"name": "budget", "value": 1000})
        )
        .await,
        "Set 'budget'."
    );

    // A dies hard.
    drop(a);
    assert_eq!(
        raw_call(
            &http,
            &b.url,
            &sid,
            5,
            "get_session",
            json!({"name": "budget"})
        )
        .await,
        "1000"
    );
    assert_eq!(
        raw_call(
            &http,
            &b.url,
            &sid,
            6,
            "get_session",
            json!({"name": "target"})
        )
        .await,
        "\"10.0.0.5\""
    );
    assert!(
        raw_call(&http, &b.url, &sid, 7, "whoami", json!({}))
            .await
            .starts_with("username: alice")
    );

    // A replica that did not exist when the session began serves it too.
    let c = spawn_replica(dir.path()).await;
    assert_eq!(
        raw_call(
            &http,
            &c.url,
            &sid,
            8,
            "get_session",
            json!({"name": "budget"})
        )
        .await,
        "1000"
    );
    // Another session's variables stay apart.
    let other = raw_initialize(&http, &c.url).await;
    assert_eq!(
        raw_call(
            &http,
            &b.url,
            &other,
            9,
            "get_session",
            json!({"name": "budget"})
        )
        .await,
        "null"
    );
    let _ = &c.base;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_shuts_down_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = spawn_replica(dir.path()).await;
    let pid = r.child.id() as i32;
    // SAFETY: kill(2) on our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let mut status = None;
    for _ in 0..50 {
        if let Some(s) = r.child.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let status = status.expect("the gateway exits after SIGTERM");
    assert!(status.success(), "{status:?}");
    assert!(
        mcp_support::http_client()
            .get(format!("{}/healthz", r.base))
            .send()
            .await
            .is_err()
    );
}

#[test]
fn bad_settings_stop_startup_naming_the_setting() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcc-gateway"))
        .arg("serve")
        .env("MCC_SERVER__PORT", "eighty")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("server.port") && err.contains("MCC_SERVER__PORT"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "tools:\n  - name: x\n    exec: [unclosed\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mcc-gateway"))
        .args(["serve", "--tools"])
        .arg(&bad)
        .env("MCC_SERVER__PORT", free_port().to_string())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml"), "{err}");
}
