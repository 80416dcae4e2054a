//! `curl:` commands rendered so that a param value can never change the command: whatever
//! the author wrote (`{{ p }}` or `{{ p | quote }}`, bare, in single or in double quotes),
//! a value stays inside the shell word it was placed in, and inside a URL it is
//! percent-encoded so it cannot change the URL's structure either.
//!
//! MCC single-quotes a shorthand URL *before* rendering it, so a value holding a `'` left
//! the quotes and ran as shell. Here every printed value first becomes a placeholder; the
//! rendered line is then read as the shell will read it (quotes, word boundaries,
//! `$(…)`, backticks, comments, here-documents) and each placeholder is replaced by text
//! that is inert where it stands:
//!
//! - in a word that starts with `http://` or `https://` (the shorthand URL, or a URL in a
//!   flag-style target): percent-encoded for its part of the URL — host (`:` kept), path
//!   (`/` kept, a segment of only dots encoded), query or fragment (only `A-Z a-z 0-9 - .
//!   _ ~` kept). The encoded text is inert in any quoting, and `| quote` adds no quotes.
//! - elsewhere: quoted for the shell context it is in (bare: `shlex.quote`; in single
//!   quotes: its `'` spliced as `'"'"'`; in double quotes: closed, single-quoted,
//!   reopened). A list with `| quote`, bare, still gives one word per item, as in MCC.
//! - where no quoting is safe (inside `$(…)`, backticks, `${…}`, after `\`, in a comment,
//!   after `<<`, inside a `$'…'` word, whose escapes bash and busybox expand): the render
//!   fails and nothing runs.
//!
//! The author's own text is left as written, so `$API_TOKEN`, flags and pipes in a
//! flag-style target keep working under `/bin/sh -c`. A benign value (a word of letters,
//! digits and `-._~`) renders exactly as MCC renders it.

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use minijinja::value::{Object, ObjectRepr, ValueKind};
use minijinja::{Error, ErrorKind, Value};
use serde_json::Map;

use super::{is_shell_safe, py_text, quote_filter, shell_quote, shell_quote_always, urlencode};

/// Opens and closes a placeholder in the marked text (Unicode noncharacters: never text).
const OPEN: char = '\u{FDD0}';
const CLOSE: char = '\u{FDD1}';

/// Renders a curl command template (the shorthand's command line) with `params`.
pub fn render_curl(source: &str, params: &Map<String, serde_json::Value>) -> Result<String, Error> {
    if source.contains([OPEN, CLOSE]) {
        return Err(refuse("the template holds U+FDD0 or U+FDD1"));
    }
    let pieces = Arc::new(Mutex::new(Vec::new()));
    let marked = super::render(&recording_environment(pieces.clone()), source, params)?;
    let pieces = std::mem::take(&mut *pieces.lock().unwrap_or_else(|p| p.into_inner()));
    Placer::new(&pieces).place(&marked)
}

fn refuse(why: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, why.into())
}

/// One printed value, as text.
#[derive(Debug)]
struct Piece {
    text: String,
    /// `| quote` of a list: its items, which become separate words when placed bare.
    words: Option<Vec<String>>,
    /// `| urlencode` output: already percent-encoded.
    encoded: bool,
}

/// What `| quote` returns in a curl template: the value, marked as quoted. Printed, it is
/// placed like any value; used in an expression (`~`), it is MCC's quoted text.
#[derive(Debug)]
struct Quoted(Value);

impl Object for Quoted {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&quote_filter(self.0.clone()))
    }
}

/// What `| urlencode` returns in a curl template: the encoded text, marked so that a URL
/// does not encode it twice.
#[derive(Debug)]
struct Encoded(String);

impl Object for Encoded {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn urlencode_marker(value: Value) -> Value {
    match value.downcast_object_ref::<Quoted>() {
        Some(Quoted(inner)) => Value::from_object(Encoded(urlencode(inner.clone()))),
        None => Value::from_object(Encoded(urlencode(value))),
    }
}

fn quote_marker(value: Value) -> Value {
    if value.downcast_object_ref::<Quoted>().is_some() {
        value
    } else {
        Value::from_object(Quoted(value))
    }
}

/// The standard environment, except that printing a value records it and prints a
/// placeholder, and `quote` marks instead of quoting.
fn recording_environment(pieces: Arc<Mutex<Vec<Piece>>>) -> minijinja::Environment<'static> {
    let mut env = super::environment();
    let recorded = AtomicUsize::new(0);
    env.add_filter("quote", quote_marker);
    env.add_filter("urlencode", urlencode_marker);
    env.set_formatter(move |out, _state, value| {
        let piece = if let Some(Quoted(inner)) = value.downcast_object_ref() {
            quoted_piece(inner)
        } else if let Some(Encoded(text)) = value.downcast_object_ref() {
            Piece {
                text: text.clone(),
                words: None,
                encoded: true,
            }
        } else {
            Piece {
                text: py_text(value),
                words: None,
                encoded: false,
            }
        };
        // Text printed from a captured block ({% set %}…, {% filter %}, a macro) already
        // holds placeholders mixed with other text: it cannot be placed safely.
        if piece.text.contains([OPEN, CLOSE]) {
            return Err(refuse(
                "a value printed from a {% set %} block, filter block or macro (or holding U+FDD0/U+FDD1) cannot be placed safely in a curl command",
            ));
        }
        let mut pieces = pieces.lock().unwrap_or_else(|p| p.into_inner());
        // The values are the rendered text too: bounded while rendering, like the rest.
        let total = recorded.fetch_add(piece.text.len(), Ordering::Relaxed) + piece.text.len();
        if total > super::MAX_RENDERED_BYTES {
            return Err(super::too_long());
        }
        write!(out, "{OPEN}{}{CLOSE}", pieces.len())?;
        pieces.push(piece);
        Ok(())
    });
    env
}

fn quoted_piece(inner: &Value) -> Piece {
    match inner.kind() {
        ValueKind::Seq | ValueKind::Iterable => match inner.try_iter() {
            Ok(items) => {
                let words: Vec<String> = items.map(|v| py_text(&v)).collect();
                Piece {
                    text: words.join(" "),
                    words: Some(words),
                    encoded: false,
                }
            }
            Err(_) => Piece {
                text: py_text(inner),
                words: None,
                encoded: false,
            },
        },
        _ => Piece {
            text: py_text(inner),
            words: None,
            encoded: false,
        },
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    Bare,
    Single,
    Double,
    /// `$'…'`: bash and busybox expand its backslash escapes (`\'` does not end it).
    AnsiC,
}

/// A command substitution or parameter expansion the reader is inside of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nest {
    /// `$(…)` (and `$((…))`), with the count of `(` opened inside it.
    Paren(u32),
    Backtick,
    Brace,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    nest: Option<Nest>,
    quote: Quote,
}

/// The part of a URL a value lands in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UrlPart {
    Authority,
    Path,
    Query,
    Fragment,
}

/// Reads the marked line as `/bin/sh` would and writes it out with each placeholder
/// replaced. Only what decides a placeholder's context is modelled; in doubt (a value
/// nested in a substitution) it refuses rather than guesses.
struct Placer<'a> {
    pieces: &'a [Piece],
    out: String,
    /// `stack[0]` is the command line itself; more frames while inside `$(…)` etc.
    stack: Vec<Frame>,
    /// The current top-level word as the shell will pass it (quotes removed, expansions
    /// as written): decides whether a value is in a URL and in which part.
    word: String,
    in_word: bool,
    comment: bool,
    heredoc: bool,
}

impl<'a> Placer<'a> {
    fn new(pieces: &'a [Piece]) -> Self {
        Self {
            pieces,
            out: String::new(),
            stack: vec![Frame {
                nest: None,
                quote: Quote::Bare,
            }],
            word: String::new(),
            in_word: false,
            comment: false,
            heredoc: false,
        }
    }

    fn place(mut self, marked: &str) -> Result<String, Error> {
        let chars: Vec<char> = marked.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            if c == OPEN {
                let len = chars[i..]
                    .iter()
                    .position(|&c| c == CLOSE)
                    .ok_or_else(|| refuse("unterminated placeholder"))?;
                let index: String = chars[i + 1..i + len].iter().collect();
                let piece = index
                    .parse::<usize>()
                    .ok()
                    .and_then(|n| self.pieces.get(n))
                    .ok_or_else(|| refuse("unknown placeholder"))?;
                self.value(piece)?;
                i += len + 1;
                continue;
            }
            let quoted = self.stack.last().is_some_and(|f| f.quote == Quote::Single);
            if c == '\\' && next == Some(OPEN) && !quoted && !self.comment {
                return Err(refuse(
                    "a value right after a backslash cannot be placed safely in a curl command",
                ));
            }
            i += self.literal(c, next);
        }
        Ok(self.out)
    }

    /// Copies one literal character (two when it escapes or opens a nest) and updates
    /// the reader's state; returns how many characters were consumed.
    fn literal(&mut self, c: char, next: Option<char>) -> usize {
        self.out.push(c);
        let top = self.stack.len() == 1;
        if self.comment {
            if c == '\n' {
                self.comment = false;
                self.end_word();
            }
            return 1;
        }
        let frame = *self.stack.last().expect("the command frame");
        match frame.quote {
            Quote::Single => {
                if c == '\'' {
                    self.set_quote(Quote::Bare);
                } else if top {
                    self.word.push(c);
                }
                1
            }
            Quote::AnsiC => match (c, next) {
                ('\\', Some(n)) => {
                    self.out.push(n);
                    2
                }
                ('\'', _) => {
                    self.set_quote(Quote::Bare);
                    1
                }
                _ => 1,
            },
            Quote::Double => match (c, next) {
                ('\\', Some(n)) => {
                    self.out.push(n);
                    if top {
                        self.word.push(n);
                    }
                    2
                }
                ('"', _) => {
                    self.set_quote(Quote::Bare);
                    1
                }
                _ => self.maybe_nest(c, next, top),
            },
            Quote::Bare => match (c, next) {
                ('\\', Some(n)) => {
                    self.out.push(n);
                    if top {
                        self.word.push(n);
                        self.in_word = true;
                    }
                    2
                }
                ('$', Some('\'')) => {
                    self.out.push('\'');
                    self.set_quote(Quote::AnsiC);
                    self.in_word |= top;
                    2
                }
                ('\'', _) | ('"', _) => {
                    self.set_quote(if c == '"' {
                        Quote::Double
                    } else {
                        Quote::Single
                    });
                    self.in_word |= top;
                    1
                }
                ('`', _) if frame.nest == Some(Nest::Backtick) => {
                    self.stack.pop();
                    1
                }
                ('(', _) if matches!(frame.nest, Some(Nest::Paren(_))) => {
                    if let Some(Nest::Paren(n)) = &mut self.top_frame().nest {
                        *n += 1;
                    }
                    1
                }
                (')', _) if matches!(frame.nest, Some(Nest::Paren(_))) => {
                    if frame.nest == Some(Nest::Paren(0)) {
                        self.stack.pop();
                    } else if let Some(Nest::Paren(n)) = &mut self.top_frame().nest {
                        *n -= 1;
                    }
                    1
                }
                ('}', _) if frame.nest == Some(Nest::Brace) => {
                    self.stack.pop();
                    1
                }
                _ if !top => self.maybe_nest(c, next, top),
                (c, _) if c.is_whitespace() || ";&|<>()".contains(c) => {
                    if c == '<' && next == Some('<') {
                        self.heredoc = true;
                    }
                    self.end_word();
                    1
                }
                ('#', _) if !self.in_word => {
                    self.comment = true;
                    1
                }
                _ => self.maybe_nest(c, next, top),
            },
        }
    }

    /// `$(`, `${` and a backtick open a nest; any other character is word text.
    fn maybe_nest(&mut self, c: char, next: Option<char>, top: bool) -> usize {
        let nest = match (c, next) {
            ('$', Some('(')) => Some((Nest::Paren(0), 2)),
            ('$', Some('{')) => Some((Nest::Brace, 2)),
            ('`', _) => Some((Nest::Backtick, 1)),
            _ => None,
        };
        if top {
            self.in_word = true;
        }
        match nest {
            Some((nest, consumed)) => {
                if consumed == 2 {
                    self.out.push(next.unwrap_or_default());
                }
                self.stack.push(Frame {
                    nest: Some(nest),
                    quote: Quote::Bare,
                });
                consumed
            }
            None => {
                if top {
                    self.word.push(c);
                }
                1
            }
        }
    }

    fn top_frame(&mut self) -> &mut Frame {
        self.stack.last_mut().expect("the command frame")
    }

    fn set_quote(&mut self, quote: Quote) {
        self.top_frame().quote = quote;
    }

    fn end_word(&mut self) {
        self.word.clear();
        self.in_word = false;
    }

    /// Writes a value where the reader stands.
    fn value(&mut self, piece: &Piece) -> Result<(), Error> {
        if self.stack.len() > 1 {
            return Err(refuse(
                "a value inside $(…), `…` or ${…} cannot be placed safely in a curl command",
            ));
        }
        if self.comment {
            return Err(refuse(
                "a value inside a # comment cannot be placed safely in a curl command",
            ));
        }
        if self.heredoc {
            return Err(refuse(
                "a value after a here-document (<<) cannot be placed safely in a curl command",
            ));
        }
        self.in_word = true;
        let part = url_part(&self.word);
        let text = match part {
            // `| urlencode` already encoded it: once is enough.
            Some(part) if !piece.encoded => Cow::Owned(encode(part, &piece.text)),
            _ => Cow::Borrowed(piece.text.as_str()),
        };
        if text.contains('\0') {
            return Err(refuse(
                "a value holds a NUL byte, which no process argument can carry",
            ));
        }
        match (self.stack[0].quote, &piece.words) {
            (Quote::Bare, Some(words)) if part.is_none() => {
                let quoted: Vec<String> = words.iter().map(|w| shell_quote(w)).collect();
                self.out.push_str(&quoted.join(" "));
                self.word = words.last().cloned().unwrap_or_default();
                return Ok(());
            }
            (Quote::Bare, _) => self.out.push_str(&shell_quote(&text)),
            (Quote::Single, _) => self.out.push_str(&text.replace('\'', "'\"'\"'")),
            (Quote::Double, _) if is_shell_safe(&text) => self.out.push_str(&text),
            (Quote::Double, _) => {
                self.out.push('"');
                self.out.push_str(&shell_quote_always(&text));
                self.out.push('"');
            }
            (Quote::AnsiC, _) => {
                return Err(refuse(
                    "a value inside a $'…' word cannot be placed safely in a curl command (its escapes are expanded)",
                ));
            }
        }
        self.word.push_str(&text);
        Ok(())
    }
}

/// The URL part a value appended to `word` lands in, if `word` is a URL so far (also
/// the value of a flag written `--url=https://…`).
fn url_part(word: &str) -> Option<UrlPart> {
    let word = match word.split_once('=') {
        Some((flag, value)) if flag.starts_with('-') => value,
        _ => word,
    };
    let starts = |scheme: &str| {
        word.get(..scheme.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
    };
    let rest = if starts("http://") {
        &word[7..]
    } else if starts("https://") {
        &word[8..]
    } else {
        return None;
    };
    Some(if rest.contains('#') {
        UrlPart::Fragment
    } else if rest.contains('?') {
        UrlPart::Query
    } else if rest.contains('/') {
        UrlPart::Path
    } else {
        UrlPart::Authority
    })
}

/// Percent-encodes `text` for `part`: only unreserved characters stay, plus `/` in a path
/// and `:` (a port) in the host; a path segment of only dots is encoded too, so a value
/// cannot climb out of the path it was placed in.
fn encode(part: UrlPart, text: &str) -> String {
    let keep = |b: u8| {
        b.is_ascii_alphanumeric()
            || b"-._~".contains(&b)
            || (part == UrlPart::Path && b == b'/')
            || (part == UrlPart::Authority && b == b':')
    };
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if keep(b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    if part != UrlPart::Path {
        return out;
    }
    out.split('/')
        .map(|segment| {
            if !segment.is_empty() && segment.bytes().all(|b| b == b'.') {
                segment.replace('.', "%2E")
            } else {
                segment.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
#[path = "curl_tests.rs"]
mod tests;
