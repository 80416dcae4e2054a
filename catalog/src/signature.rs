//! The signature block shown to the LLM, rendered exactly as MCC renders it:
//!
//! ```text
//! ## public.osint.greet (name:str, times:int=3, tag:str="", loud:bool=False) -> str
//! `name` — Who to greet.
//! <description>
//! <example>
//! ```

use std::fmt::Write;

use serde_json::Value;

use crate::tool::{Param, ParamType, Tool};

/// The full signature block of `tool` (ends with a newline).
pub fn signature(tool: &Tool) -> String {
    let mut out = String::with_capacity(128);
    let _ = write!(out, "## {} (", tool.key);
    for (i, param) in tool.visible_params().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_param(&mut out, param);
    }
    let _ = writeln!(out, ") -> {}", tool.signature_return_type());
    for param in tool.visible_params().filter(|p| !p.description.is_empty()) {
        let _ = writeln!(out, "`{}` — {}", param.name, param.description);
    }
    for text in [&tool.description, &tool.example] {
        if !text.is_empty() {
            out.push_str(text);
            out.push('\n');
        }
    }
    out
}

fn write_param(out: &mut String, param: &Param) {
    let _ = write!(out, "{}:{}", param.name, param.ty);
    if param.required {
        return;
    }
    if param.ty == ParamType::Str {
        // MCC: '"' ~ (default or '') ~ '"' — a falsy default renders as "".
        let text = match &param.default {
            Some(v) if is_truthy(v) => py_str(v),
            _ => String::new(),
        };
        let _ = write!(out, "=\"{text}\"");
    } else {
        let _ = write!(
            out,
            "={}",
            py_str(param.default.as_ref().unwrap_or(&Value::Null))
        );
    }
}

fn is_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Python's `str()` of a JSON value (what Jinja prints for a default): `None`, `True`,
/// `3`, `1.5`, `['a', 1]`, `{'k': 'v'}`.
pub fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => {
            let mut out = String::new();
            py_repr(other, &mut out);
            out
        }
    }
}

fn py_repr(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => {
                let _ = write!(out, "{i}");
            }
            (_, Some(u), _) => {
                let _ = write!(out, "{u}");
            }
            (_, _, Some(f)) if f.fract() == 0.0 && f.abs() < 1e16 => {
                let _ = write!(out, "{f:.1}");
            }
            (_, _, Some(f)) => {
                let _ = write!(out, "{f}");
            }
            _ => out.push_str(&n.to_string()),
        },
        Value::String(s) => {
            // Python prefers single quotes unless the string contains one.
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
                    c => out.push(c),
                }
            }
            out.push(q);
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_repr(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_repr(&Value::String(k.clone()), out);
                out.push_str(": ");
                py_repr(item, out);
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{CONTEXT_PARAM, ToolKind};
    use serde_json::json;

    fn param(name: &str, ty: ParamType, required: bool, default: Option<Value>) -> Param {
        Param {
            name: name.into(),
            ty,
            required,
            default,
            ..Param::default()
        }
    }

    fn tool(kind: ToolKind, params: Vec<Param>) -> Tool {
        Tool {
            key: "public.osint.greet".into(),
            name: "greet".into(),
            groups: vec!["public".into(), "osint".into()],
            description: String::new(),
            example: String::new(),
            kind,
            params,
            stdin: false,
            limits: Default::default(),
            cwd: None,
            env: Default::default(),
            env_file: None,
            env_passthrough: Default::default(),
            transform: None,
            cache_ttl: None,
            return_type: Some("str".into()),
            source: String::new(),
        }
    }

    #[test]
    fn renders_the_reference_example_heading() {
        let mut t = tool(
            ToolKind::Fn {
                path: "m:greet".into(),
                python: None,
            },
            vec![
                param("name", ParamType::Str, true, None),
                param("times", ParamType::Int, false, Some(json!(3))),
                param("tag", ParamType::Str, false, None),
                param("loud", ParamType::Bool, false, Some(json!(false))),
                param(CONTEXT_PARAM, ParamType::Dict, false, None),
            ],
        );
        t.params[0].description = "Who to greet.".into();
        t.description = "Greets someone.".into();
        t.example = "greet(name='bob')".into();
        assert_eq!(
            signature(&t),
            "## public.osint.greet (name:str, times:int=3, tag:str=\"\", loud:bool=False) -> str\n\
             `name` — Who to greet.\nGreets someone.\ngreet(name='bob')\n"
        );
    }

    #[test]
    fn exec_tools_show_the_failure_triple_and_hide_overrides() {
        let mut hidden = param("token", ParamType::Str, true, None);
        hidden.override_value = Some(Value::Null);
        let t = tool(
            ToolKind::Exec {
                command: "echo".into(),
            },
            vec![hidden, param("n", ParamType::Float, false, None)],
        );
        assert_eq!(
            signature(&t),
            "## public.osint.greet (n:float=None) -> str | (int, str, str)\n"
        );
    }

    #[test]
    fn python_reprs() {
        assert_eq!(
            py_str(&json!([1, "a", null, {"k": true}])),
            "[1, 'a', None, {'k': True}]"
        );
        assert_eq!(py_str(&json!(1.0)), "1.0");
        assert_eq!(py_str(&json!(2.5)), "2.5");
        assert_eq!(py_str(&json!("it's")), "it's");
        assert_eq!(py_str(&json!(["it's"])), "[\"it's\"]");
    }
}
