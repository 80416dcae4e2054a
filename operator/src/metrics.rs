//! Prometheus metrics of the operator (reconciles, errors, durations, catalog publishes,
//! objects not Ready by reason, MCPServer upstreams: states, tools, refreshes) and the small HTTP server that exposes them on `/metrics` (plus `/healthz`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Which controller a sample is about.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabel {
    pub controller: String,
}

/// A controller and the kind of error it met.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabel {
    pub controller: String,
    pub error: String,
}

/// A kind of object and why it is left out.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExcludedLabel {
    pub kind: String,
    pub reason: String,
}

/// An MCPServer's state: `Published`, `Unreachable` or why it is not served.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabel {
    pub state: String,
}

/// One MCPServer (`namespace/name`; bounded by the MCPServers that exist).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServerLabel {
    pub mcpserver: String,
}

/// Why a discovery ran (`Schedule`, `ListChanged`, …).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CauseLabel {
    pub cause: String,
}

/// The kind of a failed discovery (`connect`, `timeout`, `too_many_tools`, …).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub error: String,
}

type HistogramFamily = Family<ControllerLabel, Histogram, fn() -> Histogram>;
type CauseHistogramFamily = Family<CauseLabel, Histogram, fn() -> Histogram>;

/// The operator's metrics, registered in their own registry.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ControllerLabel, Counter>,
    errors: Family<ErrorLabel, Counter>,
    durations: HistogramFamily,
    /// ConfigMap writes of a changed catalog.
    pub publishes: Counter,
    /// Size in bytes of the last published payload.
    pub catalog_bytes: Gauge,
    /// Tools in the last published catalog.
    pub catalog_tools: Gauge,
    /// Shard ConfigMaps of the last published catalog (0: one ConfigMap).
    pub catalog_shards: Gauge,
    /// 1 while the catalog is too large and is published with the tools of the last one
    /// that fit (users, grants and keys still current).
    pub catalog_tools_held: Gauge,
    /// Objects not Ready in the last assembly, by kind and reason (counts only: names
    /// are on the objects' statuses).
    excluded: Family<ExcludedLabel, Gauge>,
    /// MCPServers by state, in the last assembly.
    mcpservers: Family<StateLabel, Gauge>,
    /// Tools published per MCPServer, in the last assembly.
    mcpserver_tools: Family<ServerLabel, Gauge>,
    /// Failed discoveries, by kind.
    refresh_errors: Family<KindLabel, Counter>,
    /// Time of one discovery (connect and every page), by cause.
    refresh_durations: CauseHistogramFamily,
    /// `notifications/tools/list_changed` received on standing streams.
    list_changed: Counter,
}

fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 12))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("mcc_operator");
        let reconciles = Family::<ControllerLabel, Counter>::default();
        let errors = Family::<ErrorLabel, Counter>::default();
        let durations: HistogramFamily = Family::new_with_constructor(duration_histogram);
        let publishes = Counter::default();
        let catalog_bytes = Gauge::default();
        let catalog_tools = Gauge::default();
        let catalog_shards = Gauge::default();
        let catalog_tools_held = Gauge::default();
        let excluded = Family::<ExcludedLabel, Gauge>::default();
        let mcpservers = Family::<StateLabel, Gauge>::default();
        let mcpserver_tools = Family::<ServerLabel, Gauge>::default();
        let refresh_errors = Family::<KindLabel, Counter>::default();
        let refresh_durations: CauseHistogramFamily =
            Family::new_with_constructor(duration_histogram);
        let list_changed = Counter::default();
        registry.register("reconciliations", "Reconciles run", reconciles.clone());
        registry.register("reconcile_errors", "Reconciles that failed", errors.clone());
        registry.register(
            "reconcile_duration_seconds",
            "Time spent in one reconcile",
            durations.clone(),
        );
        registry.register(
            "catalog_publishes",
            "Catalog ConfigMap writes",
            publishes.clone(),
        );
        registry.register(
            "catalog_bytes",
            "Size of the published catalog payload",
            catalog_bytes.clone(),
        );
        registry.register(
            "catalog_tools",
            "Tools in the published catalog",
            catalog_tools.clone(),
        );
        registry.register(
            "catalog_shards",
            "Shard ConfigMaps of the published catalog (0: one ConfigMap)",
            catalog_shards.clone(),
        );
        registry.register(
            "catalog_tools_held",
            "1 while the catalog is too large and is published with the tools of the last one that fit",
            catalog_tools_held.clone(),
        );
        registry.register(
            "objects_not_ready",
            "Tools and UserGrants not Ready in the last assembly, by reason",
            excluded.clone(),
        );
        registry.register(
            "mcpservers",
            "MCPServers by state in the last assembly (Published, Unreachable, or why not served)",
            mcpservers.clone(),
        );
        registry.register(
            "mcpserver_tools",
            "Tools published from each MCPServer in the last assembly",
            mcpserver_tools.clone(),
        );
        registry.register(
            "mcpserver_refresh_errors",
            "MCPServer discoveries that failed, by kind",
            refresh_errors.clone(),
        );
        registry.register(
            "mcpserver_refresh_duration_seconds",
            "Time of one MCPServer discovery (connect and every tools/list page), by cause",
            refresh_durations.clone(),
        );
        registry.register(
            "mcpserver_list_changed_notifications",
            "notifications/tools/list_changed received on MCPServers' standing streams",
            list_changed.clone(),
        );
        Self {
            registry,
            reconciles,
            errors,
            durations,
            publishes,
            catalog_bytes,
            catalog_tools,
            catalog_shards,
            catalog_tools_held,
            excluded,
            mcpservers,
            mcpserver_tools,
            refresh_errors,
            refresh_durations,
            list_changed,
        }
    }
}

/// Records a reconcile's duration when dropped.
pub struct ReconcileTimer<'a> {
    metrics: &'a Metrics,
    controller: &'static str,
    start: Instant,
}

impl Drop for ReconcileTimer<'_> {
    fn drop(&mut self) {
        self.metrics
            .durations
            .get_or_create(&label(self.controller))
            .observe(self.start.elapsed().as_secs_f64());
    }
}

fn label(controller: &str) -> ControllerLabel {
    ControllerLabel {
        controller: controller.to_string(),
    }
}

impl Metrics {
    /// Counts a reconcile and times it until the returned guard drops.
    pub fn reconcile(&self, controller: &'static str) -> ReconcileTimer<'_> {
        self.reconciles.get_or_create(&label(controller)).inc();
        ReconcileTimer {
            metrics: self,
            controller,
            start: Instant::now(),
        }
    }

    /// Counts a failed reconcile.
    pub fn error(&self, controller: &str, error: &crate::Error) {
        self.errors
            .get_or_create(&ErrorLabel {
                controller: controller.to_string(),
                error: error.metric_label().to_string(),
            })
            .inc();
    }

    /// Replaces the counts of objects not Ready: `(kind, reason) → count`.
    pub fn set_not_ready(&self, counts: &std::collections::BTreeMap<(&str, &str), i64>) {
        self.excluded.clear();
        for ((kind, reason), n) in counts {
            self.excluded
                .get_or_create(&ExcludedLabel {
                    kind: kind.to_string(),
                    reason: reason.to_string(),
                })
                .set(*n);
        }
    }

    /// Replaces the MCPServer gauges: `state → count` and `namespace/name → tools`.
    pub fn set_mcpservers(
        &self,
        states: &std::collections::BTreeMap<&str, i64>,
        tools: &std::collections::BTreeMap<String, i64>,
    ) {
        self.mcpservers.clear();
        for (state, n) in states {
            self.mcpservers
                .get_or_create(&StateLabel {
                    state: state.to_string(),
                })
                .set(*n);
        }
        self.mcpserver_tools.clear();
        for (server, n) in tools {
            self.mcpserver_tools
                .get_or_create(&ServerLabel {
                    mcpserver: server.clone(),
                })
                .set(*n);
        }
    }

    /// Records one discovery: its time by cause, and its failure's kind.
    pub fn refreshed(&self, cause: &str, seconds: f64, error: Option<&str>) {
        self.refresh_durations
            .get_or_create(&CauseLabel {
                cause: cause.to_string(),
            })
            .observe(seconds);
        if let Some(kind) = error {
            self.refresh_errors
                .get_or_create(&KindLabel {
                    error: kind.to_string(),
                })
                .inc();
        }
    }

    /// Counts a `notifications/tools/list_changed`.
    pub fn list_changed(&self) {
        self.list_changed.inc();
    }

    /// The metrics in Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

async fn metrics_handler(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.render(),
    )
}

/// The metrics router: `/metrics` and `/healthz`.
pub fn router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(metrics)
}

/// Serves [`router`] on `addr` until the process ends.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, router(metrics)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn serves_counts_over_http() {
        let metrics = Arc::new(Metrics::default());
        {
            let _t = metrics.reconcile("tool");
        }
        metrics.error("tool", &crate::Error::StoreClosed);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(axum::serve(listener, router(metrics)).into_future());
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut body = String::new();
        stream.read_to_string(&mut body).await.unwrap();
        assert!(body.starts_with("HTTP/1.1 200"), "{body}");
        assert!(
            body.contains("mcc_operator_reconciliations_total{controller=\"tool\"} 1"),
            "{body}"
        );
        assert!(body.contains(
            "mcc_operator_reconcile_errors_total{controller=\"tool\",error=\"store_closed\"} 1"
        ));
        assert!(
            body.contains("mcc_operator_reconcile_duration_seconds_count{controller=\"tool\"} 1")
        );
    }
}
