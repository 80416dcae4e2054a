//! What crosses the boundary of a pod-runtime Pod: the call going in (a file of the
//! per-call Secret, so params, context and passthrough values never appear in the Pod
//! object) and the result coming out (one line of the runner's stdout, read back from the
//! container log). `mcc-executor pod-run`, copied into the Pod by an init container, is
//! the runner: it reads [`PodInput`], runs it as the executor would and prints
//! [`PodOutput`]. The gateway's pod runtime writes the one and parses the other.
//!
//! Everything that can be binary (stdin, stdout, stderr) is base64, so the log stays one
//! text line whatever the tool printed.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};

use crate::process::{Captured, Ending, Finished};
use crate::runtime::{Request, RunError};

/// The key of the per-call Secret that holds the [`PodInput`].
pub const INPUT_KEY: &str = "request.json";
/// What starts the result line in the runner's stdout.
pub const RESULT_PREFIX: &str = "mcc-pod-result/v1 ";

/// The call, as the runner reads it.
#[derive(Debug, Serialize, Deserialize)]
pub struct PodInput {
    pub request: Request,
    /// `Request::stdin` (not serialized with the request), base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
}

impl PodInput {
    pub fn encode(request: &Request) -> Result<Vec<u8>, String> {
        let input = PodInput {
            request: request.clone(),
            stdin: request.stdin.as_deref().map(|b| B64.encode(b)),
        };
        serde_json::to_vec(&input).map_err(|e| format!("cannot encode the call: {e}"))
    }

    pub fn decode(bytes: &[u8]) -> Result<Request, String> {
        let input: PodInput =
            serde_json::from_slice(bytes).map_err(|e| format!("unreadable call: {e}"))?;
        let mut request = input.request;
        request.stdin = match input.stdin {
            Some(b) => Some(B64.decode(b).map_err(|e| format!("stdin: {e}"))?),
            None => None,
        };
        Ok(request)
    }
}

/// One captured stream, base64.
#[derive(Debug, Serialize, Deserialize)]
struct Stream {
    bytes: String,
    total: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    tail: String,
}

impl Stream {
    fn of(c: &Captured) -> Self {
        Self {
            bytes: B64.encode(&c.bytes),
            total: c.total,
            tail: B64.encode(&c.tail),
        }
    }

    fn captured(self) -> Result<Captured, String> {
        let decode = |s: &str| B64.decode(s).map_err(|e| format!("output: {e}"));
        Ok(Captured {
            bytes: decode(&self.bytes)?,
            total: self.total,
            tail: decode(&self.tail)?,
        })
    }
}

/// The result, as the runner prints it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum PodOutput {
    Finished {
        ending: Ending,
        stdout: Stream,
        stderr: Stream,
    },
    Failed(RunError),
}

/// The runner's result line (with its newline).
pub fn result_line(result: &Result<Finished, RunError>) -> String {
    let output = match result {
        Ok(f) => PodOutput::Finished {
            ending: f.ending,
            stdout: Stream::of(&f.stdout),
            stderr: Stream::of(&f.stderr),
        },
        Err(e) => PodOutput::Failed(e.clone()),
    };
    let json = serde_json::to_string(&output).expect("a result serializes");
    format!("{RESULT_PREFIX}{json}\n")
}

/// The result in a container log: its last result line. `Err` when there is none or it
/// is unreadable (the runner was killed before it printed, or the log was cut).
pub fn parse_log(log: &[u8]) -> Result<Result<Finished, RunError>, String> {
    let text = String::from_utf8_lossy(log);
    let line = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(RESULT_PREFIX))
        .ok_or("the runner printed no result")?;
    match serde_json::from_str(line).map_err(|e| format!("unreadable result: {e}"))? {
        PodOutput::Finished {
            ending,
            stdout,
            stderr,
        } => Ok(Ok(Finished {
            ending,
            stdout: stdout.captured()?,
            stderr: stderr.captured()?,
        })),
        PodOutput::Failed(e) => Ok(Err(e)),
    }
}

/// The most log a result line of `max_output`-bounded streams can take (base64 of both
/// streams and their tails, plus the JSON around them): the gateway reads no more.
pub fn max_log_bytes(max_output: usize) -> usize {
    let stream = (max_output + crate::process::TAIL).div_ceil(3) * 4;
    2 * stream + 64 * 1024
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_and_result_round_trip() {
        let request = Request {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "cat".into()],
            stdin: Some(b"{\"a\": 1}\n\xff".to_vec()),
            max_output: 10,
            env: mcc_catalog::env::EnvSpec {
                passthrough: mcc_catalog::EnvPassthrough::All(false),
                ..Default::default()
            },
            ..Request::default()
        };
        assert_eq!(
            PodInput::decode(&PodInput::encode(&request).unwrap()).unwrap(),
            request
        );

        let finished = Finished {
            ending: Ending::Exited(3),
            stdout: Captured {
                bytes: b"out\n\x00".to_vec(),
                total: 5,
                tail: vec![],
            },
            stderr: Captured {
                bytes: b"err".to_vec(),
                total: 9,
                tail: b"tail".to_vec(),
            },
        };
        // Whatever else the container printed, the last result line counts.
        let log = format!("noise\n{}{}", RESULT_PREFIX, "{}\n") + &result_line(&Ok(finished));
        let parsed = parse_log(log.as_bytes()).unwrap().unwrap();
        assert_eq!(parsed.ending, Ending::Exited(3));
        assert_eq!(parsed.stdout.bytes, b"out\n\x00");
        assert_eq!(
            (parsed.stderr.total, &parsed.stderr.tail[..]),
            (9, &b"tail"[..])
        );

        let failed = Err(RunError::NotFound {
            program: "python3".into(),
        });
        match parse_log(result_line(&failed).as_bytes()).unwrap() {
            Err(e) => assert_eq!(Err::<(), _>(e), failed.map(|_: Finished| ())),
            Ok(_) => panic!("a failure reads back as a failure"),
        }
        assert!(parse_log(b"killed before printing").is_err());
    }
}
