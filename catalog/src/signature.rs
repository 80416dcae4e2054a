//! The signature block shown to the LLM, rendered exactly as MCC renders it:
//!
//! ```text
//! ## public.osint.greet (name:str, times:int=3, tag:str="", loud:bool=False) -> str
//! `name` — Who to greet.
//! <description>
//! <example>
//! ```
//!
//! followed by [`crate::annotations::lines`] for a tool that declares a title, hints or
//! an output schema (none: MCC's block, byte for byte).

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
    out.push_str(&crate::annotations::lines(
        &tool.annotations,
        tool.output_schema.as_ref(),
    ));
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
            Some(v) if is_truthy(v) => crate::pyfmt::str(v),
            _ => String::new(),
        };
        let _ = write!(out, "=\"{text}\"");
    } else {
        let _ = write!(
            out,
            "={}",
            crate::pyfmt::str(param.default.as_ref().unwrap_or(&Value::Null))
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
            rate_limit: None,
            return_type: Some("str".into()),
            annotations: Default::default(),
            output_schema: None,
            approval_required: false,
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
    fn declared_annotations_and_schema_follow_the_block() {
        let mut t = tool(
            ToolKind::Exec {
                command: "echo".into(),
            },
            vec![],
        );
        t.description = "Counts.".into();
        t.annotations.title = Some("Counter".into());
        t.annotations.idempotent_hint = Some(true);
        t.output_schema = Some(json!({"type": "object"}));
        assert_eq!(
            signature(&t),
            "## public.osint.greet () -> str | (int, str, str)\nCounts.\nTitle: Counter\n\
             Hints: idempotentHint=true\nOutput schema: {\"type\":\"object\"}\n"
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
}
