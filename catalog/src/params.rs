//! The one definition of a call's params: [`validate`] checks and coerces what a caller
//! sent (the gateway's `execute`), [`check_validated`] is the engine's guard that only
//! what came out of [`validate`] ever reaches a process. Both use the same type rules.
//!
//! Coercion is lax the way MCC's pydantic models are: `"5"` and `5.0` are accepted for an
//! `int`, `2` for a `float`, `"yes"` for a `bool`; a string param takes only strings and an
//! explicit `null` is refused for every type. Unlike MCC, unknown params are rejected (a
//! typo should not pass unnoticed). Messages follow pydantic's wording, which the agents
//! that use MCC already know.
//!
//! Overridden params: as in MCC, a value the caller sends for one is ignored and the
//! forced value used, silently — an error would reveal that the hidden param exists.

use std::fmt;

use serde_json::{Map, Number, Value};

use crate::pyfmt;
use crate::tool::{Param, ParamType, Tool, ToolKind};

/// Everything wrong with one call's params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// The pydantic-style model name: `<key>_params`.
    pub model: String,
    pub problems: Vec<Problem>,
}

/// One problem: the parameter and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub param: String,
    pub message: String,
}

/// How many problems a message lists. pydantic lists them all; a caller who sends
/// thousands of unknown params gets the first ones and a count, not a reply ten times
/// the size of the request.
pub const LISTED_PROBLEMS: usize = 100;

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        let plural = if n == 1 { "" } else { "s" };
        write!(f, "{n} validation error{plural} for {}", self.model)?;
        for p in self.problems.iter().take(LISTED_PROBLEMS) {
            write!(f, "\n{}\n  {}", p.param, p.message)?;
        }
        if n > LISTED_PROBLEMS {
            write!(f, "\n({} more not shown)", n - LISTED_PROBLEMS)?;
        }
        Ok(())
    }
}

impl std::error::Error for ValidationError {}

/// Checks `given` against the tool's visible params and returns the params the tool runs
/// with: coerced values, every visible param present (its default, else `null`, as MCC's
/// `model_dump()` passes it), overrides applied.
pub fn validate(
    tool: &Tool,
    given: &Map<String, Value>,
) -> Result<Map<String, Value>, ValidationError> {
    if let ToolKind::Mcp { input_schema, .. } = &tool.kind {
        return validate_upstream(tool, input_schema, given).map(|()| given.clone());
    }
    let mut problems = Vec::new();
    let mut out = Map::new();
    let mut given_repr = None;
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
                Err(message) => problems.push(Problem {
                    param: param.name.clone(),
                    message,
                }),
            },
            None if param.required => problems.push(Problem {
                param: param.name.clone(),
                message: format!(
                    "Field required [type=missing, input_value={}, input_type=dict]",
                    given_repr
                        .get_or_insert_with(|| pyfmt::input_repr(&Value::Object(given.clone())))
                ),
            }),
            None => {
                out.insert(
                    param.name.clone(),
                    param.default.clone().unwrap_or(Value::Null),
                );
            }
        }
    }
    for (name, value) in given {
        let declared = tool.params.iter().find(|p| &p.name == name);
        // The caller's value for an overridden param is dropped, without a word.
        let ignored = declared.is_some_and(|p| p.override_value.is_some());
        if !ignored && !declared.is_some_and(|p| tool.is_visible(p)) {
            let accepted: Vec<&str> = tool.visible_params().map(|p| p.name.as_str()).collect();
            let accepted = if accepted.is_empty() {
                "none".into()
            } else {
                accepted.join(", ")
            };
            problems.push(Problem {
                param: name.clone(),
                message: format!(
                    "Extra inputs are not permitted (accepted: {accepted}) {}",
                    input_note("extra_forbidden", value)
                ),
            });
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(ValidationError {
            model: format!("{}_params", tool.key),
            problems,
        })
    }
}

/// An upstream tool's arguments go to the upstream as given (no coercion: the upstream's
/// schema is the contract), once they match its input schema. A problem's `param` is the
/// JSON Pointer of the value (`/count`), or `(arguments)` for the whole object.
fn validate_upstream(
    tool: &Tool,
    input_schema: &crate::input_schema::InputSchema,
    given: &Map<String, Value>,
) -> Result<(), ValidationError> {
    validate_arguments(input_schema, given).map_err(|problems| ValidationError {
        model: format!("{}_params", tool.key),
        problems: problems
            .into_iter()
            .map(|(at, message)| Problem {
                param: match at.strip_prefix('/') {
                    Some(p) if !p.is_empty() => p.to_string(),
                    _ => "(arguments)".into(),
                },
                message,
            })
            .collect(),
    })
}

/// The engine's guard: `params` must be what [`validate`] returns for some call — every
/// name a param the caller may pass or an override, every overridden param at its forced
/// value, every required visible param present, every value of its declared type (or the
/// param's default, or `null` for an optional param). A violation means the params did
/// not come out of [`validate`]; nothing may run with them.
pub fn check_validated(tool: &Tool, params: &Map<String, Value>) -> Result<(), Problem> {
    if let ToolKind::Mcp { input_schema, .. } = &tool.kind {
        return validate_upstream(tool, input_schema, params)
            .map_err(|mut e| e.problems.swap_remove(0));
    }
    let problem = |param: &str, message: String| Problem {
        param: param.to_string(),
        message,
    };
    for (name, value) in params {
        let Some(param) = tool.params.iter().find(|p| &p.name == name) else {
            return Err(problem(name, "is not a parameter of this tool".into()));
        };
        match &param.override_value {
            Some(forced) if forced != value => {
                return Err(problem(
                    name,
                    "is overridden by the tool, not passed".into(),
                ));
            }
            Some(_) => continue,
            None if !tool.is_visible(param) => {
                return Err(problem(
                    name,
                    "is injected by the gateway, not passed".into(),
                ));
            }
            None => {}
        }
        let fits = param.default.as_ref() == Some(value)
            || (value.is_null() && !param.required)
            || has_type(param.ty, value);
        if !fits {
            return Err(problem(name, format!("expected {}, got {value}", param.ty)));
        }
    }
    if let Some(missing) = tool
        .visible_params()
        .find(|p| p.required && !params.contains_key(&p.name))
    {
        return Err(problem(&missing.name, "is required but missing".into()));
    }
    Ok(())
}

/// Whether `value` already is of type `ty`: what [`coerce`] returns always is.
pub fn has_type(ty: ParamType, value: &Value) -> bool {
    match ty {
        ParamType::Str => value.is_string(),
        ParamType::Int => value.is_i64() || value.is_u64(),
        ParamType::Float => value.is_number(),
        ParamType::Bool => value.is_boolean(),
        ParamType::List => value.is_array(),
        ParamType::Dict => value.is_object(),
    }
}

/// The required scalar params missing from `given`: what may be asked of the user.
pub fn missing_required<'a>(tool: &'a Tool, given: &Map<String, Value>) -> Vec<&'a Param> {
    tool.visible_params()
        .filter(|p| p.required && p.ty.is_scalar() && !given.contains_key(&p.name))
        .collect()
}

/// `[type=<kind>, input_value=<repr>, input_type=<python type>]`, as pydantic ends its lines.
fn input_note(kind: &str, value: &Value) -> String {
    let ty = match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    };
    format!(
        "[type={kind}, input_value={}, input_type={ty}]",
        pyfmt::input_repr(value)
    )
}

fn fail(message: &str, kind: &str, value: &Value) -> Result<Value, String> {
    Err(format!("{message} {}", input_note(kind, value)))
}

/// Converts `value` to `ty` with pydantic-like lax rules, or says what is wrong.
pub fn coerce(ty: ParamType, value: &Value) -> Result<Value, String> {
    match (ty, value) {
        (ParamType::Str, Value::String(_)) => Ok(value.clone()),
        (ParamType::Str, _) => fail("Input should be a valid string", "string_type", value),
        (ParamType::Int, Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(value.clone()),
        (ParamType::Int, Value::Number(n)) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Value::from(f as i64)),
            _ => fail(
                "Input should be a valid integer, got a number with a fractional part",
                "int_from_float",
                value,
            ),
        },
        (ParamType::Int, Value::String(s)) => match s.trim().parse::<i64>() {
            Ok(i) => Ok(Value::from(i)),
            Err(_) => fail(
                "Input should be a valid integer, unable to parse string as an integer",
                "int_parsing",
                value,
            ),
        },
        (ParamType::Int, Value::Bool(b)) => Ok(Value::from(*b as i64)),
        (ParamType::Int, _) => fail("Input should be a valid integer", "int_type", value),
        (ParamType::Float, Value::Number(n)) => Ok(n
            .as_f64()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .unwrap_or_else(|| value.clone())),
        (ParamType::Float, Value::String(s)) => {
            match s.trim().parse::<f64>().ok().and_then(Number::from_f64) {
                Some(n) => Ok(Value::Number(n)),
                None => fail(
                    "Input should be a valid number, unable to parse string as a number",
                    "float_parsing",
                    value,
                ),
            }
        }
        (ParamType::Float, Value::Bool(b)) => Ok(Value::from(if *b { 1.0 } else { 0.0 })),
        (ParamType::Float, _) => fail("Input should be a valid number", "float_type", value),
        (ParamType::Bool, Value::Bool(_)) => Ok(value.clone()),
        (ParamType::Bool, Value::Number(n)) if n.as_f64() == Some(0.0) => Ok(Value::Bool(false)),
        (ParamType::Bool, Value::Number(n)) if n.as_f64() == Some(1.0) => Ok(Value::Bool(true)),
        (ParamType::Bool, Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "t" | "yes" | "y" | "on" | "1" => Ok(Value::Bool(true)),
            "false" | "f" | "no" | "n" | "off" | "0" => Ok(Value::Bool(false)),
            _ => fail(
                "Input should be a valid boolean, unable to interpret input",
                "bool_parsing",
                value,
            ),
        },
        (ParamType::Bool, _) => fail("Input should be a valid boolean", "bool_type", value),
        (ParamType::List, Value::Array(_)) => Ok(value.clone()),
        (ParamType::List, _) => fail("Input should be a valid list", "list_type", value),
        (ParamType::Dict, Value::Object(_)) => Ok(value.clone()),
        (ParamType::Dict, _) => fail("Input should be a valid dictionary", "dict_type", value),
    }
}

/// Checks a call's arguments against the upstream tool's input schema; each problem
/// names where (a JSON Pointer) and what, never the value.
pub fn validate_arguments(
    input_schema: &crate::input_schema::InputSchema,
    arguments: &Map<String, Value>,
) -> Result<(), Vec<(String, String)>> {
    let validator = input_schema.validator().map_err(|e| {
        vec![(
            String::new(),
            format!("the input schema does not compile: {e}"),
        )]
    })?;
    let instance = Value::Object(arguments.clone());
    // The common case answers without building error values.
    if validator.is_valid(&instance) {
        return Ok(());
    }
    let problems: Vec<(String, String)> = validator
        .iter_errors(&instance)
        .take(LISTED_PROBLEMS + 1)
        .map(|e| {
            (
                e.instance_path().as_str().to_string(),
                e.masked().to_string(),
            )
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::ToolKind;
    use serde_json::json;

    fn tool(kind: ToolKind, params: Vec<Param>) -> Tool {
        let mut t: Tool = serde_json::from_value(
            json!({"key": "public.greet", "name": "greet", "kind": "exec", "command": "x"}),
        )
        .unwrap();
        t.kind = kind;
        t.params = params;
        t
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
    fn exec() -> ToolKind {
        ToolKind::Exec {
            command: "x".into(),
        }
    }

    #[test]
    fn coerces_laxly_and_fills_defaults_and_nulls() {
        let mut times = p("times", ParamType::Int, false);
        times.default = Some(json!(3));
        let params = vec![
            p("n", ParamType::Int, true),
            p("f", ParamType::Float, false),
            p("b", ParamType::Bool, false),
            times,
            p("tag", ParamType::Str, false),
        ];
        let out = validate(
            &tool(exec(), params),
            &obj(json!({"n": "5", "f": 2, "b": "yes"})),
        );
        assert_eq!(
            Value::Object(out.unwrap()),
            json!({"n": 5, "f": 2.0, "b": true, "times": 3, "tag": null})
        );
    }

    #[test]
    fn names_every_bad_param_in_pydantic_words() {
        let t = tool(
            exec(),
            vec![
                p("name", ParamType::Str, true),
                p("n", ParamType::Int, false),
            ],
        );
        let err = validate(&t, &obj(json!({"n": "x", "bogus": 1}))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "3 validation errors for public.greet_params\n\
             name\n  Field required [type=missing, input_value={'n': 'x', 'bogus': 1}, input_type=dict]\n\
             n\n  Input should be a valid integer, unable to parse string as an integer \
             [type=int_parsing, input_value='x', input_type=str]\n\
             bogus\n  Extra inputs are not permitted (accepted: name, n) \
             [type=extra_forbidden, input_value=1, input_type=int]"
        );
    }

    #[test]
    fn a_hostile_call_gets_a_bounded_message() {
        let t = tool(
            exec(),
            vec![
                p("name", ParamType::Str, true),
                p("n", ParamType::Int, false),
            ],
        );
        let mut given = obj(json!({"n": "9".repeat(100_000) + "x"}));
        for i in 0..5_000 {
            given.insert(format!("p{i}"), json!(i));
        }
        let err = validate(&t, &given).unwrap_err();
        assert_eq!(err.problems.len(), 5_002, "every problem is kept");
        let text = err.to_string();
        assert!(text.starts_with("5002 validation errors for public.greet_params\n"));
        assert!(text.ends_with(&format!("\n({} more not shown)", 5_002 - LISTED_PROBLEMS)));
        assert_eq!(text.matches("\n  ").count(), LISTED_PROBLEMS);
        // The 100,001-byte value and the whole given dict come back cut to pydantic's 50.
        assert!(
            text.contains(&format!(
                "input_value='{}...{}x', input_type=str]",
                "9".repeat(24),
                "9".repeat(22)
            )),
            "{text:.600}"
        );
        assert!(
            text.contains(
                "input_value={'n': '999999999999999999...8': 4998, 'p4999': 4999}, input_type=dict]"
            ),
            "{text:.600}"
        );
        assert!(text.len() < 20_000, "{} bytes", text.len());
    }

    #[test]
    fn explicit_null_is_refused_for_every_type() {
        for ty in ParamType::ALL {
            assert!(coerce(ty, &Value::Null).is_err(), "{ty}");
        }
    }

    #[test]
    fn overrides_win_silently() {
        let mut secret = p("token", ParamType::Str, true);
        secret.override_value = Some(json!("s3cret"));
        let t = tool(exec(), vec![secret, p("q", ParamType::Str, false)]);
        assert_eq!(validate(&t, &Map::new()).unwrap()["token"], json!("s3cret"));
        // The caller's value (of any type) is ignored, with no error, as MCC does.
        for mine in [json!("mine"), json!(5), json!(null)] {
            let out = validate(&t, &obj(json!({"token": mine, "q": "x"}))).unwrap();
            assert_eq!(Value::Object(out), json!({"token": "s3cret", "q": "x"}));
        }
        // An unknown param is still an error, and the message never names the hidden one.
        let err = validate(&t, &obj(json!({"tokn": 1})))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("Extra inputs are not permitted (accepted: q)"),
            "{err}"
        );
        assert!(!err.contains("token"), "{err}");
    }

    #[test]
    fn the_guard_accepts_exactly_what_validate_returns() {
        let mut secret = p("token", ParamType::Str, true);
        secret.override_value = Some(json!("s3cret"));
        let mut times = p("times", ParamType::Int, false);
        times.default = Some(json!("three"));
        let t = tool(
            exec(),
            vec![
                secret,
                times,
                p("n", ParamType::Int, true),
                p("f", ParamType::Float, false),
                p("b", ParamType::Bool, false),
                p("l", ParamType::List, false),
                p("d", ParamType::Dict, false),
                p("s", ParamType::Str, false),
            ],
        );
        for given in [
            json!({"n": "5", "f": 2, "b": "yes", "token": "mine"}),
            json!({"n": 5.0, "l": [1], "d": {"a": 1}, "s": ""}),
            json!({"n": true, "times": 4, "f": "1e3", "b": 0}),
        ] {
            let out = validate(&t, &obj(given.clone())).unwrap();
            assert_eq!(check_validated(&t, &out), Ok(()), "{given}");
        }
        let refused = |params: Value| check_validated(&t, &obj(params)).unwrap_err();
        assert_eq!(
            refused(json!({"n": "5"})).message,
            "expected int, got \"5\""
        );
        assert_eq!(refused(json!({})).param, "n");
        assert_eq!(refused(json!({"n": 1, "x": 1})).param, "x");
        assert_eq!(
            refused(json!({"n": 1, "token": "mine"})).message,
            "is overridden by the tool, not passed"
        );
    }

    #[test]
    fn fn_context_is_hidden() {
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
        assert_eq!(
            Value::Object(validate(&t, &Map::new()).unwrap()),
            json!({"opt": null})
        );
        assert!(validate(&t, &obj(json!({"context": {}}))).is_err());
        let out = validate(&t, &Map::new()).unwrap();
        assert!(check_validated(&t, &out).is_ok());
        let mut with_context = out.clone();
        with_context.insert("context".into(), json!({}));
        assert_eq!(
            check_validated(&t, &with_context).unwrap_err().message,
            "is injected by the gateway, not passed"
        );
    }

    #[test]
    fn lax_rules() {
        assert!(coerce(ParamType::Str, &json!(5)).is_err());
        assert!(coerce(ParamType::Str, &json!(true)).is_err());
        assert!(coerce(ParamType::Int, &json!(2.5)).is_err());
        assert_eq!(coerce(ParamType::Int, &json!(5.0)), Ok(json!(5)));
        assert_eq!(coerce(ParamType::Int, &json!("05")), Ok(json!(5)));
        assert_eq!(coerce(ParamType::Int, &json!(true)), Ok(json!(1)));
        assert!(coerce(ParamType::Bool, &json!(2)).is_err());
        assert!(coerce(ParamType::Bool, &json!("maybe")).is_err());
        assert!(coerce(ParamType::List, &json!("a")).is_err());
        assert!(coerce(ParamType::Dict, &json!([])).is_err());
    }

    #[test]
    fn missing_required_lists_scalars_only() {
        let t = tool(
            exec(),
            vec![p("a", ParamType::Str, true), p("l", ParamType::List, true)],
        );
        let names: Vec<_> = missing_required(&t, &Map::new())
            .into_iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(names, ["a"]);
    }
}
