//! The `concurrency` section: how many tool executions run at once (globally, per caller,
//! per tool) and how long a call waits for a slot before it is answered "busy". The
//! limiter itself is [`super::limiter`].

use std::time::Duration;

use serde::Deserialize;

use super::LimiterSettings;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ConcurrencySettings {
    /// Executions running at once on this gateway, all callers and tools together.
    pub max_executions: usize,
    /// Executions one caller (username; anonymous callers share one) runs at once.
    pub max_per_caller: usize,
    /// Executions of one tool at once.
    pub max_per_tool: usize,
    /// How long a call waits for a free slot before it is refused, in milliseconds.
    pub wait_ms: u64,
}

impl Default for ConcurrencySettings {
    fn default() -> Self {
        Self {
            max_executions: 64,
            max_per_caller: 8,
            max_per_tool: 16,
            wait_ms: 5_000,
        }
    }
}

impl ConcurrencySettings {
    pub fn limiter(&self) -> LimiterSettings {
        LimiterSettings {
            global: self.max_executions,
            per_caller: self.max_per_caller,
            per_tool: self.max_per_tool,
            wait: Duration::from_millis(self.wait_ms),
        }
    }

    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let max = tokio::sync::Semaphore::MAX_PERMITS;
        for (key, n) in [
            ("concurrency.max_executions", self.max_executions),
            ("concurrency.max_per_caller", self.max_per_caller),
            ("concurrency.max_per_tool", self.max_per_tool),
        ] {
            if n == 0 || n > max {
                return Err((key, format!("must be between 1 and {max}")));
            }
        }
        Ok(())
    }
}
