//! Approval before a tool runs, as the execute pipeline and both surfaces share it: the
//! question (the key and the exact validated arguments), what a confirmation is bound to
//! ([`Binding`]: user, key, SHA-256 of the arguments' canonical JSON, session handle),
//! the single-use tickets of the flows that answer in a later request (MCP 2026-07-28's
//! `input_required`, REST's `428`), the decisions the audit trail records, and the texts
//! of every refusal. Which calls need approval is [`mcc_catalog::approval::required`].
//!
//! A ticket lives in the session store's backend: Redis when configured (any replica may
//! take the answer), else this process's memory. Taking it is atomic (`GETDEL`), so a
//! ticket approves at most one call, and only a call bound exactly as the asked one.
//!
//! The same tickets, bound the same way, carry the question an upstream MCP server asked
//! a 2026-07-28 caller's call ([`Tickets::issue_held`], [`Tickets::take_held`]): such a
//! ticket names the held call and approves nothing, and an approval ticket resumes no
//! call.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::redis_conn::Conn;
use crate::session::SessionStore;
use crate::upstream::held::HeldRef;

/// Tickets one user may be asked in one TTL window (Redis) or hold at once (memory).
pub const MAX_TICKETS_PER_USER: usize = 100;
/// Tickets this process holds at once without Redis.
const MAX_TICKETS_IN_MEMORY: usize = 10_000;
/// The arguments shown in a question are cut after this many bytes of JSON.
const MAX_SHOWN_ARGUMENTS: usize = 8 * 1024;
/// `apv_` + 32 hex digits.
const TICKET_LEN: usize = 36;

/// The platform's approval requirement and the tickets of asked approvals.
pub struct Approvals {
    pub policy: mcc_catalog::approval::Policy,
    pub tickets: Tickets,
}

/// What a confirmation approves: this user running this key with exactly these
/// arguments in this session scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    pub user: String,
    pub key: String,
    /// SHA-256 (hex) of the canonical JSON of the validated arguments the caller chose
    /// (the audit event's `params_hash`).
    pub arguments: String,
    /// The `session` handle the call names, if any.
    pub session: Option<String>,
}

impl Binding {
    /// What of `other` differs from this binding (`None`: the same call).
    pub fn differs(&self, other: &Binding) -> Option<&'static str> {
        if self.user != other.user {
            Some("another user")
        } else if self.key != other.key {
            Some("another tool")
        } else if self.session != other.session {
            Some("another session")
        } else if self.arguments != other.arguments {
            Some("other arguments")
        } else {
            None
        }
    }
}

/// What became of an approval, as the audit event's `approval` records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Asked; the call ends here and the client answers in a later request.
    Asked,
    Approved,
    Declined,
    /// The ticket is unknown: expired, already used, or never issued.
    Expired,
    /// The ticket was issued for another call (arguments, tool, user or session).
    Mismatch,
    /// The client cannot be asked (no form elicitation; REST without a ticket flow).
    Unsupported,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Asked => "asked",
            Decision::Approved => "approved",
            Decision::Declined => "declined",
            Decision::Expired => "expired",
            Decision::Mismatch => "mismatch",
            Decision::Unsupported => "unsupported",
        }
    }
}

/// Why a call needing approval did not run: the decision and the caller's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub decision: Decision,
    pub message: String,
}

impl Refusal {
    pub fn declined(key: &str) -> Self {
        Self {
            decision: Decision::Declined,
            message: format!("Execution not approved: running '{key}' was declined"),
        }
    }

    pub fn unsupported(key: &str) -> Self {
        Self {
            decision: Decision::Unsupported,
            message: format!(
                "Execution refused: tool '{key}' needs approval before it runs, and this \
                 client cannot be asked (it did not declare form elicitation)"
            ),
        }
    }

    /// The ticket is gone (or never was).
    pub fn expired(key: &str) -> Self {
        Self {
            decision: Decision::Expired,
            message: format!(
                "Execution refused: the approval ticket for '{key}' is unknown, expired or \
                 already used; call again to be asked anew"
            ),
        }
    }

    /// The ticket approves another call; `what` names what differs.
    pub fn mismatch(key: &str, what: &str) -> Self {
        Self {
            decision: Decision::Mismatch,
            message: format!(
                "Execution refused: the approval was given for {what} than this call of \
                 '{key}'; call again to be asked anew"
            ),
        }
    }

    /// A client answer we cannot read (neither accept, decline nor cancel).
    pub fn unreadable(key: &str) -> Self {
        Self {
            decision: Decision::Declined,
            message: format!(
                "Execution not approved: the answer to the approval of '{key}' could not be read"
            ),
        }
    }
}

/// What the person said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Approve,
    /// Declined or cancelled.
    Decline,
}

/// The question put to the person: the key and the exact validated arguments (JSON,
/// cut at [`MAX_SHOWN_ARGUMENTS`] bytes; the hash names them whole).
pub fn question(key: &str, arguments: &Map<String, Value>, hash: &str) -> String {
    let mut shown = serde_json::to_string_pretty(arguments).unwrap_or_default();
    if shown.len() > MAX_SHOWN_ARGUMENTS {
        let mut cut = MAX_SHOWN_ARGUMENTS;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        let total = shown.len();
        shown.truncate(cut);
        shown.push_str(&format!("\n… ({total} bytes in all)"));
    }
    format!("Approve running tool '{key}' with these arguments (sha256 {hash})?\n{shown}")
}

/// What the pipeline hands a surface when a call needs approval.
pub struct ApprovalRequest<'a> {
    pub key: &'a str,
    /// The validated arguments the caller chose (overridden params left out).
    pub arguments: &'a Map<String, Value>,
    pub binding: Binding,
    pub tickets: &'a Tickets,
}

impl ApprovalRequest<'_> {
    /// The message shown to the person.
    pub fn question(&self) -> String {
        question(self.key, self.arguments, &self.binding.arguments)
    }

    /// A new ticket bound to this call; `answered`: the missing params the client gave
    /// in this request (see [`Tickets::answered`]).
    pub async fn issue(&self, answered: Option<Map<String, Value>>) -> Result<Issued, TicketError> {
        let stored = Stored {
            binding: self.binding.clone(),
            answered,
            held: None,
        };
        self.tickets.issue(&stored, self.tickets.ttl).await
    }

    /// Settles a retry that carries `ticket` and `answer`: the ticket is taken (single
    /// use, whatever follows), must be bound to exactly this call, and then the answer
    /// decides. `Ok(())`: approved.
    pub async fn settle(
        &self,
        ticket: Option<&str>,
        answer: Answer,
    ) -> Result<Result<(), Refusal>, TicketError> {
        let Some(ticket) = ticket else {
            return Ok(Err(Refusal::expired(self.key)));
        };
        // An upstream question's ticket approves nothing.
        let Some(stored) = self
            .tickets
            .take(ticket)
            .await?
            .filter(|s| s.held.is_none())
        else {
            return Ok(Err(Refusal::expired(self.key)));
        };
        if let Some(what) = stored.binding.differs(&self.binding) {
            return Ok(Err(Refusal::mismatch(self.key, what)));
        }
        Ok(match answer {
            Answer::Approve => Ok(()),
            Answer::Decline => Err(Refusal::declined(self.key)),
        })
    }
}

/// A ticket handed to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    pub id: String,
    pub expires_in: Duration,
}

/// A ticket as stored: what it approves, and the missing params the client gave in the
/// round that was asked (a 2026-07-28 retry carries only the latest answers, so the
/// answer to the approval question would otherwise come without them).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stored {
    #[serde(flatten)]
    binding: Binding,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    answered: Option<Map<String, Value>>,
    /// An upstream question's ticket: the held call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    held: Option<HeldRef>,
}

/// A taken upstream question's ticket: the held call, and the params answered in the
/// rounds before (see [`Tickets::answered`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldTicket {
    pub held: HeldRef,
    pub answered: Option<Map<String, Value>>,
}

/// The ticket store failed (Redis down) or refused (too many open questions).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TicketError {
    #[error("approval store unavailable: {0}")]
    Unavailable(String),
    #[error(
        "too many approvals asked of this user at once (at most {MAX_TICKETS_PER_USER}); answer or let them expire first"
    )]
    TooMany,
}

/// `<prefix>:approval:<id>`: one ticket (its [`Binding`] as JSON).
fn ticket_key(prefix: &str, id: &str) -> String {
    format!("{prefix}:approval:{id}")
}

/// `<prefix>:approvals-of:<user>`: tickets issued to a user in the current window.
fn count_key(prefix: &str, user: &str) -> String {
    format!("{prefix}:approvals-of:{user}")
}

/// Counts a ticket for a user within a window of ARGV[1] seconds unless ARGV[2] were
/// issued already. One key (a Cluster runs it as is). Returns 1, or -1 when full.
const COUNT_SCRIPT: &str = r#"
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
if n > tonumber(ARGV[2]) then return -1 end
return 1
"#;

/// The approval tickets: in Redis when the session store is, else in this process.
pub struct Tickets {
    backend: Backend,
    ttl: Duration,
}

enum Backend {
    Memory(Mutex<HashMap<String, (Stored, Instant)>>),
    Redis { conn: Conn, prefix: String },
}

impl Tickets {
    /// Tickets beside the session store's state, valid for `ttl`.
    pub fn beside(sessions: &SessionStore, ttl: Duration) -> Self {
        let backend = match sessions.redis_client() {
            Some((_, conn, prefix)) => Backend::Redis { conn, prefix },
            None => Backend::Memory(Mutex::new(HashMap::new())),
        };
        Self { backend, ttl }
    }

    /// How long a ticket (and a legacy client's question) stays answerable.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A ticket for the question an upstream asked the call bound by `binding`, held at
    /// `held`, valid for `ttl` (the question's own bound); `answered`: as for approvals.
    pub async fn issue_held(
        &self,
        binding: Binding,
        answered: Option<Map<String, Value>>,
        held: HeldRef,
        ttl: Duration,
    ) -> Result<Issued, TicketError> {
        let stored = Stored {
            binding,
            answered,
            held: Some(held),
        };
        self.issue(&stored, ttl).await
    }

    /// Takes an upstream question's ticket for the call bound by `binding`: gone
    /// afterwards whatever follows. `Ok(Err(what))`: unknown (or an approval's), or
    /// issued for a call whose `what` differs.
    pub async fn take_held(
        &self,
        id: &str,
        binding: &Binding,
    ) -> Result<Result<HeldTicket, Option<&'static str>>, TicketError> {
        let Some(stored) = self.take(id).await? else {
            return Ok(Err(None));
        };
        let Some(held) = stored.held else {
            return Ok(Err(None));
        };
        if let Some(what) = stored.binding.differs(binding) {
            return Ok(Err(Some(what)));
        }
        Ok(Ok(HeldTicket {
            held,
            answered: stored.answered,
        }))
    }

    async fn issue(&self, stored: &Stored, ttl: Duration) -> Result<Issued, TicketError> {
        let binding = &stored.binding;
        let id = new_id()?;
        let ttl_secs = ttl.as_secs().max(1);
        match &self.backend {
            Backend::Memory(map) => {
                let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                map.retain(|_, (_, until)| *until > now);
                let mine = map
                    .values()
                    .filter(|(s, _)| s.binding.user == binding.user)
                    .count();
                if mine >= MAX_TICKETS_PER_USER || map.len() >= MAX_TICKETS_IN_MEMORY {
                    return Err(TicketError::TooMany);
                }
                map.insert(id.clone(), (stored.clone(), now + ttl));
            }
            Backend::Redis { conn, prefix } => {
                let counted: i64 = redis::cmd("EVAL")
                    .arg(COUNT_SCRIPT)
                    .arg(1)
                    .arg(count_key(prefix, &binding.user))
                    .arg(ttl_secs)
                    .arg(MAX_TICKETS_PER_USER)
                    .query_async(&mut conn.clone())
                    .await
                    .map_err(unavailable)?;
                if counted < 0 {
                    return Err(TicketError::TooMany);
                }
                let text = serde_json::to_string(stored).unwrap_or_default();
                let _: () = redis::cmd("SET")
                    .arg(ticket_key(prefix, &id))
                    .arg(text)
                    .arg("EX")
                    .arg(ttl_secs)
                    .query_async(&mut conn.clone())
                    .await
                    .map_err(unavailable)?;
            }
        }
        Ok(Issued {
            id,
            expires_in: ttl,
        })
    }

    /// Takes a ticket: it is gone afterwards, whoever took it. `None`: unknown, expired,
    /// already taken, or not a ticket id at all.
    async fn take(&self, id: &str) -> Result<Option<Stored>, TicketError> {
        if !is_ticket_id(id) {
            return Ok(None);
        }
        match &self.backend {
            Backend::Memory(map) => {
                let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
                Ok(map
                    .remove(id)
                    .filter(|(_, until)| *until > Instant::now())
                    .map(|(s, _)| s))
            }
            Backend::Redis { conn, prefix } => {
                let text: Option<String> = redis::cmd("GETDEL")
                    .arg(ticket_key(prefix, id))
                    .query_async(&mut conn.clone())
                    .await
                    .map_err(unavailable)?;
                // A value we did not write (or cannot read) approves nothing.
                Ok(text.and_then(|t| serde_json::from_str::<Stored>(&t).ok()))
            }
        }
    }

    /// The missing params a client gave in the request a ticket was issued in, read
    /// without taking the ticket: its retry repeats only the original arguments. What
    /// they complete is still checked against the ticket's hash when it is taken.
    pub async fn answered(&self, id: &str) -> Option<Map<String, Value>> {
        if !is_ticket_id(id) {
            return None;
        }
        let stored = match &self.backend {
            Backend::Memory(map) => {
                let map = map.lock().unwrap_or_else(|e| e.into_inner());
                map.get(id)
                    .filter(|(_, until)| *until > Instant::now())
                    .map(|(s, _)| s.clone())
            }
            Backend::Redis { conn, prefix } => {
                let text: Option<String> = redis::cmd("GET")
                    .arg(ticket_key(prefix, id))
                    .query_async(&mut conn.clone())
                    .await
                    .ok()
                    .flatten();
                text.and_then(|t| serde_json::from_str::<Stored>(&t).ok())
            }
        };
        stored.and_then(|s| s.answered)
    }
}

fn unavailable(e: redis::RedisError) -> TicketError {
    TicketError::Unavailable(e.to_string())
}

/// `apv_` + 128 random bits in hex.
fn new_id() -> Result<String, TicketError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| TicketError::Unavailable(format!("system random source failed: {e}")))?;
    Ok(format!("apv_{}", hex::encode(bytes)))
}

fn is_ticket_id(id: &str) -> bool {
    id.len() == TICKET_LEN
        && id.starts_with("apv_")
        && id[4..].bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
#[path = "approval_tests.rs"]
mod tests;
