//! Validation of a call's params against a tool's declared parameters.
//!
//! Coercion is lax the way MCC's pydantic models are: `"5"` is accepted for an `int`, `5`
//! for a `float`, `"true"` for a `bool`; a string param takes only strings. Unknown
//! params are rejected (MCC drops them silently; a typo should not pass unnoticed).
//! Overrides are applied after validation and always win.

use std::fmt;

use serde_json::{Map, Number, Value};

use crate::tool::{Param, ParamType, Tool};

/// Everything wrong with one call's params, one problem per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    pub problems: Vec<String>,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        write!(f, "{n} validation error{}", if n == 1 { "" } else { "s" })?;
        for p in &self.problems {
            write!(f, "\n{p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ValidationError {}

/// Checks `given` against the tool's visible params and returns the params the tool runs
/// with: coerced values, defaults filled in, overrides applied. Optional params without a
/// default are passed as `null` to exec tools (so templates can test them) and left out
/// for fn tools (so the callable's own default applies).
pub fn validate(
    tool: &Tool,
    given: &Map<String, Value>,
) -> Result<Map<String, Value>, ValidationError> {
    let mut problems = Vec::new();
    for name in given.keys() {
        if !tool.visible_params().any(|p| &p.name == name) {
            let accepted: Vec<&str> = tool.visible_params().map(|p| p.name.as_str()).collect();
            let accepted = if accepted.is_empty() {
                "none".to_string()
            } else {
                accepted.join(", ")
            };
            problems.push(format!(
                "{name}\n  unknown parameter (accepted: {accepted})"
            ));
        }
    }
    let mut out = Map::new();
    for param in &tool.params {
        if let Some(forced) = &param.override_value {
            out.insert(param.name.clone(), forced.clone());
            continue;
        }
        if !tool.is_visible(param) {
            continue;
        }
        match given.get(&param.name) {
            Some(value) => match coerce(param.ty, value) {
                Ok(v) => {
                    out.insert(param.name.clone(), v);
                }
                Err(expected) => problems.push(format!(
                    "{}\n  expected {expected}, got {} {}",
                    param.name,
                    json_kind(value),
                    truncate(&value.to_string(), 80)
                )),
            },
            None if param.required => problems.push(format!(
                "{}\n  missing required parameter ({})",
                param.name, param.ty
            )),
            None => match (&param.default, tool.kind.is_fn()) {
                (Some(d), _) => {
                    out.insert(param.name.clone(), d.clone());
                }
                (None, false) => {
                    out.insert(param.name.clone(), Value::Null);
                }
                (None, true) => {}
            },
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(ValidationError { problems })
    }
}

/// The required scalar params missing from `given`: what may be asked of the user.
pub fn missing_required<'a>(tool: &'a Tool, given: &Map<String, Value>) -> Vec<&'a Param> {
    tool.visible_params()
        .filter(|p| p.required && !given.contains_key(&p.name))
        .collect()
}

/// Converts `value` to `ty` with pydantic-like lax rules, or says what was expected.
pub fn coerce(ty: ParamType, value: &Value) -> Result<Value, &'static str> {
    match (ty, value) {
        (ParamType::Str, Value::String(_)) => Ok(value.clone()),
        (ParamType::Str, _) => Err("a string"),
        (ParamType::Int, Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(value.clone()),
        (ParamType::Int, Value::Number(n)) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Value::from(f as i64)),
            _ => Err("an integer"),
        },
        (ParamType::Int, Value::String(s)) => s
            .trim()
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| "an integer"),
        (ParamType::Int, Value::Bool(b)) => Ok(Value::from(*b as i64)),
        (ParamType::Int, _) => Err("an integer"),
        (ParamType::Float, Value::Number(n)) => Ok(n
            .as_f64()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .unwrap_or(value.clone())),
        (ParamType::Float, Value::String(s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .ok_or("a number"),
        (ParamType::Float, _) => Err("a number"),
        (ParamType::Bool, Value::Bool(_)) => Ok(value.clone()),
        (ParamType::Bool, Value::Number(n)) => match n.as_f64() {
            Some(f) if f == 0.0 => Ok(Value::Bool(false)),
            Some(f) if f == 1.0 => Ok(Value::Bool(true)),
            _ => Err("a boolean"),
        },
        (ParamType::Bool, Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "t" | "yes" | "y" | "on" | "1" => Ok(Value::Bool(true)),
            "false" | "f" | "no" | "n" | "off" | "0" => Ok(Value::Bool(false)),
            _ => Err("a boolean"),
        },
        (ParamType::Bool, _) => Err("a boolean"),
        (ParamType::List, Value::Array(_)) => Ok(value.clone()),
        (ParamType::List, _) => Err("a list"),
        (ParamType::Dict, Value::Object(_)) => Ok(value.clone()),
        (ParamType::Dict, _) => Err("a dict"),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::ToolKind;
    use serde_json::json;

    fn tool(kind: ToolKind, params: Vec<Param>) -> Tool {
        serde_json::from_value::<Tool>(
            json!({"key": "t", "name": "t", "kind": "exec", "command": "x"}),
        )
        .map(|mut t| {
            t.kind = kind;
            t.params = params;
            t
        })
        .unwrap()
    }
    fn p(name: &str, ty: ParamType, required: bool) -> Param {
        Param {
            name: name.into(),
            ty,
            required,
            ..Param::default()
        }
    }
    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn coerces_laxly_and_fills_defaults() {
        let mut times = p("times", ParamType::Int, false);
        times.default = Some(json!(3));
        let t = tool(
            ToolKind::Exec {
                command: "x".into(),
            },
            vec![
                p("n", ParamType::Int, true),
                p("f", ParamType::Float, false),
                p("b", ParamType::Bool, false),
                times,
            ],
        );
        let out = validate(&t, &obj(json!({"n": "5", "f": 2, "b": "yes"}))).unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"n": 5, "f": 2.0, "b": true, "times": 3})
        );
    }

    #[test]
    fn names_every_bad_param() {
        let t = tool(
            ToolKind::Exec {
                command: "x".into(),
            },
            vec![
                p("name", ParamType::Str, true),
                p("n", ParamType::Int, false),
            ],
        );
        let err = validate(&t, &obj(json!({"n": "abc", "bogus": 1}))).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("3 validation errors"), "{text}");
        assert!(
            text.contains("bogus\n  unknown parameter (accepted: name, n)"),
            "{text}"
        );
        assert!(
            text.contains("n\n  expected an integer, got string \"abc\""),
            "{text}"
        );
        assert!(
            text.contains("name\n  missing required parameter (str)"),
            "{text}"
        );
    }

    #[test]
    fn overrides_win_and_are_not_callable() {
        let mut secret = p("token", ParamType::Str, true);
        secret.override_value = Some(json!("s3cret"));
        let t = tool(
            ToolKind::Exec {
                command: "x".into(),
            },
            vec![secret],
        );
        assert_eq!(validate(&t, &Map::new()).unwrap()["token"], json!("s3cret"));
        assert!(validate(&t, &obj(json!({"token": "mine"}))).is_err());
    }

    #[test]
    fn fn_tools_leave_out_optional_params_without_default_and_hide_context() {
        let t = tool(
            ToolKind::Fn {
                path: "m:f".into(),
                python: None,
            },
            vec![
                p("opt", ParamType::Str, false),
                p("context", ParamType::Dict, false),
            ],
        );
        assert_eq!(validate(&t, &Map::new()).unwrap(), Map::new());
        assert!(validate(&t, &obj(json!({"context": {}}))).is_err());
    }

    #[test]
    fn strings_are_not_coerced_from_numbers() {
        assert_eq!(coerce(ParamType::Str, &json!(5)), Err("a string"));
        assert_eq!(coerce(ParamType::Int, &json!(2.5)), Err("an integer"));
        assert_eq!(coerce(ParamType::Bool, &json!("maybe")), Err("a boolean"));
    }
}
