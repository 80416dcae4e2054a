//! stdio upstreams end to end: a real gateway in file mode whose tool file declares
//! `mcp_servers:` entries with a `command:` running `mcp-server-time` (PyPI, the
//! reference time server, written by no one here), both in the embedded default (the
//! gateway's own process group) and through an executor serving its socket. Discovery,
//! search, execute with structured results, an upstream error, validation, RBAC hiding,
//! a server killed and started again, one that cannot start keeping its tools (marked
//! unavailable) and coming back, and the process gone with the gateway.
//!
//! `mcp-server-time` is installed once, pinned, into a venv under `~/.cache/mcc/`; where
//! pip cannot install it the tests print why and return.

use crate::mcp_support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mcp_support::*;
use serde_json::{Value, json};

/// The version the tests were written against.
const VERSION: &str = "2026.10.19";

pub(crate) fn venv() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/tmp".into());
    home.join(".cache/mcc/mcp-server-time")
}

fn installed() -> bool {
    let out = std::process::Command::new(venv().join("bin/pip"))
        .args(["show", "mcp-server-time"])
        .output();
    out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(&format!("Version: {VERSION}")))
        && venv().join("bin/mcp-server-time").exists()
}

/// The server's program, installed unless it is there; `None` when pip could not.
pub(crate) fn time_server() -> Option<PathBuf> {
    // The tests of one binary run in parallel: one install at a time.
    static INSTALL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    if installed() {
        return Some(venv().join("bin/mcp-server-time"));
    }
    let created = std::process::Command::new("python3")
        .args(["-m", "venv"])
        .arg(venv())
        .status();
    let pip = std::process::Command::new(venv().join("bin/pip"))
        .args(["install", "--quiet", &format!("mcp-server-time=={VERSION}")])
        .status();
    if installed() {
        return Some(venv().join("bin/mcp-server-time"));
    }
    // Straight to the process's stderr: the test harness captures eprintln!.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "SKIPPED: cannot install mcp-server-time=={VERSION} into {} (venv: {created:?}, pip: {pip:?}); the stdio upstream tests did not run\n",
            venv().display()
        )
        .as_bytes(),
    );
    None
}

/// The upstreams: the time server for `public`, again for `finance` only, and one
/// started through a wrapper that runs the server only while `flag` exists. `mark`
/// is set in the servers' environment, to find their processes.
fn upstreams_file(program: &std::path::Path, flag: &std::path::Path, mark: &str) -> String {
    let program = program.display();
    let flag = flag.display();
    format!(
        r#"
mcp_servers:
  - name: time
    command: [{program}, --local-timezone, UTC]
    groups: [public]
    prefix: time_
    env:
      STDIO_TEST_MARK: {mark}-time
  - name: finance-time
    command: {program}
    args: [--local-timezone, UTC]
    groups: [finance]
    prefix: fin_
    include: [get_current_time]
    env:
      STDIO_TEST_MARK: {mark}-finance
  - name: flaky-time
    command: [/bin/sh, -c, 'test -e {flag} && exec {program} --local-timezone UTC']
    groups: [public]
    prefix: flaky_
    include: [get_current_time]
    env:
      STDIO_TEST_MARK: {mark}-flaky
"#
    )
}

/// A gateway over the upstreams file, and what its tests need to reach the servers.
struct Fixture {
    server: Server,
    /// The executor serving this test's socket, when the gateway uses one.
    executor: Option<tokio::task::JoinHandle<()>>,
    program: PathBuf,
    /// `flaky-time` starts only while this file exists.
    flag: PathBuf,
    /// In the servers' environment, to find their processes ([`marked`]).
    mark: String,
    _run_dir: tempfile::TempDir,
}

impl Fixture {
    /// `None` (the test returns) when mcp-server-time cannot be installed.
    /// `through_executor`: tools and stdio servers run in an executor serving a socket
    /// of this test process's (as in mcp_progress), else in the gateway's own groups.
    async fn start(auth: &str, through_executor: bool) -> Option<Self> {
        let program = tokio::task::spawn_blocking(time_server).await.unwrap()?;
        let run_dir = tempfile::tempdir().unwrap();
        let flag = run_dir.path().join("flag");
        std::fs::write(&flag, "").unwrap();
        let mark = format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        let socket = run_dir.path().join("executor.sock");
        let executor = through_executor.then(|| {
            let runtime = mcc_executor::InProcess::new(vec![(
                "PATH".into(),
                std::env::var("PATH").unwrap_or_default(),
            )]);
            let address = mcc_executor::Address::Path(socket.clone());
            let listener = mcc_executor::server::bind(&address).unwrap();
            tokio::spawn(mcc_executor::server::serve(listener, runtime, 8))
        });
        let file = upstreams_file(&program, &flag, &mark);
        let server = start_configured(
            auth,
            Some(&redis_url()),
            &[("tools/upstreams.yaml", file)],
            |s| {
                if through_executor {
                    s.execution.runtime = mcc_gateway::config::RuntimeKind::Executor;
                    s.execution.executor_socket = socket.display().to_string();
                }
            },
        )
        .await;
        Some(Self {
            server,
            executor,
            program,
            flag,
            mark,
            _run_dir: run_dir,
        })
    }

    /// The running processes of upstream `name` (`time`, `finance`, `flaky`).
    fn pids(&self, name: &str) -> Vec<i32> {
        marked(&format!("{}-{name}", self.mark))
    }

    async fn stop(self) {
        self.server.stop().await;
        if let Some(executor) = self.executor {
            executor.abort();
        }
    }
}

fn keys_of(search: &str) -> Vec<String> {
    search
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect()
}

async fn execute(client: &Client, key: &str, params: Value) -> rmcp::model::CallToolResult {
    call(client, "execute", json!({"key": key, "params": params})).await
}

/// The pids of running processes whose environment holds `STDIO_TEST_MARK=<mark>`.
fn marked(mark: &str) -> Vec<i32> {
    let needle = format!("STDIO_TEST_MARK={mark}\0");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let running = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
            });
            running
                && std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.windows(needle.len()).any(|w| w == needle.as_bytes()))
        })
        .collect()
}

async fn until(what: &str, limit: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `key` is described to `client` and the search index has it: the
/// gateway waits for first discoveries only so long, and a loaded machine starts
/// Python slowly.
async fn discovered(client: &Client, key: &str) {
    until(
        &format!("{key} discovered"),
        Duration::from_secs(120),
        async || {
            let described = call_text(client, "describe_tools", json!({})).await;
            let found = call_text(
                client,
                "search",
                json!({"query": "current time in a timezone"}),
            )
            .await;
            described.contains(key) && found.contains(key)
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_is_discovered_searched_and_executed_in_process_and_via_executor() {
    for through_executor in [false, true] {
        let Some(fixture) = Fixture::start("dev-admin", through_executor).await else {
            return;
        };
        let server = &fixture.server;
        let client = legacy(&server.url, TestClient::plain()).await;
        let ctx = format!("executor={through_executor}");
        discovered(&client, "public.time_get_current_time").await;

        let found = call_text(
            &client,
            "search",
            json!({"query": "current time in a timezone"}),
        )
        .await;
        let keys = keys_of(&found);
        assert!(
            keys.contains(&"public.time_get_current_time".to_string()),
            "{ctx}: {found}"
        );
        let described = call_text(&client, "describe_tools", json!({})).await;
        assert!(
            described.contains("## public.time_convert_time\nConvert time between timezones"),
            "{ctx}: {described}"
        );
        assert!(
            described.contains("finance.fin_get_current_time"),
            "{ctx}: {described}"
        );
        assert!(
            !described.contains("fin_convert_time"),
            "include filters: {described}"
        );

        // Structured content as the server sent it.
        let r = execute(
            &client,
            "public.time_get_current_time",
            json!({"timezone": "Europe/Paris"}),
        )
        .await;
        assert_ne!(r.is_error, Some(true), "{ctx}: {r:?}");
        let structured = r.structured_content.clone().expect("structured content");
        assert_eq!(
            structured["timezone"], "Europe/Paris",
            "{ctx}: {structured}"
        );
        assert!(structured["datetime"].is_string(), "{structured}");
        let r = execute(
            &client,
            "public.time_convert_time",
            json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        )
        .await;
        let structured = r.structured_content.clone().expect("structured content");
        assert_eq!(
            structured["time_difference"], "+9.0h",
            "{ctx}: {structured}"
        );

        // The server's own error comes back as an error result.
        let r = execute(
            &client,
            "public.time_convert_time",
            json!({"source_timezone": "Nowhere/Land", "time": "12:00", "target_timezone": "UTC"}),
        )
        .await;
        assert_eq!(r.is_error, Some(true), "{ctx}: {r:?}");
        assert!(text(&r).contains("Invalid timezone"), "{ctx}: {}", text(&r));
        // Arguments are checked against the server's schema before it is asked.
        let r = execute(&client, "public.time_get_current_time", json!({})).await;
        assert!(
            text(&r).contains("\"timezone\" is a required property"),
            "{ctx}: {}",
            text(&r)
        );

        let status = get_json(&format!("{}/readyz", server.base)).await;
        let ups = status
            .pointer("/catalog/upstreams")
            .unwrap_or_else(|| panic!("{status}"));
        let time = ups
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["name"] == "time")
            .unwrap_or_else(|| panic!("{status}"));
        assert_eq!(time["available"], true, "{ctx}: {status}");
        assert_eq!(time["tools"], 2, "{ctx}: {status}");
        assert!(
            !status.to_string().contains("mcp-server-time"),
            "no command in the unauthenticated status: {status}"
        );

        // One process per server; gone when the gateway stops.
        let pids = fixture.pids("time");
        assert_eq!(pids.len(), 1, "{ctx}: {pids:?}");
        client.cancel().await.unwrap();
        let mark = fixture.mark.clone();
        fixture.stop().await;
        until(
            &format!("{ctx}: the server's process ends with the gateway"),
            Duration::from_secs(10),
            async || marked(&format!("{mark}-time")).is_empty(),
        )
        .await;
    }
}

/// A caller sees a stdio server's tool of a group it is not in exactly as it sees a
/// local tool of such a group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_tools_of_other_groups_stay_hidden() {
    // dev-public acts as bob (public, ops): not in finance or admin.
    let Some(fixture) = Fixture::start("dev-public", false).await else {
        return;
    };
    let server = &fixture.server;
    let client = legacy(&server.url, TestClient::plain()).await;
    discovered(&client, "public.time_get_current_time").await;
    let found = call_text(
        &client,
        "search",
        json!({"query": "current time in a timezone"}),
    )
    .await;
    assert!(!found.contains("fin_"), "{found}");
    assert!(found.contains("public.time_get_current_time"), "{found}");
    let described = call_text(&client, "describe_tools", json!({})).await;
    assert!(!described.contains("fin_"), "{described}");
    let hidden = text(
        &execute(
            &client,
            "finance.fin_get_current_time",
            json!({"timezone": "UTC"}),
        )
        .await,
    );
    let local_hidden = text(&execute(&client, "admin.shell", json!({"command": "id"})).await);
    assert_eq!(
        hidden, local_hidden,
        "the same answer as for a local tool of another group"
    );
    client.cancel().await.unwrap();
    fixture.stop().await;
}

/// A server killed under the gateway is started again by the next call; one that cannot
/// start keeps its tools, marked unavailable, fails calls at once, and comes back (with
/// backoff) once it can start again. The rest of the catalog is untouched throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_is_started_again_and_a_broken_one_keeps_its_tools() {
    let Some(fixture) = Fixture::start("dev-admin", false).await else {
        return;
    };
    let server = &fixture.server;
    let client = stateless(&server.url, TestClient::plain()).await;
    discovered(&client, "public.flaky_get_current_time").await;
    let now = async |key: &str| execute(&client, key, json!({"timezone": "UTC"})).await;
    assert_ne!(
        now("public.time_get_current_time").await.is_error,
        Some(true)
    );

    // Killed: the next calls start it again.
    let before = fixture.pids("time");
    assert_eq!(before.len(), 1, "{before:?}");
    // SAFETY: kill(2) touches no memory; the pid is the server this test's gateway started.
    unsafe { libc::kill(before[0], libc::SIGKILL) };
    until(
        "a call after the kill succeeds",
        Duration::from_secs(30),
        async || {
            now("public.time_get_current_time")
                .await
                .structured_content
                .is_some()
        },
    )
    .await;
    let after = fixture.pids("time");
    assert_eq!(after.len(), 1, "{after:?}");
    assert_ne!(after, before, "a new process");

    // Cannot start any more: its tools stay listed, calls fail at once and clearly.
    std::fs::remove_file(&fixture.flag).unwrap();
    let flaky = fixture.pids("flaky");
    assert_eq!(flaky.len(), 1, "{flaky:?}");
    // SAFETY: as above.
    unsafe { libc::kill(flaky[0], libc::SIGKILL) };
    let mut failure = String::new();
    until(
        "the broken server's calls fail as unavailable",
        Duration::from_secs(30),
        async || {
            let r = now("public.flaky_get_current_time").await;
            failure = text(&r);
            r.is_error == Some(true) && failure.contains("upstream 'flaky-time' is unavailable")
        },
    )
    .await;
    assert!(
        !failure.contains(&*fixture.program.to_string_lossy()),
        "{failure}"
    );
    let started = Instant::now();
    let r = now("public.flaky_get_current_time").await;
    assert_eq!(r.is_error, Some(true));
    assert!(started.elapsed() < Duration::from_secs(5), "fails fast");
    let described = call_text(&client, "describe_tools", json!({})).await;
    assert!(
        described.contains("public.flaky_get_current_time"),
        "{described}"
    );
    let status = get_json(&format!("{}/readyz", server.base)).await;
    let flaky_status = status
        .pointer("/catalog/upstreams")
        .and_then(Value::as_array)
        .and_then(|ups| ups.iter().find(|u| u["name"] == "flaky-time"))
        .cloned()
        .unwrap_or_else(|| panic!("{status}"));
    assert_eq!(flaky_status["available"], false, "{status}");
    assert_eq!(flaky_status["tools"], 1, "{status}");
    // The others are untouched.
    assert_ne!(
        now("public.time_get_current_time").await.is_error,
        Some(true)
    );
    let local = execute(&client, "public.echo", json!({"message": "local"})).await;
    assert_eq!(text(&local), "local");

    // It can start again: discovery's backoff brings it back.
    std::fs::write(&fixture.flag, "").unwrap();
    until(
        "the broken server comes back",
        Duration::from_secs(60),
        async || {
            now("public.flaky_get_current_time")
                .await
                .structured_content
                .is_some()
        },
    )
    .await;
    client.cancel().await.unwrap();
    fixture.stop().await;
}
