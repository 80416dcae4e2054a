//! Command templates: Jinja as MCC configures it (strict undefined, `trim_blocks`,
//! `lstrip_blocks`, trailing newline kept) with the `quote` filter that shell-quotes.
//!
//! `exec:` commands and transforms render as in MCC: a value lands in the shell text as
//! written, so the template's author decides what is quoted ([`render`]). `curl:` commands
//! render through [`render_curl`] (see [`curl`]), where no value can leave its shell word
//! and a value inside a URL is percent-encoded.
//!
//! Every render is bounded in work and output: [`FUEL`] instructions and
//! [`MAX_RENDERED_BYTES`] of text, both enforced while rendering. What a template holds in
//! its variables is not bounded here (minijinja has no hook for it): the gateway renders
//! in worker processes with a memory limit (`mcc_gateway::exec::render`).

mod curl;

pub use curl::render_curl;

use minijinja::value::ValueKind;
use minijinja::{Environment, ErrorKind, UndefinedBehavior};
use serde_json::{Map, Value};

/// The instructions one render may execute (minijinja's fuel): a few milliseconds of
/// work, far above what a command template needs (a loop over a thousand items takes
/// about twenty thousand), and what stops a nested loop from holding a CPU for seconds.
pub const FUEL: u64 = 2_000_000;

/// The most text one render may produce: a command line is one argument of `sh -c`, and
/// Linux's `MAX_ARG_STRLEN` (32 pages, its NUL included) is what one argument holds.
pub const MAX_RENDERED_BYTES: usize = 32 * 4096 - 1;

/// The template environment every exec/curl command and transform is rendered with.
pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_fuel(Some(FUEL));
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(true);
    env.add_filter("quote", quote_filter);
    env.add_filter("urlencode", urlencode);
    // Print values as Python's Jinja does (`None`, `True`), not minijinja's `none`/`true`.
    env.set_formatter(|out, _state, value| {
        out.write_str(&py_text(value))?;
        Ok(())
    });
    env
}

/// Checks that `source` is a valid template (used when a tool is loaded).
pub fn check(source: &str) -> Result<(), minijinja::Error> {
    environment().template_from_str(source).map(|_| ())
}

/// Renders `source` with `params` as the template's variables, stopping as soon as the
/// text passes [`MAX_RENDERED_BYTES`] or the work passes [`FUEL`].
pub fn render(
    env: &Environment<'_>,
    source: &str,
    params: &Map<String, Value>,
) -> Result<String, minijinja::Error> {
    let template = env.template_from_str(source)?;
    let mut out = CappedText::default();
    match template.render_captured_to(params, &mut out) {
        Ok(_) => String::from_utf8(out.text).map_err(|_| {
            minijinja::Error::new(
                ErrorKind::InvalidOperation,
                "the rendered text is not UTF-8",
            )
        }),
        Err(_) if out.overflowed => Err(too_long()),
        Err(e) => Err(bounded(e)),
    }
}

/// The error of a render whose text passed [`MAX_RENDERED_BYTES`].
pub(crate) fn too_long() -> minijinja::Error {
    minijinja::Error::new(
        ErrorKind::InvalidOperation,
        format!(
            "the rendered text passed {MAX_RENDERED_BYTES} bytes, the most one command line \
             holds (Linux's MAX_ARG_STRLEN): large values belong on the tool's stdin \
             (`stdin: true`)"
        ),
    )
}

/// Says what running out of fuel means; other errors pass unchanged.
pub(crate) fn bounded(e: minijinja::Error) -> minijinja::Error {
    if e.kind() == ErrorKind::OutOfFuel {
        minijinja::Error::new(
            ErrorKind::OutOfFuel,
            format!(
                "the template executed more than {FUEL} instructions (a loop too large for a \
                 command line) and was stopped"
            ),
        )
    } else {
        e
    }
}

/// Rendered text that refuses to grow past [`MAX_RENDERED_BYTES`].
#[derive(Default)]
struct CappedText {
    text: Vec<u8>,
    overflowed: bool,
}

impl std::io::Write for CappedText {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.text.len() + buf.len() > MAX_RENDERED_BYTES {
            self.overflowed = true;
            return Err(std::io::Error::other("rendered text too long"));
        }
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub(crate) fn quote_filter(value: minijinja::Value) -> String {
    match value.kind() {
        ValueKind::Seq | ValueKind::Iterable => match value.try_iter() {
            Ok(items) => items
                .map(|v| shell_quote(&py_text(&v)))
                .collect::<Vec<_>>()
                .join(" "),
            Err(_) => shell_quote(&py_text(&value)),
        },
        _ => shell_quote(&py_text(&value)),
    }
}

/// Jinja2's `urlencode`: a string (or any scalar's text) percent-encoded with only
/// `A-Z a-z 0-9 - . _ ~ /` kept; a mapping (or a list of pairs) as `k=v&…` with each
/// side encoded with nothing kept but unreserved characters and a space as `+`. The text
/// holds no character the shell treats specially (`&` of the `k=v&…` form aside).
pub(crate) fn urlencode(value: minijinja::Value) -> String {
    fn quote(s: &str, keep_slash: bool) -> String {
        let mut out = String::with_capacity(s.len());
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) || (keep_slash && b == b'/') {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }
    let for_qs = |v: &minijinja::Value| quote(&py_text(v), false).replace("%20", "+");
    let pairs: Vec<(minijinja::Value, minijinja::Value)> = match value.kind() {
        ValueKind::Map => value
            .try_iter()
            .map(|keys| {
                keys.map(|k| {
                    let v = value.get_item(&k).unwrap_or_default();
                    (k, v)
                })
                .collect()
            })
            .unwrap_or_default(),
        ValueKind::Seq => match value.try_iter() {
            Ok(items) => items
                .filter_map(|pair| {
                    Some((
                        pair.get_item_by_index(0).ok()?,
                        pair.get_item_by_index(1).ok()?,
                    ))
                })
                .collect(),
            Err(_) => Vec::new(),
        },
        _ => return quote(&py_text(&value), true),
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", for_qs(k), for_qs(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The text Python's `str()` gives for a template value (`True`, `None`, `3`, `1e-05`,
/// `['a', 1]`, `{'k': 1.0}`).
pub(crate) fn py_text(v: &minijinja::Value) -> String {
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => "None".to_string(),
        ValueKind::Bool if v.is_true() => "True".to_string(),
        ValueKind::Bool => "False".to_string(),
        ValueKind::String => v.as_str().unwrap_or_default().to_string(),
        ValueKind::Number | ValueKind::Seq | ValueKind::Map => match serde_json::to_value(v) {
            Ok(json) => crate::pyfmt::str(&json),
            Err(_) => v.to_string(),
        },
        _ => v.to_string(),
    }
}

/// POSIX shell quoting as Python's `shlex.quote`: safe words stay bare, everything else
/// is single-quoted with embedded quotes spliced as `'"'"'`.
pub fn shell_quote(s: &str) -> String {
    if s.is_empty() {
        return "''".to_string();
    }
    if is_shell_safe(s) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\"'\"'"))
    }
}

/// Whether `shlex.quote` leaves `s` bare: none of its characters means anything to the
/// shell, bare or inside double quotes.
pub fn is_shell_safe(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c))
}

/// Single-quotes `s` even when it would be safe bare (MCC quotes curl URLs this way).
pub fn shell_quote_always(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\"'\"'"))
}

/// Single-quotes a template's literal text for the shell, leaving its Jinja tags
/// (`{{ … }}`, `{% … %}`, `{# … #}`) as written: quoting a tag's own quotes (MCC quotes
/// the whole curl URL, tags included) would change the expression, e.g.
/// `{{ p | default('x') }}`. What the tags print is made safe when rendering.
pub fn shell_quote_template(source: &str) -> String {
    let mut out = String::from("'");
    let mut rest = source;
    while let Some(start) = tag_start(rest) {
        out.push_str(&rest[..start].replace('\'', "'\"'\"'"));
        let len = tag_len(&rest[start..]);
        out.push_str(&rest[start..start + len]);
        rest = &rest[start + len..];
    }
    out.push_str(&rest.replace('\'', "'\"'\"'"));
    out.push('\'');
    out
}

/// Where the next Jinja tag starts in `s`.
fn tag_start(s: &str) -> Option<usize> {
    s.match_indices('{')
        .map(|(i, _)| i)
        .find(|&i| matches!(s.as_bytes().get(i + 1), Some(b'{' | b'%' | b'#')))
}

/// The length of the tag `s` starts with, through its closing delimiter (string literals
/// inside `{{ }}` and `{% %}` may hold the delimiter); all of `s` if it is never closed.
fn tag_len(s: &str) -> usize {
    let close = match s.as_bytes()[1] {
        b'{' => "}}",
        b'%' => "%}",
        _ => "#}",
    };
    let bytes = s.as_bytes();
    let mut in_string: Option<u8> = None;
    let mut i = 2;
    while i < bytes.len() {
        let b = bytes[i];
        match in_string {
            Some(_) if b == b'\\' => i += 1,
            Some(q) if b == q => in_string = None,
            Some(_) => {}
            None if close != "#}" && (b == b'\'' || b == b'"') => in_string = Some(b),
            None if s[i..].starts_with(close) => return i + 2,
            None => {}
        }
        i += 1;
    }
    s.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(src: &str, params: Value) -> String {
        render(&environment(), src, params.as_object().unwrap()).unwrap()
    }

    #[test]
    fn quote_filter_quotes_scalars_and_lists() {
        assert_eq!(
            run("echo {{ m | quote }}", json!({"m": "a b'c"})),
            "echo 'a b'\"'\"'c'"
        );
        assert_eq!(
            run("ls {{ f | quote }}", json!({"f": ["x y", "z", 3]})),
            "ls 'x y' z 3"
        );
        assert_eq!(run("ls {{ f | quote }}", json!({"f": []})), "ls ");
        assert_eq!(
            run(
                "x {{ n | quote }} {{ b | quote }}",
                json!({"n": 5, "b": true})
            ),
            "x 5 True"
        );
        assert_eq!(run("x {{ e | quote }}", json!({"e": ""})), "x ''");
        assert_eq!(
            run(
                "{{ a }} {{ b }} {{ c }}",
                json!({"a": null, "b": false, "c": 1.5})
            ),
            "None False 1.5"
        );
        let values = json!({"l": ["a", 1, null, true], "d": {"z": 1, "k": 1.0}, "f": 0.00001});
        assert_eq!(
            run("{{ l }} {{ d }} {{ f }} {{ d | quote }}", values),
            "['a', 1, None, True] {'z': 1, 'k': 1.0} 1e-05 '{'\"'\"'z'\"'\"': 1, '\"'\"'k'\"'\"': 1.0}'",
            "Python's str() of lists, dicts (in insertion order) and floats"
        );
    }

    #[test]
    fn strict_undefined_and_block_trimming() {
        assert!(render(&environment(), "echo {{ nope }}", &Map::new()).is_err());
        let src = "echo a\n{% if loud %}\n  echo LOUD\n{% endif %}\necho b\n";
        assert_eq!(
            run(src, json!({"loud": true})),
            "echo a\n  echo LOUD\necho b\n"
        );
        assert_eq!(run(src, json!({"loud": null})), "echo a\necho b\n");
    }

    #[test]
    fn urlencode_as_jinja2() {
        let p = json!({"s": "a b/c?é", "d": {"q": "x y&z", "n": 1}, "l": [["a", "b c"]]});
        assert_eq!(
            run(
                "{{ s | urlencode }} {{ d | urlencode }} {{ l | urlencode }}",
                p
            ),
            "a%20b/c%3F%C3%A9 q=x+y%26z&n=1 a=b+c"
        );
    }

    #[test]
    fn work_and_text_are_bounded_while_rendering() {
        let nested =
            "{% for a in range(10000) %}{% for b in range(10000) %}{% endfor %}{% endfor %}";
        let started = std::time::Instant::now();
        let err = render(&environment(), nested, &Map::new()).unwrap_err();
        assert!(
            err.to_string().contains("more than 2000000 instructions"),
            "{err}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5));

        let long = "{% for a in range(100000) %}{{ s }}{% endfor %}";
        let err = render(
            &environment(),
            long,
            json!({"s": "x".repeat(100)}).as_object().unwrap(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("passed 131071 bytes"), "{err}");
        // At the bound exactly, the text renders.
        let exact = json!({"s": "x".repeat(MAX_RENDERED_BYTES)});
        assert_eq!(run("{{ s }}", exact).len(), MAX_RENDERED_BYTES);
        // The curl environment has the same bounds.
        let err = render_curl(
            "curl https://h/{% for a in range(2000) %}{{ s }}{% endfor %}",
            json!({"s": "x".repeat(100)}).as_object().unwrap(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("passed 131071 bytes"), "{err}");
        let err = render_curl(nested, &Map::new()).unwrap_err();
        assert!(err.to_string().contains("instructions"), "{err}");
    }

    #[test]
    fn shlex_compatible() {
        assert_eq!(shell_quote("safe-path/x.txt"), "safe-path/x.txt");
        assert_eq!(shell_quote("$(rm -rf /)"), "'$(rm -rf /)'");
        assert_eq!(shell_quote("it's"), "'it'\"'\"'s'");
    }
}
