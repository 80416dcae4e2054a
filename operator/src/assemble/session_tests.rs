//! Which session variables each Tool receives (issue 32, item 7): MCC's whole store in
//! the trusted namespaces, the declared `sessionKeys` elsewhere, and every variable
//! outside the trusted namespaces only where the platform team allows it.

use mcc_catalog::context::SessionAccess;

use super::*;
use crate::fixtures::{TestTool, test_policy};
use crate::status::ready_reason;

fn tool(resource: &str, ns: &str, keys: Option<&[&str]>) -> Arc<Tool> {
    let mut t = TestTool::exec(resource, ns, resource);
    t.spec.session_keys = keys.map(|k| k.iter().map(|s| s.to_string()).collect());
    Arc::new(t)
}

fn tools_only(tools: Vec<Arc<Tool>>, policy: &Policy) -> Assembly {
    assemble(&tools, &[], policy)
}

fn access(a: &Assembly, resource: &str) -> SessionAccess {
    let t = a.document.tools.iter().find(|t| t.resource == resource);
    t.unwrap_or_else(|| panic!("{resource} is not served"))
        .session
        .clone()
}

#[test]
fn trusted_tools_keep_mccs_rule_and_others_get_what_they_declare() {
    // `ns` is trusted; `other` may run locally but is another tenant's.
    let tools = vec![
        tool("trusted-all", "ns", None),
        tool("trusted-narrow", "ns", Some(&["cursor"])),
        tool("tenant-none", "other", None),
        tool(
            "tenant-some",
            "other",
            Some(&["target", "cursor", "cursor"]),
        ),
        tool("tenant-star", "other", Some(&["*"])),
    ];
    let mut policy = test_policy();
    let a = tools_only(tools.clone(), &policy);
    assert_eq!(access(&a, "trusted-all"), SessionAccess::All);
    assert_eq!(
        access(&a, "trusted-narrow"),
        SessionAccess::Keys(vec!["cursor".into()])
    );
    assert_eq!(access(&a, "tenant-none"), SessionAccess::Keys(vec![]));
    assert_eq!(
        access(&a, "tenant-some"),
        SessionAccess::Keys(vec!["cursor".into(), "target".into()])
    );
    let (ready, reason, _) = ready_reason(&a.tools["other/tenant-star"].verdict);
    assert_eq!((ready, reason), (false, "SessionKeysNotAllowed"));

    policy.session_all.insert("other".into());
    let a = tools_only(tools, &policy);
    assert_eq!(access(&a, "tenant-star"), SessionAccess::All);
}

#[test]
fn bad_session_keys_are_named() {
    for (keys, expected) in [
        (vec!["user"], "identity key"),
        (vec!["Bad-Name"], "not a session variable name"),
        (vec!["*", "cursor"], "stands alone"),
    ] {
        let a = tools_only(vec![tool("t", "ns", Some(keys.as_slice()))], &test_policy());
        let verdict = &a.tools["ns/t"].verdict;
        let text = format!("{verdict:?}");
        assert!(
            text.contains("sessionKeys") && text.contains(expected),
            "{text}"
        );
    }
}
