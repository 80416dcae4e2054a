//! Python's text forms of JSON values, which MCC's output is made of: `repr()`/`str()`
//! (signatures, set_session messages) and `json.dumps` with its default separators and
//! `ensure_ascii` (get_session, `MCC_CTX`, `MCC_CTX_<NAME>`, stdin of exec tools).

use std::fmt::Write;

use serde_json::Value;

/// Python's `repr()` of a float: shortest round-trip digits, exponent form below 1e-4 and
/// from 1e16 on (`1e-05`, `1e+16`), `.0` on integral values.
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    // Rust's Debug uses the same shortest digits and the same switch points as Python.
    let s = format!("{f:?}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = exp
                .strip_prefix('-')
                .map(|d| ('-', d))
                .unwrap_or(('+', exp));
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

fn number(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        n.to_string()
    } else {
        float_repr(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Python's `str()`: strings bare, everything else as `repr()`.
pub fn str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => repr(other),
    }
}

/// Python's `repr()`: `None`, `True`, `'text'`, `[1, 'a']`, `{'k': 1.0}`.
pub fn repr(v: &Value) -> String {
    let mut out = String::new();
    write_repr(v, &mut out);
    out
}

/// pydantic's `input_value=` form of a value in a validation error: its `repr()`, the
/// middle cut to `...` when longer than 50 bytes (the first 25 and the last 24 kept, on
/// character boundaries), so an error never echoes a caller's large value back whole.
pub fn input_repr(v: &Value) -> String {
    const MAX: usize = 50;
    let full = repr(v);
    if full.len() <= MAX {
        return full;
    }
    let head = (0..=25)
        .rev()
        .find(|&i| full.is_char_boundary(i))
        .unwrap_or(0);
    let tail = (full.len() - 24..=full.len())
        .find(|&i| full.is_char_boundary(i))
        .unwrap_or(full.len());
    format!("{}...{}", &full[..head], &full[tail..])
}

/// Python's `repr()` of a string.
pub fn repr_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    let q = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(q);
    out
}

fn write_repr(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => out.push_str(&repr_str(s)),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&repr_str(k));
                out.push_str(": ");
                write_repr(item, out);
            }
            out.push('}');
        }
    }
}

/// Python's `json.dumps(v)` with default arguments: `", "` and `": "` separators and
/// non-ASCII escaped as `\uXXXX`.
pub fn json_dumps(v: &Value) -> String {
    let mut out = String::new();
    write_json(v, &mut out);
    out
}

fn write_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => write_json_str(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json_str(k, out);
                out.push_str(": ");
                write_json(item, out);
            }
            out.push('}');
        }
    }
}

fn write_json_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn input_values_are_cut_like_pydantic() {
        // Each expected form printed by pydantic 2.13.
        assert_eq!(
            input_repr(&json!("x".repeat(48))),
            format!("'{}'", "x".repeat(48))
        );
        assert_eq!(
            input_repr(&json!(format!("{}ab", "0123456789".repeat(5)))),
            "'012345678901234567890123...901234567890123456789ab'"
        );
        assert_eq!(
            input_repr(&json!("é".repeat(60))),
            format!("'{}...{}'", "é".repeat(12), "é".repeat(11))
        );
        assert_eq!(
            input_repr(&json!(vec![1; 30])),
            "[1, 1, 1, 1, 1, 1, 1, 1, ... 1, 1, 1, 1, 1, 1, 1, 1]"
        );
    }

    #[test]
    fn floats_like_python() {
        assert_eq!(float_repr(1.0), "1.0");
        assert_eq!(float_repr(2.5), "2.5");
        assert_eq!(float_repr(1e16), "1e+16");
        assert_eq!(float_repr(0.00001), "1e-05");
        assert_eq!(float_repr(0.1 + 0.2), "0.30000000000000004");
    }

    #[test]
    fn reprs() {
        assert_eq!(
            repr(&json!([1, "a", null, {"k": true}])),
            "[1, 'a', None, {'k': True}]"
        );
        assert_eq!(str(&json!("it's")), "it's");
        assert_eq!(repr(&json!(["it's"])), "[\"it's\"]");
        assert_eq!(repr_str("a\nb"), "'a\\nb'");
    }

    #[test]
    fn json_dumps_defaults() {
        assert_eq!(
            json_dumps(&json!(["admin", "osint"])),
            "[\"admin\", \"osint\"]"
        );
        assert_eq!(
            json_dumps(&json!({"a": 1, "s": "é😀"})),
            "{\"a\": 1, \"s\": \"\\u00e9\\ud83d\\ude00\"}"
        );
        assert_eq!(json_dumps(&json!(1000)), "1000");
        assert_eq!(json_dumps(&json!(1.5)), "1.5");
        assert_eq!(json_dumps(&json!("10.0.0.5")), "\"10.0.0.5\"");
    }
}
