//! The `connections` section: what one HTTP client may hold — how long it may take to
//! send a request's headers and body, how long a request may run (open SSE streams are
//! exempt), and how many legacy MCP sessions and SSE streams one caller may keep open.

use std::time::Duration;

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ConnectionSettings {
    /// A connection that has not sent a request's complete headers this many seconds
    /// after it opened (or after its previous response) is closed; this also closes idle
    /// keep-alive and half-open connections.
    pub header_read_timeout_secs: f64,
    /// A request whose body stalls for this many seconds (between two chunks) is answered
    /// 408.
    pub body_read_timeout_secs: f64,
    /// A request that has not produced its response this many seconds after it arrived
    /// is answered 408 (an SSE stream, once open, is exempt). `null`: the maximum tool
    /// timeout (`execution.max_timeout_secs`) plus the concurrency wait plus 30 s, or no
    /// limit without a maximum tool timeout.
    pub request_timeout_secs: Option<f64>,
    /// Legacy MCP sessions (`Mcp-Session-Id`) one caller may hold in this replica.
    pub max_legacy_sessions_per_caller: usize,
    /// SSE streams one caller may have open at once in this replica.
    pub max_sse_streams_per_caller: usize,
}

impl Default for ConnectionSettings {
    fn default() -> Self {
        Self {
            header_read_timeout_secs: 10.0,
            body_read_timeout_secs: 30.0,
            request_timeout_secs: None,
            max_legacy_sessions_per_caller: 32,
            max_sse_streams_per_caller: 16,
        }
    }
}

impl ConnectionSettings {
    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.header_read_timeout_secs)
    }

    pub fn body_read_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.body_read_timeout_secs)
    }

    /// The request timeout: set, or derived from the longest a tool call can take.
    pub fn request_timeout(
        &self,
        max_tool: Option<Duration>,
        busy_wait: Duration,
    ) -> Option<Duration> {
        match self.request_timeout_secs {
            Some(s) => Some(Duration::from_secs_f64(s)),
            None => max_tool.map(|m| m + busy_wait + Duration::from_secs(30)),
        }
    }

    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let positive = |key, v: f64| {
            if v.is_finite() && v > 0.0 && v < 1e9 {
                Ok(())
            } else {
                Err((
                    key,
                    "must be a number of seconds greater than 0".to_string(),
                ))
            }
        };
        positive(
            "connections.header_read_timeout_secs",
            self.header_read_timeout_secs,
        )?;
        positive(
            "connections.body_read_timeout_secs",
            self.body_read_timeout_secs,
        )?;
        if let Some(s) = self.request_timeout_secs {
            positive("connections.request_timeout_secs", s)?;
        }
        if self.max_legacy_sessions_per_caller == 0 {
            return Err((
                "connections.max_legacy_sessions_per_caller",
                "must be at least 1".into(),
            ));
        }
        if self.max_sse_streams_per_caller == 0 {
            return Err((
                "connections.max_sse_streams_per_caller",
                "must be at least 1".into(),
            ));
        }
        Ok(())
    }
}
