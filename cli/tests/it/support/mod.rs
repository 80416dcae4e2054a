//! Running the `mcc` binary from the repository root (so `examples/` resolves), and a
//! real `mcc-gateway serve` process on a free port.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `mcc ARGS…` run in the repository root with a clean MCC environment.
pub fn mcc(args: &[&str]) -> Output {
    mcc_in(&root(), args)
}

pub fn mcc_in(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcc"));
    cmd.args(args).current_dir(dir);
    for (k, _) in std::env::vars() {
        if k.starts_with("MCC_") || k == "REDIS_URL" {
            cmd.env_remove(k);
        }
    }
    cmd.output().expect("mcc runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts success and returns stdout.
pub fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "mcc failed ({}):\nstdout: {}\nstderr: {}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// Asserts failure and returns stderr.
pub fn fails(o: Output) -> String {
    assert!(
        !o.status.success(),
        "mcc should fail; stdout: {}",
        stdout(&o)
    );
    stderr(&o)
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `mcc-gateway serve` process, killed when dropped.
pub struct Gateway {
    child: Child,
    /// `http://127.0.0.1:<port>/mcp`
    pub url: String,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The gateway binary: `MCC_GATEWAY_BIN`, else beside `mcc` in the target directory
/// (`cargo test --workspace` builds it there), else built now with `cargo build -p
/// mcc-gateway` (cargo releases the build directory once the tests are compiled).
pub fn gateway_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("MCC_GATEWAY_BIN") {
        return PathBuf::from(p);
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_mcc")).with_file_name("mcc-gateway");
    if !bin.is_file() || std::env::var_os("MCC_TEST_BUILD_GATEWAY").is_some() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "mcc-gateway", "--bin", "mcc-gateway"])
            .current_dir(root())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "cargo build -p mcc-gateway failed");
    }
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build -p mcc-gateway`",
        bin.display()
    );
    bin
}

/// Starts `mcc-gateway serve` over `env` (MCC_TOOL_FILES, MCC_USERS_FILE, MCC_AUTH…)
/// on a free port and waits for `/readyz`.
pub fn spawn_gateway(env: &[(&str, String)]) -> Gateway {
    let port = free_port();
    let mut cmd = Command::new(gateway_bin());
    cmd.arg("serve")
        .current_dir(root())
        .env_remove("REDIS_URL")
        .env("MCC_SERVER__PORT", port.to_string())
        .env("MCC_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let gateway = Gateway {
        child: cmd.spawn().expect("the gateway starts"),
        url: format!("http://127.0.0.1:{port}/mcp"),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if http_status(port, "/readyz") == Some(200) {
            return gateway;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the gateway on port {port} never became ready");
}

fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}
