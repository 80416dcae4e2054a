//! The users the authenticator resolves credentials against: the catalog's users plus the
//! API-key records attached to them, behind a shared handle that a catalog reload swaps
//! atomically (so a removed user or key stops working on the next request).
//!
//! The entry shape (users file, and what Kubernetes mode builds from the catalog
//! document) is the catalog's ([`mcc_catalog::users::UserEntry`]); so is the API-key
//! format ([`mcc_catalog::apikey`]). This module indexes entries for lookups by
//! username, email, API-key prefix, OIDC identity and ServiceAccount, and leaves out what
//! cannot be used.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use chrono::{DateTime, Utc};
use mcc_catalog::User;
use mcc_catalog::apikey::PREFIX_LEN;
pub use mcc_catalog::users::{ApiKeyEntry, OidcSubject, UserEntry};

/// A key record ready for verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    /// The user the key logs in as.
    pub username: String,
    pub sha256: [u8; 32],
    pub expires_at: Option<DateTime<Utc>>,
}

/// Why a set of users cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectoryError {
    #[error("users: user '{0}' is listed more than once")]
    DuplicateUser(String),
    #[error(
        "users: user '{user}': api_keys prefix '{prefix}' must be {PREFIX_LEN} lowercase hex characters"
    )]
    BadPrefix { user: String, prefix: String },
    #[error("users: user '{user}': api_keys entry '{prefix}': sha256 must be 64 hex characters")]
    BadHash { user: String, prefix: String },
    #[error("users: user '{user}': API key {prefix}: expiresAt '{value}': {reason}")]
    BadExpiry {
        user: String,
        prefix: String,
        value: String,
        reason: String,
    },
    #[error("users: api_keys prefix '{prefix}' is used by both '{first}' and '{second}'")]
    DuplicatePrefix {
        prefix: String,
        first: String,
        second: String,
    },
    #[error(
        "users: OIDC subject '{subject}' of issuer {issuer} is bound to both '{first}' and '{second}'; it acts as neither"
    )]
    DuplicateOidcSubject {
        issuer: String,
        subject: String,
        first: String,
        second: String,
    },
}

/// Something [`Directory::lenient`] left out, and how many API-key records went with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// Why (names the user and the prefix, never the hash).
    pub error: DirectoryError,
    /// Key records that no longer log anyone in because of this.
    pub api_keys: usize,
}

/// An immutable snapshot of users and keys, indexed for lookups.
#[derive(Debug, Default)]
pub struct Directory {
    users: Vec<User>,
    by_name: HashMap<String, usize>,
    by_email: HashMap<String, usize>,
    keys: HashMap<String, KeyRecord>,
    /// (namespace, name) of a ServiceAccount → index of the user it acts as.
    service_accounts: HashMap<(String, String), usize>,
    /// OIDC identity → index of the user it acts as.
    oidc: HashMap<OidcSubject, usize>,
}

impl Directory {
    /// Users without API keys (e.g. the catalog's users in Kubernetes mode).
    pub fn from_users(users: Vec<User>) -> Result<Self, DirectoryError> {
        Self::new(
            users
                .into_iter()
                .map(|user| UserEntry {
                    user,
                    ..UserEntry::default()
                })
                .collect(),
        )
    }

    /// Users with their API keys; rejects duplicate users, malformed or shared prefixes
    /// and malformed hashes, naming the user (the first problem [`Self::lenient`] finds).
    pub fn new(entries: Vec<UserEntry>) -> Result<Self, DirectoryError> {
        let (dir, left_out) = Self::lenient(entries);
        match left_out.into_iter().next() {
            Some(l) => Err(l.error),
            None => Ok(dir),
        }
    }

    /// Users with their API keys, leaving out what cannot be used rather than refusing
    /// the whole set, so one bad record never keeps every other change (a revoked key
    /// included) from applying:
    ///
    /// - a malformed key record (prefix or hash): that record;
    /// - a prefix held by more than one record: all of them, since no record has a
    ///   better claim and a key must never log in as whichever user happens to come
    ///   first;
    /// - a user listed again: the later entry, with its keys;
    /// - an OIDC identity bound to more than one user: every binding of it (as for a
    ///   shared prefix).
    ///
    /// What was left out comes back in entry order (shared prefixes last); logging it,
    /// with where the users came from, is the caller's job.
    pub fn lenient(entries: Vec<UserEntry>) -> (Self, Vec<LeftOut>) {
        let mut dir = Directory::default();
        let mut left_out = Vec::new();
        let mut records: Vec<(String, KeyRecord)> = Vec::new();
        let mut subjects: Vec<(OidcSubject, usize)> = Vec::new();
        for entry in entries {
            let name = entry.user.username.clone();
            if dir.by_name.contains_key(&name) {
                left_out.push(LeftOut {
                    api_keys: entry.api_keys.len(),
                    error: DirectoryError::DuplicateUser(name),
                });
                continue;
            }
            for key in &entry.api_keys {
                match key_record(&name, key) {
                    Ok(record) => records.push((key.prefix.clone(), record)),
                    Err(error) => left_out.push(LeftOut { error, api_keys: 1 }),
                }
            }
            let index = dir.users.len();
            for subject in entry.oidc_subjects {
                subjects.push((subject, index));
            }
            if let Some(email) = &entry.user.email {
                // The first user with an email wins, as a lookup by email in MCC does.
                dir.by_email.entry(email.to_lowercase()).or_insert(index);
            }
            dir.by_name.insert(name, index);
            dir.users.push(entry.user);
        }
        let mut holders: HashMap<String, Vec<KeyRecord>> = HashMap::new();
        let mut order = Vec::new();
        for (prefix, record) in records {
            let held = holders.entry(prefix.clone()).or_default();
            if held.is_empty() {
                order.push(prefix);
            }
            held.push(record);
        }
        for prefix in order {
            let Some(mut held) = holders.remove(&prefix) else {
                continue;
            };
            if held.len() == 1 {
                dir.keys.insert(prefix, held.remove(0));
            } else {
                left_out.push(LeftOut {
                    api_keys: held.len(),
                    error: DirectoryError::DuplicatePrefix {
                        prefix,
                        first: held[0].username.clone(),
                        second: held[1].username.clone(),
                    },
                });
            }
        }
        dir.bind_oidc_subjects(subjects, &mut left_out);
        (dir, left_out)
    }

    /// Indexes the OIDC bindings; a subject bound to two users binds neither.
    fn bind_oidc_subjects(
        &mut self,
        subjects: Vec<(OidcSubject, usize)>,
        left_out: &mut Vec<LeftOut>,
    ) {
        let mut holders: HashMap<OidcSubject, Vec<usize>> = HashMap::new();
        let mut order = Vec::new();
        for (subject, index) in subjects {
            let held = holders.entry(subject.clone()).or_default();
            if held.is_empty() {
                order.push(subject);
            }
            if !held.contains(&index) {
                held.push(index);
            }
        }
        for subject in order {
            let held = &holders[&subject];
            if held.len() == 1 {
                self.oidc.insert(subject, held[0]);
            } else {
                left_out.push(LeftOut {
                    api_keys: 0,
                    error: DirectoryError::DuplicateOidcSubject {
                        issuer: subject
                            .issuer
                            .clone()
                            .map_or("(the pinned one)".into(), |i| format!("'{i}'")),
                        subject: subject.subject.clone(),
                        first: self.users[held[0]].username.clone(),
                        second: self.users[held[1]].username.clone(),
                    },
                });
            }
        }
    }

    pub fn users(&self) -> &[User] {
        &self.users
    }

    pub fn by_username(&self, username: &str) -> Option<&User> {
        self.by_name.get(username).map(|&i| &self.users[i])
    }

    /// The user with this email, compared case-insensitively (providers differ in case).
    pub fn by_email(&self, email: &str) -> Option<&User> {
        self.by_email
            .get(&email.to_lowercase())
            .map(|&i| &self.users[i])
    }

    /// The user bound to the OIDC identity (`issuer`, `subject`); `issuer: None` looks up
    /// the old plain-subject bindings (the caller applies them only under its pinned
    /// issuer).
    pub fn by_oidc_subject(&self, issuer: Option<&str>, subject: &str) -> Option<&User> {
        let key = OidcSubject {
            issuer: issuer.map(str::to_string),
            subject: subject.to_string(),
        };
        self.oidc.get(&key).map(|&i| &self.users[i])
    }

    /// The first user (in catalog order) who is in `group`.
    pub fn first_in_group(&self, group: &str) -> Option<&User> {
        self.users.iter().find(|u| u.in_group(group))
    }

    pub fn key(&self, prefix: &str) -> Option<&KeyRecord> {
        self.keys.get(prefix)
    }

    /// Lets ServiceAccount `namespace/name` act as `username` (Kubernetes mode). A
    /// ServiceAccount already bound keeps its first user; `false` tells the caller so.
    pub fn bind_service_account(&mut self, namespace: &str, name: &str, username: &str) -> bool {
        let Some(&index) = self.by_name.get(username) else {
            return false;
        };
        let sa = (namespace.to_string(), name.to_string());
        if self.service_accounts.contains_key(&sa) {
            return false;
        }
        self.service_accounts.insert(sa, index);
        true
    }

    /// The user a ServiceAccount acts as.
    pub fn by_service_account(&self, namespace: &str, name: &str) -> Option<&User> {
        self.service_accounts
            .get(&(namespace.to_string(), name.to_string()))
            .map(|&i| &self.users[i])
    }
}

fn key_record(user: &str, key: &ApiKeyEntry) -> Result<KeyRecord, DirectoryError> {
    if !mcc_catalog::apikey::is_prefix(&key.prefix) {
        return Err(DirectoryError::BadPrefix {
            user: user.to_string(),
            prefix: key.prefix.clone(),
        });
    }
    let mut sha256 = [0u8; 32];
    hex::decode_to_slice(&key.sha256, &mut sha256).map_err(|_| DirectoryError::BadHash {
        user: user.to_string(),
        prefix: key.prefix.clone(),
    })?;
    Ok(KeyRecord {
        username: user.to_string(),
        sha256,
        expires_at: key.expires_at,
    })
}

/// The current [`Directory`], shared by the authenticator and whoever reloads the
/// catalog. Cloning is cheap; [`SharedDirectory::replace`] is seen by the next request.
#[derive(Clone, Default)]
pub struct SharedDirectory(Arc<ArcSwap<Directory>>);

impl SharedDirectory {
    pub fn new(directory: Directory) -> Self {
        Self(Arc::new(ArcSwap::from_pointee(directory)))
    }

    /// The snapshot to use for one request.
    pub fn current(&self) -> Arc<Directory> {
        self.0.load_full()
    }

    /// Swap in a reloaded set of users; keys missing from it are revoked at once.
    pub fn replace(&self, directory: Directory) {
        self.0.store(Arc::new(directory));
    }
}

impl std::fmt::Debug for SharedDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedDirectory")
            .field("users", &self.0.load().users.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, prefix: &str, sha: &str) -> UserEntry {
        UserEntry {
            user: User {
                username: name.into(),
                ..Default::default()
            },
            api_keys: vec![ApiKeyEntry {
                prefix: prefix.into(),
                sha256: sha.into(),
                expires_at: None,
            }],
            ..UserEntry::default()
        }
    }

    fn bound(name: &str, subjects: &[(Option<&str>, &str)]) -> UserEntry {
        UserEntry {
            user: User {
                username: name.into(),
                ..Default::default()
            },
            oidc_subjects: subjects
                .iter()
                .map(|(issuer, subject)| OidcSubject {
                    issuer: issuer.map(str::to_string),
                    subject: subject.to_string(),
                })
                .collect(),
            ..UserEntry::default()
        }
    }

    #[test]
    fn oidc_subjects_bind_by_issuer_and_subject_and_shared_ones_bind_no_one() {
        let idp = Some("https://idp/");
        let (dir, left_out) = Directory::lenient(vec![
            bound("alice", &[(idp, "a1"), (None, "legacy")]),
            bound("bob", &[(idp, "shared")]),
            bound("carol", &[(idp, "shared"), (Some("https://other/"), "a1")]),
        ]);
        let who = |issuer, subject| {
            dir.by_oidc_subject(issuer, subject)
                .map(|u| u.username.as_str())
        };
        assert_eq!(who(idp, "a1"), Some("alice"));
        assert_eq!(who(Some("https://other/"), "a1"), Some("carol"));
        assert_eq!(who(Some("https://evil/"), "a1"), None);
        assert_eq!(who(None, "legacy"), Some("alice"));
        assert_eq!(
            who(idp, "legacy"),
            None,
            "a plain subject is not a pinned one"
        );
        assert_eq!(who(idp, "shared"), None, "bound twice: neither");
        assert_eq!(left_out.len(), 1);
        assert!(
            left_out[0].error.to_string().contains("'bob' and 'carol'"),
            "{}",
            left_out[0].error
        );
    }

    #[test]
    fn rejects_bad_entries_naming_the_user() {
        let sha = "ab".repeat(32);
        let err = Directory::new(vec![entry("bob", "XYZ", &sha)]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "users: user 'bob': api_keys prefix 'XYZ' must be 12 lowercase hex characters"
        );
        let err = Directory::new(vec![entry("bob", "0123456789ab", "zz")]).unwrap_err();
        assert!(matches!(err, DirectoryError::BadHash { .. }), "{err}");
        let err = Directory::new(vec![
            entry("bob", "0123456789ab", &sha),
            entry("eve", "0123456789ab", &sha),
        ])
        .unwrap_err();
        assert!(err.to_string().contains("both 'bob' and 'eve'"), "{err}");
    }

    #[test]
    fn lenient_leaves_out_only_the_bad_records() {
        let sha = "ab".repeat(32);
        let mut alice = entry("alice", "0123456789ab", &sha);
        alice.api_keys.push(ApiKeyEntry {
            prefix: "aaaaaaaaaaaa".into(),
            sha256: sha.clone(),
            expires_at: None,
        });
        let (dir, left_out) = Directory::lenient(vec![
            alice,
            entry("bob", "0123456789ab", &sha),
            entry("carol", "XYZ", &sha),
            entry("dave", "bbbbbbbbbbbb", &sha),
            entry("dave", "cccccccccccc", &sha),
        ]);
        assert_eq!(dir.users().len(), 4, "every distinct user is served");
        assert_eq!(dir.key("aaaaaaaaaaaa").unwrap().username, "alice");
        assert_eq!(dir.key("bbbbbbbbbbbb").unwrap().username, "dave");
        assert!(
            dir.key("0123456789ab").is_none(),
            "a prefix held twice logs no one in"
        );
        assert!(
            dir.key("cccccccccccc").is_none(),
            "the repeated user's keys"
        );
        let messages: Vec<(String, usize)> = left_out
            .iter()
            .map(|l| (l.error.to_string(), l.api_keys))
            .collect();
        assert_eq!(
            messages,
            [
                (
                    "users: user 'carol': api_keys prefix 'XYZ' must be 12 lowercase hex characters"
                        .to_string(),
                    1
                ),
                ("users: user 'dave' is listed more than once".to_string(), 1),
                (
                    "users: api_keys prefix '0123456789ab' is used by both 'alice' and 'bob'"
                        .to_string(),
                    2
                ),
            ]
        );
        assert!(!format!("{left_out:?}").contains(&sha), "never the hash");
    }

    #[test]
    fn users_file_entry_parses_from_yaml() {
        let yaml = "username: alice\nemail: a@x.org\ngroups: [osint]\napi_keys:\n  - prefix: 0123456789ab\n    sha256: '00'\n    expires_at: 2027-03-01T00:00:00Z\n";
        let entry: UserEntry = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(entry.user.username, "alice");
        assert_eq!(entry.user.groups, vec!["osint".to_string()]);
        assert_eq!(
            entry.api_keys[0].expires_at.unwrap().to_rfc3339(),
            "2027-03-01T00:00:00+00:00"
        );
    }
}
