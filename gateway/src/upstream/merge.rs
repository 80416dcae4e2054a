//! The files' tools plus the upstreams' tools as one tool set. A key is held by whoever
//! had it first — the files' tools, then the upstreams in name order — and a later tool
//! with the same key is left out with the catalog's duplicate message (naming both
//! places), logged and counted as excluded, as a colliding introspected tool is.

use std::collections::HashMap;

use mcc_catalog::Tool;

/// `local` and `upstream` merged; the second value counts the upstream tools left out.
pub fn merge(local: &[Tool], upstream: Vec<Tool>) -> (Vec<Tool>, usize) {
    let mut tools = local.to_vec();
    let mut held: HashMap<String, usize> = tools
        .iter()
        .enumerate()
        .map(|(i, t)| (t.key.clone(), i))
        .collect();
    let mut excluded = 0;
    for tool in upstream {
        if let Some(&first) = held.get(&tool.key) {
            let message = format!(
                "key '{}' is defined twice, in {} and in {}",
                tool.key, tools[first].source, tool.source
            );
            tracing::warn!(error = %message, "upstream tool left out: its key is taken");
            excluded += 1;
            continue;
        }
        held.insert(tool.key.clone(), tools.len());
        tools.push(tool);
    }
    (tools, excluded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(key: &str, source: &str) -> Tool {
        serde_json::from_value(json!({
            "key": key, "name": key, "kind": "exec", "command": "true", "source": source
        }))
        .unwrap()
    }

    #[test]
    fn the_first_holder_of_a_key_keeps_it() {
        let local = vec![tool("echo", "t.yaml: tools[0] 'echo'")];
        let up = vec![tool("echo", "up"), tool("add", "up"), tool("add", "up2")];
        let (tools, excluded) = merge(&local, up);
        let keys: Vec<&str> = tools.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["echo", "add"]);
        assert_eq!(tools[0].source, "t.yaml: tools[0] 'echo'");
        assert_eq!(excluded, 2);
    }
}
