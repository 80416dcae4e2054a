//! What clients see of the gateway before calling anything: the MCP tool definitions
//! (names, descriptions, input and output schemas) and the prompts with their texts.
//!
//! The definitions live in `surface.json` beside this file, copied byte for byte from MCC
//! 0.4.0's `tools/list` and `prompts/list` (descriptions are compared side by side with
//! the reference), plus our additions: the optional `session` argument of `execute`,
//! `set_session` and `get_session`, and the `new_session` tool.

use std::sync::{Arc, LazyLock};

use rmcp::model::{GetPromptResult, Prompt, PromptMessage, Role, Tool};
use serde::Deserialize;
use serde_json::{Map, Value};

#[derive(Deserialize)]
struct SurfaceFile {
    tools: Vec<Tool>,
    prompts: Vec<Prompt>,
}

static SURFACE: LazyLock<SurfaceFile> = LazyLock::new(|| {
    serde_json::from_str(include_str!("surface.json")).expect("surface.json is valid (tested)")
});

/// The MCP tools, in the reference's order (then `new_session`).
pub fn tools() -> &'static [Tool] {
    &SURFACE.tools
}

pub fn tool(name: &str) -> Option<Tool> {
    SURFACE.tools.iter().find(|t| t.name == name).cloned()
}

/// Whether a tool wraps its text result as `{"result": text}` structured content (every
/// tool that declares an output schema).
pub fn wraps_result(name: &str) -> bool {
    SURFACE
        .tools
        .iter()
        .any(|t| t.name == name && t.output_schema.is_some())
}

pub fn prompts() -> &'static [Prompt] {
    &SURFACE.prompts
}

/// Why a prompt could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("Unknown prompt: {0}")]
    Unknown(String),
    #[error("Missing required argument '{argument}' for prompt '{prompt}'")]
    MissingArgument { prompt: String, argument: String },
}

/// Renders a prompt: one user message whose text has the arguments inserted raw, as the
/// reference's f-strings do.
pub fn render_prompt(
    name: &str,
    args: &Map<String, Value>,
) -> Result<GetPromptResult, PromptError> {
    let prompt = SURFACE
        .prompts
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| PromptError::Unknown(name.to_string()))?;
    let arg = |argument: &str| -> Result<String, PromptError> {
        match args.get(argument) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Ok(other.to_string()),
            None => Err(PromptError::MissingArgument {
                prompt: name.to_string(),
                argument: argument.to_string(),
            }),
        }
    };
    let text = match name {
        "find_and_run" => format!(
            "Search the tool catalog for a tool that can: {}. Review the results, pick the best match, and execute it with appropriate parameters.",
            arg("task")?
        ),
        "explain_tool" => format!(
            "Read the tool catalog entry for '{}' and explain:\n1. What the tool does\n2. What parameters it accepts (required vs optional)\n3. When you would use this tool",
            arg("key")?
        ),
        "debug_error" => format!(
            "The tool '{}' returned this error:\n\n{}\n\nDiagnose what went wrong and suggest:\n1. How to fix the parameters or input\n2. Whether a different tool would be more appropriate\n3. Any other troubleshooting steps",
            arg("key")?,
            arg("error")?
        ),
        other => return Err(PromptError::Unknown(other.to_string())),
    };
    let mut result = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]);
    if let Some(description) = &prompt.description {
        result = result.with_description(description.clone());
    }
    Ok(result)
}

/// The input schema of a tool, for argument checks.
pub fn input_schema(name: &str) -> Option<Arc<Map<String, Value>>> {
    SURFACE
        .tools
        .iter()
        .find(|t| t.name == name)
        .map(|t| t.input_schema.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reference_tools_and_prompts_in_order() {
        let names: Vec<&str> = tools().iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(
            names,
            [
                "search",
                "execute",
                "whoami",
                "describe_tools",
                "set_session",
                "get_session",
                "new_session"
            ]
        );
        assert!(!wraps_result("execute"));
        assert!(wraps_result("search") && wraps_result("new_session"));
        let prompts: Vec<&str> = prompts().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(prompts, ["find_and_run", "explain_tool", "debug_error"]);
    }

    #[test]
    fn descriptions_are_the_reference_docstrings() {
        let whoami = tool("whoami").unwrap();
        assert_eq!(
            whoami.description.as_deref(),
            Some(
                "Return the identity of the currently authenticated user.\n\nResolves the caller's auth session (validated in this process — no token or\nsecret is ever returned) to their catalog identity: username, email, the\ngroups they belong to, and the tools they can execute.\n\nUse this to confirm who you are authenticated as and which groups/tools\ngate your access before searching or executing tools.\nGroups are the groups the user is in; membership grants access to every tool\nin those groups.\nTools is the exhaustive list of tool keys the user can execute — the union of\ntools granted directly and all tools reachable through their group memberships.\n\nReturns a human-readable summary, or a notice if the request is unauthenticated."
            )
        );
        let execute = tool("execute").unwrap();
        assert!(execute.description.as_deref().unwrap().ends_with(
            "  params: Dict of parameter name → value. Omit or pass null for tools with no required parameters."
        ));
        assert_eq!(
            Value::Object((*execute.input_schema).clone())["required"],
            json!(["key"])
        );
    }

    #[test]
    fn prompt_texts() {
        let args = json!({"key": "K", "error": "E", "task": "T"});
        let args = args.as_object().unwrap();
        let r = render_prompt("debug_error", args).unwrap();
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v["messages"][0]["content"]["text"],
            "The tool 'K' returned this error:\n\nE\n\nDiagnose what went wrong and suggest:\n1. How to fix the parameters or input\n2. Whether a different tool would be more appropriate\n3. Any other troubleshooting steps"
        );
        assert_eq!(
            v["description"],
            "Diagnose a tool execution error and suggest fixes."
        );
        assert_eq!(v["messages"][0]["role"], "user");
        let e = render_prompt("explain_tool", &Map::new()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Missing required argument 'key' for prompt 'explain_tool'"
        );
    }
}
