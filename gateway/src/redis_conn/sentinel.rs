//! The master of a Sentinel deployment, followed through failovers: the sentinels are
//! asked where the master is on the first call and again whenever a call fails in a way
//! a failover explains (the connection dropped, refused or timed out; `READONLY` from a
//! demoted master). Calls between failovers go straight to the master over one
//! [`ConnectionManager`].

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{Cmd, ErrorKind, IntoConnectionInfo, Pipeline, RedisError, RedisResult, Value};

use super::Target;

#[derive(Clone)]
pub struct FollowingMaster {
    inner: Arc<Inner>,
}

struct Inner {
    /// Asking the sentinels is serialised: one failure wave asks once.
    sentinels: tokio::sync::Mutex<SentinelClient>,
    /// The blocking twin (the search embedding cache runs outside the runtime).
    sentinels_blocking: std::sync::Mutex<SentinelClient>,
    current: ArcSwapOption<Current>,
    config: ConnectionManagerConfig,
    timeout: Duration,
    db: i64,
}

/// The master as last resolved. `generation` tells a caller whether someone else has
/// re-resolved since its call failed.
struct Current {
    generation: u64,
    address: String,
    conn: ConnectionManager,
}

impl FollowingMaster {
    pub fn new(
        target: &Target,
        master: &str,
        certs: Option<redis::TlsCertificates>,
        timeout: Duration,
    ) -> RedisResult<Self> {
        let sentinels = target
            .hosts
            .iter()
            .map(|h| {
                target
                    .sentinel_url(h)
                    .into_connection_info()
                    .map(|i| i.addr().clone())
            })
            .collect::<RedisResult<Vec<_>>>()?;
        // The master's credentials and database come from the URL.
        let node = target.node_url(&target.hosts[0]).into_connection_info()?;
        let settings = node.redis_settings();
        let build = || -> RedisResult<SentinelClient> {
            let mut builder =
                SentinelClientBuilder::new(sentinels.clone(), master, SentinelServerType::Master)?
                    .set_client_to_redis_db(settings.db());
            if let Some(user) = settings.username() {
                builder = builder.set_client_to_redis_username(user);
            }
            if let Some(password) = settings.password() {
                builder = builder.set_client_to_redis_password(password);
            }
            if target.tls {
                builder = builder
                    .set_client_to_redis_tls_mode(redis::TlsMode::Secure)
                    .set_client_to_sentinel_tls_mode(redis::TlsMode::Secure);
                if let Some(certs) = &certs {
                    builder = builder
                        .set_client_to_redis_certificates(certs.clone())
                        .set_client_to_sentinel_certificates(certs.clone());
                }
            }
            builder.build()
        };
        Ok(Self {
            inner: Arc::new(Inner {
                sentinels: tokio::sync::Mutex::new(build()?),
                sentinels_blocking: std::sync::Mutex::new(build()?),
                current: ArcSwapOption::empty(),
                config: super::manager_config(timeout),
                timeout,
                db: settings.db(),
            }),
        })
    }

    pub fn db(&self) -> i64 {
        self.inner.db
    }

    /// A client for the master as the sentinels name it now.
    pub async fn master_client(&self) -> RedisResult<redis::Client> {
        let mut sentinels = self.inner.sentinels.lock().await;
        tokio::time::timeout(self.inner.timeout * 2, sentinels.async_get_client())
            .await
            .map_err(|_| super::timed_out("asking the sentinels for the master"))?
    }

    /// [`Self::master_client`] for blocking code.
    pub fn master_client_blocking(&self) -> RedisResult<redis::Client> {
        let mut sentinels = self
            .inner
            .sentinels_blocking
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        sentinels.get_client()
    }

    async fn connection(&self) -> RedisResult<(u64, ConnectionManager)> {
        match self.inner.current.load_full() {
            Some(c) => Ok((c.generation, c.conn.clone())),
            None => self.resolve(0).await,
        }
    }

    /// Asks the sentinels where the master is, unless someone did since `seen`.
    async fn resolve(&self, seen: u64) -> RedisResult<(u64, ConnectionManager)> {
        let mut sentinels = self.inner.sentinels.lock().await;
        let old = self.inner.current.load_full();
        if let Some(c) = &old
            && c.generation != seen
        {
            return Ok((c.generation, c.conn.clone()));
        }
        let client = tokio::time::timeout(self.inner.timeout * 2, sentinels.async_get_client())
            .await
            .map_err(|_| super::timed_out("asking the sentinels for the master"))??;
        let address = client.get_connection_info().addr().to_string();
        let generation = old.as_ref().map_or(1, |c| c.generation + 1);
        // The same master (no failover yet): keep its connection, which reconnects.
        let conn = match &old {
            Some(c) if c.address == address => c.conn.clone(),
            _ => {
                if old.is_some() {
                    tracing::warn!(master = %address, "Redis Sentinel: following the master to a new address");
                }
                ConnectionManager::new_lazy_with_config(client, self.inner.config.clone())?
            }
        };
        self.inner.current.store(Some(Arc::new(Current {
            generation,
            address,
            conn: conn.clone(),
        })));
        Ok((generation, conn))
    }

    pub async fn command(&self, cmd: &Cmd) -> RedisResult<Value> {
        let (generation, mut conn) = self.connection().await?;
        match conn.req_packed_command(cmd).await {
            Err(e) if failover_sign(&e) => {
                let (_, mut conn) = self.resolve(generation).await.map_err(|_| e.clone())?;
                if not_run(&e) {
                    return conn.req_packed_command(cmd).await;
                }
                Err(e)
            }
            result => result,
        }
    }

    pub async fn commands(
        &self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let (generation, mut conn) = self.connection().await?;
        match conn.req_packed_commands(pipeline, offset, count).await {
            Err(e) if failover_sign(&e) => {
                let (_, mut conn) = self.resolve(generation).await.map_err(|_| e.clone())?;
                if not_run(&e) {
                    return conn.req_packed_commands(pipeline, offset, count).await;
                }
                Err(e)
            }
            result => result,
        }
    }
}

/// An error a failover explains: the master is gone, unreachable or demoted.
fn failover_sign(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || not_run(e)
}

/// An error that says the command did not run, so running it on the new master cannot
/// apply it twice: refused connections and `READONLY` (a replica refuses writes).
fn not_run(e: &RedisError) -> bool {
    e.is_connection_refusal() || e.kind() == ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
}
