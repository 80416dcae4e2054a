//! Exec command templates: Jinja as MCC configures it (strict undefined, `trim_blocks`,
//! `lstrip_blocks`, trailing newline kept) with the `quote` filter that shell-quotes.

use minijinja::value::ValueKind;
use minijinja::{Environment, UndefinedBehavior};
use serde_json::{Map, Value};

/// The template environment every exec/curl command and transform is rendered with.
pub fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(true);
    env.add_filter("quote", quote_filter);
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

/// Renders `source` with `params` as the template's variables.
pub fn render(
    env: &Environment<'_>,
    source: &str,
    params: &Map<String, Value>,
) -> Result<String, minijinja::Error> {
    env.render_str(source, params)
}

fn quote_filter(value: minijinja::Value) -> String {
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

/// The text Python's `str()` gives for a template value (`True`, `None`, `3`, `1e-05`,
/// `['a', 1]`, `{'k': 1.0}`).
fn py_text(v: &minijinja::Value) -> String {
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
    let safe = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "@%+=:,./-_".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\"'\"'"))
    }
}

/// Single-quotes `s` even when it would be safe bare (MCC quotes curl URLs this way).
pub fn shell_quote_always(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\"'\"'"))
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
    fn shlex_compatible() {
        assert_eq!(shell_quote("safe-path/x.txt"), "safe-path/x.txt");
        assert_eq!(shell_quote("$(rm -rf /)"), "'$(rm -rf /)'");
        assert_eq!(shell_quote("it's"), "'it'\"'\"'s'");
    }
}
