//! stdio upstreams (`command:` instead of `url:`, file mode): the server's process is
//! started by the gateway's tool runtime, never by the gateway itself — the executor
//! behind its socket (`execution.runtime: executor`; the connection becomes the process's
//! stdin and stdout, `mcc_executor::session`), or, in the embedded default
//! (`in-process`), a process group of the gateway's own, exactly as exec tools run there.
//! The environment is the exec tools' rule ([`StdioCommand::env_spec`]): the env floor
//! and `env_passthrough` from the runtime's environment, the entry's `env` over them.
//!
//! rmcp's client speaks MCP over that byte stream; the session is the same
//! [`Session`] as an HTTP upstream's, so discovery, calls, `list_changed`, bounds and the
//! reconnection rule are [`super`]'s, unchanged.

use std::sync::Arc;
use std::time::Duration;

use mcc_catalog::upstream::UpstreamSpec;
use mcc_catalog::upstream::stdio::StdioCommand;
use mcc_executor::{Runtime, SessionRequest};
use rmcp::model::ProtocolVersion;
use rmcp::service::ClientCacheConfig;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use tokio::sync::Notify;

use super::connect::{self, ConnectError, Handler, Session};

/// A session with no byte either way for this long ends (the next call starts the
/// server again). Longer than any `refresh`'s usual value, so a served upstream idles
/// out only when nothing at all uses it.
pub const IDLE: Duration = Duration::from_secs(3600);
/// A server process runs at most this long; the next call starts a fresh one.
pub const LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// How long starting the process and the MCP handshake may take: an interpreter's
/// imports on a busy node, or a launcher such as `uvx` fetching the server, take far
/// longer than an HTTP connection (whose bound is `connect::CONNECT_TIMEOUT`).
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Where stdio servers run: the gateway's tool runtime, and its env floor.
#[derive(Clone)]
pub struct Launcher {
    pub runtime: Arc<dyn Runtime>,
    pub env_floor: Vec<String>,
}

impl std::fmt::Debug for Launcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launcher")
            .field("runtime", &self.runtime.kind())
            .finish_non_exhaustive()
    }
}

impl Launcher {
    /// What the runtime is asked to start for `command`.
    pub fn request(&self, command: &StdioCommand) -> SessionRequest {
        SessionRequest {
            program: command.program.clone(),
            args: command.args.clone(),
            env: command.env_spec(&self.env_floor),
            rlimits: Default::default(),
            idle: IDLE,
            lifetime: LIFETIME,
            max_message: connect::MAX_RESPONSE_BYTES,
        }
    }
}

/// Starts `spec`'s server (its `command`) through `launcher` and opens an MCP client
/// session over its stdio, within [`START_TIMEOUT`].
pub async fn connect(
    spec: &UpstreamSpec,
    command: &StdioCommand,
    launcher: Option<&Launcher>,
    list_changed: Arc<Notify>,
) -> Result<Session, ConnectError> {
    let Some(launcher) = launcher else {
        return Err(ConnectError::Connect(format!(
            "upstream '{}' is a stdio server, and this gateway has no runtime to start it",
            spec.name
        )));
    };
    let request = launcher.request(command);
    let start = async {
        let stream = launcher
            .runtime
            .open_session(&request)
            .await
            .map_err(|e| ConnectError::Connect(format!("cannot start the server: {e}")))?;
        let (read, write) = tokio::io::split(stream);
        // Lines over the bound are dropped by rmcp; the executor's pump has already
        // ended such a session (same bound), so this is the second line of defence.
        let transport = AsyncRwTransport::new_client(read, write)
            .with_max_line_length(connect::MAX_RESPONSE_BYTES);
        let lifecycle = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: None,
        };
        Handler::new(list_changed)
            .serve_with_lifecycle(transport, lifecycle)
            .await
            .map_err(|e| ConnectError::Connect(e.to_string()))
    };
    let session = tokio::time::timeout(START_TIMEOUT, start)
        .await
        .map_err(|_| ConnectError::Timeout(START_TIMEOUT))??;
    // As for HTTP upstreams: discovery must see the server as it is.
    session
        .set_response_cache_config(ClientCacheConfig::disabled())
        .await;
    Ok(session)
}

/// The shortest and longest gap between two starts of one server's process.
const MIN_GAP: Duration = Duration::from_secs(1);
const MAX_GAP: Duration = Duration::from_secs(60);
/// A process that ran this long was not crash-looping: the gap starts over.
const STABLE: Duration = Duration::from_secs(60);

/// Restart backoff of one stdio server: a process that keeps dying is started again
/// after 1 s, then 2 s, … up to 60 s; one that lived a minute resets it. A call in the
/// gap fails at once as unavailable instead of starting a process.
#[derive(Debug, Default)]
pub struct Restarts {
    state: std::sync::Mutex<(Option<std::time::Instant>, Duration)>,
}

impl Restarts {
    /// `Ok` and the start recorded, or how long until a start is allowed.
    pub fn admit(&self) -> Result<(), Duration> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (last, gap) = &mut *st;
        let now = std::time::Instant::now();
        if let Some(at) = *last {
            let since = now - at;
            let current = (*gap).max(MIN_GAP);
            if since < current {
                return Err(current - since);
            }
            *gap = match since < STABLE {
                true => (current * 2).min(MAX_GAP),
                false => MIN_GAP,
            };
        }
        *last = Some(now);
        Ok(())
    }
}
