//! The gateway's own process environment never reaches a tool, checked by setting
//! variables in this test process (`std::env::set_var`): hence a test binary of its own,
//! apart from the harness in `tests/it/`, whose other tests would read the environment
//! meanwhile. Each test sets names no other test reads.
//!
//! - The gateway with `execution.runtime: executor` (Kubernetes mode's runtime, selectable
//!   in file mode): tools run in an executor behind a real Unix socket, with the
//!   executor's environment — never the gateway's — as their floor and passthrough; an
//!   unreachable executor fails calls at once with a clear message and takes the replica
//!   out of readiness, and nothing else stops.
//! - The local runtime: neither a tool (`exec_env`'s floor) nor its transform
//!   (`exec_cache`'s) inherits a variable of the gateway's by accident.

#[path = "it/common/mod.rs"]
mod common;
#[path = "it/mcp_support/mod.rs"]
mod mcp_support;

use std::path::Path;

use mcc_executor::{Address, InProcess, server};
use mcc_gateway::config::RuntimeKind;
use mcc_gateway::exec::Engine;
use mcp_support::*;
use serde_json::{Value, json};

const ENV_TOOL: &str = r#"
tools:
  - name: env
    groups: [public]
    description: Print the environment.
    env_passthrough: true
    exec: env
"#;

fn executor(socket: &Path) -> tokio::task::JoinHandle<()> {
    let runtime = InProcess::new(vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".into(), "/home/executor".into()),
        ("EXECUTOR_ONLY".into(), "e".into()),
    ]);
    let listener = server::bind(&Address::Path(socket.to_path_buf())).expect("the executor binds");
    tokio::spawn(server::serve(listener, runtime, 16))
}

async fn ready(base: &str) -> (u16, Value) {
    let r = mcp_support::http_client()
        .get(format!("{base}/readyz"))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_run_in_the_executor_with_its_environment() {
    // SAFETY: set before the gateway starts; no other test reads these names.
    unsafe {
        std::env::set_var("GATEWAY_ONLY_SECRET", "do-not-leak");
        std::env::set_var("MCC_AUTH__JWT__HS256_SECRET", "gw-secret");
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/executor.sock");
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    let serving = executor(&socket);

    let mut s = settings(dir.path(), "dev-admin", None);
    std::fs::write(dir.path().join("tools/env.yaml"), ENV_TOOL).unwrap();
    s.execution.runtime = RuntimeKind::Executor;
    s.execution.executor_socket = socket.display().to_string();
    let server = start_with(s, dir).await;
    let client = legacy(&server.url, TestClient::plain()).await;

    let echo = json!({"key": "public.echo", "params": {"message": "through the socket"}});
    assert_eq!(
        call_text(&client, "execute", echo.clone()).await,
        "through the socket"
    );
    let env = call_text(&client, "execute", json!({"key": "public.env"})).await;
    assert!(env.contains("HOME=/home/executor"), "{env}");
    assert!(env.contains("EXECUTOR_ONLY=e"), "{env}");
    assert!(env.contains("MCC_CTX_USER=alice"), "{env}");
    for leaked in ["GATEWAY_ONLY_SECRET", "gw-secret", "MCC_AUTH"] {
        assert!(!env.contains(leaked), "{leaked} reached the tool: {env}");
    }
    let (status, detail) = ready(&server.base).await;
    assert_eq!(
        (status, &detail["runtime"]["ok"]),
        (200, &json!(true)),
        "{detail}"
    );

    // The executor goes away: calls fail at once, naming it; readiness says why.
    serving.abort();
    let _ = serving.await;
    std::fs::remove_file(&socket).unwrap();
    let started = std::time::Instant::now();
    let r = call(&client, "execute", echo.clone()).await;
    let message = text(&r);
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    assert!(
        message.contains("executor at") && message.contains("unreachable"),
        "{message}"
    );
    let (status, detail) = ready(&server.base).await;
    assert_eq!(status, 503, "{detail}");
    assert!(
        detail["runtime"]["error"]
            .as_str()
            .unwrap()
            .contains("executor"),
        "{detail}"
    );
    // Nothing else stopped.
    assert_eq!(
        call_text(&client, "get_session", json!({"name": "user"})).await,
        "\"alice\""
    );

    // Back: the next call works without restarting the gateway.
    let _serving = executor(&socket);
    assert_eq!(
        call_text(&client, "execute", echo).await,
        "through the socket"
    );
    assert_eq!(ready(&server.base).await.0, 200);
    server.stop().await;
}

/// An exec tool's stdout from a successful outcome.
fn exec_stdout(outcome: &mcc_gateway::exec::Outcome) -> String {
    match outcome {
        mcc_gateway::exec::Outcome::Success(v) => {
            v.as_str().expect("exec stdout is a string").to_string()
        }
        failure => panic!("expected success, got {failure:?}"),
    }
}

#[tokio::test]
async fn the_gateway_environment_is_never_inherited_by_accident() {
    // SAFETY: no other test reads this name.
    unsafe { std::env::set_var("MCC_TEST_GATEWAY_SECRET", "top-secret") };
    let engine = Engine::new(common::settings(std::env::vars().collect()));
    let out = common::run(&engine, &common::exec_tool("env"), json!({})).await;
    let text = exec_stdout(&out.outcome);
    assert!(!text.contains("MCC_TEST_GATEWAY_SECRET"), "{text}");
    assert!(!text.contains("top-secret"));
    assert!(text.contains("PATH="), "the floor still arrives");
}

#[tokio::test]
async fn transform_runs_with_the_tools_env_cwd_and_limits() {
    // SAFETY: set once, before the engine reads its parent environment; only this test
    // uses the name.
    unsafe { std::env::set_var("MCC_TEST_TRANSFORM_SECRET", "leaked") };
    let engine = Engine::new(common::settings(std::env::vars().collect()));
    let dir = tempfile::tempdir().unwrap();
    let mut tool = common::exec_tool("echo in");
    tool.env.insert("TOOL_VAR".into(), "tool-value".into());
    tool.cwd = Some(dir.path().to_path_buf());
    tool.transform = Some(
        "cat >/dev/null; echo \"$TOOL_VAR|${MCC_TEST_TRANSFORM_SECRET:-unset}|$MCC_CTX_USER|$(pwd)\""
            .into(),
    );
    let out = common::run(&engine, &tool, json!({})).await;
    let cwd = dir.path().canonicalize().unwrap();
    assert_eq!(
        out.outcome.to_text(),
        format!("tool-value|unset|alice|{}\n", cwd.display())
    );
    tool.transform = Some("ulimit -n".into());
    tool.limits = serde_json::from_value(json!({"nofile": 77})).unwrap();
    assert_eq!(
        common::run(&engine, &tool, json!({}))
            .await
            .outcome
            .to_text(),
        "77\n"
    );
    tool.transform = Some("sleep 10".into());
    tool.limits = serde_json::from_value(json!({"timeout": 0.5})).unwrap();
    assert_eq!(
        common::run(&engine, &tool, json!({})).await.outcome,
        mcc_gateway::exec::Outcome::Failure {
            code: -1,
            stdout: String::new(),
            stderr: "timeout after 0.5s".into()
        }
    );
}
