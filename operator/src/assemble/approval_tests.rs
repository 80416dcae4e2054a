//! Approval stamping (issue 34, item 4): every Tool of a namespace the platform team
//! lists is published with `approval_required`, whatever the Tool says; a Tool may ask
//! for approval itself anywhere.

use super::*;
use crate::fixtures::{TestTool, test_policy};

fn tool(resource: &str, ns: &str, approval: Option<&str>) -> Arc<Tool> {
    let mut t = TestTool::exec(resource, ns, resource);
    t.spec.approval = approval.map(str::to_string);
    Arc::new(t)
}

fn stamped(a: &Assembly, resource: &str) -> bool {
    let t = a.document.tools.iter().find(|t| t.resource == resource);
    t.unwrap_or_else(|| panic!("{resource} is not served"))
        .tool
        .approval_required
}

#[test]
fn listed_namespaces_publish_every_tool_with_approval_required() {
    let tools = vec![
        tool("plain", "ns", None),
        tool("asks", "ns", Some("required")),
        tool("tenant", "other", None),
    ];
    let mut policy = test_policy();
    let a = assemble(&tools, &[], &policy);
    assert!(!stamped(&a, "plain"));
    assert!(stamped(&a, "asks"));
    assert!(!stamped(&a, "tenant"));

    policy.approval_namespaces.insert("other".into());
    let a = assemble(&tools, &[], &policy);
    assert!(stamped(&a, "tenant"));
    assert!(!stamped(&a, "plain"));
}

#[test]
fn a_bad_approval_value_is_an_invalid_spec_naming_the_field() {
    let a = assemble(&[tool("t", "ns", Some("never"))], &[], &test_policy());
    let text = format!("{:?}", a.tools["ns/t"].verdict);
    assert!(
        text.contains("approval") && text.contains("must be 'required'"),
        "{text}"
    );
}
