//! `logging/setLevel` and the log notifications (`notifications/message`) a legacy MCP
//! session asks for: while its level is set, the session's own `execute` calls tell it
//! when they start and how they end (info), and what they ran with and returned (debug).
//!
//! The level is the session's: it lives in the session's handler ([`SessionLog`], one
//! per MCP session copy: rmcp builds a handler per session), and a notification goes
//! through that session's peer, so no other caller, and no other session of the same
//! caller, ever receives it. Two limits follow, documented in docs/mcp.md: a session
//! restored on another replica starts without a level (set it again there), and rmcp
//! sends notifications on the session's standalone stream (the client's GET), which a
//! client must hold open to receive them.
//!
//! 2026-07-28 deprecates logging (SEP-2577) and has no sessions: `setLevel` is accepted
//! there and changes nothing. rmcp marks the logging types deprecated, hence the
//! `allow(deprecated)`s.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::{Peer, RequestContext};
use serde_json::Value;

/// The logger name of the gateway's notifications.
const LOGGER: &str = "mcc";

/// How long a notification may wait for the session's stream: a client that does not
/// read its stream must not hold up its own call.
const SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// The level a legacy session chose, shared by the clones of its handler.
#[derive(Clone, Default)]
pub struct SessionLog {
    level: Arc<Mutex<Option<LoggingLevel>>>,
}

/// Severity rank, lowest first (the spec's RFC 5424 order).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl SessionLog {
    /// `logging/setLevel` from a legacy session (`legacy`); ignored otherwise.
    pub fn set(&self, level: LoggingLevel, legacy: bool) {
        if legacy {
            *self.level.lock().unwrap_or_else(|e| e.into_inner()) = Some(level);
        }
    }

    /// The logger of one call of this session: silent without a level or a session.
    pub fn for_call(&self, ctx: &RequestContext<RoleServer>, legacy: bool) -> CallLog {
        let level = *self.level.lock().unwrap_or_else(|e| e.into_inner());
        CallLog {
            sink: level
                .filter(|_| legacy)
                .map(|level| (ctx.peer.clone(), level)),
        }
    }
}

/// Sends one call's log notifications at or above the session's level.
pub struct CallLog {
    sink: Option<(Peer<RoleServer>, LoggingLevel)>,
}

impl CallLog {
    /// A logger that sends nothing (calls outside a session with a level).
    pub fn silent() -> Self {
        Self { sink: None }
    }

    /// Whether debug messages are sent (to skip building them otherwise).
    pub fn debugging(&self) -> bool {
        self.enabled(LoggingLevel::Debug)
    }

    fn enabled(&self, level: LoggingLevel) -> bool {
        self.sink
            .as_ref()
            .is_some_and(|(_, min)| rank(level) >= rank(*min))
    }

    pub async fn info(&self, text: String) {
        self.send(LoggingLevel::Info, text).await;
    }

    pub async fn debug(&self, text: String) {
        self.send(LoggingLevel::Debug, text).await;
    }

    async fn send(&self, level: LoggingLevel, text: String) {
        let Some((peer, _)) = self.sink.as_ref().filter(|_| self.enabled(level)) else {
            return;
        };
        let message =
            LoggingMessageNotificationParam::new(level, Value::String(text)).with_logger(LOGGER);
        // A closed or stalled stream loses the message, never the call.
        let _ = tokio::time::timeout(SEND_TIMEOUT, peer.notify_logging_message(message)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_rank_in_the_spec_order() {
        assert!(rank(LoggingLevel::Debug) < rank(LoggingLevel::Info));
        assert!(rank(LoggingLevel::Warning) < rank(LoggingLevel::Error));
        assert!(rank(LoggingLevel::Alert) < rank(LoggingLevel::Emergency));
        assert!(!CallLog::silent().enabled(LoggingLevel::Emergency));
    }
}
