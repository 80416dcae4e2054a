//! Cancellation (issue 32, item 8): a client's `notifications/cancelled` kills the tool's
//! process group at once — also when the cancel lands on another replica than the one
//! running the call — and the call is audited `cancelled`. The closed-stream rule: a
//! 2026-07-28 call whose stream closes (no resumable event ids) is cancelled the same
//! way; a legacy call, whose stream has event ids to resume from, runs on.
//!
//! The tool starts `sleep 30` in the background and writes its pid, so the test sees
//! whether the whole group (not only the shell) was killed. Each test prints the latency
//! it measured from the cancel to the sleeper's death.

use crate::mcp_support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mcp_support::replica::*;
use mcp_support::*;
use serde_json::{Value, json};

const SLEEPY: &str = r#"
tools:
  - name: sleepy
    groups: [public]
    description: Sleep in the background and write the sleeper's pid.
    params:
      - name: pidfile
        type: str
        required: true
    exec: "sleep 30 & echo $! > {{ pidfile | quote }}; wait"
"#;

/// How long the test waits for a kill (the mechanism's target is 100 ms; this bound only
/// keeps a loaded test machine from failing the test).
const KILL_BOUND: Duration = Duration::from_secs(2);

fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("mcc-test-cancel-{name}-{}-{nanos}", std::process::id())
}

/// Writes the sleepy tool beside the standard ones.
fn tool_files(dir: &Path) {
    std::fs::create_dir_all(dir.join("tools")).unwrap();
    std::fs::write(dir.join("tools/sleepy.yaml"), SLEEPY).unwrap();
}

fn execute_body(id: u64, pidfile: &Path) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "execute",
        "arguments": {"key": "public.sleepy", "params": {"pidfile": pidfile.display().to_string()}}}})
}

/// A legacy `execute` of the sleepy tool; the response (its SSE stream) is returned open.
async fn start_legacy_call(
    http: &reqwest::Client,
    url: &str,
    sid: &str,
    id: u64,
    pidfile: &Path,
) -> reqwest::Response {
    let resp = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", sid)
        .header("mcp-protocol-version", "2025-06-18")
        .body(execute_body(id, pidfile).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    resp
}

/// The sleeper's pid, once the tool has written it.
async fn sleeper(pidfile: &Path) -> i32 {
    for _ in 0..200 {
        if let Ok(text) = std::fs::read_to_string(pidfile)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the tool never wrote {}", pidfile.display());
}

/// Gone, or a zombie nobody reaped yet (an orphan of a killed group, adopted by an init
/// that may not reap): either way, no longer running.
fn dead(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            state.starts_with('Z') || state.starts_with('X')
        }
    }
}

/// How long after `since` the process died; panics past [`KILL_BOUND`].
async fn killed_within(pid: i32, since: Instant, what: &str) -> Duration {
    while since.elapsed() < KILL_BOUND {
        if dead(pid) {
            let latency = since.elapsed();
            eprintln!("{what}: sleeper {pid} dead {latency:?} after the cancel");
            return latency;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Leave nothing behind.
    // SAFETY: kill(2) on a pid; no memory is involved.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    panic!("{what}: sleeper {pid} still running {KILL_BOUND:?} after the cancel");
}

async fn cancel(http: &reqwest::Client, url: &str, sid: &str, id: u64) -> Instant {
    let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "the user changed their mind"}});
    let sent = Instant::now();
    let (status, _, msgs) = post(http, url, Some(sid), note.to_string()).await;
    assert_eq!(status, 202, "{msgs:?}");
    sent
}

fn assert_cancelled(event: &Value) {
    assert_eq!(event["event"], "execute", "{event}");
    assert_eq!(event["tool"], "public.sleepy", "{event}");
    assert_eq!(event["outcome"], "cancelled", "{event}");
    assert_eq!(
        event["reason"], "the request was cancelled before the call finished",
        "{event}"
    );
    assert!(event.get("exit_code").is_none(), "{event}");
}

/// An in-process gateway (the in-process runtime) auditing to a fresh Redis stream.
async fn gateway(audit: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    tool_files(dir.path());
    let mut s = settings(dir.path(), "dev-admin", Some(&redis_url()));
    s.audit.stream = Some(audit.to_string());
    start_with(s, dir).await
}

fn pidfile(server_dir: &Path, name: &str) -> PathBuf {
    server_dir.join(format!("{name}.pid"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_is_killed_at_once_and_audited_cancelled() {
    let audit = unique("local");
    let server = gateway(&audit).await;
    let http = http_client();
    let sid = raw_initialize(&http, &server.url).await;
    let file = pidfile(server.dir.path(), "local");

    let _stream = start_legacy_call(&http, &server.url, &sid, 5, &file).await;
    let pid = sleeper(&file).await;
    assert!(!dead(pid));
    let sent = cancel(&http, &server.url, &sid, 5).await;
    killed_within(pid, sent, "in-process runtime").await;

    let events = audit_events(&audit, 1).await;
    assert_cancelled(&events[0]);
    // The session serves the next call as usual.
    let echo = json!({"key": "public.echo", "params": {"message": "still here"}});
    assert_eq!(
        raw_call(&http, &server.url, &sid, 6, "execute", echo).await,
        "still here"
    );
    server.stop().await;
}

/// The executor runtime (Kubernetes mode's): the gateway closes the call's connection,
/// and the executor kills the group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_in_the_executor_is_killed_at_once() {
    use mcc_executor::{Address, InProcess, server};
    let dir = tempfile::tempdir().unwrap();
    tool_files(dir.path());
    let socket = dir.path().join("executor.sock");
    let path = std::env::var("PATH").unwrap_or_default();
    let runtime = InProcess::new(vec![("PATH".into(), path)]);
    let listener = server::bind(&Address::Path(socket.clone())).expect("the executor binds");
    let executor = tokio::spawn(server::serve(listener, runtime, 16));
    let audit = unique("executor");
    let mut s = settings(dir.path(), "dev-admin", Some(&redis_url()));
    s.audit.stream = Some(audit.clone());
    s.execution.runtime = mcc_gateway::config::RuntimeKind::Executor;
    s.execution.executor_socket = socket.display().to_string();
    let server = start_with(s, dir).await;
    let http = http_client();
    let sid = raw_initialize(&http, &server.url).await;
    let file = pidfile(server.dir.path(), "executor");

    let _stream = start_legacy_call(&http, &server.url, &sid, 4, &file).await;
    let pid = sleeper(&file).await;
    let sent = cancel(&http, &server.url, &sid, 4).await;
    killed_within(pid, sent, "executor runtime").await;
    assert_cancelled(&audit_events(&audit, 1).await[0]);
    server.stop().await;
    executor.abort();
}

/// A legacy client's cancel POSTed to replica B kills the call running on replica A.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_sent_to_another_replica_kills_the_call() {
    let dir = tempfile::tempdir().unwrap();
    tool_files(dir.path());
    let audit = unique("replicas");
    let env = [
        ("REDIS_URL", redis_url()),
        ("MCC_LOG", "warn".to_string()),
        ("MCC_AUDIT__STREAM", audit.clone()),
    ];
    let a = spawn_gateway(dir.path(), &env).await;
    let b = spawn_gateway(dir.path(), &env).await;
    let http = http_client();
    let sid = raw_initialize(&http, &a.url).await;
    let file = pidfile(dir.path(), "replicas");

    let _stream = start_legacy_call(&http, &a.url, &sid, 9, &file).await;
    let pid = sleeper(&file).await;
    let sent = cancel(&http, &b.url, &sid, 9).await;
    killed_within(pid, sent, "cancel relayed from another replica").await;

    let events = audit_events(&audit, 1).await;
    assert_cancelled(&events[0]);
}

/// A 2026-07-28 call's response carries no resumable event ids: the client closing it
/// cancels the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stream_without_event_ids_cancels_the_call() {
    let audit = unique("stateless");
    let server = gateway(&audit).await;
    let file = pidfile(server.dir.path(), "stateless");
    let mut body = execute_body(1, &file);
    body["params"]["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    // Its own client: dropping it closes the connection.
    let http = http_client();
    let url = server.url.clone();
    let call = tokio::spawn(async move {
        modern_execute(&http, &url, &body)
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    let pid = sleeper(&file).await;
    assert!(!call.is_finished(), "{:?}", call.await);
    call.abort();
    let closed = Instant::now();
    killed_within(pid, closed, "closed 2026-07-28 stream").await;

    let events = audit_events(&audit, 1).await;
    assert_cancelled(&events[0]);
    server.stop().await;
}

/// A legacy call's stream has event ids (the client may reconnect with Last-Event-ID):
/// closing it leaves the call running, and the client resumes the stream to its result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_resumable_stream_leaves_the_call_running() {
    let audit = unique("resumable");
    let server = gateway(&audit).await;
    let http = http_client();
    let sid = raw_initialize(&http, &server.url).await;
    let file = pidfile(server.dir.path(), "resumable");

    let mut stream = start_legacy_call(&http, &server.url, &sid, 3, &file).await;
    let first = stream.chunk().await.unwrap().unwrap();
    let first = String::from_utf8_lossy(&first).to_string();
    let last_event_id = first
        .lines()
        .find_map(|l| l.strip_prefix("id:"))
        .unwrap_or_else(|| panic!("no event id in {first:?}"))
        .trim()
        .to_string();
    let pid = sleeper(&file).await;
    drop(stream);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(
        !dead(pid),
        "the call was cancelled with its resumable stream"
    );

    // The client reconnects while the call runs; the sleeper ends (the tool's `wait`
    // returns), the call finishes, and the resumed stream delivers its result.
    let resumed = http
        .get(&server.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-06-18")
        .header("last-event-id", &last_event_id)
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status().as_u16(), 200);
    let mut resumed = resumed;
    let mut body = String::new();
    // SAFETY: kill(2) on a pid; no memory is involved.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let reply = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let chunk = resumed
                .chunk()
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("the stream ended first: {body:?}"));
            body.push_str(&String::from_utf8_lossy(&chunk));
            if let Some(reply) = body
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|m| m["id"] == json!(3))
            {
                return reply;
            }
        }
    })
    .await
    .expect("the resumed stream delivers the result");
    assert_eq!(reply["result"]["content"][0]["text"], json!(""), "{reply}");
    let events = audit_events(&audit, 1).await;
    assert_eq!(events[0]["outcome"], "success", "{}", events[0]);
    server.stop().await;
}
