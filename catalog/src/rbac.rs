//! Who may execute what. One rule, used by search, describe_tools, whoami and execute alike.

use serde::{Deserialize, Serialize};

/// A caller's identity and grants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub username: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default)]
    pub groups: Vec<String>,
    /// Tool keys granted explicitly.
    #[serde(default)]
    pub tools: Vec<String>,
}

impl User {
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

/// The group whose members may run every tool and read the audit trail.
pub const ADMIN_GROUP: &str = "admin";

/// Whether `user` is an administrator (a member of [`ADMIN_GROUP`]).
pub fn is_admin(user: &User) -> bool {
    user.in_group(ADMIN_GROUP)
}

/// MCC's access rule, first match wins:
/// 1. a tool without groups or in `public` is open to everyone, anonymous included;
/// 2. otherwise an anonymous caller is denied;
/// 3. a member of `admin` may run everything;
/// 4. sharing any group with the tool allows;
/// 5. an explicit grant of the tool's key allows;
/// 6. anything else is denied.
pub fn allows(tool_groups: &[String], tool_key: &str, user: Option<&User>) -> bool {
    if tool_groups.is_empty() || tool_groups.iter().any(|g| g == "public") {
        return true;
    }
    let Some(user) = user else { return false };
    is_admin(user)
        || tool_groups.iter().any(|g| user.in_group(g))
        || user.tools.iter().any(|t| t == tool_key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(groups: &[&str], tools: &[&str]) -> User {
        User {
            username: "u".into(),
            email: None,
            groups: groups.iter().map(|s| s.to_string()).collect(),
            tools: tools.iter().map(|s| s.to_string()).collect(),
        }
    }
    fn g(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn open_tools_allow_everyone() {
        assert!(allows(&[], "t", None));
        assert!(allows(&g(&["public", "ops"]), "public.ops.t", None));
    }

    #[test]
    fn anonymous_denied_on_grouped_tool() {
        assert!(!allows(&g(&["ops"]), "ops.t", None));
    }

    #[test]
    fn admin_overlap_and_explicit_grant() {
        assert!(allows(&g(&["ops"]), "ops.t", Some(&user(&["admin"], &[]))));
        assert!(allows(
            &g(&["ops", "db"]),
            "ops.db.t",
            Some(&user(&["db"], &[]))
        ));
        assert!(allows(&g(&["ops"]), "ops.t", Some(&user(&[], &["ops.t"]))));
        assert!(!allows(
            &g(&["ops"]),
            "ops.t",
            Some(&user(&["dev"], &["ops.other"]))
        ));
    }
}
