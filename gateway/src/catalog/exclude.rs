//! Which tools a catalog leaves out: fn tools that cannot be introspected, and tools
//! whose introspected key collides with another's. Both catalog sources (tool files and
//! the operator's document) go through [`introspect`], so one bad tool is left out the
//! same way everywhere and everything else is served. Each exclusion is logged with the
//! tool and the whole reason (introspection stderr included: the log is the place for
//! it); counts go to `/readyz` and the metrics ([`super::live`]).

use std::collections::BTreeMap;

use mcc_catalog::introspect::{Introspector, Pending};
use mcc_catalog::{LoadError, Tool};

/// A tool left out of the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExcludedTool {
    /// The tool's key (the provisional one when introspection never named it).
    pub key: String,
    /// Where it was declared: `<file>: tools[<i>] '<name>'`, or `Tool <ns>/<name>`.
    pub place: String,
    /// Why, in full (for the log only).
    pub reason: String,
}

/// What two tools with one key declared without introspection lead to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeclaredDuplicates {
    /// Refuse the load (tool files: MCC's rule; `mcc-gateway check` reports the same).
    Refuse,
    /// Keep the first and leave out the others (the operator's document, where the
    /// operator already refused the duplicate: this only guards against a bad document).
    KeepFirst,
}

/// The tools to serve: `keep[i]` for the i-th tool given to [`introspect`].
#[derive(Debug, Default)]
pub struct Selection {
    pub keep: Vec<bool>,
    pub excluded: Vec<ExcludedTool>,
}

impl Selection {
    /// The kept items of a list aligned with the tools (the tools themselves, or what
    /// goes with each of them).
    pub fn retain<T>(&self, items: Vec<T>) -> Vec<T> {
        items
            .into_iter()
            .zip(&self.keep)
            .filter_map(|(item, &keep)| keep.then_some(item))
            .collect()
    }

    /// One warning per excluded tool, naming it, where it came from and why.
    pub fn log(&self, source: &str) {
        for e in &self.excluded {
            tracing::warn!(
                tool = %e.key,
                place = %e.place,
                %source,
                reason = %e.reason,
                "tool left out of the catalog"
            );
        }
    }
}

/// Introspects the `pending` tools ([`Introspector::fill_each`]) and selects the tools to
/// serve. `places[i]` names tool `i` in messages.
///
/// A key held by more than one tool after introspection goes to the tool that declared
/// it (its key did not change); tools that took it through their callable's `__name__`
/// are left out. When every holder took it that way, all of them are left out: document
/// order is no claim to a key (it is first come, first served across namespaces).
pub fn introspect(
    tools: &mut [Tool],
    pending: &[Pending],
    introspector: &Introspector,
    places: &[String],
    declared: DeclaredDuplicates,
) -> Result<Selection, LoadError> {
    let provisional: Vec<String> = tools.iter().map(|t| t.key.clone()).collect();
    let mut selection = Selection {
        keep: vec![true; tools.len()],
        excluded: Vec::new(),
    };
    for failure in introspector.fill_each(tools, pending) {
        selection.keep[failure.index] = false;
        selection.excluded.push(ExcludedTool {
            key: tools[failure.index].key.clone(),
            place: places[failure.index].clone(),
            reason: failure.error.to_string(),
        });
    }
    let mut holders: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, tool) in tools.iter().enumerate() {
        if selection.keep[i] {
            holders.entry(tool.key.as_str()).or_default().push(i);
        }
    }
    let mut collided = Vec::new();
    for (key, held) in holders.iter().filter(|(_, held)| held.len() > 1) {
        let (declared_by, renamed): (Vec<usize>, Vec<usize>) =
            held.iter().partition(|&&i| tools[i].key == provisional[i]);
        if let [first, second, ..] = declared_by[..] {
            if declared == DeclaredDuplicates::Refuse {
                return Err(LoadError::Duplicate {
                    key: key.to_string(),
                    name: tools[second].name.clone(),
                    groups: tools[second].groups.clone(),
                    first: tools[first].source.clone(),
                    second: tools[second].source.clone(),
                });
            }
            for &i in &declared_by[1..] {
                collided.push((
                    i,
                    format!("key '{key}' is also declared by {}", places[first]),
                ));
            }
        }
        for &i in &renamed {
            let others: Vec<&str> = held
                .iter()
                .filter(|&&j| j != i)
                .map(|&j| places[j].as_str())
                .collect();
            collided.push((
                i,
                format!(
                    "the key '{key}' its callable's __name__ gives is also the key of {}",
                    others.join(", ")
                ),
            ));
        }
    }
    for (i, reason) in collided {
        selection.keep[i] = false;
        selection.excluded.push(ExcludedTool {
            key: tools[i].key.clone(),
            place: places[i].clone(),
            reason,
        });
    }
    Ok(selection)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fn_tool(key: &str, path: &str, cwd: &std::path::Path) -> Tool {
        serde_json::from_value(serde_json::json!({
            "key": key, "name": key, "kind": "fn", "path": path, "cwd": cwd,
            "source": format!("t.yaml: '{key}'"),
        }))
        .unwrap()
    }

    fn exec_tool(key: &str) -> Tool {
        serde_json::from_value(serde_json::json!({
            "key": key, "name": key, "kind": "exec", "command": "echo",
            "source": format!("t.yaml: '{key}'"),
        }))
        .unwrap()
    }

    fn renamed(index: usize) -> Pending {
        Pending {
            index,
            name_from_callable: true,
        }
    }

    /// `add_v2` and `add_v3` are both named `add` by their callables; `add` is declared.
    /// `sum_a` and `sum_b` both become `total`, which nobody declared.
    #[test]
    fn introspected_collisions_leave_out_the_renamed_tools() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("m.py"),
            "def add(a: int) -> int:\n    return a\n\ndef total(x: list) -> int:\n    return 0\n\
             other = total\n",
        )
        .unwrap();
        let mut tools = vec![
            exec_tool("add"),
            fn_tool("add_v2", "m:add", dir.path()),
            fn_tool("sum_a", "m:total", dir.path()),
            fn_tool("sum_b", "m:other", dir.path()),
            fn_tool("missing", "nowhere:f", dir.path()),
            exec_tool("plain"),
        ];
        let places: Vec<String> = tools.iter().map(|t| format!("Tool t/{}", t.key)).collect();
        let pending = [renamed(1), renamed(2), renamed(3), renamed(4)];
        let selection = introspect(
            &mut tools,
            &pending,
            &Introspector::default(),
            &places,
            DeclaredDuplicates::Refuse,
        )
        .unwrap();
        assert_eq!(selection.keep, [true, false, false, false, false, true]);
        let reasons: BTreeMap<&str, &str> = selection
            .excluded
            .iter()
            .map(|e| (e.place.as_str(), e.reason.as_str()))
            .collect();
        assert!(
            reasons["Tool t/missing"].contains("No module named 'nowhere'"),
            "{reasons:#?}"
        );
        assert!(
            reasons["Tool t/add_v2"].contains("'add'")
                && reasons["Tool t/add_v2"].contains("Tool t/add"),
            "{reasons:#?}"
        );
        assert!(
            reasons["Tool t/sum_a"].contains("'total'")
                && reasons["Tool t/sum_a"].contains("Tool t/sum_b"),
            "{reasons:#?}"
        );
        assert_eq!(selection.retain(tools).len(), 2);
    }

    #[test]
    fn declared_duplicates_refuse_or_keep_the_first() {
        let mut tools = vec![exec_tool("a"), exec_tool("a"), exec_tool("b")];
        let places = vec!["first".to_string(), "second".into(), "third".into()];
        let e = introspect(
            &mut tools,
            &[],
            &Introspector::default(),
            &places,
            DeclaredDuplicates::Refuse,
        )
        .unwrap_err();
        assert!(e.to_string().contains("defined twice"), "{e}");
        let selection = introspect(
            &mut tools,
            &[],
            &Introspector::default(),
            &places,
            DeclaredDuplicates::KeepFirst,
        )
        .unwrap();
        assert_eq!(selection.keep, [true, false, true]);
        assert_eq!(
            selection.excluded[0].reason,
            "key 'a' is also declared by first"
        );
    }
}
