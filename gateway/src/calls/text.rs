//! The calls' exact texts (reference MCC 0.4.0 strings), as pure functions of the
//! catalog, the caller and the inputs: what the MCP tools return, and the texts REST
//! shares with them (no tools, not authenticated). What a caller may see is
//! [`view`]'s; this module only words it.

use mcc_catalog::approval::Policy;
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

/// The line a tool's description block and signature block end with when a call of it
/// needs approval ([`mcc_catalog::approval::required`], the rule `execute` applies;
/// the tool's own flag or the platform's groups); absent otherwise, so MCC's texts stay
/// byte for byte what they were.
pub const APPROVAL_LINE: &str = "Approval: required";

/// The tools the caller may run ([`view::visible_tools`]) as their
/// [`tool_block`]s joined by a blank line.
pub fn describe_tools(
    catalog: &Catalog,
    policy: &Policy,
    user: Option<&User>,
    groups: &[String],
) -> String {
    let tools = view::visible_tools(catalog, user, groups);
    if tools.is_empty() {
        return NO_TOOLS.to_string();
    }
    tools
        .iter()
        .map(|t| tool_block(t, policy))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// One tool as `describe_tools` prints it, `## <key>\n<description>`: also the text of
/// its `mcc://tools/{key}` resource (`mcp::resources`). A tool that declares a title,
/// hints or an output schema gets their lines after the description (the signature
/// block's, [`mcc_catalog::annotations::lines`]), and a tool that needs approval
/// [`APPROVAL_LINE`] last; MCC's tools have neither.
pub fn tool_block(tool: &Tool, policy: &Policy) -> String {
    let mut block = format!("## {}\n{}", tool.key, tool.description);
    let mut extra = mcc_catalog::annotations::lines(&tool.annotations, tool.output_schema.as_ref());
    push_approval(&mut extra, tool, policy);
    if !extra.is_empty() {
        if !block.ends_with('\n') {
            block.push('\n');
        }
        block.push_str(extra.trim_end_matches('\n'));
    }
    block
}

/// The tool's signature block ([`mcc_catalog::signature`], ends with a newline) as the
/// gateway shows it — `search` hits, REST's tool descriptions and lists — with
/// [`APPROVAL_LINE`] last when a call of it needs approval.
pub fn signature(tool: &Tool, policy: &Policy) -> String {
    let mut block = mcc_catalog::signature(tool);
    push_approval(&mut block, tool, policy);
    block
}

/// Appends [`APPROVAL_LINE`] and a newline to `lines` (empty, or ending with a newline)
/// when a call of `tool` needs approval.
fn push_approval(lines: &mut String, tool: &Tool, policy: &Policy) {
    if mcc_catalog::approval::required(tool, policy) {
        lines.push_str(APPROVAL_LINE);
        lines.push('\n');
    }
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
            describe_tools(&c, &none(), None, &[]),
            "## public.a\n\n\n## public.b\nB."
        );
        let admin = user("root", None, &["admin"], &[]);
        assert_eq!(
            describe_tools(&c, &none(), Some(&admin), &["admin".into(), "web".into()]),
            "## admin.web.x\nX.\n"
        );
        assert_eq!(
            describe_tools(&c, &none(), Some(&admin), &["admin".into(), "ops".into()]),
            NO_TOOLS
        );
    }

    #[test]
    fn describe_blocks_add_declared_annotations_only() {
        let mut t = tool("public.a", &["public"], "A.");
        assert_eq!(tool_block(&t, &none()), "## public.a\nA.");
        t.annotations.title = Some("The A".into());
        t.annotations.read_only_hint = Some(true);
        t.output_schema = Some(json!({"type": "object"}));
        assert_eq!(
            tool_block(&t, &none()),
            "## public.a\nA.\nTitle: The A\nHints: readOnlyHint=true\n\
             Output schema: {\"type\":\"object\"}"
        );
        t.approval_required = true;
        assert_eq!(
            tool_block(&t, &none()),
            "## public.a\nA.\nTitle: The A\nHints: readOnlyHint=true\n\
             Output schema: {\"type\":\"object\"}\nApproval: required"
        );
    }

    fn none() -> Policy {
        Policy::default()
    }

    fn ops() -> Policy {
        Policy {
            groups: vec!["ops".into()],
        }
    }

    #[test]
    fn approval_line_exactly_when_the_rule_requires_it() {
        let c = catalog();
        let root = user("root", None, &["admin", "ops", "public"], &[]);
        // No policy, no flags: MCC's text, byte for byte.
        let plain = describe_tools(&c, &none(), Some(&root), &[]);
        assert!(!plain.contains(APPROVAL_LINE), "{plain}");
        // The platform's groups: only the tools in them get the line.
        assert_eq!(
            describe_tools(&c, &ops(), Some(&root), &[]),
            plain.replace("## ops.r\nR.", "## ops.r\nR.\nApproval: required")
        );
        // The tool's own flag, with no policy: the line after the description.
        let mut flagged = tool("public.a", &["public"], "A.");
        flagged.approval_required = true;
        assert_eq!(
            tool_block(&flagged, &none()),
            "## public.a\nA.\nApproval: required"
        );
        // A description ending with a newline gets no blank line before it.
        let mut x = tool("admin.web.x", &["admin", "web"], "X.\n");
        assert_eq!(tool_block(&x, &none()), "## admin.web.x\nX.\n");
        x.approval_required = true;
        assert_eq!(
            tool_block(&x, &none()),
            "## admin.web.x\nX.\nApproval: required"
        );
        // The signature block: MCC's, then the line.
        let sig = mcc_catalog::signature(&flagged);
        assert_eq!(
            signature(&flagged, &none()),
            format!("{sig}Approval: required\n")
        );
        let plain_tool = tool("public.b", &["public"], "B.");
        assert_eq!(
            signature(&plain_tool, &ops()),
            mcc_catalog::signature(&plain_tool)
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
