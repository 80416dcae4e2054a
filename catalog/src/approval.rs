//! Approval before a tool runs: which calls need a person to confirm them first.
//!
//! A tool asks for it itself (`approval: required` in a tool file, `approval: required`
//! on a `Tool`), or the platform team requires it: for every tool in some groups (the
//! gateway's `execution.approval.groups`, both modes) and, in Kubernetes mode, for every
//! tool the operator publishes from some namespaces (stamped into the catalog document
//! as [`Tool::approval_required`]). A tool cannot opt out: there is no value that
//! switches a platform requirement off. [`required`] is the one rule both binaries use.
//!
//! Approval is a human-in-the-loop safeguard, not authorization: a client may accept on
//! its own. Who may run a tool is [`crate::rbac`]'s.

use serde::Deserialize;

use crate::Tool;

/// The one value the `approval` field of a tool file or a `Tool` accepts.
pub const REQUIRED: &str = "required";

/// The platform team's requirement, as the gateway holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Policy {
    /// Every tool in any of these groups needs approval.
    pub groups: Vec<String>,
}

/// Does a call of `tool` need approval before it runs?
pub fn required(tool: &Tool, policy: &Policy) -> bool {
    tool.approval_required || tool.groups.iter().any(|g| policy.groups.contains(g))
}

/// The `approval` field as written: absent or `required` (`true` when required); any
/// other value is an error saying what is accepted.
pub fn parse(value: Option<&str>) -> Result<bool, String> {
    match value {
        None => Ok(false),
        Some(REQUIRED) => Ok(true),
        Some(other) => Err(format!(
            "must be '{REQUIRED}' (or left out), got '{}'",
            other.chars().take(64).collect::<String>()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(groups: &[&str], approval_required: bool) -> Tool {
        let mut t: Tool = serde_json::from_value(json!({
            "key": "k", "name": "t", "kind": "exec", "command": "echo", "groups": groups
        }))
        .unwrap();
        t.approval_required = approval_required;
        t
    }

    #[test]
    fn the_tool_or_the_platform_requires_approval() {
        let none = Policy::default();
        let ops = Policy {
            groups: vec!["ops".into()],
        };
        assert!(!required(&tool(&["public"], false), &none));
        assert!(required(&tool(&["public"], true), &none));
        assert!(required(&tool(&["public", "ops"], false), &ops));
        assert!(!required(&tool(&["public"], false), &ops));
        // A tool cannot opt out of the platform's requirement.
        assert!(required(&tool(&["ops"], false), &ops));
    }

    #[test]
    fn only_required_is_accepted() {
        assert_eq!(parse(None), Ok(false));
        assert_eq!(parse(Some("required")), Ok(true));
        let e = parse(Some("never")).unwrap_err();
        assert_eq!(e, "must be 'required' (or left out), got 'never'");
        assert!(parse(Some("Required")).is_err());
        assert!(parse(Some("")).is_err());
    }

    #[test]
    fn the_catalog_document_keeps_the_stamp() {
        let t = tool(&["public"], true);
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(v["approval_required"], json!(true));
        let back: Tool = serde_json::from_value(v).unwrap();
        assert!(back.approval_required);
        let v = serde_json::to_value(tool(&["public"], false)).unwrap();
        assert!(v.get("approval_required").is_none(), "{v}");
    }
}
