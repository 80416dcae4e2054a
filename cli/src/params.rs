//! A call's parameters from the command line: `name=value` (a string; the catalog's
//! rules coerce it to the parameter's type, as MCC's lax validation does), `name:=JSON`
//! (a JSON value, for lists, objects and explicit types) and whole JSON objects (MCC's
//! `--json '{…}'`). Later entries win.

use anyhow::{Context, bail};
use serde_json::{Map, Value};

pub fn parse(args: &[String]) -> anyhow::Result<Map<String, Value>> {
    let mut out = Map::new();
    for arg in args {
        if arg.trim_start().starts_with('{') {
            let value: Value = serde_json::from_str(arg)
                .with_context(|| format!("parameters {arg}: not a JSON object"))?;
            let Value::Object(map) = value else {
                bail!("parameters {arg}: not a JSON object");
            };
            out.extend(map);
            continue;
        }
        let Some((name, value)) = arg.split_once('=') else {
            bail!("parameter '{arg}': expected name=value, name:=JSON or a JSON object");
        };
        let (name, value) = match name.strip_suffix(':') {
            Some(name) => {
                let parsed = serde_json::from_str(value).with_context(|| {
                    format!("parameter '{name}': the value after ':=' is not JSON: {value}")
                })?;
                (name, parsed)
            }
            None => (name, Value::String(value.to_string())),
        };
        if name.is_empty() {
            bail!("parameter '{arg}': the name before '=' is empty");
        }
        out.insert(name.to_string(), value);
    }
    Ok(out)
}

/// `NAME=JSON` of `--set`: the value as JSON, else as a string.
pub fn session_var(arg: &str) -> anyhow::Result<(String, Value)> {
    let Some((name, value)) = arg.split_once('=') else {
        bail!("--set '{arg}': expected NAME=VALUE");
    };
    Ok((name.to_string(), json_or_string(value)))
}

/// A value typed on the command line: JSON when it parses, else the text itself.
pub fn json_or_string(value: &str) -> Value {
    serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn forms() {
        let args = [
            "name=World".to_string(),
            "times:=3".to_string(),
            r#"{"loud": true, "name": "x"}"#.to_string(),
            "eq=a=b".to_string(),
        ];
        let p = parse(&args).unwrap();
        assert_eq!(
            Value::Object(p),
            json!({"name": "x", "times": 3, "loud": true, "eq": "a=b"})
        );
        assert!(
            parse(&["oops".into()])
                .unwrap_err()
                .to_string()
                .contains("'oops'")
        );
        assert!(
            parse(&["n:=nope".into()])
                .unwrap_err()
                .to_string()
                .contains("'n'")
        );
        assert_eq!(session_var("a=1").unwrap(), ("a".into(), json!(1)));
        assert_eq!(session_var("a=x").unwrap(), ("a".into(), json!("x")));
    }
}
