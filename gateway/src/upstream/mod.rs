//! Upstream MCP servers in file mode: each declared upstream (`mcp_servers:`, parsed by
//! [`mcc_catalog::upstream`]) is discovered by its own task, and its tools are served
//! beside the files' tools. Owns the upstreams' state and their calls; the conversion
//! rule is the catalog crate's, the catalog swap is [`crate::catalog::live`]'s.
//!
//! - [`connect`]: an rmcp client session to an upstream, the bounded `tools/list` (the
//!   catalog crate's `upstream::client`, shared with the operator's discovery);
//! - [`sessions`]: an upstream's shared session and its connection threads' own;
//! - [`call`]: one `tools/call`, posted directly or through rmcp, and why it failed;
//! - [`stdio`]: a `command:` upstream's process, started by the tool runtime (the
//!   executor, or the gateway's own process group in the embedded default), its stdio
//!   the session's transport;
//! - [`reply`]: a `tools/call` result, verbatim;
//! - [`context`]: what of the caller's session a call carries (`session_context:`);
//! - [`relay`]: the upstream's progress and questions during a call, to its caller;
//! - [`held`], [`held_remote`]: a 2026-07-28 caller's call held open while its caller
//!   answers the upstream's question in a retry, on this replica or another;
//! - [`merge`]: file tools plus upstream tools into one tool set (keys checked).
//!
//! Guarantees: discovery runs on the upstream's own schedule (`refresh`), again at once on
//! `notifications/tools/list_changed`, and retries a failed upstream with backoff; an
//! upstream that fails keeps its last good tools, marked unavailable (a call fails fast
//! with a clear error, no wait for a timeout), and never delays another upstream or the
//! files. A call takes a slot of the upstream's `max_concurrency`, and is bounded by the
//! tool's timeout; dropping it (a cancelled `execute`) cancels the upstream request
//! (`notifications/cancelled`).

pub use mcc_catalog::upstream::client as connect;
mod call;
pub mod context;
mod error;
pub mod held;
pub mod held_remote;
pub mod merge;
#[cfg(feature = "kubernetes")]
pub mod published;
pub mod relay;
pub mod reply;
mod sessions;
pub mod stdio;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use mcc_catalog::Tool;
use mcc_catalog::upstream::{self, UpstreamSpec};
use rmcp::model::{CallToolRequestParams, ServerResult};
use serde_json::{Map, Value};
use tokio::sync::{Notify, Semaphore, watch};
use tokio_util::sync::CancellationToken;

use call::CallFailed;
use connect::{ConnectError, Session};
pub use error::UpstreamError;
pub use reply::UpstreamReply;

/// How long one discovery (connect and every page) may take.
pub const DISCOVERY_TIMEOUT: Duration = connect::DISCOVERY_TIMEOUT;
/// The first retry of a failed upstream; doubled up to its `refresh`.
const RETRY_MIN: Duration = Duration::from_secs(1);

/// What `/readyz` shows of an upstream (no URL: it may carry a token).
#[derive(Debug, Clone, Default, serde::Serialize, PartialEq)]
pub struct UpstreamStatus {
    pub name: String,
    pub available: bool,
    pub tools: usize,
    pub refused_tools: usize,
    pub filtered_tools: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// Every upstream of the gateway. Cheap to clone.
#[derive(Clone)]
pub struct Upstreams {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.servers().iter().map(|s| s.spec.name.clone()).collect();
        f.debug_struct("Upstreams")
            .field("servers", &names)
            .finish()
    }
}

struct Inner {
    servers: RwLock<BTreeMap<String, Arc<Server>>>,
    /// Bumped whenever some upstream's tool set changed (the catalog re-merges).
    changed: watch::Sender<u64>,
    handle: tokio::runtime::Handle,
    stop: CancellationToken,
    /// The timeout of a call whose upstream declares none.
    default_timeout: Option<Duration>,
    /// Kubernetes mode: reads published upstreams' header Secrets.
    #[cfg(feature = "kubernetes")]
    header_resolver: std::sync::OnceLock<Arc<dyn crate::exec::environment::EnvResolver>>,
    /// Starts stdio upstreams (file mode: the tool runtime).
    launcher: Arc<std::sync::OnceLock<stdio::Launcher>>,
    /// 2026-07-28 callers' calls held open for their answers.
    held: held::Held,
    /// Answers to held questions from and to other replicas, when there is Redis.
    held_remote: std::sync::OnceLock<Arc<held_remote::Remote>>,
}

struct Server {
    spec: UpstreamSpec,
    state: Mutex<State>,
    sessions: sessions::Sessions,
    permits: Semaphore,
    /// Discovery now: list_changed, or a call found the connection gone.
    wake: Arc<Notify>,
    /// `true` once the first discovery ended (either way).
    attempted: watch::Sender<bool>,
    stop: CancellationToken,
    /// Kubernetes mode: the operator discovers; this server only calls, with header
    /// values read from their Secrets when it connects ([`published`]).
    #[cfg(feature = "kubernetes")]
    published: Option<published::Headers>,
    /// stdio upstreams: what starts the process, and its restart backoff.
    launcher: Arc<std::sync::OnceLock<stdio::Launcher>>,
    restarts: stdio::Restarts,
}

#[derive(Default)]
struct State {
    tools: Vec<Tool>,
    refused: usize,
    filtered: usize,
    available: bool,
    last_error: Option<String>,
}

impl Upstreams {
    /// An empty set; upstreams come with [`Upstreams::set_specs`]. Must be called on the
    /// runtime the discovery tasks will run on.
    pub fn new(stop: CancellationToken, default_timeout: Option<Duration>) -> Self {
        Self {
            inner: Arc::new(Inner {
                servers: RwLock::new(BTreeMap::new()),
                changed: watch::channel(0).0,
                handle: tokio::runtime::Handle::current(),
                stop,
                default_timeout,
                #[cfg(feature = "kubernetes")]
                header_resolver: std::sync::OnceLock::new(),
                launcher: Arc::default(),
                held: held::Held::default(),
                held_remote: Default::default(),
            }),
        }
    }

    /// Lets answers to held questions cross replicas through `redis` (keys under
    /// `prefix`), until the gateway stops ([`held_remote`]). Without it, a question is
    /// answerable on this replica only.
    pub fn enable_replicas(&self, redis: crate::redis_conn::Redis, prefix: &str) {
        let remote = held_remote::enable(&self.inner.held, redis, prefix, self.inner.stop.clone());
        let _ = self.inner.held_remote.set(remote);
    }

    /// The calls held open for their callers' answers.
    pub fn held(&self) -> &held::Held {
        &self.inner.held
    }

    /// Where stdio upstreams (`command:`) run: the gateway's tool runtime and env floor.
    /// Set once, before the first upstream is installed; without it a stdio upstream is
    /// unavailable ("no runtime to start it").
    pub fn set_launcher(&self, runtime: Arc<dyn mcc_executor::Runtime>, env_floor: &[String]) {
        let _ = self.inner.launcher.set(stdio::Launcher {
            runtime,
            env_floor: env_floor.to_vec(),
        });
    }

    /// Installs the declared upstreams: an unchanged declaration keeps its state and
    /// session, a new or changed one starts discovering, a removed one stops. Callable
    /// from any thread.
    pub fn set_specs(&self, specs: Vec<UpstreamSpec>) {
        let mut servers = self.inner.servers.write().expect("upstreams lock");
        let mut next = BTreeMap::new();
        for spec in specs {
            match servers.remove(&spec.name) {
                Some(old) if old.spec == spec => {
                    next.insert(spec.name.clone(), old);
                }
                old => {
                    if let Some(old) = old {
                        old.stop.cancel();
                    }
                    let server = Arc::new(Server {
                        permits: Semaphore::new(spec.max_concurrency),
                        state: Mutex::new(State::default()),
                        sessions: Default::default(),
                        wake: Arc::new(Notify::new()),
                        attempted: watch::channel(false).0,
                        stop: self.inner.stop.child_token(),
                        spec,
                        #[cfg(feature = "kubernetes")]
                        published: None,
                        launcher: self.inner.launcher.clone(),
                        restarts: stdio::Restarts::default(),
                    });
                    self.inner
                        .handle
                        .spawn(discover_loop(server.clone(), self.inner.clone()));
                    next.insert(server.spec.name.clone(), server);
                }
            }
        }
        for removed in servers.values() {
            removed.stop.cancel();
        }
        let removed = !servers.is_empty();
        *servers = next;
        drop(servers);
        if removed {
            self.inner.changed.send_modify(|g| *g += 1);
        }
    }

    /// Waits (at most `limit`) until every upstream's first discovery has ended.
    pub async fn first_discovery(&self, limit: Duration) {
        let waits: Vec<watch::Receiver<bool>> = self
            .servers()
            .iter()
            .map(|s| s.attempted.subscribe())
            .collect();
        let all = async {
            for mut w in waits {
                let _ = w.wait_for(|done| *done).await;
            }
        };
        let _ = tokio::time::timeout(limit, all).await;
    }

    /// Changes to some upstream's tools (the value is a generation).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.changed.subscribe()
    }

    /// Every upstream's last good tools, in upstream name order.
    pub fn tools(&self) -> Vec<Tool> {
        self.servers()
            .iter()
            .flat_map(|s| s.state.lock().expect("upstream state").tools.clone())
            .collect()
    }

    pub fn status(&self) -> Vec<UpstreamStatus> {
        self.servers()
            .iter()
            .map(|s| {
                let st = s.state.lock().expect("upstream state");
                UpstreamStatus {
                    name: s.spec.name.clone(),
                    available: st.available,
                    tools: st.tools.len(),
                    refused_tools: st.refused,
                    filtered_tools: st.filtered,
                    last_error: st.last_error.clone(),
                }
            })
            .collect()
    }

    fn servers(&self) -> Vec<Arc<Server>> {
        self.inner
            .servers
            .read()
            .expect("upstreams lock")
            .values()
            .cloned()
            .collect()
    }

    /// Proxies `tools/call` of `tool` on upstream `server` with `arguments` (already
    /// checked against the tool's input schema). `timeout`: the call's bound (the tool's,
    /// else the gateway's default). Dropping the future cancels the upstream request.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
        timeout: Option<Duration>,
    ) -> Result<UpstreamReply, UpstreamError> {
        self.call_with_context(server, tool, arguments, None, timeout)
            .await
    }

    /// [`Self::call`] for a caller whose tool context (identity and visible session
    /// variables) is `context`: the call carries what the upstream's `session_context`
    /// declares of it ([`context`]).
    pub async fn call_with_context(
        &self,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
        context: Option<&Map<String, Value>>,
        timeout: Option<Duration>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let Some(up) = self
            .inner
            .servers
            .read()
            .expect("upstreams lock")
            .get(server)
            .cloned()
        else {
            return Err(UpstreamError::Unknown {
                server: server.into(),
            });
        };
        let timeout = timeout.or(self.inner.default_timeout);
        let meta = context.and_then(|c| context::meta(&up.spec.session_context, c));
        if relay::holdable() {
            // A 2026-07-28 caller answers questions in a retry: the call outlives this
            // request when the upstream asks ([`held`]).
            let (name, tool) = (server.to_string(), tool.to_string());
            let work = async move {
                let work = up.call(&tool, arguments, meta);
                bounded(work, timeout, &name).await
            };
            return self.inner.held.start(server, work).await;
        }
        bounded(up.call(tool, arguments, meta), timeout, server).await
    }

    /// Answers the question a held call of upstream `server` asked (`at`, from the
    /// caller's ticket) with `answer`, and returns what follows: the call's result, or
    /// its next question ([`UpstreamError::Asked`]). Never starts a call.
    pub async fn resume(
        &self,
        server: &str,
        at: &held::HeldRef,
        answer: rmcp::model::ElicitResult,
        timeout: Option<Duration>,
    ) -> Result<UpstreamReply, UpstreamError> {
        let held = &self.inner.held;
        if at.replica == held.replica() {
            return held.resume(server, &at.call, answer).await;
        }
        let timeout = timeout.or(self.inner.default_timeout);
        let remote = self.inner.held_remote.get();
        held_remote::resume(held, remote, server, at, answer, timeout).await
    }
}

/// `work` within `timeout` (a timeout names `server`).
async fn bounded(
    work: impl std::future::Future<Output = Result<UpstreamReply, UpstreamError>>,
    timeout: Option<Duration>,
    server: &str,
) -> Result<UpstreamReply, UpstreamError> {
    match timeout {
        Some(t) => tokio::time::timeout(t, work)
            .await
            .unwrap_or(Err(UpstreamError::Timeout {
                server: server.into(),
                seconds: t.as_secs_f64(),
            })),
        None => work.await,
    }
}

impl Server {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn unavailable(&self) -> Option<String> {
        let st = self.state.lock().expect("upstream state");
        (!st.available).then(|| {
            st.last_error
                .clone()
                .unwrap_or_else(|| "not discovered yet".into())
        })
    }

    async fn call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        meta: Option<Map<String, Value>>,
    ) -> Result<UpstreamReply, UpstreamError> {
        if let Some(reason) = self.unavailable() {
            return Err(UpstreamError::Unavailable {
                server: self.name().into(),
                reason,
            });
        }
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| UpstreamError::Unavailable {
                server: self.name().into(),
                reason: "it is being removed".into(),
            })?;
        // A stdio server's session is a process: calls share it.
        let per_thread = self.spec.command.is_none();
        let session = self
            .sessions
            .for_call(per_thread, async || self.connect().await)
            .await
            .map_err(|e| self.lost(&e))?;
        let mut params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        params.meta = meta.map(rmcp::model::RequestMetaObject::from);
        match call::send(&session, params).await {
            Ok(ServerResult::CallToolResult(result)) => Ok(UpstreamReply::from_result(result)),
            Ok(ServerResult::EmptyResult(_)) => Ok(UpstreamReply::from_result(
                rmcp::model::CallToolResult::success(vec![]),
            )),
            Ok(ServerResult::InputRequiredResult(_)) => Err(UpstreamError::InputRequired {
                server: self.name().into(),
            }),
            Ok(_) => Err(UpstreamError::Refused {
                server: self.name().into(),
                message: "it answered tools/call with another kind of result".into(),
            }),
            Err(CallFailed::Refused(e)) => Err(UpstreamError::Refused {
                server: self.name().into(),
                message: e.message.chars().take(1024).collect(),
            }),
            Err(CallFailed::Abandoned) => Err(UpstreamError::QuestionClosed {
                server: self.name().into(),
            }),
            Err(CallFailed::Lost(e)) => {
                // The session is gone (or broken): drop it, mark the upstream down, and
                // let discovery reconnect.
                self.sessions.forget(&session).await;
                Err(self.lost(&ConnectError::Connect(e.to_string())))
            }
        }
    }

    /// Records a lost connection (logged in full, shown as its kind) and wakes discovery.
    fn lost(&self, e: &ConnectError) -> UpstreamError {
        tracing::warn!(upstream = self.name(), error = %e, "upstream call failed; marking it unavailable");
        let reason = e.public();
        #[cfg(feature = "kubernetes")]
        if self.published.is_some() {
            // The operator owns availability here: the next call connects again.
            return UpstreamError::Unavailable {
                server: self.name().into(),
                reason,
            };
        }
        {
            let mut st = self.state.lock().expect("upstream state");
            st.available = false;
            st.last_error = Some(reason.clone());
        }
        self.wake.notify_one();
        UpstreamError::Unavailable {
            server: self.name().into(),
            reason,
        }
    }

    /// The shared session, connected on first use (and after a loss).
    async fn session(&self) -> Result<Arc<Session>, ConnectError> {
        self.sessions.shared(async || self.connect().await).await
    }

    /// A new session to the upstream.
    async fn connect(&self) -> Result<Session, ConnectError> {
        #[cfg(feature = "kubernetes")]
        if let Some(headers) = &self.published {
            let spec = headers.spec_with_values(&self.spec).await?;
            return connect::connect(&spec, self.wake.clone()).await;
        }
        match &self.spec.command {
            Some(command) => {
                // A server process that keeps dying is not started again at once.
                self.restarts.admit().map_err(|wait| {
                    ConnectError::Connect(format!(
                        "the server's process ended; it is started again in {} s at the earliest",
                        wait.as_secs().max(1)
                    ))
                })?;
                let launcher = self.launcher.get();
                stdio::connect(&self.spec, command, launcher, self.wake.clone()).await
            }
            None => connect::connect(&self.spec, self.wake.clone()).await,
        }
    }

    /// One discovery: connect if needed, list, convert. Returns whether the tool set
    /// changed.
    async fn discover(&self) -> Result<bool, ConnectError> {
        // A stdio server's start has a bound of its own, on top of the listing's.
        let limit = match self.spec.command {
            Some(_) => stdio::START_TIMEOUT + DISCOVERY_TIMEOUT,
            None => DISCOVERY_TIMEOUT,
        };
        let listed = tokio::time::timeout(limit, async {
            let session = self.session().await?;
            connect::list_tools(&session).await
        })
        .await
        .map_err(|_| ConnectError::Timeout(limit))?;
        let listed = match listed {
            Ok(l) => l,
            Err(e) => {
                self.sessions.forget_shared().await;
                return Err(e);
            }
        };
        let converted = upstream::convert(&self.spec, &listed);
        for refused in &converted.refused {
            tracing::warn!(
                upstream = self.name(),
                tool = %refused.name,
                reason = %refused.reason,
                "upstream tool not served"
            );
        }
        let mut st = self.state.lock().expect("upstream state");
        let changed = st.tools != converted.tools || !st.available;
        st.tools = converted.tools;
        st.refused = converted.refused.len();
        st.filtered = converted.filtered;
        st.available = true;
        st.last_error = None;
        tracing::info!(
            upstream = self.name(),
            tools = st.tools.len(),
            refused = st.refused,
            filtered = st.filtered,
            "upstream discovered"
        );
        Ok(changed)
    }
}

/// One upstream's discovery task: now, then every `refresh`, at once on a wake, with
/// backoff while it fails; ends when the upstream is removed or the gateway stops.
async fn discover_loop(server: Arc<Server>, inner: Arc<Inner>) {
    let refresh = Duration::from_secs(server.spec.refresh);
    let mut retry = RETRY_MIN;
    loop {
        let wait = match server.discover().await {
            Ok(changed) => {
                retry = RETRY_MIN;
                if changed {
                    inner.changed.send_modify(|g| *g += 1);
                }
                refresh
            }
            Err(e) => {
                tracing::warn!(upstream = server.name(), error = %e, "upstream discovery failed; keeping its last good tools");
                let was_available = {
                    let mut st = server.state.lock().expect("upstream state");
                    let was = st.available;
                    st.available = false;
                    st.last_error = Some(e.public());
                    was
                };
                if was_available {
                    inner.changed.send_modify(|g| *g += 1);
                }
                let wait = retry;
                retry = (retry * 2).min(refresh);
                wait
            }
        };
        server.attempted.send_replace(true);
        tokio::select! {
            () = server.stop.cancelled() => break,
            () = tokio::time::sleep(wait) => {}
            () = server.wake.notified() => {}
        }
    }
    server.sessions.close().await;
}
