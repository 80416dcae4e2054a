//! The gateway's Prometheus metrics and their text exposition for `/metrics`.
//!
//! - `mcc_http_requests_total{path,status}` and `mcc_http_request_duration_seconds{path}`;
//! - `mcc_tool_calls_total{tool,outcome}` and `mcc_tool_call_duration_seconds{tool}` for
//!   `execute` (`outcome`: success, failure, unknown, unauthorized, invalid, cancelled,
//!   error);
//! - `mcc_mcp_calls_total{tool}` for every MCP tool call;
//! - `mcc_search_duration_seconds`;
//! - `mcc_session_store_errors_total{operation}`;
//! - `mcc_rate_limit_store_errors_total{on_error}`: rate-limit checks Redis could not
//!   answer (`on_error`: `open`, the call ran; `closed`, it was refused);
//! - `mcc_audit_events_total{sink}` (written) and `mcc_audit_events_dropped_total{sink,
//!   reason}` (`reason`: `queue_full`, `write_error`): no audit event is lost silently;
//! - `mcc_catalog_excluded_tools` and `mcc_catalog_excluded_api_keys`: gauges of what
//!   the catalog being served left out (a tool whose introspection failed or whose key
//!   collided; an API-key record that is malformed or shares its prefix). Which ones,
//!   and why, is in the log.
//!
//! Label values a caller influences are never taken as given: a `tool` label is a key of
//! the catalog being served ([`Metrics::catalog_tools`]) or `unknown`, an MCP tool is one
//! of the surface's, a path one of the routes or `other` (both mapped by their callers,
//! which know the surface and the routes, as `&'static str`), an outcome one of
//! [`OUTCOMES`] or `other`. So the number of series is bounded by the catalog (series of
//! keys that leave it are removed), and every value is escaped as the exposition format
//! requires ([`Label`]), whatever a catalog key contains.

use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The `metrics` settings section: where `/metrics` is served and whether it needs a
/// credential (assembled into the settings by `config`).
#[derive(Clone, Debug, Default, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsSettings {
    /// Serve `/metrics` on this port only (same host as `server.host`), not on the MCP
    /// port. `null`: on the MCP port.
    pub port: Option<u16>,
    /// When set, `/metrics` answers only requests with `Authorization: Bearer <token>`.
    pub token: Option<mcc_catalog::Secret>,
}

impl MetricsSettings {
    pub fn validate(&self, server_port: u16) -> Result<(), (&'static str, String)> {
        if self.port == Some(server_port) {
            return Err((
                "metrics.port",
                format!("is server.port ({server_port}); choose another port or leave it unset"),
            ));
        }
        if self
            .token
            .as_ref()
            .is_some_and(|t| t.expose().trim().is_empty())
        {
            return Err(("metrics.token", "is empty; unset it or give a token".into()));
        }
        Ok(())
    }
}

type Labels = Vec<(&'static str, Label)>;

/// The label value of every caller-supplied key that is not in the catalog.
pub const UNKNOWN: &str = "unknown";

/// What ended an `execute` call: the one vocabulary of `mcc_tool_calls_total`'s `outcome`
/// label, of audit events' `outcome` and of `mcc audit --outcome`
/// (`calls::executed::Executed::label` names each call's).
pub const OUTCOMES: &[&str] = &[
    "success",
    "failure",
    "unknown",
    "unauthorized",
    "invalid",
    "cancelled",
    "input_required",
    "not_approved",
    "rate_limited",
    "error",
];

/// The `outcome` label of anything outside [`OUTCOMES`].
const OTHER_OUTCOME: &str = "other";

/// A label value, escaped on output as the text format requires (`\\`, `\"`, `\n`):
/// prometheus-client writes label values verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Label(String);

impl Label {
    fn new(value: impl Into<String>) -> Self {
        Label(value.into())
    }
}

impl EncodeLabelValue for Label {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        let mut rest = self.0.as_str();
        while let Some(i) = rest.find(['\\', '"', '\n']) {
            encoder.write_str(&rest[..i])?;
            encoder.write_str(match rest.as_bytes()[i] {
                b'\\' => "\\\\",
                b'"' => "\\\"",
                _ => "\\n",
            })?;
            rest = &rest[i + 1..];
        }
        encoder.write_str(rest)
    }
}

fn latency_histogram() -> Histogram {
    // 100 µs .. ~52 s
    Histogram::new(exponential_buckets(0.0001, 2.0, 20))
}

/// All metrics; cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    http_requests: Family<Labels, Counter>,
    http_duration: Family<Labels, Histogram, fn() -> Histogram>,
    tool_calls: Family<Labels, Counter>,
    tool_duration: Family<Labels, Histogram, fn() -> Histogram>,
    mcp_calls: Family<Labels, Counter>,
    search_duration: Histogram,
    store_errors: Family<Labels, Counter>,
    rate_limit_errors: Family<Labels, Counter>,
    audit_written: Family<Labels, Counter>,
    audit_dropped: Family<Labels, Counter>,
    excluded_tools: Gauge,
    excluded_api_keys: Gauge,
    /// The keys of the catalog being served: the only `tool` label values besides `unknown`.
    catalog_keys: RwLock<HashSet<String>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("mcc");
        let http_requests = Family::<Labels, Counter>::default();
        let http_duration = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let tool_calls = Family::<Labels, Counter>::default();
        let tool_duration = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let mcp_calls = Family::<Labels, Counter>::default();
        let search_duration = latency_histogram();
        let store_errors = Family::<Labels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests by path and status",
            http_requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "HTTP request latency by path",
            http_duration.clone(),
        );
        registry.register(
            "tool_calls",
            "execute calls by tool and outcome",
            tool_calls.clone(),
        );
        registry.register(
            "tool_call_duration_seconds",
            "execute latency by tool",
            tool_duration.clone(),
        );
        registry.register("mcp_calls", "MCP tool calls by MCP tool", mcp_calls.clone());
        registry.register(
            "search_duration_seconds",
            "search latency",
            search_duration.clone(),
        );
        registry.register(
            "session_store_errors",
            "session store failures by operation",
            store_errors.clone(),
        );
        let rate_limit_errors = Family::<Labels, Counter>::default();
        registry.register(
            "rate_limit_store_errors",
            "rate-limit checks the store could not answer, by on_error (open: ran, closed: refused)",
            rate_limit_errors.clone(),
        );
        let audit_written = Family::<Labels, Counter>::default();
        registry.register(
            "audit_events",
            "audit events written, by sink",
            audit_written.clone(),
        );
        let audit_dropped = Family::<Labels, Counter>::default();
        registry.register(
            "audit_events_dropped",
            "audit events not written, by sink and reason (queue_full, write_error)",
            audit_dropped.clone(),
        );
        let excluded_tools = Gauge::default();
        let excluded_api_keys = Gauge::default();
        registry.register(
            "catalog_excluded_tools",
            "tools of the catalog source left out of the served catalog",
            excluded_tools.clone(),
        );
        registry.register(
            "catalog_excluded_api_keys",
            "API-key records of the catalog source left out",
            excluded_api_keys.clone(),
        );
        Self {
            inner: Arc::new(Inner {
                registry,
                http_requests,
                http_duration,
                tool_calls,
                tool_duration,
                mcp_calls,
                search_duration,
                store_errors,
                rate_limit_errors,
                audit_written,
                audit_dropped,
                excluded_tools,
                excluded_api_keys,
                catalog_keys: RwLock::default(),
            }),
        }
    }

    /// Counts a request to `route`: one of the router's own route names (the HTTP layer
    /// maps a request's path to one, or to `other`), never a path as the client sent it.
    pub fn http_request(&self, route: &'static str, status: u16, elapsed: Duration) {
        self.inner
            .http_requests
            .get_or_create(&vec![
                ("path", Label::new(route)),
                ("status", Label::new(status.to_string())),
            ])
            .inc();
        self.inner
            .http_duration
            .get_or_create(&vec![("path", Label::new(route))])
            .observe(elapsed.as_secs_f64());
    }

    /// Counts an `execute` call. `tool` is what the caller asked for: it becomes a label
    /// only when it is a key of the catalog being served, else [`UNKNOWN`].
    pub fn tool_call(&self, tool: &str, outcome: &str, elapsed: Duration) {
        let tool = self.tool_label(tool);
        let outcome = OUTCOMES
            .iter()
            .find(|o| **o == outcome)
            .copied()
            .unwrap_or(OTHER_OUTCOME);
        self.inner
            .tool_calls
            .get_or_create(&vec![
                ("tool", tool.clone()),
                ("outcome", Label::new(outcome)),
            ])
            .inc();
        self.inner
            .tool_duration
            .get_or_create(&vec![("tool", tool)])
            .observe(elapsed.as_secs_f64());
    }

    fn tool_label(&self, tool: &str) -> Label {
        let keys = self
            .inner
            .catalog_keys
            .read()
            .unwrap_or_else(|p| p.into_inner());
        Label::new(if keys.contains(tool) { tool } else { UNKNOWN })
    }

    /// The keys of the catalog now served (called at each catalog swap): later calls of
    /// other keys count as [`UNKNOWN`], and the series of keys that left are removed.
    pub fn catalog_tools<'a>(&self, keys: impl IntoIterator<Item = &'a str>) {
        let new: HashSet<String> = keys.into_iter().map(str::to_string).collect();
        let mut keys = self
            .inner
            .catalog_keys
            .write()
            .unwrap_or_else(|p| p.into_inner());
        for gone in keys.difference(&new) {
            let tool = Label::new(gone.as_str());
            for outcome in OUTCOMES.iter().chain([&OTHER_OUTCOME]) {
                self.inner.tool_calls.remove(&vec![
                    ("tool", tool.clone()),
                    ("outcome", Label::new(*outcome)),
                ]);
            }
            self.inner.tool_duration.remove(&vec![("tool", tool)]);
        }
        *keys = new;
    }

    /// Counts an MCP tool call. `mcp_tool` is a name of the MCP surface's: the MCP layer
    /// counts only the calls it dispatched (an unknown name is refused before).
    pub fn mcp_call(&self, mcp_tool: &str) {
        self.inner
            .mcp_calls
            .get_or_create(&vec![("tool", Label::new(mcp_tool))])
            .inc();
    }

    pub fn search(&self, elapsed: Duration) {
        self.inner.search_duration.observe(elapsed.as_secs_f64());
    }

    /// `operation` is one of the code's own names (never a caller's input).
    pub fn store_error(&self, operation: &str) {
        self.inner
            .store_errors
            .get_or_create(&vec![("operation", Label::new(operation))])
            .inc();
    }

    /// A rate-limit check the store could not answer; `on_error` is `open` or `closed`.
    pub fn rate_limit_store_error(&self, on_error: &'static str) {
        self.inner
            .rate_limit_errors
            .get_or_create(&vec![("on_error", Label::new(on_error))])
            .inc();
    }

    /// `n` audit events written to `sink` (a sink's own name).
    pub fn audit_written(&self, sink: &'static str, n: u64) {
        self.inner
            .audit_written
            .get_or_create(&vec![("sink", Label::new(sink))])
            .inc_by(n);
    }

    /// `n` audit events `sink` did not write; `reason` is `queue_full` or `write_error`.
    pub fn audit_dropped(&self, sink: &'static str, reason: &'static str, n: u64) {
        self.inner
            .audit_dropped
            .get_or_create(&vec![
                ("sink", Label::new(sink)),
                ("reason", Label::new(reason)),
            ])
            .inc_by(n);
    }

    /// What the catalog being served left out (set at each swap).
    pub fn catalog_excluded(&self, tools: usize, api_keys: usize) {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.inner.excluded_tools.set(count(tools));
        self.inner.excluded_api_keys.set(count(api_keys));
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.inner.registry).expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family() {
        let m = Metrics::new();
        m.catalog_tools(["public.echo"]);
        m.http_request("/mcp", 200, Duration::from_millis(3));
        m.tool_call("public.echo", "success", Duration::from_millis(5));
        m.mcp_call("search");
        m.search(Duration::from_micros(200));
        m.store_error("set");
        m.rate_limit_store_error("open");
        m.audit_written("stdout", 2);
        m.audit_dropped("redis", "queue_full", 1);
        m.catalog_excluded(2, 1);
        let text = m.render();
        for needle in [
            "mcc_http_requests_total{path=\"/mcp\",status=\"200\"} 1",
            "mcc_tool_calls_total{tool=\"public.echo\",outcome=\"success\"} 1",
            "mcc_tool_call_duration_seconds_count{tool=\"public.echo\"} 1",
            "mcc_mcp_calls_total{tool=\"search\"} 1",
            "mcc_search_duration_seconds_count 1",
            "mcc_session_store_errors_total{operation=\"set\"} 1",
            "mcc_rate_limit_store_errors_total{on_error=\"open\"} 1",
            "mcc_audit_events_total{sink=\"stdout\"} 2",
            "mcc_audit_events_dropped_total{sink=\"redis\",reason=\"queue_full\"} 1",
            "mcc_catalog_excluded_tools 2",
            "mcc_catalog_excluded_api_keys 1",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }

    #[test]
    fn keys_outside_the_catalog_count_as_unknown() {
        let m = Metrics::new();
        m.catalog_tools(["public.echo"]);
        for i in 0..100 {
            m.tool_call(&format!("random.{i}"), "unknown", Duration::ZERO);
        }
        m.tool_call("x\"} 1\nmcc_fake 9\n", "unknown", Duration::ZERO);
        m.tool_call("public.echo", "made-up outcome", Duration::ZERO);
        let text = m.render();
        assert!(
            text.contains("mcc_tool_calls_total{tool=\"unknown\",outcome=\"unknown\"} 101"),
            "{text}"
        );
        assert!(text.contains("mcc_tool_calls_total{tool=\"public.echo\",outcome=\"other\"} 1"));
        assert!(!text.contains("random."), "{text}");
        assert!(!text.contains("mcc_fake"), "{text}");
    }

    #[test]
    fn label_values_are_escaped() {
        let m = Metrics::new();
        let key = "evil\"} 1\nmcc_injected{a=\"b\\";
        m.catalog_tools([key]);
        m.tool_call(key, "success", Duration::ZERO);
        let text = m.render();
        assert!(
            text.contains(r#"mcc_tool_calls_total{tool="evil\"} 1\nmcc_injected{a=\"b\\",outcome="success"} 1"#),
            "{text}"
        );
        assert!(
            !text.lines().any(|l| l.starts_with("mcc_injected")),
            "{text}"
        );
    }

    #[test]
    fn series_of_keys_that_leave_the_catalog_are_removed() {
        let m = Metrics::new();
        m.catalog_tools(["a.one", "a.two"]);
        m.tool_call("a.one", "success", Duration::ZERO);
        m.tool_call("a.two", "failure", Duration::ZERO);
        m.catalog_tools(["a.two"]);
        let text = m.render();
        assert!(!text.contains("a.one"), "{text}");
        assert!(text.contains("tool=\"a.two\""), "{text}");
        m.tool_call("a.one", "success", Duration::ZERO);
        assert!(!m.render().contains("a.one"));
    }
}
