//! `session_context:` of an `mcp_servers:` entry: what of the caller's session the
//! gateway sends an upstream with each `tools/call`, as `_meta` keys. Off by default: an
//! upstream serves every caller and sees whatever it is sent, so the platform team names
//! each piece (the caller's identity; session variables by name). Never the whole
//! session, never a value not named here. The keys ([`USER`], [`GROUPS`], [`SESSION`])
//! and the bounds are defined here; the gateway builds the `_meta` from them.

use serde::{Deserialize, Serialize};

/// `_meta` key of the caller's username (`anonymous` without one).
pub const USER: &str = "dev.mcc/user";
/// `_meta` key of the caller's groups (a list of strings).
pub const GROUPS: &str = "dev.mcc/groups";
/// `_meta` key of the declared session variables the session holds (an object).
pub const SESSION: &str = "dev.mcc/session";
/// At most this many variables may be declared.
pub const MAX_VARIABLES: usize = 32;
/// The declared variables' values sent with one call, serialized, at most (a variable
/// that would pass it is left out, and the gateway logs its name).
pub const MAX_SESSION_BYTES: usize = 16 * 1024;

/// What an upstream is sent of the caller's session. The default sends nothing. A tool
/// file's `session_context:` refuses unknown keys; the catalog document's copy (Kubernetes
/// mode) is read with [`lenient`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SessionContext {
    /// Send the caller's username and groups ([`USER`], [`GROUPS`]).
    #[serde(default)]
    pub identity: bool,
    /// Send these session variables, when set ([`SESSION`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<String>,
}

/// Reads a [`SessionContext`] ignoring keys it does not know: a field a newer operator
/// adds to the catalog document makes an older gateway send less, never fail the whole
/// document (whose upstream table must be read entire).
pub fn lenient<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SessionContext, D::Error> {
    #[derive(Deserialize)]
    struct Known {
        #[serde(default)]
        identity: bool,
        #[serde(default)]
        variables: Vec<String>,
    }
    let known = Known::deserialize(d)?;
    Ok(SessionContext {
        identity: known.identity,
        variables: known.variables,
    })
}

impl SessionContext {
    /// Whether anything is sent.
    pub fn is_off(&self) -> bool {
        !self.identity && self.variables.is_empty()
    }

    /// The `(field, message)` of what is wrong: a variable name that is not a session
    /// variable's (a slug), an identity key (sent with `identity`), a repeat, too many.
    pub fn check(&self) -> Result<(), (String, String)> {
        if self.variables.len() > MAX_VARIABLES {
            return Err((
                "session_context.variables".into(),
                format!("at most {MAX_VARIABLES} variables"),
            ));
        }
        for (i, name) in self.variables.iter().enumerate() {
            let field = format!("session_context.variables[{i}]");
            if crate::context::is_reserved(name) {
                return Err((
                    field,
                    format!(
                        "'{name}' is part of the identity, not a session variable (identity: true sends user and groups)"
                    ),
                ));
            }
            if !crate::context::is_slug(name) {
                return Err((
                    field,
                    format!(
                        "not a session variable name ({})",
                        crate::context::SLUG_RULE
                    ),
                ));
            }
            if self.variables[..i].contains(name) {
                return Err((field, format!("'{name}' is listed twice")));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        let ok = SessionContext {
            identity: true,
            variables: vec!["project".into(), "region".into()],
        };
        assert!(ok.check().is_ok() && !ok.is_off());
        assert!(SessionContext::default().is_off());
        let bad = |v: &str| {
            SessionContext {
                identity: false,
                variables: vec![v.into()],
            }
            .check()
            .unwrap_err()
        };
        assert!(bad("Project").1.contains("not a session variable name"));
        assert!(bad("user").1.contains("identity: true"));
        let twice = SessionContext {
            identity: false,
            variables: vec!["a".into(), "a".into()],
        };
        assert_eq!(twice.check().unwrap_err().0, "session_context.variables[1]");
    }

    #[test]
    fn the_document_form_ignores_unknown_keys_and_the_file_form_does_not() {
        #[derive(Deserialize)]
        struct Doc {
            #[serde(deserialize_with = "lenient")]
            c: SessionContext,
        }
        let text = r#"{"c": {"identity": true, "variables": ["project"], "later": 1}}"#;
        let doc: Doc = serde_json::from_str(text).unwrap();
        assert_eq!(
            doc.c,
            SessionContext {
                identity: true,
                variables: vec!["project".into()]
            }
        );
        let file = serde_json::from_str::<SessionContext>(r#"{"identity": true, "later": 1}"#);
        assert!(file.unwrap_err().to_string().contains("unknown field"));
        // Serialized, it reads back the same through either form.
        let back: SessionContext =
            serde_json::from_value(serde_json::to_value(&doc.c).unwrap()).unwrap();
        assert_eq!(back, doc.c);
    }
}
