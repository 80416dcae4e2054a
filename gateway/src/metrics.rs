//! The gateway's Prometheus metrics and their text exposition for `/metrics`.
//!
//! - `mcc_http_requests_total{path,status}` and `mcc_http_request_duration_seconds{path}`;
//! - `mcc_tool_calls_total{tool,outcome}` and `mcc_tool_call_duration_seconds{tool}` for
//!   `execute` (`outcome`: success, failure, unknown, unauthorized, invalid, cancelled,
//!   error);
//! - `mcc_mcp_calls_total{tool}` for every MCP tool call;
//! - `mcc_search_duration_seconds`;
//! - `mcc_session_store_errors_total{operation}`;
//! - `mcc_catalog_excluded_tools` and `mcc_catalog_excluded_api_keys`: gauges of what
//!   the catalog being served left out (a tool whose introspection failed or whose key
//!   collided; an API-key record that is malformed or shares its prefix). Which ones,
//!   and why, is in the log.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

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
    excluded_tools: Gauge,
    excluded_api_keys: Gauge,
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
                excluded_tools,
                excluded_api_keys,
            }),
        }
    }

    pub fn http_request(&self, path: &str, status: u16, elapsed: Duration) {
        let path = match path {
            "/mcp" | "/healthz" | "/readyz" | "/metrics" => path.to_string(),
            p if p.starts_with("/mcp") => "/mcp".into(),
            _ => "other".into(),
        };
        self.inner
            .http_requests
            .get_or_create(&vec![
                ("path", path.clone()),
                ("status", status.to_string()),
            ])
            .inc();
        self.inner
            .http_duration
            .get_or_create(&vec![("path", path)])
            .observe(elapsed.as_secs_f64());
    }

    pub fn tool_call(&self, tool: &str, outcome: &str, elapsed: Duration) {
        self.inner
            .tool_calls
            .get_or_create(&vec![
                ("tool", tool.to_string()),
                ("outcome", outcome.to_string()),
            ])
            .inc();
        self.inner
            .tool_duration
            .get_or_create(&vec![("tool", tool.to_string())])
            .observe(elapsed.as_secs_f64());
    }

    pub fn mcp_call(&self, mcp_tool: &str) {
        self.inner
            .mcp_calls
            .get_or_create(&vec![("tool", mcp_tool.to_string())])
            .inc();
    }

    pub fn search(&self, elapsed: Duration) {
        self.inner.search_duration.observe(elapsed.as_secs_f64());
    }

    pub fn store_error(&self, operation: &str) {
        self.inner
            .store_errors
            .get_or_create(&vec![("operation", operation.to_string())])
            .inc();
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
        m.http_request("/mcp", 200, Duration::from_millis(3));
        m.tool_call("public.echo", "success", Duration::from_millis(5));
        m.mcp_call("search");
        m.search(Duration::from_micros(200));
        m.store_error("set");
        m.catalog_excluded(2, 1);
        let text = m.render();
        for needle in [
            "mcc_http_requests_total{path=\"/mcp\",status=\"200\"} 1",
            "mcc_tool_calls_total{tool=\"public.echo\",outcome=\"success\"} 1",
            "mcc_tool_call_duration_seconds_count{tool=\"public.echo\"} 1",
            "mcc_mcp_calls_total{tool=\"search\"} 1",
            "mcc_search_duration_seconds_count 1",
            "mcc_session_store_errors_total{operation=\"set\"} 1",
            "mcc_catalog_excluded_tools 2",
            "mcc_catalog_excluded_api_keys 1",
        ] {
            assert!(text.contains(needle), "missing {needle} in\n{text}");
        }
    }
}
