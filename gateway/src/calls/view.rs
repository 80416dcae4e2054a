//! What a caller may see of the catalog: the tools they may run ([`visible_tools`], the
//! one list behind MCP's `describe_tools` and REST's `/v1/tools`), one tool
//! ([`visible_tool`]: a tool they may not run is not there, as an unknown key), and who
//! they are ([`whoami`]). RBAC is [`mcc_catalog::Tool::allows`]; nothing here renders.

use mcc_catalog::{Tool, User};

use crate::catalog::Catalog;

/// The tools `user` may run that are in every one of `groups` (an empty list is no
/// filter), sorted by key.
pub fn visible_tools<'a>(
    catalog: &'a Catalog,
    user: Option<&User>,
    groups: &[String],
) -> Vec<&'a Tool> {
    let mut tools: Vec<&Tool> = catalog
        .tools()
        .iter()
        .filter(|t| t.allows(user))
        .filter(|t| groups.iter().all(|g| t.groups.contains(g)))
        .collect();
    tools.sort_by(|a, b| a.key.cmp(&b.key));
    tools
}

/// The tool `key` if `user` may run it; `None` whether it is unknown or forbidden.
pub fn visible_tool<'a>(catalog: &'a Catalog, user: Option<&User>, key: &str) -> Option<&'a Tool> {
    catalog.tool(key).filter(|t| t.allows(user))
}

/// Who the caller is and every key they may run (sorted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WhoAmI<'a> {
    pub user: &'a User,
    pub tools: Vec<&'a str>,
}

/// `None` for an anonymous caller.
pub fn whoami<'a>(catalog: &'a Catalog, user: Option<&'a User>) -> Option<WhoAmI<'a>> {
    let user = user?;
    let tools = visible_tools(catalog, Some(user), &[])
        .into_iter()
        .map(|t| t.key.as_str())
        .collect();
    Some(WhoAmI { user, tools })
}
