//! The `_meta` keys a `tools/call` carries of the caller's session, as the upstream's
//! `session_context:` declares them ([`mcc_catalog::upstream::session_context`]: the keys,
//! the names allowed and the bounds). Nothing unless declared; only the identity
//! (username and groups) and the variables named; values the session does not hold are
//! left out, and so is a variable that would take the whole past its byte bound.

use mcc_catalog::upstream::session_context::{
    GROUPS, MAX_SESSION_BYTES, SESSION, SessionContext, USER,
};
use serde_json::{Map, Value};

/// The `_meta` entries for a call whose tool context (identity applied over the
/// visible session variables, [`mcc_catalog::context::assemble`]) is `context`; `None`
/// when nothing is to be sent.
pub fn meta(declared: &SessionContext, context: &Map<String, Value>) -> Option<Map<String, Value>> {
    if declared.is_off() {
        return None;
    }
    let mut meta = Map::new();
    if declared.identity {
        let user = context
            .get("user")
            .cloned()
            .unwrap_or_else(|| Value::from(mcc_catalog::context::ANONYMOUS));
        meta.insert(USER.into(), user);
        let groups = context
            .get("groups")
            .cloned()
            .unwrap_or_else(|| Value::Array(Vec::new()));
        meta.insert(GROUPS.into(), groups);
    }
    if !declared.variables.is_empty() {
        let mut session = Map::new();
        let mut size = 2;
        for name in &declared.variables {
            let Some(value) = context.get(name) else {
                continue;
            };
            let entry = name.len() + value.to_string().len() + 4;
            if size + entry > MAX_SESSION_BYTES {
                tracing::warn!(
                    variable = %name,
                    "session variable not sent to the upstream: over {MAX_SESSION_BYTES} bytes with the others"
                );
                continue;
            }
            size += entry;
            session.insert(name.clone(), value.clone());
        }
        meta.insert(SESSION.into(), Value::Object(session));
    }
    Some(meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx() -> Map<String, Value> {
        json!({"user": "ada", "groups": ["dev"], "email": "a@x", "tools": [],
               "project": "p1", "secret_note": "s", "big": "x".repeat(MAX_SESSION_BYTES)})
        .as_object()
        .unwrap()
        .clone()
    }

    #[test]
    fn only_what_is_declared_is_sent() {
        assert_eq!(meta(&SessionContext::default(), &ctx()), None);
        let identity = SessionContext {
            identity: true,
            variables: vec![],
        };
        assert_eq!(
            Value::Object(meta(&identity, &ctx()).unwrap()),
            json!({"dev.mcc/user": "ada", "dev.mcc/groups": ["dev"]})
        );
        let vars = SessionContext {
            identity: false,
            variables: vec!["project".into(), "unset".into(), "big".into()],
        };
        assert_eq!(
            Value::Object(meta(&vars, &ctx()).unwrap()),
            json!({"dev.mcc/session": {"project": "p1"}})
        );
    }
}
