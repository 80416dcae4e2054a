//! The per-namespace budget of catalog bytes: over it, only that namespace's newest Tools
//! are left out.

use super::*;
use crate::fixtures::{Builder, TestTool, test_policy};
use crate::status::{NAMESPACE_BUDGET_EXCEEDED, ready_reason};

fn tool(resource: &str, ns: &str, at: &str, description_bytes: usize) -> Arc<Tool> {
    let mut t = TestTool::exec(resource, ns, resource).created(at);
    t.spec.description = Some("d".repeat(description_bytes));
    Arc::new(t)
}

fn entry_bytes(a: &Assembly, resource: &str) -> u64 {
    let t = a.document.tools.iter().find(|t| t.resource == resource);
    serde_json::to_vec(t.expect("served")).unwrap().len() as u64
}

fn served(a: &Assembly) -> Vec<String> {
    let mut v: Vec<String> = a
        .document
        .tools
        .iter()
        .map(|t| format!("{}/{}", t.namespace, t.resource))
        .collect();
    v.sort();
    v
}

#[test]
fn over_budget_the_newest_tools_of_that_namespace_only_are_left_out() {
    // `other` is the hostile namespace: an old small Tool, then a huge one, then a small
    // one created the same second as the huge one (the name decides: `huge` < `late`).
    let tools = vec![
        tool("late", "other", "2026-01-03T00:00:00Z", 10),
        tool("huge", "other", "2026-01-03T00:00:00Z", 10_000),
        tool("old", "other", "2026-01-01T00:00:00Z", 10),
        tool("mine", "ns", "2026-01-05T00:00:00Z", 10_000),
    ];
    let unbudgeted = assemble(&tools, &[], &test_policy());
    assert_eq!(unbudgeted.document.tools.len(), 4);
    let old_bytes = entry_bytes(&unbudgeted, "old");
    let huge_bytes = entry_bytes(&unbudgeted, "huge");
    let total = old_bytes + huge_bytes + entry_bytes(&unbudgeted, "late");

    let mut policy = test_policy();
    policy.tool_bytes = [("other".to_string(), 4096)].into();
    let a = assemble(&tools, &[], &policy);
    assert_eq!(served(&a), ["ns/mine", "other/old"]);
    assert_eq!(
        a.tools["other/huge"].verdict,
        Verdict::NamespaceBudgetExceeded {
            namespace: "other".into(),
            entry: "other".into(),
            budget: 4096,
            total,
            size: huge_bytes,
        }
    );
    // The newer small Tool is left out too: the budget is spent from the oldest on.
    let late = &a.tools["other/late"];
    assert!(matches!(
        late.verdict,
        Verdict::NamespaceBudgetExceeded { .. }
    ));
    assert_eq!(late.key.as_deref(), Some("late"));
    let (ready, reason, message) = ready_reason(&late.verdict);
    assert!(!ready);
    assert_eq!(reason, NAMESPACE_BUDGET_EXCEEDED);
    for part in [
        format!("namespace other take {total} bytes"),
        "over its budget of 4096 bytes".into(),
        "MCC_NAMESPACE_TOOL_BYTES, entry 'other'".into(),
        "operator.namespaceToolBytes".into(),
        "its newest Tools are left out".into(),
    ] {
        assert!(message.contains(&part), "{message} (wanted {part})");
    }

    // A budget that holds them all changes nothing.
    policy.tool_bytes = [("other".to_string(), total)].into();
    assert_eq!(assemble(&tools, &[], &policy).document.tools.len(), 4);
}

#[test]
fn the_star_entry_applies_to_every_namespace_without_its_own() {
    let tools = vec![
        tool("a", "ns", "2026-01-01T00:00:00Z", 3000),
        tool("b", "other", "2026-01-01T00:00:00Z", 3000),
    ];
    let mut policy = test_policy();
    policy.tool_bytes = [("*".to_string(), 1000), ("ns".to_string(), 1 << 20)].into();
    let a = assemble(&tools, &[], &policy);
    assert_eq!(served(&a), ["ns/a"]);
    match &a.tools["other/b"].verdict {
        Verdict::NamespaceBudgetExceeded { entry, budget, .. } => {
            assert_eq!((entry.as_str(), *budget), ("*", 1000));
        }
        v => panic!("{v:?}"),
    }
    // Refused Tools (here: invalid) take no budget.
    let mut broken = TestTool::exec("broken", "other", "x").created("2025-01-01T00:00:00Z");
    broken.spec.exec = Some("{{ a ".into());
    broken.spec.description = Some("d".repeat(5000));
    let small = tool("small", "other", "2026-01-01T00:00:00Z", 10);
    let a = assemble(&[Arc::new(broken), small], &[], &policy);
    assert_eq!(served(&a), ["other/small"]);
}
