//! Checking a `Tool`'s spec against the size limits of [`crate::limits`]: the operator
//! applies [`check_tool`] to every Tool it reads, so an object stored before a limit
//! existed (the CRD schema enforces the same limits at admission) is left out with a
//! status naming the field, not published. The limits themselves are `limits`'s; this
//! module only walks a [`ToolSpec`]'s fields.

use serde_json::Value;

use crate::crd::{Runtime, ToolSpec};
use crate::limits::{
    CALLABLE, COMMAND, DESCRIPTION, ENV_ENTRIES, ENV_VALUE, GLOB, LIST_ENTRIES, LimitError, NAME,
    OUTPUT_SCHEMA_BYTES, PARAM_VALUE_BYTES, PARAMS, PATH, POD_ENTRIES, RATE_LIMIT, SESSION_KEYS,
    SHORT_TEXT, TITLE,
};

fn over(field: impl Into<String>, len: usize, limit: usize, unit: &str) -> LimitError {
    LimitError {
        field: field.into(),
        message: format!("{len} {unit}, over the limit of {limit} {unit}"),
    }
}

fn text(field: &str, value: Option<&str>, limit: usize) -> Result<(), LimitError> {
    // Characters, as the API server's maxLength counts; the byte length bounds the
    // count, so short text is not walked.
    match value {
        Some(v) if v.len() > limit && v.chars().count() > limit => {
            Err(over(field, v.chars().count(), limit, "characters"))
        }
        _ => Ok(()),
    }
}

fn items(field: &str, len: usize, limit: usize) -> Result<(), LimitError> {
    if len > limit {
        return Err(over(field, len, limit, "entries"));
    }
    Ok(())
}

fn json(field: &str, value: Option<&Value>, limit: usize) -> Result<(), LimitError> {
    let len = value.map_or(0, |v| v.to_string().len());
    if len > limit {
        return Err(over(field, len, limit, "bytes of JSON"));
    }
    Ok(())
}

/// The first field of `spec` over its limit, in the order of the spec's fields.
pub fn check_tool(spec: &ToolSpec) -> Result<(), LimitError> {
    text("description", spec.description.as_deref(), DESCRIPTION)?;
    text("example", spec.example.as_deref(), SHORT_TEXT)?;
    text("exec", spec.exec.as_deref(), COMMAND)?;
    text("fn", spec.func.as_deref(), CALLABLE)?;
    text("curl", spec.curl.as_deref(), COMMAND)?;
    text("python", spec.python.as_deref(), PATH)?;
    let params = spec.params.as_deref().unwrap_or_default();
    items("params", params.len(), PARAMS)?;
    for (i, p) in params.iter().enumerate() {
        let at = |f: &str| format!("params[{i}].{f}");
        text(&at("name"), Some(&p.name), NAME)?;
        text(&at("description"), p.description.as_deref(), SHORT_TEXT)?;
        json(&at("default"), p.default.as_ref(), PARAM_VALUE_BYTES)?;
        json(&at("example"), p.example.as_ref(), PARAM_VALUE_BYTES)?;
        json(
            &at("override"),
            p.override_value.as_ref(),
            PARAM_VALUE_BYTES,
        )?;
    }
    text("cwd", spec.cwd.as_deref(), PATH)?;
    items("env", spec.env.len(), ENV_ENTRIES)?;
    for (i, e) in spec.env.iter().enumerate() {
        text(&format!("env[{i}].name"), Some(&e.name), NAME)?;
        text(&format!("env[{i}].value"), e.value.as_deref(), ENV_VALUE)?;
    }
    items("envFrom", spec.env_from.len(), ENV_ENTRIES)?;
    for (i, e) in spec.env_from.iter().enumerate() {
        text(&format!("envFrom[{i}].prefix"), e.prefix.as_deref(), NAME)?;
    }
    raw_list("envPassthrough", spec.env_passthrough.as_ref(), GLOB)?;
    transform(spec.transform.as_ref())?;
    if let Some(Value::String(s)) = &spec.rate_limit {
        text("rateLimit", Some(s), RATE_LIMIT)?;
    }
    text("returnType", spec.return_type.as_deref(), CALLABLE)?;
    let keys = spec.session_keys.as_deref().unwrap_or_default();
    items("sessionKeys", keys.len(), SESSION_KEYS)?;
    for (i, k) in keys.iter().enumerate() {
        text(&format!("sessionKeys[{i}]"), Some(k), NAME)?;
    }
    text("title", spec.title.as_deref(), TITLE)?;
    json(
        "outputSchema",
        spec.output_schema.as_ref(),
        OUTPUT_SCHEMA_BYTES,
    )?;
    if let Some(Runtime::Pod(pod)) = &spec.runtime {
        items(
            "runtime.pod.nodeSelector",
            pod.node_selector.len(),
            POD_ENTRIES,
        )?;
        items(
            "runtime.pod.tolerations",
            pod.tolerations.len(),
            POD_ENTRIES,
        )?;
    }
    Ok(())
}

/// A raw list of strings (`envPassthrough`): its length and each entry. Other shapes
/// are the shape check's to refuse.
fn raw_list(field: &str, value: Option<&Value>, each: usize) -> Result<(), LimitError> {
    let Some(Value::Array(list)) = value else {
        return Ok(());
    };
    items(field, list.len(), LIST_ENTRIES)?;
    for (i, v) in list.iter().enumerate() {
        text(&format!("{field}[{i}]"), v.as_str(), each)?;
    }
    Ok(())
}

/// `transform`: one pipeline, or stages that are joined into one; the whole is a
/// command.
fn transform(value: Option<&Value>) -> Result<(), LimitError> {
    match value {
        Some(Value::String(s)) => text("transform", Some(s), COMMAND),
        Some(Value::Array(stages)) => {
            items("transform", stages.len(), LIST_ENTRIES)?;
            let len: usize = stages
                .iter()
                .filter_map(Value::as_str)
                .map(|s| s.chars().count() + " | ".len())
                .sum();
            let len = len.saturating_sub(" | ".len());
            if len > COMMAND {
                return Err(over("transform", len, COMMAND, "characters"));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::ToolParam;
    use k8s_openapi::api::core::v1::EnvVar;
    use serde_json::json;

    fn spec() -> ToolSpec {
        ToolSpec {
            name: Some("t".into()),
            exec: Some("echo hi".into()),
            ..Default::default()
        }
    }

    #[test]
    fn each_field_over_its_limit_is_named_with_the_limit() {
        type Case = (fn(&mut ToolSpec), &'static str);
        let cases: [Case; 11] = [
            (
                |s| s.description = Some("d".repeat(DESCRIPTION + 1)),
                "spec.description: 16385 characters, over the limit of 16384 characters",
            ),
            (
                |s| s.exec = Some("x".repeat(COMMAND + 1)),
                "spec.exec: 131072 characters, over the limit of 131071 characters",
            ),
            (
                |s| {
                    s.params = Some(vec![ToolParam {
                        name: "p".into(),
                        description: Some("é".repeat(SHORT_TEXT + 1)),
                        ..Default::default()
                    }])
                },
                "spec.params[0].description: 4097 characters",
            ),
            (
                |s| s.params = Some(vec![ToolParam::default(); PARAMS + 1]),
                "spec.params: 129 entries, over the limit of 128 entries",
            ),
            (
                |s| {
                    s.params = Some(vec![ToolParam {
                        name: "p".into(),
                        default: Some(json!(["v".repeat(PARAM_VALUE_BYTES)])),
                        ..Default::default()
                    }])
                },
                "spec.params[0].default: 16388 bytes of JSON, over the limit of 16384",
            ),
            (
                |s| {
                    s.env = vec![EnvVar {
                        name: "BIG".into(),
                        value: Some("v".repeat(ENV_VALUE + 1)),
                        ..Default::default()
                    }]
                },
                "spec.env[0].value: 32769 characters",
            ),
            (
                |s| s.transform = Some(json!(["a".repeat(COMMAND / 2), "b".repeat(COMMAND / 2)])),
                "spec.transform: 131073 characters",
            ),
            (
                |s| s.env_passthrough = Some(json!(vec!["X*"; LIST_ENTRIES + 1])),
                "spec.envPassthrough: 129 entries",
            ),
            (
                |s| s.rate_limit = Some(json!("1".repeat(RATE_LIMIT + 1))),
                "spec.rateLimit: 65 characters",
            ),
            (
                |s| s.title = Some("t".repeat(TITLE + 1)),
                "spec.title: 257 characters, over the limit of 256 characters",
            ),
            (
                |s| {
                    s.output_schema = Some(
                        json!({"type": "object", "description": "d".repeat(OUTPUT_SCHEMA_BYTES)}),
                    )
                },
                "spec.outputSchema: 16418 bytes of JSON, over the limit of 16384",
            ),
        ];
        for (change, want) in cases {
            let mut s = spec();
            change(&mut s);
            let e = check_tool(&s).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e} (wanted {want})");
        }
    }

    #[test]
    fn text_at_its_limit_passes_and_characters_are_counted_not_bytes() {
        let mut s = spec();
        s.description = Some("é".repeat(DESCRIPTION));
        s.exec = Some("x".repeat(COMMAND));
        assert_eq!(check_tool(&s), Ok(()));
    }
}
