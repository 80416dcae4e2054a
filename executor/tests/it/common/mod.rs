//! What the executor's end-to-end tests share: the real `mcc-executor serve` on a socket,
//! and shell requests.

#![allow(dead_code)] // each test binary uses its own part

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcc_catalog::EnvPassthrough;
use mcc_catalog::env::EnvSpec;
use mcc_executor::{Address, Request};

/// A running `mcc-executor serve`, killed on drop.
pub struct Executor {
    child: Child,
}

impl Executor {
    /// Serving this test's own uid (tests are both the gateway and the tools here).
    pub fn start_at(address: &Address, env: &[(&str, &str)]) -> Self {
        Self::start_with(address, env, &["--allow-uid", &own_uid().to_string()])
    }

    /// With `args` after `serve --socket <address>`.
    pub fn start_with(address: &Address, env: &[(&str, &str)], args: &[&str]) -> Self {
        Self::start_logging(address, env, args, None)
    }

    /// [`Self::start_with`], its log (stderr) written to `log` when given.
    pub fn start_logging(
        address: &Address,
        env: &[(&str, &str)],
        args: &[&str],
        log: Option<&std::path::Path>,
    ) -> Self {
        let stderr = match log {
            Some(path) => Stdio::from(std::fs::File::create(path).expect("the log file")),
            None => Stdio::null(),
        };
        let child = Command::new(env!("CARGO_BIN_EXE_mcc-executor"))
            .args(["serve", "--socket", &address.to_string()])
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("MCC_EXECUTOR_SOCKET", address.to_string())
            .envs(env.iter().copied())
            .stderr(stderr)
            .spawn()
            .expect("mcc-executor starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !connectable(address) {
            assert!(Instant::now() < deadline, "the executor never listened");
            std::thread::sleep(Duration::from_millis(10));
        }
        Self { child }
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("a pid")
    }

    /// Its exit status once it exits by itself within `limit`.
    pub fn wait_timeout(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn own_uid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

pub fn connectable(address: &Address) -> bool {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixStream};
    match address {
        Address::Path(path) => UnixStream::connect(path).is_ok(),
        Address::Abstract(name) => SocketAddr::from_abstract_name(name)
            .and_then(|addr| UnixStream::connect_addr(&addr))
            .is_ok(),
    }
}

pub fn shell(line: &str) -> Request {
    Request {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), line.into()],
        env: EnvSpec {
            floor: vec!["PATH".into(), "HOME".into()],
            passthrough: EnvPassthrough::All(false),
            set: BTreeMap::new(),
            cwd_on_pythonpath: false,
            ..EnvSpec::default()
        },
        max_output: 1000,
        ..Request::default()
    }
}

pub fn out(f: &mcc_executor::Finished) -> String {
    String::from_utf8_lossy(&f.stdout.bytes).into_owned()
}

pub fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}
