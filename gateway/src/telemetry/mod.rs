//! Logs and traces: the `tracing` subscriber the gateway runs with — the log on stderr
//! (text or JSON lines, `MCC_LOG`'s filter) and, when [`TraceExport::Otlp`] says so,
//! OpenTelemetry spans exported over OTLP/HTTP ([`export`], feature `otel`).
//!
//! The spans of a call: `request` (the HTTP server span, [`http`]) → `auth` → `search` or
//! `execute` → `run` (each tool or transform process: in-process, through the executor, or
//! in a Pod). They are declared where the work is (`auth/middleware.rs`, `mcp/`,
//! `exec/`) with the target [`TARGET`]; only spans of that target are exported, and the
//! log never shows them as span context, so with tracing off (or without the feature)
//! they are disabled at their call sites and the log reads as it always did. With
//! tracing on, log lines inside a span carry its `trace_id` and `span_id`
//! ([`log_ids`]). Log lines are not exported as span events.
//!
//! Every line is bounded in length ([`bounded_lines`]), whatever a library puts in it.
//!
//! Not here: what turns export on (settled in `config/otel.rs`); audit events, which are
//! not log lines and have sinks of their own ([`crate::audit`]).

pub mod bounded_lines;
pub mod http;
pub mod spans;

#[cfg(feature = "otel")]
mod export;
#[cfg(feature = "otel")]
pub mod log_ids;
pub mod settings;

pub use http::trace_request;
pub use spans::within;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use settings::{LogFormat, TraceExport, TracingSettings};

/// The target of every span that may be exported (the literal in the span macros).
pub const TARGET: &str = "mcc_trace";

/// The log filter when `MCC_LOG` is unset. rmcp logs each stateless request's life at
/// `info` (its service starting with the client's whole peer info, its input ending, its
/// serve loop finishing): three lines per call that say nothing a call's own line does not,
/// written synchronously on the request's thread. Its warnings and errors still show.
pub const DEFAULT_FILTER: &str = "info,rmcp=warn";

/// What [`init`] started; [`Telemetry::shutdown`] sends the spans still queued.
pub struct Telemetry {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

/// Why logging or tracing could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("tracing: building the OTLP exporter for {endpoint}: {reason}")]
    Exporter { endpoint: String, reason: String },
    #[error(
        "tracing.enabled is true, but this mcc-gateway was built without the `otel` feature: \
         it cannot export spans"
    )]
    NotBuiltIn,
    #[error("logging: a global subscriber is already installed")]
    AlreadyInstalled,
}

type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// Installs the global subscriber: the log in `format` on stderr and, when `tracing`
/// says so, the OTLP exporter, its requests sent from `runtime`.
pub fn init(
    format: LogFormat,
    tracing: &TracingSettings,
    runtime: &tokio::runtime::Handle,
) -> Result<Telemetry, TelemetryError> {
    init_writing_to(format, tracing, runtime, std::io::stderr)
}

/// [`init`] with the log written to `writer` (a test reads what the gateway logs).
pub fn init_writing_to<W>(
    format: LogFormat,
    tracing: &TracingSettings,
    runtime: &tokio::runtime::Handle,
    writer: W,
) -> Result<Telemetry, TelemetryError>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let (layers, telemetry) = layers(format, tracing, runtime, writer)?;
    tracing_subscriber::registry()
        .with(layers)
        .try_init()
        .map_err(|_| TelemetryError::AlreadyInstalled)?;
    match &tracing.export {
        TraceExport::Otlp(o) if telemetry.exporting() => tracing::info!(
            endpoint = %o.endpoint,
            service = %o.service_name,
            sampler = ?o.sampler,
            "tracing: exporting spans over OTLP/HTTP"
        ),
        TraceExport::Otlp(o) => tracing::warn!(
            endpoint = %o.endpoint,
            "tracing: an OTLP endpoint is set, but this build has no `otel` feature: no spans are exported"
        ),
        TraceExport::Off { reason } => tracing::info!("tracing: no spans are exported ({reason})"),
    }
    Ok(telemetry)
}

/// The subscriber's layers writing the log to `writer`, and the exporter they feed.
fn layers<W>(
    format: LogFormat,
    tracing: &TracingSettings,
    runtime: &tokio::runtime::Handle,
    writer: W,
) -> Result<(Vec<BoxedLayer>, Telemetry), TelemetryError>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let telemetry = Telemetry::start(tracing, runtime)?;
    let filter = EnvFilter::try_from_env("MCC_LOG")
        .unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER))
        .add_directive(format!("{TARGET}=off").parse().expect("a valid directive"));
    #[cfg_attr(not(feature = "otel"), allow(unused_mut))]
    let mut layers = vec![
        log_layer(format, telemetry.exporting(), writer)
            .with_filter(filter)
            .boxed(),
    ];
    #[cfg(feature = "otel")]
    if let Some(provider) = &telemetry.provider {
        use opentelemetry::trace::TracerProvider as _;
        let spans = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("mcc-gateway"))
            .with_threads(false)
            .with_location(false)
            .with_tracked_inactivity(false)
            .with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target(TARGET, tracing::Level::INFO),
            );
        layers.push(spans.boxed());
    }
    Ok((layers, telemetry))
}

fn log_layer<W>(format: LogFormat, with_ids: bool, writer: W) -> BoxedLayer
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    use std::io::IsTerminal;
    let writer = bounded_lines::BoundedLines::new(writer, matches!(format, LogFormat::Json));
    let layer = tracing_subscriber::fmt::layer().with_writer(writer);
    let _ = with_ids;
    match format {
        #[cfg(feature = "otel")]
        LogFormat::Json if with_ids => {
            let inner = tracing_subscriber::fmt::format().json();
            layer
                .json()
                .event_format(log_ids::WithTraceIds { inner, json: true })
                .boxed()
        }
        LogFormat::Json => layer.json().boxed(),
        LogFormat::Text => {
            let layer = layer.with_ansi(std::io::stderr().is_terminal());
            #[cfg(feature = "otel")]
            if with_ids {
                let inner = tracing_subscriber::fmt::format();
                return layer
                    .event_format(log_ids::WithTraceIds { inner, json: false })
                    .boxed();
            }
            layer.boxed()
        }
    }
}

impl Telemetry {
    /// No exporter; [`Telemetry::shutdown`] has nothing to do.
    pub fn off() -> Self {
        Self {
            #[cfg(feature = "otel")]
            provider: None,
        }
    }

    /// Builds the exporter `tracing` asks for, if any.
    pub fn start(
        tracing: &TracingSettings,
        runtime: &tokio::runtime::Handle,
    ) -> Result<Self, TelemetryError> {
        let TraceExport::Otlp(export) = &tracing.export else {
            return Ok(Self::off());
        };
        #[cfg(feature = "otel")]
        let started = Self {
            provider: Some(export::provider(export, runtime.clone())?),
        };
        #[cfg(not(feature = "otel"))]
        let started = {
            let _ = (export, runtime);
            if tracing.enabled == Some(true) {
                return Err(TelemetryError::NotBuiltIn);
            }
            Self::off()
        };
        Ok(started)
    }

    /// Whether an exporter was built (spans leave the process).
    pub fn exporting(&self) -> bool {
        #[cfg(feature = "otel")]
        let on = self.provider.is_some();
        #[cfg(not(feature = "otel"))]
        let on = false;
        on
    }

    /// Sends the spans still queued and stops the exporter (blocks up to its timeout).
    /// Call it while the runtime that [`init`] was given still runs.
    pub fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            tracing::warn!(error = %e, "tracing: the last spans could not be exported");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_writer::Captured;

    /// Without `MCC_LOG`: our `info` lines show, rmcp's per-request `info` lines do not,
    /// its warnings do.
    #[test]
    fn the_default_filter_keeps_rmcp_to_its_warnings() {
        if std::env::var_os("MCC_LOG").is_some() {
            return; // the filter under test is the one used without MCC_LOG
        }
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let captured = Captured::default();
        let writer = captured.clone();
        let (layers, _telemetry) = layers(
            LogFormat::Text,
            &TracingSettings::default(),
            runtime.handle(),
            move || writer.clone(),
        )
        .unwrap();
        let subscriber = tracing_subscriber::registry().with(layers);
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "rmcp::service", "Service initialized as server");
            tracing::warn!(target: "rmcp::service", "rmcp warning");
            tracing::info!(target: "mcc_gateway::calls::execute", "execute completed");
        });
        let lines = captured.lines();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].ends_with("rmcp warning"), "{lines:?}");
        assert!(lines[1].ends_with("execute completed"), "{lines:?}");
    }

    #[tokio::test]
    async fn no_exporter_without_otel_settings() {
        let settings = crate::config::load(None, &|_| None).unwrap();
        assert!(matches!(settings.tracing.export, TraceExport::Off { .. }));
        let telemetry =
            Telemetry::start(&settings.tracing, &tokio::runtime::Handle::current()).unwrap();
        assert!(!telemetry.exporting(), "no exporter is built");
        telemetry.shutdown();
    }

    /// A build without the feature never exports: `tracing.enabled: true` is refused,
    /// an endpoint alone only warns.
    #[cfg(not(feature = "otel"))]
    #[tokio::test]
    async fn without_the_feature_nothing_is_exported() {
        let runtime = tokio::runtime::Handle::current();
        let mut on = TracingSettings {
            enabled: Some(true),
            ..Default::default()
        };
        on.resolve(&|_| None).unwrap();
        assert!(matches!(
            Telemetry::start(&on, &runtime),
            Err(TelemetryError::NotBuiltIn)
        ));
        let mut endpoint = TracingSettings::default();
        endpoint
            .resolve(&|k| (k == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://c:4318".into()))
            .unwrap();
        assert!(!Telemetry::start(&endpoint, &runtime).unwrap().exporting());
    }

    /// The log of a gateway that exports spans.
    #[cfg(feature = "otel")]
    mod log_lines {
        use super::*;

        /// Tracing on (nothing sampled, so nothing is ever sent): one line inside a traced
        /// span, one outside; returns them and the span's trace and span id.
        fn log_in_and_out_of_a_span(format: LogFormat) -> (Vec<String>, String, String) {
            use opentelemetry::trace::TraceContextExt as _;
            use tracing_opentelemetry::OpenTelemetrySpanExt as _;
            let mut tracing = TracingSettings {
                enabled: Some(true),
                ..Default::default()
            };
            tracing.resolve(&|_| None).unwrap();
            let TraceExport::Otlp(export) = &mut tracing.export else {
                panic!("tracing.enabled: true exports");
            };
            export.sampler = settings::Sampler::AlwaysOff;
            let runtime = tokio::runtime::Runtime::new().unwrap();
            let captured = Captured::default();
            let writer = captured.clone();
            let (layers, telemetry) =
                layers(format, &tracing, runtime.handle(), move || writer.clone()).unwrap();
            assert!(telemetry.exporting());
            let subscriber = tracing_subscriber::registry().with(layers);
            let ids = tracing::subscriber::with_default(subscriber, || {
                let span = tracing::info_span!(target: "mcc_trace", "execute");
                let ids = span.in_scope(|| {
                    tracing::info!("inside");
                    let cx = span.context();
                    let sc = cx.span().span_context().clone();
                    (sc.trace_id().to_string(), sc.span_id().to_string())
                });
                tracing::info!("outside");
                ids
            });
            telemetry.shutdown();
            (captured.lines(), ids.0, ids.1)
        }

        #[test]
        fn json_log_lines_inside_a_span_carry_its_ids() {
            let (lines, trace_id, span_id) = log_in_and_out_of_a_span(LogFormat::Json);
            let lines: Vec<serde_json::Value> = lines
                .iter()
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
                .collect();
            let [inside, outside] = &lines[..] else {
                panic!("two lines: {lines:?}");
            };
            assert_eq!(inside["fields"]["message"], "inside");
            assert_eq!(inside["trace_id"], trace_id.as_str());
            assert_eq!(inside["span_id"], span_id.as_str());
            assert_eq!(inside["target"], "mcc_gateway::telemetry::tests::log_lines");
            assert!(
                inside.get("span").is_none(),
                "trace spans are not log context: {inside}"
            );
            assert_eq!(outside["fields"]["message"], "outside");
            assert!(outside.get("trace_id").is_none(), "{outside}");
        }

        #[test]
        fn text_log_lines_inside_a_span_end_with_its_ids() {
            let (lines, trace_id, span_id) = log_in_and_out_of_a_span(LogFormat::Text);
            let [inside, outside] = &lines[..] else {
                panic!("two lines: {lines:?}");
            };
            assert!(
                inside.ends_with(&format!("inside trace_id={trace_id} span_id={span_id}")),
                "{inside}"
            );
            assert!(outside.ends_with("outside"), "{outside}");
        }
    }
}
