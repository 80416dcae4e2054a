//! The session context a tool receives: the caller's identity (reserved, re-derived on
//! every call) merged over the session's stored variables, and the rules for names.

use serde_json::{Map, Value};

use crate::tool::User;

/// Identity keys: read-only, always derived from the authenticated caller.
pub const RESERVED_KEYS: [&str; 4] = ["user", "email", "groups", "tools"];

/// The username of unauthenticated callers.
pub const ANONYMOUS: &str = "anonymous";

/// The rule for session variable names, as shown to users.
pub const SLUG_RULE: &str = "^[a-z_][a-z0-9_]*$";

/// `^[a-z_][a-z0-9_]*$`: valid as a JSON key, a tool argument and an env-var suffix.
pub fn is_slug(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z' | '_'))
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
}

pub fn is_reserved(name: &str) -> bool {
    RESERVED_KEYS.contains(&name)
}

/// Why a session variable name cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error(
        "Invalid name {}: must match ^[a-z_][a-z0-9_]*$ (lowercase letters, digits, underscores; not starting with a digit).",
        crate::pyfmt::repr_str(.0)
    )]
    NotSlug(String),
    #[error("Cannot set reserved identity key {}.", crate::pyfmt::repr_str(.0))]
    Reserved(String),
}

/// What `set_session` answers once a value is stored: `Set 'name'.`
pub fn set_confirmation(name: &str) -> String {
    format!("Set {}.", crate::pyfmt::repr_str(name))
}

/// The check `set_session` applies to a name.
pub fn check_writable(name: &str) -> Result<(), NameError> {
    if !is_slug(name) {
        Err(NameError::NotSlug(name.to_string()))
    } else if is_reserved(name) {
        Err(NameError::Reserved(name.to_string()))
    } else {
        Ok(())
    }
}

/// The identity part of the context: `user` (or `anonymous`), `email` when known,
/// `groups`, and `tools` (the caller's direct grants, as MCC injects them). An anonymous
/// caller's identity is `user` alone.
pub fn identity(user: Option<&User>) -> Map<String, Value> {
    let mut id = Map::new();
    let Some(user) = user else {
        id.insert("user".into(), Value::from(ANONYMOUS));
        return id;
    };
    id.insert("user".into(), Value::from(user.username.clone()));
    if let Some(email) = &user.email {
        id.insert("email".into(), Value::from(email.clone()));
    }
    id.insert("groups".into(), Value::from(user.groups.clone()));
    id.insert("tools".into(), Value::from(user.tools.clone()));
    id
}

/// The context a tool receives: stored variables with identity applied over them, so a
/// stored `user` can never impersonate the caller.
pub fn assemble(user: Option<&User>, stored: &Map<String, Value>) -> Map<String, Value> {
    let mut ctx: Map<String, Value> = stored
        .iter()
        .filter(|(k, _)| !is_reserved(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    ctx.extend(identity(user));
    ctx
}

/// What an fn tool left in its context, made ready to replace the stored variables:
/// reserved keys stripped; any non-slug key rejects the whole write-back.
pub fn sanitize_write_back(returned: &Map<String, Value>) -> Result<Map<String, Value>, NameError> {
    if let Some(bad) = returned.keys().find(|k| !is_slug(k)) {
        return Err(NameError::NotSlug(bad.clone()));
    }
    Ok(returned
        .iter()
        .filter(|(k, _)| !is_reserved(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn slugs() {
        for ok in ["a", "_x", "target", "budget_2", "a1_b"] {
            assert!(is_slug(ok), "{ok}");
        }
        for bad in ["", "1a", "A", "a-b", "a.b", "é", "a b"] {
            assert!(!is_slug(bad), "{bad}");
        }
    }

    #[test]
    fn set_session_names() {
        assert_eq!(
            check_writable("user"),
            Err(NameError::Reserved("user".into()))
        );
        assert!(
            check_writable("Bad")
                .unwrap_err()
                .to_string()
                .starts_with("Invalid name 'Bad': must match")
        );
        assert_eq!(check_writable("target"), Ok(()));
        let quoted = check_writable("it's").unwrap_err().to_string();
        assert!(
            quoted.starts_with("Invalid name \"it's\": must match"),
            "{quoted}"
        );
        assert_eq!(set_confirmation("target"), "Set 'target'.");
    }

    #[test]
    fn identity_wins_over_stored_values() {
        let alice = User {
            username: "alice".into(),
            email: None,
            groups: vec!["osint".into()],
            tools: vec![],
        };
        let stored = json!({"user": "mallory", "budget": 1000})
            .as_object()
            .unwrap()
            .clone();
        let ctx = assemble(Some(&alice), &stored);
        assert_eq!(
            Value::Object(ctx),
            json!({"user": "alice", "groups": ["osint"], "tools": [], "budget": 1000})
        );
        assert_eq!(
            Value::Object(assemble(None, &Map::new())),
            json!({"user": "anonymous"})
        );
    }

    #[test]
    fn write_back_strips_reserved_and_rejects_bad_keys() {
        let ok = json!({"cursor": 2, "user": "mallory"})
            .as_object()
            .unwrap()
            .clone();
        assert_eq!(
            Value::Object(sanitize_write_back(&ok).unwrap()),
            json!({"cursor": 2})
        );
        let bad = json!({"cursor": 2, "Bad-Key": 1})
            .as_object()
            .unwrap()
            .clone();
        assert!(sanitize_write_back(&bad).is_err());
    }
}
