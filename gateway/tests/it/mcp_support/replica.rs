//! Real `mcc-gateway serve` processes over the test files of a directory: what the
//! multi-replica and abuse tests start, kill, restart and measure.

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
    pub port: u16,
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

/// Starts the binary over the tool and users files of `dir` (written when missing) on a
/// free port, with nothing of this process's `REDIS_URL` and `env` on top, and waits
/// until `/readyz` answers 200.
pub async fn spawn_gateway(dir: &Path, env: &[(&str, String)]) -> Replica {
    super::settings(dir, "dev-admin", None); // writes the tool and users files
    let port = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcc-gateway"));
    cmd.arg("serve")
        .env_remove("REDIS_URL")
        .env("MCC_TOOL_FILES", dir.join("tools"))
        .env("MCC_USERS_FILE", dir.join("users.yaml"))
        .env("MCC_SERVER__PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("the gateway binary starts");
    let base = format!("http://127.0.0.1:{port}");
    // Owned at once, so the process is killed and reaped on every path.
    let replica = Replica {
        child,
        port,
        url: format!("{base}/mcp"),
        base,
    };
    let http = super::http_client();
    for _ in 0..300 {
        if let Ok(r) = http.get(format!("{}/readyz", replica.base)).send().await
            && r.status().is_success()
        {
            return replica;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("gateway on port {port} never became ready");
}

impl Replica {
    /// Waits until `/readyz` says semantic ranking has joined (`search.semantic`): the
    /// gateway serves keyword-only search while the embeddings are built.
    pub async fn wait_for_semantic(&self) {
        let http = super::http_client();
        for _ in 0..1200 {
            if let Ok(r) = http.get(format!("{}/readyz", self.base)).send().await
                && let Ok(body) = r.json::<serde_json::Value>().await
                && body["search"]["semantic"] == true
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "the gateway on port {} never had a semantic index",
            self.port
        );
    }
}

/// A replica sharing the test Redis (sessions, legacy session registry, relay).
pub async fn spawn_replica(dir: &Path) -> Replica {
    let env = [
        ("REDIS_URL", super::redis_url()),
        ("MCC_LOG", "warn".to_string()),
    ];
    spawn_gateway(dir, &env).await
}
