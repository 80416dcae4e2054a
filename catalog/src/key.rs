//! Tool keys: `groups.name`, with `public` then `admin` first and the other groups in the
//! order they were declared. This is the only place a key is built.

/// The longest key accepted: a key must fit in a Kubernetes object name and label-free
/// annotation, so the file loader and the operator agree on 253 characters.
pub const MAX_KEY_LEN: usize = 253;

/// Groups in key order: `public`, then `admin`, then the rest as declared.
pub fn sorted_groups(groups: &[String]) -> Vec<&str> {
    let rank = |g: &str| match g {
        "public" => 0,
        "admin" => 1,
        _ => 2,
    };
    let mut sorted: Vec<&str> = groups.iter().map(String::as_str).collect();
    // A stable sort keeps the declared order among the other groups.
    sorted.sort_by_key(|g| rank(g));
    sorted
}

/// The key of a tool named `name` in `groups`.
pub fn tool_key(groups: &[String], name: &str) -> String {
    let mut parts = sorted_groups(groups);
    parts.push(name);
    parts.join(".")
}

/// Appends `extra` groups to `groups`, skipping any already present (order preserved).
pub fn union_groups(groups: &[String], extra: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(groups.len() + extra.len());
    for g in groups.iter().chain(extra) {
        if !out.contains(g) {
            out.push(g.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn public_then_admin_then_declared_order() {
        assert_eq!(
            tool_key(&s(&["ops", "admin"]), "deploy"),
            "admin.ops.deploy"
        );
        assert_eq!(
            tool_key(&s(&["zeta", "osint", "public"]), "greet"),
            "public.zeta.osint.greet"
        );
        assert_eq!(tool_key(&s(&["admin", "public"]), "x"), "public.admin.x");
        assert_eq!(tool_key(&[], "bare"), "bare");
    }

    #[test]
    fn union_keeps_order_without_duplicates() {
        assert_eq!(
            union_groups(&s(&["a", "b"]), &s(&["b", "c", "a"])),
            s(&["a", "b", "c"])
        );
    }
}
