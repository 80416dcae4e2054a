//! `serve`: builds the runtime state from [`Settings`] (catalog, session store, engine,
//! identity, metrics), starts the catalog watcher (tool files, or the operator's
//! ConfigMap in Kubernetes mode) and serves HTTP until shutdown.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use rmcp::transport::streamable_http_server::session::SessionStore as McpSessionStore;

use crate::audit::Auditor;
use crate::auth::{AuthSetupError, Authenticator, TokenReviewer};
use crate::catalog::{self, LiveCatalog};
use crate::config::{CatalogSource, FeatureRedis, Settings};
use crate::exec::cache::ResultCache;
use crate::exec::environment::EnvResolver;
use crate::exec::introspect::RuntimeInterpreter;
use crate::exec::pod::PodRunner;
use crate::exec::render::Renderer;
use crate::exec::{Engine, Limiter};
use crate::http::{self, McpOptions};
use crate::mcp::Shared;
use crate::mcp::legacy_sessions::RedisSessionRegistry;
use crate::mcp::session_owner::SessionOwners;
use crate::metrics::Metrics;
use crate::ratelimit::{Counter, RateLimits};
use crate::session::{SessionSetupError, SessionStore};
use mcc_executor::Runtime;
use mcc_search::{SearchError, SearchService};

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("loading the catalog: {0}")]
    Catalog(#[from] catalog::CatalogError),
    #[error("auth: {0}")]
    Auth(#[from] AuthSetupError),
    #[error("{0}")]
    Session(#[from] SessionSetupError),
    #[error("search: {0}")]
    Search(#[from] SearchError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A setting that could not be turned into what it names (e.g. a Redis URL).
    #[error("{setting}: {reason}")]
    Setting {
        setting: &'static str,
        reason: String,
    },
    #[cfg(feature = "kubernetes")]
    #[error("{0}")]
    Kube(#[from] crate::kube::KubeSetupError),
    #[cfg(not(feature = "kubernetes"))]
    #[error("catalog.source: kubernetes needs a gateway built with the `kubernetes` cargo feature")]
    KubernetesNotBuilt,
}

/// What keeps the catalog current while serving.
enum Watch {
    /// Poll the tool and users files.
    Files,
    /// Watch the operator's ConfigMap.
    #[cfg(feature = "kubernetes")]
    Kubernetes {
        client: ::kube::Client,
        configmap: crate::kube::watch::CatalogConfigMap,
        /// The pod runtime's sweeper and its interval (`execution.pod.enabled`).
        sweeper: Option<Box<(crate::kube::pods::Sweeper, Duration)>>,
    },
}

/// How long a stopping gateway waits for its audit sinks to write what calls queued.
const AUDIT_FLUSH: Duration = Duration::from_secs(2);

/// A built gateway, ready to serve.
pub struct Gateway {
    pub router: axum::Router,
    pub catalog: Arc<LiveCatalog>,
    pub shared: Arc<Shared>,
    reload_interval: Duration,
    watch: Watch,
    /// `/metrics` on its own port (`metrics.port`), when set.
    metrics: Option<(std::net::SocketAddr, axum::Router)>,
    connections: http::ConnectionLimits,
}

/// Builds everything from settings. Loads the catalog (blocking: introspection runs
/// Python); in Kubernetes mode the catalog arrives once the watch starts.
pub async fn build(
    settings: &Settings,
    shutdown: CancellationToken,
) -> Result<Gateway, StartError> {
    match settings.catalog.source {
        CatalogSource::Files => build_from_files(settings, shutdown).await,
        #[cfg(feature = "kubernetes")]
        CatalogSource::Kubernetes => build_for_kubernetes(settings, shutdown).await,
        #[cfg(not(feature = "kubernetes"))]
        CatalogSource::Kubernetes => Err(StartError::KubernetesNotBuilt),
    }
}

async fn build_from_files(
    settings: &Settings,
    shutdown: CancellationToken,
) -> Result<Gateway, StartError> {
    let entries = settings.tools.clone();
    let users = settings.users_file.clone();
    let runtime = settings.execution.build(settings.catalog.source);
    // Importing a tool's module runs its code: through the runtime, like a call.
    let introspector = RuntimeInterpreter::introspector(runtime.clone(), &settings.env_floor);
    let catalog =
        tokio::task::spawn_blocking(move || LiveCatalog::load(entries, users, introspector))
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))??;
    let catalog = Arc::new(catalog);
    // Upstream MCP servers: their first discovery is waited for (bounded), so a gateway
    // starts with their tools unless an upstream is down; see crate::upstream.
    let upstreams =
        crate::upstream::Upstreams::new(shutdown.clone(), settings.execution.default_timeout());
    upstreams.set_launcher(runtime.clone(), &settings.env_floor);
    catalog.attach_upstreams(upstreams.clone());
    upstreams
        .first_discovery(crate::upstream::DISCOVERY_TIMEOUT)
        .await;
    catalog.merge_upstreams();
    let search = search_service(settings, &catalog).await?;
    build_parts(settings, catalog, search, shutdown, None, runtime)
}

/// Kubernetes mode: not ready (`/readyz`) until the first catalog document is installed.
#[cfg(feature = "kubernetes")]
async fn build_for_kubernetes(
    settings: &Settings,
    shutdown: CancellationToken,
) -> Result<Gateway, StartError> {
    let client = crate::kube::client().await?;
    let pods = settings.execution.pod.enabled;
    let configmap = crate::kube::watch::CatalogConfigMap {
        namespace: settings
            .catalog
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string()),
        name: settings.catalog.configmap.clone(),
    };
    let catalog = Arc::new(LiveCatalog::waiting(format!(
        "waiting for the catalog ConfigMap {configmap}"
    )));
    let search = search_service(settings, &catalog).await?;
    let kube = KubeParts {
        reviewer: Arc::new(crate::kube::token_review::KubeTokenReviewer::new(
            client.clone(),
            settings.auth.token_audience.clone(),
        )),
        resolver: Arc::new(crate::kube::env::KubeEnvResolver::new(
            client.clone(),
            crate::kube::env::DEFAULT_TTL,
        )),
        pods: pods.then(|| {
            Arc::new(crate::kube::pods::PodRuntime::new(
                client.clone(),
                pod_settings(settings),
            )) as Arc<dyn PodRunner>
        }),
    };
    let sweeper = pods.then(|| {
        let pod = &settings.execution.pod;
        let max_age = settings.execution.max_timeout().unwrap_or_default()
            + Duration::from_secs(pod.sweep_grace_secs);
        let sweeper = crate::kube::pods::Sweeper::new(
            client.clone(),
            pod.namespaces.clone(),
            &pod.instance,
            max_age,
        );
        Box::new((sweeper, pod.sweep_interval()))
    });
    // MCPServers' tools: the operator discovers them; calls go to the URL each document
    // records (crate::upstream::published), header values read by the same resolver.
    let upstreams =
        crate::upstream::Upstreams::new(shutdown.clone(), settings.execution.default_timeout());
    upstreams.set_header_resolver(kube.resolver.clone());
    catalog.attach_upstreams(upstreams);
    let runtime = settings.execution.build(settings.catalog.source);
    let mut gateway = build_parts(settings, catalog, search, shutdown, Some(kube), runtime)?;
    gateway.watch = Watch::Kubernetes {
        client,
        configmap,
        sweeper,
    };
    Ok(gateway)
}

/// The pod runtime's settings (`execution.pod`), this replica named by `POD_NAME` (the
/// downward API) or its host name.
#[cfg(feature = "kubernetes")]
fn pod_settings(settings: &Settings) -> crate::kube::pods::PodSettings {
    let pod = &settings.execution.pod;
    crate::kube::pods::PodSettings {
        default_image: pod.default_image.clone(),
        runner_image: pod.runner_image.clone(),
        replica: pod.replica_name(&|name| std::env::var(name).ok()),
        instance: pod.instance.clone(),
        passthrough_env: pod
            .passthrough_env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        max_per_tool: pod.max_per_tool,
        sweep_grace: Duration::from_secs(pod.sweep_grace_secs),
    }
}

/// The search service over the current snapshot: the model is loaded and the keyword
/// index built before this returns; tool embeddings are computed in the background
/// (semantic ranking joins when they are ready), so serving never waits for them.
async fn search_service(
    settings: &Settings,
    catalog: &LiveCatalog,
) -> Result<SearchService, StartError> {
    let search_settings = settings.search_settings()?;
    // Kubernetes mode starts with no catalog: its first document's index is built when it
    // arrives, and `/readyz` waits for it (an index of nothing would count as built).
    let snapshot = (catalog.status().generation > 0).then(|| catalog.snapshot());
    let search = tokio::task::spawn_blocking(move || {
        let search = SearchService::new(search_settings)?;
        if let Some(snapshot) = snapshot {
            search.update(snapshot)?;
        }
        Ok::<_, SearchError>(search)
    })
    .await
    .map_err(|e| std::io::Error::other(e.to_string()))??;
    Ok(search)
}

/// Builds everything around an existing live catalog (tests and benchmarks use this).
pub fn build_with_catalog(
    settings: &Settings,
    catalog: Arc<LiveCatalog>,
    search: SearchService,
    shutdown: CancellationToken,
) -> Result<Gateway, StartError> {
    let runtime = settings.execution.build(settings.catalog.source);
    build_parts(settings, catalog, search, shutdown, None, runtime)
}

/// What Kubernetes mode adds: ServiceAccount token checks, reference resolution and,
/// when enabled, the pod runtime.
#[cfg_attr(not(feature = "kubernetes"), allow(dead_code))]
struct KubeParts {
    reviewer: Arc<dyn TokenReviewer>,
    resolver: Arc<dyn EnvResolver>,
    pods: Option<Arc<dyn PodRunner>>,
}

fn build_parts(
    settings: &Settings,
    catalog: Arc<LiveCatalog>,
    search: SearchService,
    shutdown: CancellationToken,
    kube: Option<KubeParts>,
    runtime: Arc<dyn Runtime>,
) -> Result<Gateway, StartError> {
    let sessions = SessionStore::from_settings(&settings.session)?;
    // The legacy MCP session registry shares the session store's Redis connection.
    let registry: Option<Arc<dyn McpSessionStore>> = sessions.redis_connection().map(|conn| {
        Arc::new(RedisSessionRegistry::over_connection(
            conn,
            &settings.session.key_prefix,
            sessions.ttl(),
        )) as Arc<dyn McpSessionStore>
    });
    let engine = Engine::new(settings.engine_settings(runtime))
        .with_renderer(Renderer::from_settings(&settings.execution.render))
        .with_limiter(
            Limiter::new(settings.concurrency.limiter())
                .with_per_pod_tool(settings.execution.pod.max_per_tool),
        );
    // With Redis sessions, cached results of `cache_ttl` tools are shared by the replicas.
    let engine = match sessions.redis_connection() {
        Some(conn) => {
            engine.with_cache(ResultCache::redis_with(conn, &settings.session.key_prefix))
        }
        None => engine,
    };
    let engine = match catalog.upstreams() {
        Some(upstreams) => {
            // Answers to upstream questions held for 2026-07-28 callers cross replicas.
            if let Some((redis, _, prefix)) = sessions.redis_client() {
                upstreams.enable_replicas(redis, &prefix);
            }
            engine.with_upstreams(upstreams)
        }
        None => engine,
    };
    let (engine, reviewer) = match kube {
        Some(k) => {
            let engine = engine.with_env_resolver(k.resolver);
            let engine = match k.pods {
                Some(pods) => engine.with_pod_runner(pods),
                None => engine,
            };
            (engine, Some(k.reviewer))
        }
        None => (engine, None),
    };
    let auth = Authenticator::with_token_reviewer(&settings.auth, catalog.directory(), reviewer)?;
    let metrics = Metrics::new();
    // The catalog reports what it leaves out (mcc_catalog_excluded_*) at each swap.
    catalog.attach_metrics(&metrics);
    let rate_limits = RateLimits::new(
        settings.rate_limit.clone(),
        redis_for(
            settings,
            "rate_limit.redis_url",
            &settings.rate_limit.redis_url,
            &sessions,
        )?
        .map_or_else(Counter::local, |conn| {
            Counter::redis(conn, &settings.session.key_prefix)
        }),
        metrics.clone(),
    );
    let audit = Auditor::start(
        &settings.audit,
        redis_for(
            settings,
            "audit.redis_url",
            &settings.audit.redis_url,
            &sessions,
        )?,
        &metrics,
    );
    let tickets =
        crate::calls::approval::Tickets::beside(&sessions, settings.execution.approval.ttl());
    let shared = Arc::new(Shared {
        catalog: catalog.clone(),
        sessions,
        engine,
        search,
        metrics,
        response_max_size: settings.server.response_max_size,
        rate_limits,
        audit,
        approvals: crate::calls::approval::Approvals {
            policy: settings.execution.approval.policy(),
            tickets,
        },
    });
    let router = http::router_with(
        shared.clone(),
        auth,
        McpOptions {
            server: &settings.server,
            registry,
            session_ttl: shared.sessions.ttl(),
            owners: SessionOwners::new(
                shared.sessions.redis_connection(),
                &settings.session.key_prefix,
                shared.sessions.ttl(),
            ),
            shutdown,
        },
        http::RouterLimits {
            metrics: settings.metrics.clone(),
            request_timeout: settings.connections.request_timeout(
                settings.execution.max_timeout(),
                settings.concurrency.limiter().wait,
            ),
            max_legacy_sessions_per_caller: settings.connections.max_legacy_sessions_per_caller,
            max_sse_streams_per_caller: settings.connections.max_sse_streams_per_caller,
        },
    );
    let metrics = settings.metrics.port.map(|port| {
        let addr = std::net::SocketAddr::new(settings.bind_addr().ip(), port);
        (
            addr,
            http::metrics_router(shared.clone(), &settings.metrics),
        )
    });
    Ok(Gateway {
        router,
        catalog,
        shared,
        reload_interval: Duration::from_millis(settings.reload_interval_ms),
        watch: Watch::Files,
        metrics,
        connections: http::ConnectionLimits {
            header_read_timeout: settings.connections.header_read_timeout(),
            body_read_timeout: settings.connections.body_read_timeout(),
            loopback_peers_only: settings.auth.checks_no_credential(),
        },
    })
}

/// The Redis a feature counts or writes in, by [`Settings::feature_redis`]: its own
/// `setting` connected anew, or the session store's connection shared.
fn redis_for(
    settings: &Settings,
    setting: &'static str,
    url: &Option<String>,
    sessions: &SessionStore,
) -> Result<Option<crate::redis_conn::Conn>, StartError> {
    match settings.feature_redis(url.as_deref()) {
        FeatureRedis::Own(url) => {
            let timeout = Duration::from_millis(settings.session.timeout_ms.max(1));
            crate::redis_conn::Redis::connect(
                setting,
                url,
                &settings.session.redis_options(),
                timeout,
            )
            .map(|redis| Some(redis.conn()))
            .map_err(|e| StartError::Setting {
                setting: e.setting,
                reason: e.reason,
            })
        }
        FeatureRedis::Session(_) => Ok(sessions.redis_connection()),
        FeatureRedis::None => Ok(None),
    }
}

impl Gateway {
    /// Serves on `listener` until `shutdown` fires, watching the catalog files meanwhile;
    /// in-flight requests finish first.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: CancellationToken,
    ) -> std::io::Result<()> {
        self.serve_until(listener, shutdown, None).await
    }

    /// [`Self::serve`] for a process stopped by a signal: when `stop` fires it stops
    /// accepting and drains ([`crate::drain`]: open connections answered a little longer,
    /// running calls finished, MCP calls included); then it cancels `shutdown`, the token
    /// [`build`] was given (MCP sessions, watches), and returns.
    pub async fn serve_draining(
        self,
        listener: TcpListener,
        stop: CancellationToken,
        shutdown: CancellationToken,
    ) -> std::io::Result<()> {
        self.serve_until(listener, stop, Some(shutdown)).await
    }

    async fn serve_until(
        self,
        listener: TcpListener,
        stop: CancellationToken,
        drain_then: Option<CancellationToken>,
    ) -> std::io::Result<()> {
        // What the watches and the sweeper stop on: the end of everything.
        let shutdown = drain_then.clone().unwrap_or_else(|| stop.clone());
        let search = self.shared.search.clone();
        let rebuild_search: catalog::OnReload = Arc::new(move |catalog| {
            if let Err(e) = search.update(catalog.clone()) {
                tracing::error!(error = %e, "search index rebuild failed; searching the previous catalog");
            }
        });
        match self.watch {
            Watch::Files => {
                tokio::spawn(catalog::watch(
                    self.catalog.clone(),
                    self.reload_interval,
                    shutdown.clone(),
                    rebuild_search,
                ));
            }
            #[cfg(feature = "kubernetes")]
            Watch::Kubernetes {
                client,
                configmap,
                sweeper,
            } => {
                if let Some((sweeper, interval)) = sweeper.map(|b| *b) {
                    tracing::info!(selector = %sweeper.selector(), "pod runtime: sweeping leftover tool Pods");
                    tokio::spawn(sweeper.run(interval, shutdown.clone()));
                }
                tracing::info!(%configmap, "watching the catalog ConfigMap");
                tokio::spawn(crate::kube::watch::run(
                    self.catalog.clone(),
                    client,
                    configmap,
                    // Importing a tool's module runs its code: in the executor, like a call.
                    RuntimeInterpreter::introspector(
                        self.shared.engine.settings().runtime.clone(),
                        &self.shared.engine.settings().env_floor,
                    ),
                    shutdown.clone(),
                    rebuild_search,
                ));
            }
        }
        if let Some((addr, router)) = self.metrics {
            let metrics_listener = TcpListener::bind(addr).await.map_err(|e| {
                std::io::Error::new(e.kind(), format!("metrics.port: cannot bind {addr}: {e}"))
            })?;
            tracing::info!(%addr, "serving /metrics at http://{addr}/metrics");
            tokio::spawn(http::serve(
                metrics_listener,
                router,
                self.connections,
                shutdown.clone(),
            ));
        }
        let served = match drain_then {
            Some(sessions) => {
                http::serve_draining(listener, self.router, self.connections, stop, sessions).await
            }
            None => http::serve(listener, self.router, self.connections, stop).await,
        };
        // Every request has ended: what they queued for the audit trail is written now.
        self.shared.audit.flush(AUDIT_FLUSH).await;
        served
    }
}
