//! Real `mcc-gateway serve` processes over the test files of a directory, sharing the test
//! Redis: what the multi-replica tests start, kill and restart.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `mcc-gateway serve` process, killed and reaped when dropped.
pub struct Replica {
    pub child: Child,
    /// `http://127.0.0.1:<port>/mcp`
    pub url: String,
    /// `http://127.0.0.1:<port>`
    pub base: String,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a replica over the tool and users files of `dir` (written when missing) and
/// waits until it is ready.
pub async fn spawn_replica(dir: &Path) -> Replica {
    super::settings(dir, "dev-admin", None); // writes the tool and users files
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_mcc-gateway"))
        .arg("serve")
        .env("MCC_TOOL_FILES", dir.join("tools"))
        .env("MCC_USERS_FILE", dir.join("users.yaml"))
        .env("MCC_SERVER__PORT", port.to_string())
        .env("REDIS_URL", super::redis_url())
        .env("MCC_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the gateway binary starts");
    let base = format!("http://127.0.0.1:{port}");
    // Owned at once, so the process is killed and reaped on every path.
    let replica = Replica {
        child,
        url: format!("{base}/mcp"),
        base,
    };
    let http = reqwest::Client::new();
    for _ in 0..100 {
        if let Ok(r) = http.get(format!("{}/readyz", replica.base)).send().await
            && r.status().is_success()
        {
            return replica;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("replica on port {port} never became ready");
}
