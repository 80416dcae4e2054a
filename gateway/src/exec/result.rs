//! Turning a finished process into an [`Outcome`]: stdout on exit 0, the triple
//! `(code, stdout, stderr)` otherwise (`code` is `-N` for a process killed by signal N,
//! `-1` with `timeout after Ns` for a timeout), the limit-hit line before stderr, and the
//! truncation marker on output cut at the configured size.

use std::time::Duration;

use mcc_catalog::Limits;

use super::Outcome;
use super::limits::{hit_prefix, timeout_message};
use super::process::{Captured, Ending, Finished};

/// Appended to output cut at the size limit (as MCC's response limiter words it).
pub const TRUNCATION_MARKER: &str = "\n\n[Response truncated due to size limit]";

/// The text of a captured stream: lossy UTF-8; when the stream was longer than the
/// capture, cut so that text and [`TRUNCATION_MARKER`] fit in `max` bytes.
pub fn text(captured: &Captured, max: usize) -> String {
    if !captured.truncated() {
        return String::from_utf8_lossy(&captured.bytes).into_owned();
    }
    let keep = max
        .saturating_sub(TRUNCATION_MARKER.len())
        .min(captured.bytes.len());
    let kept = &captured.bytes[..keep];
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
    fn a_cut_never_splits_a_character() {
        // "aé" is 3 bytes; keeping 2 would split the é.
        let max = TRUNCATION_MARKER.len() + 2;
        let out = text(&captured(&"aé".repeat(40), 1_000), max);
        assert_eq!(out, format!("a{TRUNCATION_MARKER}"));
        assert_eq!(incomplete_tail("€".as_bytes()), 0);
        assert_eq!(incomplete_tail(&"€".as_bytes()[..2]), 2);
    }
}
