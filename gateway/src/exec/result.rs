//! Turning a finished process into an [`Outcome`]: stdout on exit 0, the triple
//! `(code, stdout, stderr)` otherwise (`code` is `-N` for a process killed by signal N,
//! `-1` with `timeout after Ns` for a timeout), the limit-hit line before stderr, and the
//! truncation marker on output cut at the configured size.
//!
//! Also the one truncation rule of the gateway ([`limit`], [`truncate`]): a tool's output
//! here and the whole response in `calls::text` are cut the same way.

use std::time::Duration;

use mcc_catalog::Limits;

use super::Outcome;
use super::limits::{hit_prefix, timeout_message};
use super::process::{Captured, Ending, Finished};

macro_rules! notice {
    () => {
        "[Response truncated due to size limit]"
    };
}

/// What a cut result ends with (as MCC's response limiter words it).
pub const TRUNCATION_NOTICE: &str = notice!();

/// Appended to text cut at the size limit: a blank line, then [`TRUNCATION_NOTICE`].
pub const TRUNCATION_MARKER: &str = concat!("\n\n", notice!());

/// The text of a captured stream: lossy UTF-8; when the stream was longer than the
/// capture, [`truncate`]d.
pub fn text(captured: &Captured, max: usize) -> String {
    if !captured.truncated() {
        return String::from_utf8_lossy(&captured.bytes).into_owned();
    }
    truncate(&captured.bytes, max)
}

/// `text` as is when it fits in `max` bytes, else [`truncate`]d.
pub fn limit(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    truncate(text.as_bytes(), max)
}

/// The truncation rule: the longest prefix of `bytes` that, with [`TRUNCATION_MARKER`],
/// fits in `max` bytes (never ending inside a UTF-8 character), then the marker. When
/// `max` is smaller than the marker, the marker alone.
pub fn truncate(bytes: &[u8], max: usize) -> String {
    let keep = max.saturating_sub(TRUNCATION_MARKER.len()).min(bytes.len());
    let kept = &bytes[..keep];
    let kept = &kept[..kept.len() - incomplete_tail(kept)];
    let mut out = String::from_utf8_lossy(kept).into_owned();
    out.push_str(TRUNCATION_MARKER);
    out
}

/// How many bytes at the end of `bytes` are the start of a UTF-8 character that the cut
/// left incomplete.
fn incomplete_tail(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let b = bytes[bytes.len() - back];
        if b & 0xC0 == 0x80 {
            continue; // a continuation byte: keep looking for the lead byte
        }
        let width = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if width > back { back } else { 0 };
    }
    0
}

/// The exit code MCC reports: the status, or minus the signal number.
pub fn exit_code(ending: Ending) -> i32 {
    match ending {
        Ending::Exited(code) => code,
        Ending::Signaled(sig) => -sig,
        Ending::TimedOut => -1,
    }
}

/// The outcome of an exec or curl tool (and of a transform): stdout on success.
/// `timeout` is the one the process ran with (declared or the deployment's default).
pub fn shell_outcome(
    finished: &Finished,
    limits: &Limits,
    timeout: Option<Duration>,
    max: usize,
) -> Outcome {
    match finished.ending {
        Ending::Exited(0) => Outcome::Success(text(&finished.stdout, max).into()),
        _ => failure(finished, limits, timeout, max, text(&finished.stderr, max)),
    }
}

/// The failure triple, with `stderr` as the caller prepared it (fn tools shorten it).
pub fn failure(
    finished: &Finished,
    limits: &Limits,
    timeout: Option<Duration>,
    max: usize,
    stderr: String,
) -> Outcome {
    match finished.ending {
        Ending::TimedOut => Outcome::Failure {
            code: -1,
            stdout: String::new(),
            stderr: timeout_message(timeout),
        },
        Ending::Signaled(sig) if !limits.is_empty() => Outcome::Failure {
            code: -sig,
            stdout: text(&finished.stdout, max),
            stderr: hit_prefix(sig, limits) + &stderr,
        },
        ending => Outcome::Failure {
            code: exit_code(ending),
            stdout: text(&finished.stdout, max),
            stderr,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(s: &str, total: u64) -> Captured {
        Captured {
            bytes: s.as_bytes().to_vec(),
            total,
            tail: vec![],
        }
    }

    #[test]
    fn whole_output_is_kept() {
        assert_eq!(text(&captured("héllo", 6), 100), "héllo");
    }

    #[test]
    fn cut_output_fits_the_limit_and_ends_with_the_marker() {
        let max = TRUNCATION_MARKER.len() + 4;
        let out = text(&captured(&"x".repeat(max), 10_000), max);
        assert_eq!(out, format!("xxxx{TRUNCATION_MARKER}"));
        assert!(out.len() <= max);
    }

    #[test]
    fn limit_keeps_short_text_and_cuts_long_text_like_captured_output() {
        assert_eq!(limit("short".into(), 100), "short");
        let long = "é".repeat(100);
        let max = TRUNCATION_MARKER.len() + 5;
        let cut = limit(long.clone(), max);
        assert_eq!(cut, format!("éé{TRUNCATION_MARKER}"));
        assert_eq!(cut, text(&captured(&long, 10_000), max));
        assert!(cut.ends_with(TRUNCATION_NOTICE));
        assert_eq!(limit(long, 3), TRUNCATION_MARKER);
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        // "aé" is 3 bytes; keeping 2 would split the é.
        let max = TRUNCATION_MARKER.len() + 2;
        let out = text(&captured(&"aé".repeat(40), 1_000), max);
        assert_eq!(out, format!("a{TRUNCATION_MARKER}"));
        assert_eq!(incomplete_tail("€".as_bytes()), 0);
        assert_eq!(incomplete_tail(&"€".as_bytes()[..2]), 2);
    }
}
