//! The gateway's one Redis connection definition. Every Redis user of the gateway gets its
//! connection here: sessions and handles ([`crate::session`]), the legacy MCP session
//! registry, session owners and the SSE event store ([`crate::mcp`]), the elicitation
//! relay's pub/sub channel, the held upstream questions' channels
//! ([`crate::upstream::held_remote`]), rate-limit windows ([`crate::ratelimit`]), the result cache
//! ([`crate::exec`]), the audit stream ([`crate::audit`]) and the search embedding cache
//! (`mcc_search`, through [`mcc_search::RedisConnector`]). So how Redis is reached — one server, a master through Sentinel
//! or a Redis Cluster ([`target`]), TLS and its CA, an ACL user — is read once and holds
//! for all of them.
//!
//! To add a Redis user: take the session store's [`Redis`]
//! ([`crate::session::SessionStore::redis`]) and run commands on [`Redis::conn`] (a
//! cheap clone; `redis::cmd(..).query_async(&mut conn)`), pub/sub with
//! [`Redis::publish`] / [`Redis::subscribe`], blocking code with
//! [`Redis::blocking_connection`]. Never open a `redis::Client` of your own: it would
//! reach only a single server. Key formats stay with their owners; in a Cluster, keys
//! that one command or script touches together must share a hash tag (`{…}`), and every
//! key of one user's thing (a session bucket, a rate-limit window set, an event stream)
//! should.
//!
//! - Single: a [`ConnectionManager`], lazy (the gateway starts while Redis is down),
//!   reconnecting by itself; each call bounded by the timeout.
//! - Sentinel: the master the sentinels name, asked again whenever a call fails on a
//!   connection error or `READONLY` (a demoted master) — [`sentinel`]. The failed call
//!   returns its error (retryable: the caller's next call goes to the new master); a call
//!   refused before it ran (connection refused, `READONLY`) is retried once on the new
//!   master.
//! - Cluster: the `redis` crate's cluster connection (slot map, `MOVED`, failover), made
//!   on first use; pub/sub is sharded (`SPUBLISH` / `SSUBSCRIBE` over RESP3), which the
//!   crate re-subscribes after a failover.
//!
//! TLS: `rediss…` verifies servers against the system's roots, or only against the PEM
//! bundle of `session.redis_tls_ca_file` when set (a private CA). rustls with ring, the
//! process's one provider ([`crate::tls`]); `#insecure` URLs are refused (the crate is
//! built without `tls-rustls-insecure`).

mod sentinel;
pub mod target;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

pub use target::{Target, Topology};

/// How to reach Redis beyond its URL; the same for every Redis connection of a gateway.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedisOptions {
    /// PEM file of the CA certificates a `rediss…` server's certificate must chain to
    /// (instead of the system's roots). Ignored by `redis…` URLs.
    pub tls_ca_file: Option<PathBuf>,
}

/// A Redis setting that cannot be used: the setting's name (`session.redis_url`,
/// `rate_limit.redis_url`, `session.redis_tls_ca_file`, …) and why. Never shows a
/// password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {reason}")]
pub struct RedisSetupError {
    pub setting: &'static str,
    pub reason: String,
}

/// Whether `url` has a scheme this gateway reaches Redis with (the rest is checked by
/// [`Target::parse`]).
pub fn is_redis_url(url: &str) -> bool {
    [
        "redis://",
        "rediss://",
        "redis+sentinel://",
        "rediss+sentinel://",
    ]
    .iter()
    .chain(&["redis+cluster://", "rediss+cluster://"])
    .any(|s| url.starts_with(s))
}

/// A handle on one Redis deployment: commands, pub/sub and blocking connections, all
/// made as its URL and [`RedisOptions`] say. Cheap to clone; nothing is contacted until
/// the first call.
#[derive(Clone)]
pub struct Redis {
    inner: Arc<Inner>,
}

struct Inner {
    target: Target,
    certs: Option<redis::TlsCertificates>,
    timeout: Duration,
    conn: Conn,
    /// Single: the server's client (pub/sub, blocking connections).
    single: Option<redis::Client>,
    /// Sentinel: the master finder behind [`Conn`].
    sentinel: Option<sentinel::FollowingMaster>,
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis")
            .field("target", &self.inner.target)
            .finish_non_exhaustive()
    }
}

/// The command connection of a [`Redis`]: use it as any `redis` async connection
/// (`query_async(&mut conn)`). Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct Conn(Arc<ConnKind>);

enum ConnKind {
    Single(LazySingle),
    Sentinel(sentinel::FollowingMaster),
    Cluster(LazyCluster),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &*self.0 {
            ConnKind::Single(c) => Box::pin(async move {
                let mut conn = c.get()?;
                conn.req_packed_command(cmd).await
            }),
            ConnKind::Sentinel(s) => Box::pin(s.command(cmd)),
            ConnKind::Cluster(c) => Box::pin(async move {
                let mut conn = c.get().await?;
                conn.req_packed_command(cmd).await
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &*self.0 {
            ConnKind::Single(c) => Box::pin(async move {
                let mut conn = c.get()?;
                conn.req_packed_commands(pipeline, offset, count).await
            }),
            ConnKind::Sentinel(s) => Box::pin(s.commands(pipeline, offset, count)),
            ConnKind::Cluster(c) => Box::pin(async move {
                let mut conn = c.get().await?;
                conn.req_packed_commands(pipeline, offset, count).await
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match &*self.0 {
            ConnKind::Single(c) => c.client.get_connection_info().redis_settings().db(),
            ConnKind::Sentinel(s) => s.db(),
            ConnKind::Cluster(_) => 0,
        }
    }
}

/// The single server's [`ConnectionManager`], made on first use (inside the runtime: a
/// [`Redis`] may be made outside one, e.g. by the search embedding cache's builder).
#[derive(Clone)]
struct LazySingle {
    client: redis::Client,
    config: ConnectionManagerConfig,
    conn: Arc<std::sync::OnceLock<RedisResult<ConnectionManager>>>,
}

impl LazySingle {
    fn get(&self) -> RedisResult<ConnectionManager> {
        self.conn
            .get_or_init(|| {
                ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone())
            })
            .clone()
    }
}

impl Conn {
    /// Runs `write` (a command on `key`), then `WAIT replicas timeout` where it ran, so
    /// its answer comes with how many replicas hold the write. One server or Sentinel:
    /// one pipeline on the one connection. Cluster: the write routed by its key (slot
    /// moves followed), then `WAIT` sent to the master of the key's slot.
    pub async fn write_and_wait<T: redis::FromRedisValue>(
        &self,
        key: &str,
        write: Cmd,
        replicas: u32,
        timeout: Duration,
    ) -> RedisResult<(T, u32)> {
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(timeout.as_millis() as u64);
        match &*self.0 {
            ConnKind::Cluster(c) => {
                let mut conn = c.get().await?;
                let answer: T = write.query_async(&mut conn).await?;
                let route = redis::cluster_routing::RoutingInfo::SingleNode(
                    redis::cluster_routing::SingleNodeRoutingInfo::SpecificNode(
                        redis::cluster_routing::Route::with_key(
                            key,
                            redis::cluster_routing::SlotAddr::Master,
                        ),
                    ),
                );
                match conn.route_command(wait, route).await {
                    Ok(reached) => Ok((answer, redis::from_redis_value(reached)?)),
                    Err(e) => {
                        c.reset();
                        Err(e)
                    }
                }
            }
            _ => {
                redis::pipe()
                    .add_command(write)
                    .add_command(wait)
                    .query_async(&mut self.clone())
                    .await
            }
        }
    }
}

/// The cluster connection, made on first use (the gateway starts while the cluster is
/// down) and then kept: it follows slot moves and failovers by itself for commands
/// routed by key. A command routed by hand (`WAIT` to a slot's master) is not followed,
/// so its failure drops the connection ([`Self::reset`]) and the next call discovers
/// the slots anew.
#[derive(Clone)]
struct LazyCluster {
    client: ClusterClient,
    conn: Arc<arc_swap::ArcSwapOption<ClusterConnection>>,
    making: Arc<tokio::sync::Mutex<()>>,
}

impl LazyCluster {
    async fn get(&self) -> RedisResult<ClusterConnection> {
        if let Some(conn) = self.conn.load_full() {
            return Ok((*conn).clone());
        }
        let _making = self.making.lock().await;
        if let Some(conn) = self.conn.load_full() {
            return Ok((*conn).clone());
        }
        let conn = self.client.get_async_connection().await?;
        self.conn.store(Some(Arc::new(conn.clone())));
        Ok(conn)
    }

    fn reset(&self) {
        self.conn.store(None);
    }
}

impl Redis {
    /// The deployment `url` names (the value of `setting`), reached as `options` say,
    /// every call bounded by `timeout`. Errors name the setting and never show a
    /// password.
    pub fn connect(
        setting: &'static str,
        url: &str,
        options: &RedisOptions,
        timeout: Duration,
    ) -> Result<Self, RedisSetupError> {
        let target = Target::parse(setting, url)?;
        let certs = match (&options.tls_ca_file, target.tls) {
            (Some(path), true) => {
                crate::tls::install_crypto_provider();
                Some(redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(read_ca(path)?),
                })
            }
            (None, true) => {
                crate::tls::install_crypto_provider();
                None
            }
            (_, false) => None,
        };
        let invalid = |e: redis::RedisError| RedisSetupError {
            setting,
            reason: format!("{}: {e}", redact_url(url)),
        };
        let mut single = None;
        let mut following = None;
        let conn = match &target.topology {
            Topology::Single => {
                let node = target.node_url(&target.hosts[0]);
                let client = match &certs {
                    Some(c) => redis::Client::build_with_tls(node, c.clone()),
                    None => redis::Client::open(node),
                }
                .map_err(invalid)?;
                single = Some(client.clone());
                ConnKind::Single(LazySingle {
                    client,
                    config: manager_config(timeout),
                    conn: Arc::new(std::sync::OnceLock::new()),
                })
            }
            Topology::Sentinel { master } => {
                let s = sentinel::FollowingMaster::new(&target, master, certs.clone(), timeout)
                    .map_err(invalid)?;
                following = Some(s.clone());
                ConnKind::Sentinel(s)
            }
            Topology::Cluster => ConnKind::Cluster(LazyCluster {
                client: cluster_client(&target, certs.clone(), timeout, None).map_err(invalid)?,
                conn: Arc::new(arc_swap::ArcSwapOption::empty()),
                making: Arc::new(tokio::sync::Mutex::new(())),
            }),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                target,
                certs,
                timeout,
                conn: Conn(Arc::new(conn)),
                single,
                sentinel: following,
            }),
        })
    }

    /// The shared command connection.
    pub fn conn(&self) -> Conn {
        self.inner.conn.clone()
    }

    /// Which deployment this is.
    pub fn topology(&self) -> &Topology {
        &self.inner.target.topology
    }

    /// Publishes `payload` on `channel` (`SPUBLISH` in a Cluster: the channel lives on
    /// its slot's shard, and [`Self::subscribe`] listens there).
    pub async fn publish(&self, channel: &str, payload: &str) -> RedisResult<()> {
        self.publish_counted(channel, payload).await.map(drop)
    }

    /// [`Self::publish`], returning how many subscribers received it (in a Cluster, on
    /// the channel's shard): 0 means nobody listens there now.
    pub async fn publish_counted(&self, channel: &str, payload: &str) -> RedisResult<i64> {
        let command = match self.topology() {
            Topology::Cluster => "SPUBLISH",
            _ => "PUBLISH",
        };
        redis::cmd(command)
            .arg(channel)
            .arg(payload)
            .query_async::<i64>(&mut self.conn())
            .await
    }

    /// The payloads published on `channel` from now on, on a connection of its own.
    /// Single and Sentinel: the stream ends when the connection is lost (subscribe
    /// again: a Sentinel deployment then subscribes on the new master). Cluster: sharded
    /// pub/sub, which the cluster connection re-subscribes after a failover by itself.
    pub async fn subscribe(&self, channel: &str) -> RedisResult<BoxStream<'static, Vec<u8>>> {
        let client = match (&self.inner.single, &self.inner.sentinel) {
            (Some(client), _) => client.clone(),
            (None, Some(sentinel)) => sentinel.master_client().await?,
            (None, None) => return self.subscribe_sharded(channel).await,
        };
        let mut pubsub = tokio::time::timeout(self.inner.timeout, client.get_async_pubsub())
            .await
            .map_err(|_| timed_out("subscribing"))??;
        pubsub.subscribe(channel).await?;
        Ok(pubsub
            .into_on_message()
            .map(|m| m.get_payload_bytes().to_vec())
            .boxed())
    }

    async fn subscribe_sharded(&self, channel: &str) -> RedisResult<BoxStream<'static, Vec<u8>>> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<redis::PushInfo>();
        let inner = &self.inner;
        let client = cluster_client(&inner.target, inner.certs.clone(), inner.timeout, Some(tx))?;
        let mut conn = client.get_async_connection().await?;
        conn.ssubscribe(channel).await?;
        // The connection lives as long as the stream: dropping the stream unsubscribes.
        Ok(
            futures::stream::unfold((rx, conn), |(mut rx, conn)| async move {
                loop {
                    let push = rx.recv().await?;
                    if push.kind == redis::PushKind::SMessage
                        && let Some(Value::BulkString(payload)) = push.data.get(1)
                    {
                        return Some((payload.clone(), (rx, conn)));
                    }
                }
            })
            .boxed(),
        )
    }

    /// A blocking connection (for code that runs outside the async runtime: the search
    /// embedding cache), connected within `timeout`.
    pub fn blocking_connection(&self, timeout: Duration) -> RedisResult<BlockingConn> {
        match (&self.inner.single, &self.inner.sentinel) {
            (Some(client), _) => Ok(BlockingConn::Single(
                client.get_connection_with_timeout(timeout)?,
            )),
            (None, Some(sentinel)) => Ok(BlockingConn::Single(
                sentinel
                    .master_client_blocking()?
                    .get_connection_with_timeout(timeout)?,
            )),
            (None, None) => {
                let client =
                    cluster_client(&self.inner.target, self.inner.certs.clone(), timeout, None)?;
                Ok(BlockingConn::Cluster(Box::new(client.get_connection()?)))
            }
        }
    }
}

/// The search embedding cache's Redis is this one (its blocking connections).
impl mcc_search::RedisConnector for Redis {
    fn blocking_connection(
        &self,
        timeout: Duration,
    ) -> RedisResult<Box<dyn redis::ConnectionLike>> {
        Ok(Box::new(Redis::blocking_connection(self, timeout)?))
    }
}

/// A blocking connection of a [`Redis`] ([`Redis::blocking_connection`]): use it as any
/// `redis` connection (`query(&mut conn)`). In a Cluster a pipeline must keep its keys
/// in one slot (a hash tag).
pub enum BlockingConn {
    Single(redis::Connection),
    Cluster(Box<redis::cluster::ClusterConnection>),
}

impl redis::ConnectionLike for BlockingConn {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(cmd, offset, count),
            Self::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }

    fn check_connection(&mut self) -> bool {
        match self {
            Self::Single(c) => c.check_connection(),
            Self::Cluster(c) => c.check_connection(),
        }
    }

    fn is_open(&self) -> bool {
        match self {
            Self::Single(c) => c.is_open(),
            Self::Cluster(c) => c.is_open(),
        }
    }
}

/// Few, quick reconnection attempts per failure: a caller waits at most a few timeouts,
/// and the next call starts a new attempt.
fn manager_config(timeout: Duration) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(500))
}

/// A cluster client over `target`'s seed nodes; `push` makes it a RESP3 client whose
/// pushes (sharded pub/sub messages) go there.
fn cluster_client(
    target: &Target,
    certs: Option<redis::TlsCertificates>,
    timeout: Duration,
    push: Option<tokio::sync::mpsc::UnboundedSender<redis::PushInfo>>,
) -> RedisResult<ClusterClient> {
    let nodes: Vec<String> = target.hosts.iter().map(|h| target.node_url(h)).collect();
    // A failover takes the cluster's node timeout plus an election; the crate retries
    // MOVED and connection errors meanwhile, within this many attempts.
    let mut builder = ClusterClient::builder(nodes)
        .connection_timeout(timeout)
        .response_timeout(timeout)
        .retries(5)
        .min_retry_wait(100)
        .max_retry_wait(1000);
    if let Some(certs) = certs {
        builder = builder.certs(certs);
    }
    if let Some(push) = push {
        builder = builder
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(push);
    }
    builder.build()
}

fn timed_out(what: &str) -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::Io,
        "Redis did not answer in time",
        what.to_string(),
    ))
}

/// The CA bundle, checked to hold at least one PEM certificate (an empty or DER file
/// would otherwise trust nothing and fail only at the first connection).
fn read_ca(path: &Path) -> Result<Vec<u8>, RedisSetupError> {
    let error = |reason: String| RedisSetupError {
        setting: "session.redis_tls_ca_file",
        reason: format!("{}: {reason}", path.display()),
    };
    let pem = std::fs::read(path).map_err(|e| error(e.to_string()))?;
    if !pem
        .windows(b"-----BEGIN CERTIFICATE-----".len())
        .any(|w| w == b"-----BEGIN CERTIFICATE-----")
    {
        return Err(error(
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(pem)
}

/// A URL with any `user:password@` part hidden.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}<redacted>{}", &url[..scheme_end + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
#[path = "redis_conn_tests.rs"]
mod tests;
