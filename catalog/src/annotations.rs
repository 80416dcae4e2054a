//! What a tool declares about itself for agents and their hosts, beyond MCC's fields: MCP's
//! tool annotations ([`Annotations`]: a display title and four behaviour hints) and an
//! output JSON Schema ([`check_schema`] at load, [`validate_output`] at execute time).
//!
//! All of it is optional, and a tool without it renders exactly as in MCC: the lines
//! [`lines`] adds to a signature block are empty then. The hints are what the tool's author
//! says; nothing here enforces them (a `readOnlyHint` tool is not sandboxed by it).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// MCP's `ToolAnnotations`, under MCP's names (also the catalog document's and the CRD's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// A human-readable name for the tool (the key stays what callers use).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool does not modify its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may perform destructive updates (meaningful when not read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling it again with the same arguments has no further effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// It interacts with an open world of external entities (the web, not a closed set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

impl Annotations {
    pub fn is_empty(&self) -> bool {
        *self == Annotations::default()
    }

    /// The hints that are set, as `(MCP name, value)` in MCP's order.
    pub fn hints(&self) -> impl Iterator<Item = (&'static str, bool)> {
        [
            ("readOnlyHint", self.read_only_hint),
            ("destructiveHint", self.destructive_hint),
            ("idempotentHint", self.idempotent_hint),
            ("openWorldHint", self.open_world_hint),
        ]
        .into_iter()
        .filter_map(|(name, v)| v.map(|v| (name, v)))
    }
}

/// The lines a signature block (and `describe_tools`) adds for what is declared, each
/// ending with a newline; empty when nothing is, so MCC's texts stay as they were:
///
/// ```text
/// Title: Greeter
/// Hints: readOnlyHint=true, openWorldHint=false
/// Output schema: {"type":"object","properties":{"n":{"type":"integer"}}}
/// ```
pub fn lines(annotations: &Annotations, output_schema: Option<&Value>) -> String {
    let mut out = String::new();
    if let Some(title) = &annotations.title {
        out.push_str(&format!("Title: {title}\n"));
    }
    let hints: Vec<String> = annotations
        .hints()
        .map(|(name, v)| format!("{name}={v}"))
        .collect();
    if !hints.is_empty() {
        out.push_str(&format!("Hints: {}\n", hints.join(", ")));
    }
    if let Some(schema) = output_schema {
        out.push_str(&format!("Output schema: {schema}\n"));
    }
    out
}

/// Checks that `schema` can be an output schema: a JSON Schema (checked against its
/// draft's meta-schema, 2020-12 unless `$schema` names another) whose root is
/// `"type": "object"`, since MCP's `structuredContent` is an object. References must stay
/// inside the schema: nothing is fetched, so a remote `$ref` is an error here, not a
/// surprise at execute time.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    if !schema.is_object() {
        return Err("must be a JSON Schema object".into());
    }
    if schema.get("type") != Some(&Value::String("object".into())) {
        return Err(
            "the root must be \"type\": \"object\" (MCP's structuredContent is an object)".into(),
        );
    }
    jsonschema::validator_for(schema)
        .map(drop)
        .map_err(|e| match e.instance_path().as_str() {
            "" => format!("not a valid JSON Schema: {e}"),
            at => format!("not a valid JSON Schema at {at}: {e}"),
        })
}

/// A result that does not match the tool's output schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the result does not match the tool's output schema at {}: {message}", path_text(.path))]
pub struct OutputMismatch {
    /// Where in the result (a JSON Pointer, RFC 6901; empty: the whole result).
    pub path: String,
    /// What is wrong there (the value itself is left out: it may be large or private).
    pub message: String,
}

fn path_text(path: &str) -> &str {
    if path.is_empty() {
        "/ (the whole result)"
    } else {
        path
    }
}

/// Checks a tool's result against its output schema (one [`check_schema`] passed at
/// load); the first mismatch names its path. Compiled per call: schemas are small and a
/// compiled validator cannot live in the serializable [`crate::Tool`].
pub fn validate_output(schema: &Value, value: &Value) -> Result<(), OutputMismatch> {
    let validator = jsonschema::validator_for(schema).map_err(|e| OutputMismatch {
        path: String::new(),
        message: format!("the output schema does not compile: {e}"),
    })?;
    validator.validate(value).map_err(|e| OutputMismatch {
        path: e.instance_path().as_str().to_string(),
        message: e.masked().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn no_annotations_no_lines() {
        assert_eq!(lines(&Annotations::default(), None), "");
    }

    #[test]
    fn lines_show_only_what_is_set() {
        let a = Annotations {
            title: Some("Greeter".into()),
            read_only_hint: Some(true),
            open_world_hint: Some(false),
            ..Default::default()
        };
        let schema = json!({"type": "object"});
        assert_eq!(
            lines(&a, Some(&schema)),
            "Title: Greeter\nHints: readOnlyHint=true, openWorldHint=false\n\
             Output schema: {\"type\":\"object\"}\n"
        );
        let hints_only = Annotations {
            destructive_hint: Some(true),
            ..Default::default()
        };
        assert_eq!(lines(&hints_only, None), "Hints: destructiveHint=true\n");
    }

    #[test]
    fn schemas_must_be_valid_object_schemas() {
        assert_eq!(
            check_schema(&json!({"type": "object", "properties": {"n": {"type": "integer"}}})),
            Ok(())
        );
        assert!(
            check_schema(&json!("object"))
                .unwrap_err()
                .contains("object")
        );
        assert!(
            check_schema(&json!({"type": "array"}))
                .unwrap_err()
                .contains("structuredContent")
        );
        let e = check_schema(&json!({"type": "object", "properties": {"n": {"type": "integr"}}}))
            .unwrap_err();
        assert!(e.starts_with("not a valid JSON Schema"), "{e}");
        assert!(e.contains("/properties/n/type"), "{e}");
        let e = check_schema(&json!({"type": "object", "minProperties": -1})).unwrap_err();
        assert!(e.contains("/minProperties"), "{e}");
        // Nothing is fetched: a remote reference is refused at load.
        let remote = json!({"type": "object", "$ref": "https://example.com/s.json"});
        assert!(check_schema(&remote).is_err());
    }

    #[test]
    fn mismatches_name_the_path() {
        let schema = json!({
            "type": "object",
            "required": ["items"],
            "properties": {"items": {"type": "array", "items": {
                "type": "object", "properties": {"count": {"type": "integer"}}
            }}}
        });
        assert_eq!(
            validate_output(&schema, &json!({"items": [{"count": 1}]})),
            Ok(())
        );
        let e = validate_output(&schema, &json!({"items": [{"count": 1}, {"count": "x"}]}))
            .unwrap_err();
        assert_eq!(e.path, "/items/1/count");
        assert!(e.to_string().contains("at /items/1/count: "), "{e}");
        assert!(e.message.contains("integer"), "{e}");
        assert!(!e.message.contains("\"x\""), "the value is masked: {e}");
        let e = validate_output(&schema, &json!("plain text")).unwrap_err();
        assert_eq!(e.path, "");
        assert!(e.to_string().contains("at / (the whole result)"), "{e}");
        let e = validate_output(&schema, &json!({})).unwrap_err();
        assert!(e.message.contains("items"), "{e}");
    }
}
