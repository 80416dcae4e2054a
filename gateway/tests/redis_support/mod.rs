//! Real Redis processes for the Redis deployment tests: `redis-server` children on free
//! loopback ports (killed when dropped, also when a test fails) and a private CA with a
//! server certificate made by the `openssl` command at test time.
//!
//! A test calls [`redis_server_or_skip`] first: without `redis-server` it prints a loud
//! SKIPPED line and returns (`.ci/run` installs it, so CI always runs these tests).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether `redis-server` can run here; prints why not, loudly.
pub fn redis_server_or_skip(test: &str) -> bool {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        eprintln!("##################################################################");
        eprintln!("SKIPPED {test}: redis-server is not installed (apt-get install");
        eprintln!("redis-server; .ci/run installs it). Nothing was tested.");
        eprintln!("##################################################################");
    }
    found
}

pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A `redis-server` child, killed (SIGKILL) when dropped.
pub struct RedisProcess {
    child: Child,
    pub port: u16,
}

impl RedisProcess {
    /// `redis-server` on 127.0.0.1 with no persistence and `extra` arguments, started and
    /// answering (TCP accept) within 10 s. `port` is the port to wait for.
    pub fn start(port: u16, extra: &[&str]) -> Self {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server runs");
        let process = Self { child, port };
        wait_for_port(port);
        process
    }

    /// Kill now with SIGKILL (no shutdown, no last write).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn wait_for_port(port: u16) {
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "nothing listens on 127.0.0.1:{port} after 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A private CA and a server certificate for 127.0.0.1 and localhost signed by it.
pub struct TestCa {
    pub dir: tempfile::TempDir,
}

impl TestCa {
    /// Made with the `openssl` command (EC P-256 keys, valid one day).
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        openssl(
            d,
            &[
                "ecparam",
                "-name",
                "prime256v1",
                "-genkey",
                "-noout",
                "-out",
                "ca.key",
            ],
        );
        openssl(
            d,
            &[
                "req",
                "-x509",
                "-new",
                "-key",
                "ca.key",
                "-days",
                "1",
                "-subj",
                "/CN=mcc test CA",
                "-out",
                "ca.crt",
            ],
        );
        openssl(
            d,
            &[
                "ecparam",
                "-name",
                "prime256v1",
                "-genkey",
                "-noout",
                "-out",
                "server.key",
            ],
        );
        openssl(
            d,
            &[
                "req",
                "-new",
                "-key",
                "server.key",
                "-subj",
                "/CN=localhost",
                "-out",
                "server.csr",
            ],
        );
        std::fs::write(
            d.join("ext.cnf"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
        )
        .unwrap();
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "1",
                "-extfile",
                "ext.cnf",
                "-out",
                "server.crt",
            ],
        );
        Self { dir }
    }

    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// `redis-server` arguments serving TLS with this CA's server certificate (clients
    /// are not asked for certificates).
    pub fn server_args(&self) -> Vec<String> {
        let d = self.dir.path();
        vec![
            "--tls-cert-file".into(),
            d.join("server.crt").display().to_string(),
            "--tls-key-file".into(),
            d.join("server.key").display().to_string(),
            "--tls-ca-cert-file".into(),
            d.join("ca.crt").display().to_string(),
            "--tls-auth-clients".into(),
            "no".into(),
        ]
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command makes the test certificates: apt-get install openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
