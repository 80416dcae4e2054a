//! The audit trail: one structured event per `search` and per `execute`, whatever its
//! outcome (success, failure, error, and the denied attempts: unknown tool,
//! unauthorized, invalid params, rate-limited). This module owns the event
//! ([`AuditEvent`]) and handing it to the sinks ([`Auditor`]); [`sink`] owns writing
//! (stdout JSON lines, a Redis stream); [`read`] owns reading the stream back.
//!
//! What an event never holds: a credential (only its kind and, for an API key, its public
//! `mcc_<prefix>`), an overridden param's value, an environment value, a session value.
//! The params a caller chose are recorded only with `audit.params: true`; their hash
//! always (equal calls are recognisable without the values).
//!
//! Recording never fails or slows a call: events go into a bounded queue per sink and a
//! background task writes them; an event that finds its queue full, or that a sink
//! cannot write, is counted in `mcc_audit_events_dropped_total{sink,reason}` (and
//! logged), never lost silently.

pub mod read;
pub mod sink;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use mcc_catalog::Tool;

use crate::auth::Identity;
use crate::metrics::Metrics;

/// The `audit` settings section.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AuditSettings {
    /// `false`: no events at all.
    pub enabled: bool,
    /// Record the params a caller chose (never overridden ones). MCC's `audit_params`.
    pub params: bool,
    /// Write each event as one JSON line on stdout (the gateway logs on stderr).
    pub stdout: bool,
    /// Also append each event to this Redis stream (field `event`, the JSON text);
    /// `null`: no stream.
    pub stream: Option<String>,
    /// The stream's Redis; default: the session store's.
    pub redis_url: Option<String>,
    /// Keep about this many entries (`XADD … MAXLEN ~`).
    pub stream_max_len: u64,
    /// Also drop entries older than this (`XTRIM … MINID ~`); `null`: no age bound.
    pub stream_max_age_secs: Option<u64>,
    /// Events waiting per sink at most; past it new events are dropped and counted.
    pub queue_size: usize,
}

impl Default for AuditSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            params: false,
            stdout: true,
            stream: None,
            redis_url: None,
            stream_max_len: 100_000,
            stream_max_age_secs: None,
            queue_size: 10_000,
        }
    }
}

impl AuditSettings {
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.queue_size == 0 {
            return Err(("audit.queue_size", "must be greater than 0".into()));
        }
        if self.stream_max_len == 0 {
            return Err(("audit.stream_max_len", "must be greater than 0".into()));
        }
        if self.stream.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return Err((
                "audit.stream",
                "is empty; name the Redis stream or unset it".into(),
            ));
        }
        match self.redis_url.as_deref() {
            Some(url) if !crate::redis_conn::is_redis_url(url) => Err((
                "audit.redis_url",
                "must start with redis:// or rediss://".into(),
            )),
            _ => Ok(()),
        }
    }
}

/// The longest tool key an event records (catalog keys are at most 253 characters).
pub const MAX_TOOL_BYTES: usize = 512;

/// One audited `search` or `execute`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct AuditEvent {
    /// UTC, RFC 3339 with milliseconds.
    pub time: String,
    /// `execute` or `search`.
    pub event: String,
    pub user: String,
    /// `none`, `dev`, `jwt`, `api_key` or `service_account`.
    pub credential: String,
    /// `mcc_<prefix>` of an API key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
    /// The key asked for (`execute`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// `execute`: success, failure, error, unknown, unauthorized, invalid,
    /// rate_limited, cancelled, input_required, not_approved; `search`: success, invalid, error.
    pub outcome: String,
    /// The tool's exit code (0 for a cached result); absent when nothing ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub duration_ms: f64,
    /// Bytes of the result sent back.
    pub bytes_out: u64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// SHA-256 of the caller's params (overridden ones excluded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params_hash: Option<String>,
    /// The caller's params (`audit.params: true`; overridden ones excluded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub params: Option<Map<String, Value>>,
    /// `search`: the query and `min_score`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_score: Option<f64>,
    /// Why a call was refused (our own text, e.g. the rate-limit refusal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `execute` of a tool that needs approval: asked, approved, declined, expired,
    /// mismatch or unsupported (docs/approval.md); `params_hash` is then the hash the
    /// approval is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
}

impl AuditEvent {
    /// An event of `kind` by `caller`, stamped now; the rest is filled in as the call goes.
    pub fn new(kind: &str, caller: &Identity) -> Self {
        Self {
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            event: kind.to_string(),
            user: caller.username().to_string(),
            credential: caller.credential.kind().to_string(),
            key_prefix: caller.credential.key_prefix(),
            tool: None,
            outcome: "error".into(),
            exit_code: None,
            duration_ms: 0.0,
            bytes_out: 0,
            cached: false,
            params_hash: None,
            params: None,
            query: None,
            min_score: None,
            reason: None,
            approval: None,
        }
    }

    /// The tool key a caller asked for, cut to [`MAX_TOOL_BYTES`] (it is the caller's
    /// text until it is found in the catalog).
    pub fn set_tool(&mut self, key: &str) {
        self.tool = Some(crate::telemetry::spans::cut(key, MAX_TOOL_BYTES).to_string());
    }

    /// The call ended: its outcome and how long it took.
    pub fn finish(&mut self, outcome: &str, elapsed: Duration) {
        self.outcome = outcome.to_string();
        self.duration_ms = elapsed.as_secs_f64() * 1000.0;
    }
}

/// The params a caller could choose: overridden params (deployment secrets) left out.
pub fn chosen_params(tool: &Tool, params: &Map<String, Value>) -> Map<String, Value> {
    params
        .iter()
        .filter(|(name, _)| {
            tool.params
                .iter()
                .find(|p| &p.name == *name)
                .is_none_or(|p| p.override_value.is_none())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Hands events to the sinks. Cheap to clone; [`Auditor::off`] records nothing.
#[derive(Clone)]
pub struct Auditor {
    inner: Option<Arc<Inner>>,
    /// The Redis stream events go to, for reading back (`GET /v1/audit`).
    stream: Option<read::Stream>,
}

struct Inner {
    sinks: Vec<sink::Queue>,
    params: bool,
    metrics: Metrics,
    warned: sink::Throttle,
}

impl std::fmt::Debug for Auditor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sinks: Vec<&str> = self
            .inner
            .iter()
            .flat_map(|i| i.sinks.iter().map(|s| s.name))
            .collect();
        f.debug_struct("Auditor").field("sinks", &sinks).finish()
    }
}

impl Auditor {
    /// Records nothing.
    pub fn off() -> Self {
        Self {
            inner: None,
            stream: None,
        }
    }

    /// The Redis stream of `audit.stream`, when there is one (also with `enabled: false`:
    /// what it already holds can still be read).
    pub fn stream(&self) -> Option<&read::Stream> {
        self.stream.as_ref()
    }

    /// The sinks `settings` configure (the stream over `redis`, when given), each with
    /// its background writer. Must be called within a Tokio runtime.
    pub fn start(
        settings: &AuditSettings,
        redis: Option<crate::redis_conn::Conn>,
        metrics: &Metrics,
    ) -> Self {
        let stream = match (&settings.stream, &redis) {
            (Some(key), Some(conn)) => Some(read::Stream::new(key.clone(), conn.clone())),
            _ => None,
        };
        if !settings.enabled {
            return Self {
                inner: None,
                stream,
            };
        }
        let mut sinks = Vec::new();
        if settings.stdout {
            sinks.push(sink::stdout(settings.queue_size, metrics.clone()));
        }
        match (&settings.stream, redis) {
            (Some(stream), Some(conn)) => sinks.push(sink::redis_stream(
                sink::StreamSettings {
                    key: stream.clone(),
                    max_len: settings.stream_max_len,
                    max_age: settings.stream_max_age_secs.map(Duration::from_secs),
                },
                conn,
                settings.queue_size,
                metrics.clone(),
            )),
            (Some(stream), None) => tracing::error!(
                stream,
                "audit.stream is set but there is no Redis (set audit.redis_url or session.redis_url): no stream events"
            ),
            _ => {}
        }
        Self {
            stream,
            ..Self::with_sinks(sinks, settings.params, metrics)
        }
    }

    /// An auditor over given sinks (tests add their own, see [`sink::channel`]).
    pub fn with_sinks(sinks: Vec<sink::Queue>, params: bool, metrics: &Metrics) -> Self {
        Self {
            inner: Some(Arc::new(Inner {
                sinks,
                params,
                metrics: metrics.clone(),
                warned: sink::Throttle::default(),
            })),
            stream: None,
        }
    }

    /// Waits, at most `within` in all, until every sink has written (or counted as dropped)
    /// what was queued; at shutdown, so the last calls' events are not lost with the
    /// process. Logs the sinks that did not finish.
    pub async fn flush(&self, within: Duration) {
        let Some(inner) = &self.inner else {
            return;
        };
        let deadline = tokio::time::Instant::now() + within;
        for queue in &inner.sinks {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if !queue.flush(left).await {
                tracing::warn!(
                    sink = queue.name,
                    "audit: shutting down with events not yet written"
                );
            }
        }
    }

    /// Whether events carry the caller's params (`audit.params`).
    pub fn records_params(&self) -> bool {
        self.inner.as_ref().is_some_and(|i| i.params)
    }

    /// Notes a validated call's params on `event`: their hash, and the values when
    /// `audit.params` is on; overridden params never.
    pub fn note_params(&self, event: &mut AuditEvent, tool: &Tool, params: &Map<String, Value>) {
        if self.inner.is_none() {
            return;
        }
        let chosen = chosen_params(tool, params);
        event.params_hash = Some(crate::exec::cache::canonical_hash(&chosen));
        if self.records_params() {
            event.params = Some(chosen);
        }
    }

    /// Queues `event` for every sink; never waits. A full queue drops it for that sink,
    /// counted and logged (at most once per interval).
    pub fn record(&self, event: &AuditEvent) {
        let Some(inner) = &self.inner else {
            return;
        };
        let line: Arc<str> = match serde_json::to_string(event) {
            Ok(s) => s.into(),
            Err(e) => {
                tracing::error!(error = %e, "audit event not serializable");
                return;
            }
        };
        for queue in &inner.sinks {
            if !queue.offer(line.clone()) {
                inner.metrics.audit_dropped(queue.name, "queue_full", 1);
                if inner.warned.ready() {
                    tracing::warn!(
                        sink = queue.name,
                        "audit: sink queue full, events dropped (counted in mcc_audit_events_dropped_total)"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
