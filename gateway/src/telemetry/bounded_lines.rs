//! The log's last bound on what a caller can write into it. Our own log lines cut the
//! caller's text they carry ([`super::spans::bounded`]), but the libraries under us log
//! some of it whole: rmcp's warning about a malformed or disallowed `Host` carries the
//! header (hyper admits ~400 KB of headers), its warning about a mismatched
//! `MCP-Protocol-Version` the header and the body's version. So every line the log
//! writes passes through [`BoundedLines`]: one of at most [`MAX_LINE_BYTES`] is written as
//! it is; a longer one keeps its fields with each long text cut to [`MAX_VALUE_BYTES`]
//! (a JSON line stays one valid JSON object) and says how long it was.
//!
//! This relies on `tracing_subscriber::fmt` handing its writer each event as one
//! `write_all` of the whole formatted line, which [`Bounded`] accepts in one `write`.

use std::io::{self, Write};

use serde_json::Value;
use tracing_subscriber::fmt::MakeWriter;

use super::spans::cut;

/// The longest line written as it is.
pub const MAX_LINE_BYTES: usize = 16 * 1024;

/// What each text of a longer line keeps.
pub const MAX_VALUE_BYTES: usize = 1024;

/// A [`MakeWriter`] whose writers bound each line (`json`: the lines are JSON objects).
#[derive(Debug, Clone)]
pub struct BoundedLines<M> {
    inner: M,
    json: bool,
}

impl<M> BoundedLines<M> {
    pub fn new(inner: M, json: bool) -> Self {
        Self { inner, json }
    }
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for BoundedLines<M> {
    type Writer = Bounded<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        Bounded {
            inner: self.inner.make_writer(),
            json: self.json,
        }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        Bounded {
            inner: self.inner.make_writer_for(meta),
            json: self.json,
        }
    }
}

/// One event's writer.
pub struct Bounded<W> {
    inner: W,
    json: bool,
}

impl<W: Write> Write for Bounded<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() <= MAX_LINE_BYTES {
            self.inner.write_all(buf)?;
        } else {
            self.inner.write_all(shorten(buf, self.json).as_bytes())?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// `line` (longer than [`MAX_LINE_BYTES`]) with its long texts cut, ending in a newline.
fn shorten(line: &[u8], json: bool) -> String {
    let text = String::from_utf8_lossy(line);
    let text = text.strip_suffix('\n').unwrap_or(&text);
    if json && let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(text) {
        object.values_mut().for_each(cut_strings);
        object.insert("log.line_bytes".into(), line.len().into());
        let shortened = Value::Object(object).to_string();
        if shortened.len() <= MAX_LINE_BYTES {
            return shortened + "\n";
        }
    }
    if json {
        // Not an object, or too many fields even cut: a line that says so, with its start.
        let note = serde_json::json!({
            "level": "WARN",
            "message": "a log line was too long to write",
            "log.line_bytes": line.len(),
            "log.line_start": cut(text, MAX_VALUE_BYTES),
        });
        return note.to_string() + "\n";
    }
    format!(
        "{} … [log line of {} bytes cut]\n",
        cut(text, MAX_LINE_BYTES),
        line.len()
    )
}

fn cut_strings(value: &mut Value) {
    match value {
        Value::String(s) if s.len() > MAX_VALUE_BYTES => {
            let kept = cut(s, MAX_VALUE_BYTES).len();
            s.truncate(kept);
            s.push('…');
        }
        Value::Array(items) => items.iter_mut().for_each(cut_strings),
        Value::Object(members) => members.values_mut().for_each(cut_strings),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_writer::Captured;

    fn written(json: bool, line: &str) -> String {
        let captured = Captured::default();
        let writer = captured.clone();
        let lines = BoundedLines::new(move || writer.clone(), json);
        lines.make_writer().write_all(line.as_bytes()).unwrap();
        captured.lines().join("\n")
    }

    #[test]
    fn a_line_within_the_bound_is_written_as_it_is() {
        let line = format!("{}\n", "é".repeat(MAX_LINE_BYTES / 2 - 1));
        assert_eq!(written(false, &line), line.trim_end());
        let json = format!("{{\"message\":\"{}\"}}\n", "m".repeat(MAX_LINE_BYTES - 20));
        assert_eq!(written(true, &json), json.trim_end());
    }

    #[test]
    fn a_long_json_line_keeps_its_fields_with_long_texts_cut() {
        let host = "h".repeat(200_000);
        let line = serde_json::json!({
            "level": "WARN",
            "fields": {"message": "rejected request with malformed Host header", "host": host},
            "target": "rmcp::transport",
        })
        .to_string()
            + "\n";
        let out = written(true, &line);
        assert!(out.len() <= MAX_LINE_BYTES, "{}", out.len());
        let parsed: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(parsed["level"], "WARN");
        assert_eq!(parsed["target"], "rmcp::transport");
        assert_eq!(
            parsed["fields"]["message"],
            "rejected request with malformed Host header"
        );
        let kept = parsed["fields"]["host"].as_str().unwrap();
        assert!(
            kept.starts_with("hhhh") && kept.ends_with('…'),
            "{kept:.40}"
        );
        assert_eq!(kept.len(), MAX_VALUE_BYTES + '…'.len_utf8());
        assert_eq!(parsed["log.line_bytes"], line.len());
    }

    #[test]
    fn a_json_line_of_many_fields_becomes_a_note_with_its_start() {
        let fields: serde_json::Map<String, Value> = (0..2000)
            .map(|i| (format!("field{i}"), Value::from("v".repeat(100))))
            .collect();
        let line = Value::Object(fields).to_string() + "\n";
        let parsed: Value = serde_json::from_str(&written(true, &line)).unwrap();
        assert_eq!(parsed["message"], "a log line was too long to write");
        assert_eq!(parsed["log.line_bytes"], line.len());
        assert!(
            parsed["log.line_start"]
                .as_str()
                .unwrap()
                .starts_with("{\"field0\"")
        );
    }

    #[test]
    fn a_long_text_line_is_cut_on_a_character_boundary_and_says_so() {
        let line = format!("WARN rmcp: rejected host={}\n", "é".repeat(100_000));
        let out = written(false, &line);
        assert!(out.len() <= MAX_LINE_BYTES + 64, "{}", out.len());
        assert!(out.starts_with("WARN rmcp: rejected host=éé"));
        assert!(
            out.ends_with(&format!("[log line of {} bytes cut]", line.len())),
            "{}",
            &out[out.len() - 60..]
        );
    }
}
