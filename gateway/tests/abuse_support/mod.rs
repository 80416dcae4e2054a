//! Shared by the abuse tests that need a process of their own: a real `mcc-gateway serve`
//! over the test tool and users files, its RSS from `/proc`, raw HTTP helpers.
#![allow(dead_code)]

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

/// A `mcc-gateway serve` process; killed and reaped when dropped.
pub struct Gateway {
    pub child: Child,
    pub port: u16,
    pub base: String,
    pub url: String,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Gateway {
    /// Resident set size of the process, in KiB (`VmRSS` of `/proc/<pid>/status`).
    pub fn rss_kib(&self) -> u64 {
        rss_kib(self.child.id())
    }
}

pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/<pid>/status")
}

/// Starts the binary over the test files in `dir` (written by `mcp_support::settings`)
/// with `env` on top (dev-admin, in-memory sessions, keyword-only search unless `env`
/// says otherwise), and waits until `/readyz` answers 200.
pub async fn spawn(dir: &Path, env: &[(&str, String)]) -> Gateway {
    let port = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcc-gateway"));
    cmd.arg("serve")
        .env_remove("REDIS_URL")
        .env("MCC_TOOL_FILES", dir.join("tools"))
        .env("MCC_USERS_FILE", dir.join("users.yaml"))
        .env("MCC_SERVER__PORT", port.to_string())
        .env("MCC_AUTH", "dev-admin")
        // No model: keyword-only unless a test points MCC_MODEL_CACHE at one.
        .env("MCC_MODEL_CACHE", dir.join("no-models"))
        .env("MCC_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("the gateway binary starts");
    let base = format!("http://127.0.0.1:{port}");
    let gateway = Gateway {
        child,
        port,
        url: format!("{base}/mcp"),
        base,
    };
    let http = reqwest::Client::new();
    for _ in 0..300 {
        if let Ok(r) = http.get(format!("{}/readyz", gateway.base)).send().await
            && r.status().is_success()
        {
            return gateway;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("gateway on port {port} never became ready");
}
