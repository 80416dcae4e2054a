//! MCP resources: what a caller may read of the catalog and of their session, for
//! guided workflows (the `explain_tool` prompt reads a tool's entry).
//!
//! - `mcc://tools/{key}` (`text/markdown`, also a resource template): a tool the caller
//!   may see ([`crate::calls::view`], the rule of `describe_tools` and `search`), its text
//!   exactly the block `describe_tools` prints for it ([`crate::calls::text::tool_block`]);
//! - `mcc://session` (`application/json`): the caller's session context as `get_session`
//!   answers it, in the session scope of the request (the MCP session of a legacy client,
//!   else the caller's default bucket).
//!
//! `resources/list` pages through these in URI order, [`PAGE_SIZE`] a page; its cursor is
//! the last URI of the previous page, so a page follows catalog reloads without skipping
//! or repeating what stayed. A tool that does not exist and one the caller may not see
//! are both "Resource not found" (-32002; rmcp answers 2026-07-28 peers with -32602, as
//! that revision asks), so a read never tells one from the other.

use mcc_catalog::User;
use mcc_catalog::approval::Policy;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};

use super::{CallCtx, Shared};
use crate::calls::text;
use crate::calls::view;
use crate::catalog::Catalog;

/// The template of a tool's resource (also a completion reference: [`super::completion`]).
pub const TOOL_TEMPLATE: &str = "mcc://tools/{key}";
const TOOL_PREFIX: &str = "mcc://tools/";
/// The caller's session context.
pub const SESSION: &str = "mcc://session";
/// Resources per `resources/list` page.
pub const PAGE_SIZE: usize = 100;

const MARKDOWN: &str = "text/markdown";
const JSON: &str = "application/json";

fn tool_uri(key: &str) -> String {
    format!("{TOOL_PREFIX}{key}")
}

/// One page of the resources `user` may read, after `cursor` (the last URI of the
/// previous page).
pub fn list(
    catalog: &Catalog,
    policy: &Policy,
    user: Option<&User>,
    cursor: Option<&str>,
) -> Result<ListResourcesResult, McpError> {
    if cursor.is_some_and(|c| !c.starts_with("mcc://")) {
        return Err(McpError::invalid_params("Invalid cursor", None));
    }
    let session = Resource::new(SESSION, "session")
        .with_description("Your session variables and identity, as get_session reads them.")
        .with_mime_type(JSON);
    // `mcc://session` sorts before every `mcc://tools/…`; tools come sorted by key.
    let tools = view::visible_tools(catalog, user, &[])
        .into_iter()
        .map(|t| {
            let resource = Resource::new(tool_uri(&t.key), t.key.clone())
                .with_mime_type(MARKDOWN)
                .with_size(text::tool_block(t, policy).len() as u64);
            match t.description.trim() {
                "" => resource,
                d => resource.with_description(d),
            }
        });
    let mut page: Vec<Resource> = std::iter::once(session)
        .chain(tools)
        .filter(|r| cursor.is_none_or(|c| r.uri.as_str() > c))
        .take(PAGE_SIZE + 1)
        .collect();
    let more = page.len() > PAGE_SIZE;
    page.truncate(PAGE_SIZE);
    let mut result = ListResourcesResult::with_all_items(page);
    if more {
        result.next_cursor = result.resources.last().map(|r| r.uri.clone());
    }
    Ok(result)
}

/// The one template: a tool's resource by key.
pub fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(TOOL_TEMPLATE, "tool")
            .with_description("A tool of the catalog you may run, as describe_tools shows it.")
            .with_mime_type(MARKDOWN),
    ])
}

/// The same error for a resource that does not exist and one the caller may not read.
fn not_found() -> McpError {
    McpError::resource_not_found("Resource not found", None)
}

/// The contents of `uri` for the caller of `call`.
pub async fn read(
    shared: &Shared,
    call: &CallCtx,
    uri: &str,
) -> Result<ReadResourceResult, McpError> {
    let user = call.caller.user.as_ref();
    if uri == SESSION {
        let text = session_json(shared, call).await?;
        return Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, uri).with_mime_type(JSON),
        ]));
    }
    let key = uri.strip_prefix(TOOL_PREFIX).ok_or_else(not_found)?;
    let catalog = shared.catalog.snapshot();
    let tool = view::visible_tool(&catalog, user, key).ok_or_else(not_found)?;
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(text::tool_block(tool, &shared.approvals.policy), uri)
            .with_mime_type(MARKDOWN),
    ]))
}

/// The session context as one JSON object, encoded as `get_session` encodes a value.
async fn session_json(shared: &Shared, call: &CallCtx) -> Result<String, McpError> {
    let failed = |failure: crate::calls::executed::SessionFailure| {
        if failure.caller_error {
            McpError::invalid_params(failure.message, None)
        } else {
            McpError::internal_error(failure.message, None)
        }
    };
    let scope = shared.scope(call, None).await.map_err(failed)?;
    let stored = shared
        .sessions
        .vars(&scope)
        .await
        .map_err(|e| failed(shared.session_failure("vars", e)))?;
    let context = mcc_catalog::context::assemble(call.caller.user.as_ref(), &stored);
    Ok(mcc_catalog::pyfmt::json_dumps(&serde_json::Value::Object(
        context,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog(n: usize) -> Catalog {
        super::super::test_catalog(n, "D.")
    }

    #[test]
    fn pages_follow_the_uri_order_and_end() {
        let c = catalog(150);
        let first = list(&c, &Policy::default(), None, None).unwrap();
        assert_eq!(first.resources.len(), PAGE_SIZE);
        assert_eq!(first.resources[0].uri, SESSION);
        assert_eq!(first.resources[1].uri, "mcc://tools/public.t000");
        assert_eq!(first.resources[1].mime_type.as_deref(), Some(MARKDOWN));
        let cursor = first.next_cursor.clone().unwrap();
        assert_eq!(cursor, "mcc://tools/public.t098");
        let second = list(&c, &Policy::default(), None, Some(&cursor)).unwrap();
        assert_eq!(second.resources.len(), 51);
        assert_eq!(second.resources[0].uri, "mcc://tools/public.t099");
        assert!(second.next_cursor.is_none());
        assert!(
            first
                .resources
                .iter()
                .chain(&second.resources)
                .all(|r| !r.uri.contains("admin"))
        );
        assert!(list(&c, &Policy::default(), None, Some("garbage")).is_err());
    }
}
