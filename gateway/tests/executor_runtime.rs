//! The gateway with `execution.runtime: executor` (Kubernetes mode's runtime, selectable in
//! file mode): tools run in an executor behind a real Unix socket, with the executor's
//! environment — never the gateway's — as their floor and passthrough; an unreachable
//! executor fails calls at once with a clear message and takes the replica out of
//! readiness, and nothing else stops.

#[path = "it/mcp_support/mod.rs"]
mod mcp_support;

use std::path::Path;

use mcc_executor::{Address, InProcess, server};
use mcc_gateway::config::RuntimeKind;
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
    // SAFETY: set before the gateway starts; this test binary has no other test.
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
