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
    free_ports(1)[0]
}

/// `n` distinct free ports (held open together while they are chosen).
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

/// Held while a set of servers starts: a port chosen by one test is bound before
/// another test of this binary chooses.
static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn starting() -> std::sync::MutexGuard<'static, ()> {
    STARTING.lock().unwrap_or_else(|p| p.into_inner())
}

/// A `redis-server` child, killed (SIGKILL) when dropped.
pub struct RedisProcess {
    child: Child,
    pub port: u16,
    /// The working directory when the caller gave none (no stray `dump.rdb` is read
    /// or written in the crate's directory).
    _dir: Option<tempfile::TempDir>,
}

impl RedisProcess {
    /// `redis-server` on 127.0.0.1 with no persistence and `extra` arguments, started and
    /// answering (TCP accept) within 10 s. `port` is the port to wait for.
    pub fn start(port: u16, extra: &[&str]) -> Self {
        let dir = (!extra.contains(&"--dir")).then(|| tempfile::tempdir().unwrap());
        let mut command = Command::new("redis-server");
        command
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(extra);
        if let Some(d) = &dir {
            command.arg("--dir").arg(d.path());
        }
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server runs");
        let process = Self {
            child,
            port,
            _dir: dir,
        };
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

/// The ACL user every HA set-up runs with (`default` is off): the gateway, replication
/// and the sentinels all log in as it.
pub const USER: &str = "mcc-test";
pub const PASSWORD: &str = "ha-pw-1";

/// `redis-server` arguments for the ACL user (one token per argument: redis-server
/// joins a directive's words itself) and for replicas to log in to their master.
/// Full syncs start at once (the default waits 5 s for more replicas: a master killed
/// sooner has no replica to promote). Working directory `dir`: a replica writes the
/// RDB it receives there, and a server loads a `dump.rdb` it finds there.
fn acl_args(dir: &Path) -> Vec<String> {
    let mut args: Vec<String> = format!("--user default off --user {USER} on >{PASSWORD} ~* &* +@all --masteruser {USER} --masterauth {PASSWORD} --repl-diskless-sync-delay 0 --dir")
        .split(' ')
        .map(String::from)
        .collect();
    args.push(dir.display().to_string());
    args
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// A master, two replicas and three sentinels (quorum 2, down after 1 s) on free
/// loopback ports; master name `mymaster`.
pub struct SentinelSet {
    pub dir: tempfile::TempDir,
    pub master: Option<RedisProcess>,
    pub replicas: Vec<RedisProcess>,
    pub sentinels: Vec<RedisProcess>,
}

impl SentinelSet {
    pub fn start() -> Self {
        let _starting = starting();
        let dir = tempfile::tempdir().unwrap();
        let ports = free_ports(6);
        let master_port = ports[0];
        let mut args = acl_args(dir.path());
        args.extend(["--port".into(), master_port.to_string()]);
        let master = RedisProcess::start(master_port, &strs(&args));
        let replicas = (1..3)
            .map(|i| {
                let port = ports[i];
                let replica_dir = dir.path().join(format!("replica-{i}"));
                std::fs::create_dir(&replica_dir).unwrap();
                let mut args = acl_args(&replica_dir);
                args.extend(["--port".into(), port.to_string(), "--replicaof".into()]);
                args.extend(["127.0.0.1".into(), master_port.to_string()]);
                RedisProcess::start(port, &strs(&args))
            })
            .collect();
        let sentinels = (0..3)
            .map(|i| {
                let port = ports[3 + i];
                let conf = dir.path().join(format!("sentinel-{i}.conf"));
                std::fs::write(
                    &conf,
                    format!(
                        "port {port}\nbind 127.0.0.1\nsentinel monitor mymaster 127.0.0.1 {master_port} 2\n\
                         sentinel down-after-milliseconds mymaster 1000\n\
                         sentinel failover-timeout mymaster 4000\n\
                         sentinel auth-user mymaster {USER}\nsentinel auth-pass mymaster {PASSWORD}\n"
                    ),
                )
                .unwrap();
                let child = Command::new("redis-server")
                    .arg(&conf)
                    .arg("--sentinel")
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("redis-server runs");
                let process = RedisProcess {
                    child,
                    port,
                    _dir: None,
                };
                wait_for_port(port);
                process
            })
            .collect();
        let set = Self {
            dir,
            master: Some(master),
            replicas,
            sentinels,
        };
        set.wait_until_replicated();
        set
    }

    /// `redis+sentinel://user:password@s1,s2,s3/mymaster`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!(
            "redis+sentinel://{USER}:{PASSWORD}@{}/mymaster",
            hosts.join(",")
        )
    }

    /// Until the master reports both replicas online and every sentinel knows them.
    fn wait_until_replicated(&self) {
        let master = self.master.as_ref().unwrap().port;
        let start = Instant::now();
        loop {
            let info = cli(master, &["INFO", "replication"]);
            let sentinels_ready = self.sentinels.iter().all(|s| {
                cli_plain(s.port, &["SENTINEL", "REPLICAS", "mymaster"])
                    .matches("slave")
                    .count()
                    >= 2
            });
            let synced = self
                .replicas
                .iter()
                .all(|r| cli(r.port, &["INFO", "replication"]).contains("master_link_status:up"));
            // Both replicas acknowledge a write: a replica is "online" before its
            // first acknowledgement (offset 0), and the tests' first write waits for
            // replicas. (`WAIT` before any write is satisfied by offset 0.)
            if info.contains("connected_slaves:2")
                && synced
                && sentinels_ready
                && cli(master, &["SET", "test:replicated", "1"]).trim() == "OK"
                && cli(master, &["WAIT", "2", "1000"]).trim() == "2"
            {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "replication not up: {info}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The master's port as the sentinels say now.
    pub fn master_port(&self) -> u16 {
        let out = cli_plain(
            self.sentinels[0].port,
            &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"],
        );
        out.lines()
            .nth(1)
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or(0)
    }
}

/// Three masters with one replica each (node timeout 1 s), formed with
/// `redis-cli --cluster create`.
pub struct ClusterSet {
    pub dir: tempfile::TempDir,
    pub nodes: Vec<RedisProcess>,
}

impl ClusterSet {
    pub fn start() -> Self {
        let _starting = starting();
        let dir = tempfile::tempdir().unwrap();
        let ports = free_ports(12);
        let nodes: Vec<RedisProcess> = (0..6)
            .map(|i| {
                let port = ports[i];
                // The bus port is set explicitly: port + 10000 may be taken here.
                let bus = ports[6 + i];
                let node_dir = dir.path().join(format!("node-{i}"));
                std::fs::create_dir(&node_dir).unwrap();
                let mut args = acl_args(&node_dir);
                args.extend(
                    format!(
                        "--port {port} --cluster-enabled yes --cluster-port {bus} \
                         --cluster-node-timeout 1000 --cluster-config-file {}",
                        dir.path().join(format!("nodes-{i}.conf")).display()
                    )
                    .split(' ')
                    .map(String::from),
                );
                RedisProcess::start(port, &strs(&args))
            })
            .collect();
        let mut create: Vec<String> = vec!["--cluster".into(), "create".into()];
        create.extend(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
        create.extend(["--cluster-replicas", "1", "--cluster-yes"].map(String::from));
        let out = Command::new("redis-cli")
            .args(["--user", USER, "--pass", PASSWORD, "--no-auth-warning"])
            .args(&create)
            .output()
            .expect("redis-cli runs");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}\nnode 0: {}{}",
            String::from_utf8_lossy(&out.stdout),
            cli(nodes[0].port, &["CLUSTER", "INFO"]),
            cli(nodes[0].port, &["INFO", "keyspace"]),
        );
        let set = Self { dir, nodes };
        set.wait_until_ok();
        set
    }

    /// Until every node sees the cluster ok and every replica is in sync.
    fn wait_until_ok(&self) {
        let start = Instant::now();
        while !self.nodes.iter().all(|n| {
            let info = cli(n.port, &["INFO", "replication"]);
            cli(n.port, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
                && (info.contains("role:master") || info.contains("master_link_status:up"))
        }) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the cluster is not ok"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `redis+cluster://user:password@n1,n2,n3` (three seeds).
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self.nodes[..3]
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{USER}:{PASSWORD}@{}", hosts.join(","))
    }

    /// The node (index) that serves `key` as a master now.
    pub fn master_of(&self, key: &str) -> usize {
        master_of_key(&self.nodes, key)
    }
}

/// Which of a Cluster's `nodes` (index) serves `key` as a master now.
pub fn master_of_key(nodes: &[RedisProcess], key: &str) -> usize {
    let slot: u16 = cli(nodes[0].port, &["CLUSTER", "KEYSLOT", key])
        .trim()
        .parse()
        .unwrap();
    let slots = cli(nodes[0].port, &["CLUSTER", "SLOTS"]);
    nodes
        .iter()
        .position(|n| owns(&slots, slot, n.port))
        .unwrap_or_else(|| panic!("no master serves slot {slot}: {slots}"))
}

/// Whether `CLUSTER SLOTS` output (redis-cli's plain form) gives `slot` to the master on `port`.
fn owns(slots: &str, slot: u16, port: u16) -> bool {
    let lines: Vec<&str> = slots.lines().map(str::trim).collect();
    // Each range: start, end, master ip, master port, master id, then replicas.
    lines.windows(4).any(|w| {
        match (
            w[0].parse::<u16>(),
            w[1].parse::<u16>(),
            w[3].parse::<u16>(),
        ) {
            (Ok(a), Ok(b), Ok(p)) => a <= slot && slot <= b && p == port && w[2] == "127.0.0.1",
            _ => false,
        }
    })
}

/// `redis-cli` as the ACL user against a data node; its plain output.
pub fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args([
            "-p",
            &port.to_string(),
            "--user",
            USER,
            "--pass",
            PASSWORD,
            "--no-auth-warning",
        ])
        .args(args)
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `redis-cli` without credentials (sentinels).
pub fn cli_plain(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
