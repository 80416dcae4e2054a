//! A real upstream MCP server for the upstream tests and the overhead bench: the
//! reference `@modelcontextprotocol/server-everything` from npm, pinned, installed once
//! under `~/.cache/mcc-upstream` and run in its streamable HTTP mode on a free port.
//!
//! `meta-echo.mjs`, a server of the same SDK, tells what a call's request carried.
//!
//! If npm cannot install it (no registry here), [`Everything::start`] returns `None` and
//! says so loudly on stderr; everything else that fails is a test failure.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The version the tests were written against.
pub const VERSION: &str = "2026.8.31";

/// A running server-everything; killed on drop.
pub struct Everything {
    pub port: u16,
    child: tokio::process::Child,
}

fn cache_dir() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/tmp".into());
    home.join(".cache").join("mcc-upstream")
}

fn entry_point() -> PathBuf {
    cache_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

fn installed_version() -> Option<String> {
    let manifest =
        cache_dir().join("node_modules/@modelcontextprotocol/server-everything/package.json");
    let text = std::fs::read_to_string(manifest).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(v["version"].as_str()?.to_string())
}

/// Installs the pinned package unless it is there; `false` when npm could not.
fn ensure_installed() -> bool {
    // The tests of one binary run in parallel: one npm install at a time.
    static INSTALL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    if installed_version().as_deref() == Some(VERSION) && entry_point().exists() {
        return true;
    }
    let dir = cache_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let status = std::process::Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .arg(format!("@modelcontextprotocol/server-everything@{VERSION}"))
        .status();
    match status {
        Ok(s) if s.success() => entry_point().exists(),
        other => {
            // Straight to the process's stderr: the test harness captures eprintln!.
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                format!(
                    "SKIPPED: cannot install @modelcontextprotocol/server-everything@{VERSION} with npm ({other:?}); the upstream tests did not run\n"
                )
                .as_bytes(),
            );
            false
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Everything {
    /// Starts the server on a free port and waits until it accepts connections.
    pub async fn start() -> Option<Self> {
        if !tokio::task::spawn_blocking(ensure_installed).await.unwrap() {
            return None;
        }
        Some(Self::start_on(free_port()).await)
    }

    /// Starts (again) on `port`.
    pub async fn start_on(port: u16) -> Self {
        let mut node = tokio::process::Command::new("node");
        node.arg(entry_point())
            .arg("streamableHttp")
            .env("PORT", port.to_string());
        Self::run(node, port).await
    }

    /// `meta-echo.mjs` instead of server-everything: a legacy-generation server of the
    /// same SDK whose `whoami` answers with its request's id and `_meta`.
    pub async fn start_meta_echo() -> Option<Self> {
        if !tokio::task::spawn_blocking(ensure_installed).await.unwrap() {
            return None;
        }
        // Beside node_modules, so that its imports resolve to the installed SDK.
        let script = cache_dir().join("meta-echo.mjs");
        std::fs::write(&script, include_str!("meta-echo.mjs")).unwrap();
        Some(Self::start_meta_echo_on(free_port()).await)
    }

    /// meta-echo (again) on `port`.
    pub async fn start_meta_echo_on(port: u16) -> Self {
        let mut node = tokio::process::Command::new("node");
        node.arg(cache_dir().join("meta-echo.mjs"))
            .arg(port.to_string());
        Self::run(node, port).await
    }

    async fn run(mut node: tokio::process::Command, port: u16) -> Self {
        let child = node
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs");
        let started = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the upstream did not listen on {port}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self { port, child }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Stops the server and waits for it to exit.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}
