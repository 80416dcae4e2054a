//! The session context a tool receives: the caller's identity (reserved, re-derived on
//! every call) merged over the session's stored variables, which of them a tool may see
//! ([`SessionAccess`]), the rules for names, the kernel's bound on its size, and an fn
//! tool's write-back as a diff.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::rbac::User;

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

/// The kernel's limit on one environment string (`MAX_ARG_STRLEN`, 32 pages of 4 KiB),
/// counting `NAME=` and the terminating NUL.
pub const ENV_STRING_MAX: usize = 128 * 1024;

/// Makes `ctx` fit in one environment string: `MCC_CTX=<json>` (fn tools; exec tools get
/// each entry separately, each shorter than the whole) under [`ENV_STRING_MAX`]. Drops
/// the largest stored variables first (never identity keys) and returns their names, so
/// a stored context can never stop a tool from starting; the session limits keep this
/// from happening with the defaults.
pub fn fit_env(ctx: &mut Map<String, Value>) -> Vec<String> {
    let budget = ENV_STRING_MAX - "MCC_CTX=".len() - 1;
    let mut dropped = Vec::new();
    let mut size = crate::pyfmt::json_dumps(&Value::Object(ctx.clone())).len();
    while size > budget {
        let largest = ctx
            .iter()
            .filter(|(k, _)| !is_reserved(k))
            .map(|(k, v)| (k.len() + crate::pyfmt::json_dumps(v).len(), k.clone()))
            .max();
        let Some((_, name)) = largest else { break };
        ctx.remove(&name);
        size = crate::pyfmt::json_dumps(&Value::Object(ctx.clone())).len();
        dropped.push(name);
    }
    dropped
}

/// Which stored session variables a tool receives and may write back; the identity keys
/// it always receives and never writes. MCC gives every tool the whole store, and so do
/// file-mode tools and the Tools of trusted namespaces here. A Tool from another tenant's
/// namespace falls outside MCC's single-operator catalog: it gets only the variables it
/// declares (`sessionKeys`), so one tenant's tools cannot read or rewrite what another
/// tenant's tools keep in the caller's session.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SessionAccess {
    /// Every stored variable (MCC's rule).
    #[default]
    All,
    /// Only these names.
    Keys(Vec<String>),
}

impl SessionAccess {
    pub fn is_all(&self) -> bool {
        matches!(self, Self::All)
    }

    pub fn admits(&self, name: &str) -> bool {
        match self {
            Self::All => true,
            Self::Keys(keys) => keys.iter().any(|k| k == name),
        }
    }

    /// The stored variables this access admits.
    pub fn visible<'a>(&self, stored: &'a Map<String, Value>) -> Cow<'a, Map<String, Value>> {
        match self {
            Self::All => Cow::Borrowed(stored),
            Self::Keys(keys) => Cow::Owned(
                keys.iter()
                    .filter_map(|k| stored.get(k).map(|v| (k.clone(), v.clone())))
                    .collect(),
            ),
        }
    }
}

/// An fn tool's write-back, as changes to the variables it was given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteBack {
    /// Variables the tool added or changed, with their new values.
    pub set: Map<String, Value>,
    /// Variables it was given and removed.
    pub delete: Vec<String>,
}

impl WriteBack {
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.delete.is_empty()
    }

    /// The changes `access` admits, and the names it did not (left as they were).
    pub fn within(mut self, access: &SessionAccess) -> (Self, Vec<String>) {
        let refused: Vec<String> = self
            .set
            .keys()
            .chain(self.delete.iter())
            .filter(|k| !access.admits(k))
            .cloned()
            .collect();
        self.set.retain(|k, _| access.admits(k));
        self.delete.retain(|k| access.admits(k));
        (self, refused)
    }
}

/// What an fn tool changed in its context: `given` is the context it received, `returned`
/// what it left. Reserved keys are ignored on both sides; any non-slug key the tool left
/// rejects the whole write-back. Applied to the bucket the tool was given, this is MCC's
/// "full replace"; applied to a bucket another call changed meanwhile, it keeps those
/// changes (keys the tool did not touch).
pub fn write_back_diff(
    given: &Map<String, Value>,
    returned: &Map<String, Value>,
) -> Result<WriteBack, NameError> {
    let kept = sanitize_write_back(returned)?;
    let delete = given
        .keys()
        .filter(|k| !is_reserved(k) && !kept.contains_key(*k))
        .cloned()
        .collect();
    let set = kept
        .into_iter()
        .filter(|(k, v)| given.get(k) != Some(v))
        .collect();
    Ok(WriteBack { set, delete })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_declared_access_sees_and_writes_only_its_keys() {
        let stored = json!({"cursor": 1, "target": "db", "budget": 5});
        let stored = stored.as_object().unwrap();
        let access = SessionAccess::Keys(vec!["cursor".into(), "missing".into()]);
        assert_eq!(
            Value::Object(access.visible(stored).into_owned()),
            json!({"cursor": 1})
        );
        assert_eq!(*SessionAccess::All.visible(stored), *stored);
        let given = assemble(None, &access.visible(stored));
        let left = json!({"cursor": 2, "target": "prod", "user": "root"});
        let changes = write_back_diff(&given, left.as_object().unwrap()).unwrap();
        let (kept, refused) = changes.within(&access);
        assert_eq!(Value::Object(kept.set), json!({"cursor": 2}));
        assert!(kept.delete.is_empty());
        assert_eq!(refused, ["target"]);
        // Documents without the field keep MCC's rule.
        #[derive(Deserialize)]
        struct Entry {
            #[serde(default)]
            session: SessionAccess,
        }
        let old: Entry = serde_json::from_value(json!({})).unwrap();
        assert!(old.session.is_all());
        let new: Entry = serde_json::from_value(json!({"session": {"keys": ["a"]}})).unwrap();
        assert_eq!(new.session, SessionAccess::Keys(vec!["a".into()]));
    }

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

    #[test]
    fn write_back_is_a_diff_against_what_was_given() {
        let given = json!({"user": "alice", "a": 1, "b": 2, "c": 3})
            .as_object()
            .unwrap()
            .clone();
        let left = json!({"user": "mallory", "a": 1, "b": 20, "d": 4})
            .as_object()
            .unwrap()
            .clone();
        let wb = write_back_diff(&given, &left).unwrap();
        assert_eq!(Value::Object(wb.set), json!({"b": 20, "d": 4}));
        assert_eq!(wb.delete, vec!["c".to_string()]);
        assert!(write_back_diff(&given, &given).unwrap().is_empty());
        let bad = json!({"Bad": 1}).as_object().unwrap().clone();
        assert!(write_back_diff(&given, &bad).is_err());
    }

    #[test]
    fn oversized_contexts_shed_their_largest_variables() {
        let mut ctx = json!({"user": "alice", "small": 1, "big": "x".repeat(100_000),
                             "bigger": "y".repeat(120_000)})
        .as_object()
        .unwrap()
        .clone();
        let dropped = fit_env(&mut ctx);
        assert_eq!(dropped, vec!["bigger".to_string()]);
        assert!(crate::pyfmt::json_dumps(&Value::Object(ctx.clone())).len() < ENV_STRING_MAX);
        assert_eq!(ctx["user"], "alice");
        assert!(fit_env(&mut ctx).is_empty());
    }
}
