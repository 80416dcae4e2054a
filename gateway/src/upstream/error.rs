//! Why an upstream call did not return the upstream's result, as one error type for
//! the call, the held calls of 2026-07-28 callers ([`super::held`]) and the replicas
//! that pass their answers ([`super::held_remote`]).

use super::held;

/// Why an upstream call did not return the upstream's result. Texts name the upstream
/// and what happened; never a URL, a header or the upstream's transport error text.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("upstream '{server}' is not configured on this gateway")]
    Unknown { server: String },
    #[error("upstream '{server}' is unavailable ({reason})")]
    Unavailable { server: String, reason: String },
    #[error("upstream '{server}' did not answer within {seconds} s")]
    Timeout { server: String, seconds: f64 },
    #[error("upstream '{server}' refused the call: {message}")]
    Refused { server: String, message: String },
    /// A 2026-07-28 upstream's `input_required` result: answering it takes a retry of
    /// the upstream call, which is not built (legacy upstreams' questions are relayed).
    #[error(
        "upstream '{server}' asked for input with input_required; only questions asked within the call (elicitation/create) are relayed"
    )]
    InputRequired { server: String },
    /// The upstream asked a 2026-07-28 caller's call a question: the call is held open
    /// and the caller is asked in its reply ([`held`]). Not an error the caller sees.
    #[error("upstream '{server}' asked a question; the call waits for the caller's answer")]
    Asked {
        server: String,
        asked: Box<held::Asked>,
    },
    #[error(
        "upstream '{server}': the question this answers is no longer open (it was not answered in time, or its call ended); call again"
    )]
    QuestionClosed { server: String },
    #[error(
        "upstream '{server}': the question this answers is held by another gateway replica, which cannot be reached ({reason}); call again"
    )]
    HolderUnreachable { server: String, reason: String },
    #[error(
        "upstream '{server}': too many calls wait for their callers' answers on this replica (at most {max}); try again later"
    )]
    TooManyHeld { server: String, max: usize },
    /// A held call's error as the replica holding it worded it.
    #[error("{message}")]
    Relayed { message: String },
}
