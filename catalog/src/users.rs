//! The users file (file mode's identity source, and what `mcc-operator convert` turns
//! into UserGrants): its entry shape ([`UserEntry`], [`ApiKeyEntry`], [`OidcSubject`])
//! and its one reader, [`parse`], that the gateway and the operator both call. Reading
//! the file from disk, and what each binary builds from the entries, stays with them.
//!
//! ```yaml
//! users:                       # or a bare list of entries
//!   - username: alice
//!     email: alice@example.com
//!     groups: [osint]
//!     tools: [ops.restart]
//!     oidc_subjects:
//!       - {issuer: "https://idp.example.com/", subject: "00u1abcd"}
//!     api_keys:
//!       - prefix: 3f9a0c1b2d4e
//!         sha256: 9c56cc51b374c3ba189210d5b6d4bf57790d351c96c47c02190ecf1e430635ab
//!         expires_at: 2027-03-01T00:00:00Z   # omit: never expires
//! ```

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};

use crate::rbac::User;

/// An OIDC identity bound to a catalog user: the token's `iss` and `sub`, compared
/// exactly. A subject is unique only within its issuer, so both are part of the binding.
///
/// `issuer: None` is the old plain-subject form (a bare string in a UserGrant's
/// `oidcSubjects`, kept readable): it binds the subject under the issuer the gateway
/// pins (`auth.jwt.issuer`) and under no other.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct OidcSubject {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    pub subject: String,
}

impl<'de> Deserialize<'de> for OidcSubject {
    /// `{issuer, subject}` or, the old form, a bare subject string.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Pinned {
            #[serde(default)]
            issuer: Option<String>,
            subject: String,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Plain(String),
            Pinned(Pinned),
        }
        let subject = match Form::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "expected {issuer: <iss>, subject: <sub>} (or a bare subject string)",
            )
        })? {
            Form::Plain(subject) => OidcSubject {
                issuer: None,
                subject,
            },
            Form::Pinned(p) => OidcSubject {
                issuer: p.issuer,
                subject: p.subject,
            },
        };
        subject.check().map_err(serde::de::Error::custom)?;
        Ok(subject)
    }
}

impl OidcSubject {
    /// An empty subject or issuer would bind a claim nobody should carry.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.subject.is_empty() {
            return Err("subject must not be empty");
        }
        if self.issuer.as_deref().is_some_and(str::is_empty) {
            return Err("issuer must not be empty (omit it for the old plain-subject form)");
        }
        Ok(())
    }
}

/// One user of a users file: the catalog user plus the credentials that act as them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserEntry {
    #[serde(flatten)]
    pub user: User,
    /// OIDC identities (`jwt` backend) that act as this user.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oidc_subjects: Vec<OidcSubject>,
    /// Keys whose holder authenticates as this user (format: [`crate::apikey`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_keys: Vec<ApiKeyEntry>,
}

/// The stored form of an API key in a users file: never the key itself, only its lookup
/// prefix and the SHA-256 of the whole raw key ([`crate::apikey::hash_key`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyEntry {
    /// The 12 hex characters after `mcc_`.
    pub prefix: String,
    /// Hex SHA-256 of the raw key.
    pub sha256: String,
    /// RFC 3339 instant after which the key is refused; `None` = never expires.
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
}

/// The keys a users-file entry may have.
pub const ENTRY_KEYS: [&str; 6] = [
    "username",
    "email",
    "groups",
    "tools",
    "oidc_subjects",
    "api_keys",
];

/// Why a users file cannot be used; the caller adds the file's path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsersFileError {
    #[error("not YAML: {0}")]
    Yaml(String),
    #[error("expected `users:` with a list of users (or a bare list)")]
    Shape,
    #[error("users[{index}]: unknown key '{key}' (expected one of: {})", ENTRY_KEYS.join(", "))]
    UnknownKey { index: usize, key: String },
    #[error("users[{index}]: {reason}")]
    Entry { index: usize, reason: String },
    #[error("users[{index}]: username: must not be empty")]
    EmptyUsername { index: usize },
    /// Which of two entries was meant is unknown, so the file is refused.
    #[error("users[{index}]: user '{username}' is listed more than once")]
    DuplicateUser { index: usize, username: String },
}

/// Reads users-file text: `users:` with a list of entries, or a bare list. Unknown keys,
/// an empty username and a user listed twice are refused, naming the entry. What the
/// entries' API keys and subjects are worth (a malformed key record, a shared prefix)
/// is the reader of the entries' business: such a record is left out, not the file.
pub fn parse(text: &str) -> Result<Vec<UserEntry>, UsersFileError> {
    let raw: serde_json::Value =
        serde_saphyr::from_str(text).map_err(|e| UsersFileError::Yaml(e.to_string()))?;
    let list = match raw {
        serde_json::Value::Object(mut map) if map.len() == 1 => match map.remove("users") {
            Some(serde_json::Value::Array(list)) => list,
            _ => return Err(UsersFileError::Shape),
        },
        serde_json::Value::Array(list) => list,
        _ => return Err(UsersFileError::Shape),
    };
    let mut entries: Vec<UserEntry> = Vec::with_capacity(list.len());
    for (index, value) in list.into_iter().enumerate() {
        if let Some(key) = value
            .as_object()
            .into_iter()
            .flat_map(|m| m.keys())
            .find(|k| !ENTRY_KEYS.contains(&k.as_str()))
        {
            return Err(UsersFileError::UnknownKey {
                index,
                key: key.clone(),
            });
        }
        let entry: UserEntry =
            serde_path_to_error::deserialize(value).map_err(|e| UsersFileError::Entry {
                index,
                reason: match e.path().to_string().as_str() {
                    "." => e.inner().to_string(),
                    path => format!("{path}: {}", e.inner()),
                },
            })?;
        if entry.user.username.trim().is_empty() {
            return Err(UsersFileError::EmptyUsername { index });
        }
        if entries
            .iter()
            .any(|e| e.user.username == entry.user.username)
        {
            return Err(UsersFileError::DuplicateUser {
                index,
                username: entry.user.username,
            });
        }
        entries.push(entry);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_and_every_key_parse() {
        let text = "users:\n  - username: alice\n    email: a@x\n    groups: [admin]\n    tools: [ops.t]\n    oidc_subjects:\n      - {issuer: 'https://idp/', subject: s1}\n      - legacy\n    api_keys:\n      - prefix: 0123456789ab\n        sha256: '00'\n        expires_at: 2027-03-01T00:00:00Z\n";
        let users = parse(text).unwrap();
        assert_eq!(users[0].user.tools, ["ops.t"]);
        assert_eq!(
            users[0].oidc_subjects,
            [
                OidcSubject {
                    issuer: Some("https://idp/".into()),
                    subject: "s1".into()
                },
                OidcSubject {
                    issuer: None,
                    subject: "legacy".into()
                }
            ]
        );
        assert_eq!(
            users[0].api_keys[0].expires_at.unwrap().to_rfc3339(),
            "2027-03-01T00:00:00+00:00"
        );
        let bare = parse("- username: bob\n").unwrap();
        assert_eq!(bare[0].user.username, "bob");
    }

    #[test]
    fn refusals_name_the_entry() {
        let cases = [
            (
                "users:\n  - username: a\n    grups: [x]\n",
                "users[0]: unknown key 'grups'",
            ),
            (
                "users:\n  - username: ' '\n",
                "users[0]: username: must not be empty",
            ),
            (
                "users:\n  - username: a\n  - username: a\n",
                "users[1]: user 'a' is listed more than once",
            ),
            (
                "users:\n  - username: a\n    oidc_subjects: [{subject: ''}]\n",
                "users[0]: oidc_subjects[0]: subject must not be empty",
            ),
            (
                "users:\n  - username: a\n    oidc_subjects: [{sub: x}]\n",
                "users[0]: oidc_subjects[0]: expected {issuer",
            ),
            (
                "users:\n  - username: a\n    api_keys: [{prefix: p, sha256: h, bogus: 1}]\n",
                "users[0]: api_keys[0]",
            ),
            ("people: []\n", "expected `users:`"),
        ];
        for (text, expected) in cases {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.starts_with(expected), "{text:?}: {e}");
        }
    }

    /// Fragments of users files, so random text often gets deep into the reader.
    fn usersish() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let token = prop_oneof![
            Just("users:".to_string()),
            Just("\n  - ".to_string()),
            Just("\n    ".to_string()),
            Just("username: ".to_string()),
            Just("email: ".to_string()),
            Just("groups: [a, b]".to_string()),
            Just("oidc_subjects: ".to_string()),
            Just("{issuer: 'https://i/', subject: s}".to_string()),
            Just("{subject: ''}".to_string()),
            Just("api_keys: ".to_string()),
            Just("[{prefix: 0123456789ab, sha256: '00', expires_at: x}]".to_string()),
            Just("- ".to_string()),
            Just("&a ".to_string()),
            Just("*a".to_string()),
            "[a-z0-9 :\\[\\]{},'\"-]{0,12}",
        ];
        proptest::collection::vec(token, 0..24).prop_map(|t| t.concat())
    }

    proptest::proptest! {
        #[test]
        fn the_reader_never_panics(text in usersish()) {
            let _ = parse(&text);
        }
    }

    #[test]
    fn subjects_serialize_in_the_pinned_form() {
        let s = OidcSubject {
            issuer: Some("https://idp/".into()),
            subject: "s1".into(),
        };
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            serde_json::json!({"issuer": "https://idp/", "subject": "s1"})
        );
        let legacy: OidcSubject = serde_json::from_value(serde_json::json!("s2")).unwrap();
        assert_eq!(
            serde_json::to_value(&legacy).unwrap(),
            serde_json::json!({"subject": "s2"})
        );
        assert!(
            serde_json::from_value::<OidcSubject>(
                serde_json::json!({"issuer": "", "subject": "x"})
            )
            .is_err()
        );
    }
}
