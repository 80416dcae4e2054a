//! The floor between a bare spawn and the gateway, for `benches/execute_floor.py`: plain
//! axum on one port, `POST /mcp` runs `sh -c 'echo hello'` through the executor's own
//! [`mcc_executor::process::run`] (process group, pipes, pidfd, timeout) and answers its
//! output. No MCP, no auth, no catalog, no engine: what is left of the gateway's execute
//! p50 above this is theirs.
//!
//!     cargo build --release -p mcc-gateway --example http_spawn_floor
//!     $CARGO_TARGET_DIR/release/examples/http_spawn_floor 127.0.0.1:8123

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use axum::serve::ListenerExt;
use mcc_executor::process::{self, Spec};

async fn echo() -> Result<Vec<u8>, String> {
    let env = BTreeMap::from([("PATH".to_string(), "/usr/bin:/bin".to_string())]);
    let spec = Spec {
        program: Path::new("/bin/sh"),
        args: &["-c", "echo hello"],
        env: &env,
        cwd: None,
        stdin: None,
        rlimits: Default::default(),
        timeout: Some(Duration::from_secs(30)),
        max_output: 1 << 20,
    };
    let finished = process::run(&spec).await.map_err(|e| e.to_string())?;
    Ok(finished.stdout.bytes)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8123".into());
    // As the gateway does: no write of ours waits on a delayed ACK.
    let listener = tokio::net::TcpListener::bind(&address)
        .await?
        .tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        });
    axum::serve(listener, Router::new().route("/mcp", post(echo))).await?;
    Ok(())
}
