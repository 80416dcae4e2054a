//! The calls' exact texts (reference MCC 0.4.0 strings), as pure functions of the
//! catalog, the caller and the inputs: what the MCP tools return, and the texts REST
//! shares with them (no tools, not authenticated). What a caller may see is
//! [`view`]'s; this module only words it.

use mcc_catalog::{Tool, User};

use crate::calls::view;
use crate::catalog::Catalog;

pub const NO_TOOLS: &str = "No tools available.";
pub const NOT_AUTHENTICATED: &str = "Not authenticated: no user is associated with this session.";
pub const UNAUTHORIZED: &str = "Unauthorized";
pub const CANCELLED: &str = "Execution cancelled: required parameters not provided";
/// A call whose request was cancelled while it ran (nobody receives it: rmcp drops it).
pub const ABORTED: &str = "Execution cancelled: the request was cancelled";
/// What a response cut at `server.response_max_size` ends with (the engine's rule).
pub use crate::exec::result::TRUNCATION_NOTICE as TRUNCATED;
/// Cuts a response to the limit: the same rule as a tool's captured output.
pub use crate::exec::result::limit as limit_response;

pub fn unknown_tool(key: &str) -> String {
    format!("Unknown tool: {key}")
}

/// A result its tool's output schema does not admit (no MCC text: MCC has no schemas).
pub fn bad_output(key: &str, error: &impl std::fmt::Display) -> String {
    format!("Output error for tool '{key}': {error}")
}

pub fn validation_error(key: &str, error: &impl std::fmt::Display) -> String {
    format!("Validation error for tool '{key}': {error}")
}

/// The tools the caller may run ([`view::visible_tools`]) as their
/// [`tool_block`]s joined by a blank line.
pub fn describe_tools(catalog: &Catalog, user: Option<&User>, groups: &[String]) -> String {
    let tools = view::visible_tools(catalog, user, groups);
    if tools.is_empty() {
        return NO_TOOLS.to_string();
    }
    tools
        .iter()
        .map(|t| tool_block(t))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// One tool as `describe_tools` prints it, `## <key>\n<description>`: also the text of
/// its `mcc://tools/{key}` resource (`mcp::resources`). A tool that declares a title,
/// hints or an output schema gets their lines after the description (the signature
/// block's, [`mcc_catalog::annotations::lines`]); MCC's tools have none.
pub fn tool_block(tool: &Tool) -> String {
    let mut block = format!("## {}\n{}", tool.key, tool.description);
    let extra = mcc_catalog::annotations::lines(&tool.annotations, tool.output_schema.as_ref());
    if !extra.is_empty() {
        if !block.ends_with('\n') {
            block.push('\n');
        }
        block.push_str(extra.trim_end_matches('\n'));
    }
    block
}

/// whoami's four lines (groups in stored order, tools = every accessible key, sorted).
pub fn whoami(catalog: &Catalog, user: Option<&User>) -> String {
    let Some(me) = view::whoami(catalog, user) else {
        return NOT_AUTHENTICATED.to_string();
    };
    let or_none = |s: String| {
        if s.is_empty() {
            "(none)".to_string()
        } else {
            s
        }
    };
    format!(
        "username: {}\nemail: {}\ngroups: {}\ntools: {}",
        me.user.username,
        me.user
            .email
            .as_deref()
            .filter(|e| !e.is_empty())
            .unwrap_or("(none)"),
        or_none(me.user.groups.join(", ")),
        or_none(me.tools.join(", "))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(key: &str, groups: &[&str], description: &str) -> Tool {
        serde_json::from_value(json!({
            "key": key, "name": key.rsplit('.').next().unwrap(), "groups": groups,
            "description": description, "kind": "exec", "command": "true"
        }))
        .unwrap()
    }

    fn catalog() -> Catalog {
        Catalog::new(
            vec![
                tool("public.b", &["public"], "B."),
                tool("admin.web.x", &["admin", "web"], "X.\n"),
                tool("public.a", &["public"], ""),
                tool("ops.r", &["ops"], "R."),
            ],
            vec![],
        )
    }

    fn user(name: &str, email: Option<&str>, groups: &[&str], tools: &[&str]) -> User {
        User {
            username: name.into(),
            email: email.map(Into::into),
            groups: groups.iter().map(|s| s.to_string()).collect(),
            tools: tools.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn describe_tools_sorted_and_and_filtered() {
        let c = catalog();
        assert_eq!(
            describe_tools(&c, None, &[]),
            "## public.a\n\n\n## public.b\nB."
        );
        let admin = user("root", None, &["admin"], &[]);
        assert_eq!(
            describe_tools(&c, Some(&admin), &["admin".into(), "web".into()]),
            "## admin.web.x\nX.\n"
        );
        assert_eq!(
            describe_tools(&c, Some(&admin), &["admin".into(), "ops".into()]),
            NO_TOOLS
        );
    }

    #[test]
    fn describe_blocks_add_declared_annotations_only() {
        let mut t = tool("public.a", &["public"], "A.");
        assert_eq!(tool_block(&t), "## public.a\nA.");
        t.annotations.title = Some("The A".into());
        t.annotations.read_only_hint = Some(true);
        t.output_schema = Some(json!({"type": "object"}));
        assert_eq!(
            tool_block(&t),
            "## public.a\nA.\nTitle: The A\nHints: readOnlyHint=true\n\
             Output schema: {\"type\":\"object\"}"
        );
    }

    #[test]
    fn whoami_lines() {
        let c = catalog();
        let alice = user("alice", Some("alice@example.com"), &["osint", "ops"], &[]);
        assert_eq!(
            whoami(&c, Some(&alice)),
            "username: alice\nemail: alice@example.com\ngroups: osint, ops\ntools: ops.r, public.a, public.b"
        );
        let bare = user("bob", None, &[], &[]);
        assert_eq!(
            whoami(&Catalog::default(), Some(&bare)),
            "username: bob\nemail: (none)\ngroups: (none)\ntools: (none)"
        );
        assert_eq!(whoami(&c, None), NOT_AUTHENTICATED);
    }

    #[test]
    fn truncation_keeps_the_limit_and_ends_with_the_notice() {
        assert_eq!(limit_response("short".into(), 100), "short");
        let long = "é".repeat(100);
        let cut = limit_response(long, 60);
        assert!(cut.len() <= 60, "{}", cut.len());
        assert!(cut.ends_with(TRUNCATED));
    }
}
