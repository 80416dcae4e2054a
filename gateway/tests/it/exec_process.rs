//! exec and curl tools as real processes: results, quoting, stdin, timeouts that kill
//! the whole process group, tools that ignore SIGTERM, flood stdout or never read stdin,
//! rlimits with their limit-hit report, cancellation, and calls refused before spawning.

use crate::common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::*;
use mcc_gateway::exec::{Engine, ExecError, Outcome, TRUNCATION_MARKER};
use serde_json::json;

fn failure(outcome: &Outcome) -> (i32, &str, &str) {
    match outcome {
        Outcome::Failure {
            code,
            stdout,
            stderr,
        } => (*code, stdout, stderr),
        success => panic!("expected a failure, got {success:?}"),
    }
}

fn success(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Success(v) => v.as_str().expect("a string").to_string(),
        failure => panic!("expected success, got {failure:?}"),
    }
}

fn with_limits(mut tool: mcc_catalog::Tool, limits: serde_json::Value) -> mcc_catalog::Tool {
    tool.limits = serde_json::from_value(limits).unwrap();
    tool
}

#[tokio::test]
async fn stdout_on_success_and_the_triple_on_failure() {
    let engine = engine();
    let out = run(&engine, &exec_tool("echo hi; echo warn >&2"), json!({})).await;
    assert_eq!(out.outcome, Outcome::Success(json!("hi\n")));
    assert!(!out.cached);
    assert_eq!(out.write_back, None);
    let out = run(
        &engine,
        &exec_tool("echo out; echo err >&2; exit 3"),
        json!({}),
    )
    .await;
    assert_eq!(failure(&out.outcome), (3, "out\n", "err\n"));
    assert_eq!(out.outcome.to_text(), r#"[3,"out\n","err\n"]"#);
}

#[tokio::test]
async fn params_are_rendered_and_quoted() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("pwned");
    let mut tool = exec_tool(
        "printf '%s|' {{ msg | quote }} {{ files | quote }}{% if loud %} LOUD{% endif %}",
    );
    tool.params = serde_json::from_value(json!([
        {"name": "msg", "type": "str"},
        {"name": "files", "type": "list"},
        {"name": "loud", "type": "bool"}
    ]))
    .unwrap();
    let evil = format!("$(touch {}); it's", marker.display());
    let out = run(
        &engine(),
        &tool,
        json!({"msg": evil, "files": ["a b", "c"], "loud": false}),
    )
    .await;
    assert_eq!(success(&out.outcome), format!("{evil}|a b|c|"));
    assert!(!marker.exists(), "the quoted param was not executed");
}

#[tokio::test]
async fn stdin_true_sends_the_params_as_json_and_false_sends_nothing() {
    let mut tool = exec_tool("cat");
    tool.params =
        serde_json::from_value(json!([{"name": "a", "type": "str"}, {"name": "n", "type": "int"}]))
            .unwrap();
    tool.stdin = true;
    let out = run(&engine(), &tool, json!({"a": "x", "n": 2})).await;
    let sent: serde_json::Value = serde_json::from_str(&success(&out.outcome)).unwrap();
    assert_eq!(sent, json!({"a": "x", "n": 2}));
    tool.stdin = false;
    let out = run(&engine(), &tool, json!({"a": "x", "n": 2})).await;
    assert_eq!(
        success(&out.outcome),
        "",
        "stdin is /dev/null, not the gateway's"
    );
}

#[tokio::test]
async fn a_tool_that_never_reads_stdin_does_not_block() {
    let mut tool = exec_tool("sleep 0.2; echo done");
    tool.params = serde_json::from_value(json!([{"name": "blob", "type": "str"}])).unwrap();
    tool.stdin = true;
    let blob = "z".repeat(4 * 1024 * 1024); // far beyond a pipe's buffer
    let started = Instant::now();
    let out = run(&engine(), &tool, json!({ "blob": blob })).await;
    assert_eq!(success(&out.outcome), "done\n");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("child.pid");
    let command = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
    let tool = with_limits(exec_tool(&command), json!({"timeout": 0.5}));
    let started = Instant::now();
    let out = run(&engine(), &tool, json!({})).await;
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(failure(&out.outcome), (-1, "", "timeout after 0.5s"));
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        gone_within(pid, Duration::from_secs(2)),
        "background child {pid} survived"
    );
}

#[tokio::test]
async fn whole_second_timeouts_print_like_python_ints() {
    let tool = with_limits(exec_tool("sleep 10"), json!({"timeout": 1}));
    let out = run(&engine(), &tool, json!({})).await;
    assert_eq!(failure(&out.outcome), (-1, "", "timeout after 1s"));
}

#[tokio::test]
async fn a_tool_ignoring_sigterm_is_still_killed_at_the_timeout() {
    let tool = with_limits(
        exec_tool("trap '' TERM; while :; do sleep 0.05; done"),
        json!({"timeout": 0.5}),
    );
    let started = Instant::now();
    let out = run(&engine(), &tool, json!({})).await;
    assert_eq!(failure(&out.outcome).0, -1);
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn background_children_do_not_outlive_or_stall_the_call() {
    // The child keeps the stdout pipe open; the call still returns promptly.
    let started = Instant::now();
    let out = run(&engine(), &exec_tool("sleep 30 & echo $!"), json!({})).await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let pid: i32 = success(&out.outcome).trim().parse().unwrap();
    assert!(
        gone_within(pid, Duration::from_secs(2)),
        "leftover child {pid} survived"
    );
}

#[tokio::test]
async fn dropping_the_call_kills_the_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("child.pid");
    let command = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
    let tool = exec_tool(&command);
    let engine = engine();
    let cancelled =
        tokio::time::timeout(Duration::from_millis(500), run(&engine, &tool, json!({}))).await;
    assert!(cancelled.is_err(), "the call was still running");
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        gone_within(pid, Duration::from_secs(2)),
        "child {pid} survived cancellation"
    );
}

#[tokio::test]
async fn a_stdout_flood_is_cut_with_the_marker() {
    let mut s = settings(parent_env(&[]));
    s.max_output_bytes = 10_000;
    let engine = Engine::new(s);
    // 50 MB through a 10 kB window: read and discarded, never buffered.
    let tool = exec_tool("head -c 50000000 /dev/zero | tr '\\0' x");
    let out = run(&engine, &tool, json!({})).await;
    let text = success(&out.outcome);
    assert!(text.len() <= 10_000, "{}", text.len());
    assert!(text.ends_with("[Response truncated due to size limit]"));
    assert!(text.starts_with("xxxx"));
    assert_eq!(text.len(), 10_000, "the cut fills the window exactly");
    assert!(
        text[..10_000 - TRUNCATION_MARKER.len()]
            .bytes()
            .all(|b| b == b'x')
    );
    // An endless flood ends at the timeout, not in memory exhaustion.
    let tool = with_limits(exec_tool("yes"), json!({"timeout": 1}));
    let out = run(&engine, &tool, json!({})).await;
    assert_eq!(failure(&out.outcome), (-1, "", "timeout after 1s"));
    // Failure output is bounded too.
    let tool = exec_tool("head -c 1000000 /dev/zero | tr '\\0' e >&2; exit 2");
    let out = run(&engine, &tool, json!({})).await;
    let (code, _, stderr) = failure(&out.outcome);
    assert_eq!(code, 2);
    assert!(stderr.len() <= 10_000 && stderr.ends_with("[Response truncated due to size limit]"));
}

#[tokio::test]
async fn cpu_limit_reports_sigxcpu() {
    let tool = with_limits(
        exec_tool("while :; do :; done"),
        json!({"cpu_sec": 1, "timeout": 10}),
    );
    let out = run(&engine(), &tool, json!({})).await;
    let (code, _, stderr) = failure(&out.outcome);
    assert_eq!(code, -24);
    assert_eq!(
        stderr,
        "resource limit hit: cpu time exceeded (SIGXCPU) [limits: {'timeout': 10, 'cpu_sec': 1}]\n"
    );
}

#[tokio::test]
async fn file_size_limit_reports_sigxfsz() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big");
    let tool = with_limits(
        exec_tool(&format!(
            "exec head -c 3000000 /dev/zero > {}",
            file.display()
        )),
        json!({"fsize_mb": 1}),
    );
    let out = run(&engine(), &tool, json!({})).await;
    let (code, _, stderr) = failure(&out.outcome);
    assert_eq!(code, -25);
    assert!(
        stderr.starts_with(
            "resource limit hit: file size exceeded (SIGXFSZ) [limits: {'fsize_mb': 1}]\n"
        ),
        "{stderr}"
    );
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 1024 * 1024);
}

#[tokio::test]
async fn memory_and_open_file_limits_are_set_in_the_child() {
    let tool = with_limits(
        exec_tool("ulimit -v; ulimit -n; ulimit -c"),
        json!({"mem_mb": 256, "nofile": 64}),
    );
    let out = run(&engine(), &tool, json!({})).await;
    assert_eq!(success(&out.outcome), "262144\n64\n0\n");
    // An allocation beyond the address-space limit fails inside the tool.
    let tool = with_limits(
        exec_tool("python3 -c 'bytearray(512 * 1024 * 1024)'"),
        json!({"mem_mb": 256}),
    );
    let out = run(&engine(), &tool, json!({})).await;
    let (code, _, stderr) = failure(&out.outcome);
    assert_eq!(code, 1);
    assert!(stderr.contains("MemoryError"), "{stderr}");
}

#[tokio::test]
async fn a_signal_is_reported_with_limits_and_bare_without() {
    let out = run(&engine(), &exec_tool("kill -TERM $$"), json!({})).await;
    assert_eq!(failure(&out.outcome), (-15, "", ""));
    let tool = with_limits(exec_tool("kill -TERM $$"), json!({"timeout": 5}));
    let out = run(&engine(), &tool, json!({})).await;
    assert_eq!(
        failure(&out.outcome),
        (
            -15,
            "",
            "resource limit hit: signal 15 [limits: {'timeout': 5}]\n"
        )
    );
}

#[tokio::test]
async fn a_limit_the_gateway_cannot_grant_is_refused() {
    let tool = with_limits(exec_tool("true"), json!({"nofile": 1u64 << 40}));
    let err = call(&engine(), &tool, json!({}), alice())
        .await
        .unwrap_err();
    assert!(matches!(err, ExecError::Limits { .. }));
    assert!(
        err.to_string()
            .starts_with("tool 't': limits.nofile = 1099511627776 exceeds"),
        "{err}"
    );
}

#[tokio::test]
async fn bad_params_and_templates_start_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let mut tool = exec_tool(&format!("touch {} {{{{ n }}}}", marker.display()));
    tool.params =
        serde_json::from_value(json!([{"name": "n", "type": "int", "required": true}])).unwrap();
    let engine = engine();
    let cases = [
        (
            json!({"n": "five"}),
            "tool 't': parameter 'n' expected int, got \"five\"",
        ),
        (json!({}), "tool 't': parameter 'n' is required but missing"),
        (
            json!({"n": 1, "x": 2}),
            "tool 't': parameter 'x' is not a parameter of this tool",
        ),
    ];
    for (params, expected) in cases {
        let err = call(&engine, &tool, params, alice()).await.unwrap_err();
        assert_eq!(err.to_string(), expected);
    }
    let undefined = exec_tool(&format!("touch {} {{{{ nothere }}}}", marker.display()));
    let err = call(&engine, &undefined, json!({}), alice())
        .await
        .unwrap_err();
    assert!(matches!(err, ExecError::Template { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("tool 't': cannot render its command: undefined value"),
        "{err}"
    );
    assert!(!marker.exists(), "no process was started");
}

/// A one-shot HTTP server on a free port; returns its URL and the request it received.
fn http_server(body: &'static str) -> (String, std::thread::JoinHandle<String>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/data", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4096];
        let n = conn.read(&mut buf).unwrap();
        let reply = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(reply.as_bytes()).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    });
    (url, handle)
}

#[tokio::test]
async fn curl_tools_run_the_command_they_stand_for() {
    let (url, server) = http_server("{\"ok\":true}");
    let target = format!("{url}?q={{{{ q }}}}");
    let tool = tool(json!({
        "kind": "curl",
        "target": target,
        "command": mcc_catalog::spec::curl_command(&target, false),
        "params": [{"name": "q", "type": "str", "required": true}],
    }));
    let out = run(&engine(), &tool, json!({"q": "rust"})).await;
    assert_eq!(success(&out.outcome), "{\"ok\":true}");
    let request = server.join().unwrap();
    assert!(
        request.starts_with("GET /data?q=rust HTTP/1.1"),
        "{request}"
    );
}
