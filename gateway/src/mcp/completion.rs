//! `completion/complete`: argument completion for the prompts and the resource template.
//!
//! A prompt argument named `key` (`explain_tool`'s and `debug_error`'s, as declared in
//! `surface.json`) and the `{key}` of the `mcc://tools/{key}` template complete to the
//! tool keys the caller may see ([`crate::calls::view::visible_tools`], the rule
//! `describe_tools` and `search` use) that start with what was typed: sorted, at most
//! [`CompletionInfo::MAX_VALUES`], with `total` and `hasMore`. Any other reference or
//! argument completes to nothing (an empty list, not an error: the spec leaves unknown
//! references to the server, and a client asks as the user types).

use mcc_catalog::User;
use rmcp::model::{CompleteRequestParams, CompleteResult, CompletionInfo, Reference};

use super::{resources, surface};
use crate::calls::view;
use crate::catalog::Catalog;

/// The argument that names a tool, in prompts and in the resource template.
const KEY_ARGUMENT: &str = "key";

/// The completion of `request` for `user` over `catalog`.
pub fn complete(
    catalog: &Catalog,
    user: Option<&User>,
    request: &CompleteRequestParams,
) -> CompleteResult {
    if request.argument.name != KEY_ARGUMENT || !names_a_tool(&request.r#ref) {
        return CompleteResult::default();
    }
    CompleteResult::new(tool_keys(catalog, user, &request.argument.value))
}

/// Whether the reference takes a tool key as its `key` argument: a prompt declaring a
/// `key` argument, or the tool resource template.
fn names_a_tool(reference: &Reference) -> bool {
    match reference {
        Reference::Prompt(prompt) => surface::prompts().iter().any(|p| {
            p.name == prompt.name && p.arguments.iter().flatten().any(|a| a.name == KEY_ARGUMENT)
        }),
        Reference::Resource(template) => template.uri == resources::TOOL_TEMPLATE,
        // A kind of reference this server does not know (the enum is non-exhaustive).
        _ => false,
    }
}

/// The visible keys starting with `prefix` (already sorted by `visible_tools`).
fn tool_keys(catalog: &Catalog, user: Option<&User>, prefix: &str) -> CompletionInfo {
    let matching: Vec<&str> = view::visible_tools(catalog, user, &[])
        .into_iter()
        .map(|t| t.key.as_str())
        .filter(|k| k.starts_with(prefix))
        .collect();
    let total = matching.len();
    let values = matching
        .into_iter()
        .take(CompletionInfo::MAX_VALUES)
        .map(str::to_string)
        .collect();
    let count = Some(u32::try_from(total).unwrap_or(u32::MAX));
    // Never more than MAX_VALUES values (taken above): the constructor cannot refuse.
    CompletionInfo::with_pagination(values, count, total > CompletionInfo::MAX_VALUES)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ArgumentInfo;

    fn catalog(n: usize) -> Catalog {
        super::super::test_catalog(n, "")
    }

    fn ask(
        reference: Reference,
        name: &str,
        value: &str,
        user: Option<&User>,
        c: &Catalog,
    ) -> CompletionInfo {
        complete(
            c,
            user,
            &CompleteRequestParams::new(reference, ArgumentInfo::new(name, value)),
        )
        .completion
    }

    #[test]
    fn keys_the_caller_sees_with_the_prefix_capped() {
        let c = catalog(120);
        let bob = User {
            username: "bob".into(),
            groups: vec!["public".into()],
            ..Default::default()
        };
        let all = ask(
            Reference::for_prompt("explain_tool"),
            "key",
            "",
            Some(&bob),
            &c,
        );
        assert_eq!(all.values.len(), 100);
        assert_eq!((all.total, all.has_more), (Some(120), Some(true)));
        assert_eq!(all.values[0], "public.t000");
        let some = ask(
            Reference::for_prompt("debug_error"),
            "key",
            "public.t11",
            Some(&bob),
            &c,
        );
        assert_eq!(some.values.len(), 10);
        assert_eq!((some.total, some.has_more), (Some(10), Some(false)));
        let hidden = ask(
            Reference::for_prompt("explain_tool"),
            "key",
            "admin",
            Some(&bob),
            &c,
        );
        assert!(hidden.values.is_empty());
        let template = ask(
            Reference::for_resource(resources::TOOL_TEMPLATE),
            "key",
            "public.t000",
            Some(&bob),
            &c,
        );
        assert_eq!(template.values, ["public.t000"]);
    }

    #[test]
    fn unknown_references_and_arguments_complete_to_nothing() {
        let c = catalog(3);
        for (reference, name) in [
            (Reference::for_prompt("find_and_run"), "key"),
            (Reference::for_prompt("find_and_run"), "task"),
            (Reference::for_prompt("nope"), "key"),
            (Reference::for_prompt("debug_error"), "error"),
            (Reference::for_resource("mcc://other/{key}"), "key"),
        ] {
            let info = ask(reference, name, "", None, &c);
            assert!(
                info.values.is_empty() && info.total.is_none(),
                "{name}: {info:?}"
            );
        }
    }
}
