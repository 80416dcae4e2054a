//! Which UserGrants make users, and with which API keys (pure; part of
//! [`super::assemble`]).
//!
//! - A grant counts only in a trusted namespace: elsewhere it adds no user, no groups, no
//!   ServiceAccount binding and no API key (`UntrustedNamespace`).
//! - A grant whose username or groups break the catalog's name rules, or whose
//!   `oidcSubjects` entry is neither `{issuer, subject}` nor a bare subject, is
//!   `InvalidSpec`.
//! - Grants for one username are unioned (oldest grant's email wins).
//! - An API key is published only if no older grant's key has the same prefix (the
//!   prefix is how gateways find a key): the younger grant's user is served without that
//!   key (`DuplicateApiKeyPrefix`), so the catalog never carries two records with one
//!   prefix.

use std::collections::BTreeMap;
use std::sync::Arc;

use mcc_catalog::apikey::ApiKeyRecord;
use mcc_catalog::crd::UserGrant;
use mcc_catalog::document::{CatalogUser, ServiceAccountRef};
use mcc_catalog::key::union_groups;
use mcc_catalog::tool::User;
use mcc_catalog::users::OidcSubject;
use serde::Deserialize;

use super::{Assembly, Verdict, watched};
use crate::convert::Invalid;
use crate::policy::Policy;

/// Adds the users to `out.document` and a verdict for every watched grant.
pub(super) fn assemble(out: &mut Assembly, grants: &[Arc<UserGrant>], policy: &Policy) {
    let mut users: BTreeMap<String, CatalogUser> = BTreeMap::new();
    // API-key prefix → the grant whose key has it.
    let mut prefixes: BTreeMap<String, String> = BTreeMap::new();
    for (id, namespace, grant) in watched(grants, policy) {
        let verdict = if !policy.trusts(&namespace) {
            Verdict::UntrustedNamespace { namespace }
        } else if let Err(e) = check_grant(grant) {
            Verdict::Invalid(e)
        } else {
            let mut refused = None;
            let key = published_key(grant).and_then(|k| match prefixes.get(&k.prefix) {
                Some(holder) => {
                    refused = Some(Verdict::DuplicateApiKeyPrefix {
                        prefix: k.prefix,
                        holder: holder.clone(),
                    });
                    None
                }
                None => {
                    prefixes.insert(k.prefix.clone(), id.clone());
                    Some(k)
                }
            });
            merge_grant(&mut users, grant, key);
            refused.unwrap_or(Verdict::Ready {
                introspect: false,
                renamed: false,
            })
        };
        out.grants.insert(id, verdict);
    }
    out.document.users = users.into_values().collect();
}

/// The key a grant would publish: enabled in its spec and issued (in its status).
fn published_key(grant: &UserGrant) -> Option<ApiKeyRecord> {
    let wants_key = grant.spec.api_key.as_ref().is_some_and(|k| k.enabled);
    let issued = grant.status.as_ref()?.api_key.as_ref()?;
    wants_key.then(|| ApiKeyRecord {
        prefix: issued.prefix.clone(),
        sha256: issued.sha256.clone(),
        expires_at: issued.expires_at.clone(),
    })
}

/// What the schema cannot say about a grant: the catalog's own name rules.
fn check_grant(grant: &UserGrant) -> Result<(), Invalid> {
    let spec = &grant.spec;
    let bad = |field: String, message: String| Invalid { field, message };
    if spec.username.trim().is_empty() || spec.username.chars().any(char::is_whitespace) {
        return Err(bad(
            "username".into(),
            "must be non-empty without whitespace".into(),
        ));
    }
    for (i, g) in spec.groups.iter().enumerate() {
        if g.is_empty() || g.chars().any(|c| c.is_whitespace() || c == '.') {
            return Err(bad(
                format!("groups[{i}]"),
                format!(
                    "'{g}' must be non-empty without whitespace or dots: groups are parts of tool keys"
                ),
            ));
        }
    }
    oidc_subjects(spec).map(|_| ())
}

/// The grant's `oidcSubjects`, each `{issuer, subject}` or an old bare subject string.
fn oidc_subjects(spec: &mcc_catalog::crd::UserGrantSpec) -> Result<Vec<OidcSubject>, Invalid> {
    spec.oidc_subjects
        .iter()
        .enumerate()
        .map(|(i, value)| {
            OidcSubject::deserialize(value).map_err(|e| Invalid {
                field: format!("oidcSubjects[{i}]"),
                message: e.to_string(),
            })
        })
        .collect()
}

/// Unions a grant into its user (oldest grant's email wins), with `key` if any.
fn merge_grant(
    users: &mut BTreeMap<String, CatalogUser>,
    grant: &UserGrant,
    key: Option<ApiKeyRecord>,
) {
    let spec = &grant.spec;
    let namespace = grant.metadata.namespace.clone().unwrap_or_default();
    let entry = users
        .entry(spec.username.clone())
        .or_insert_with(|| CatalogUser {
            user: User {
                username: spec.username.clone(),
                ..Default::default()
            },
            ..Default::default()
        });
    if entry.user.email.is_none() {
        entry.user.email = spec.email.clone();
    }
    entry.user.groups = union_groups(&entry.user.groups, &spec.groups);
    entry.user.tools = union_groups(&entry.user.tools, &spec.tools);
    entry
        .service_accounts
        .extend(spec.service_accounts.iter().map(|sa| ServiceAccountRef {
            namespace: sa.namespace.clone().unwrap_or_else(|| namespace.clone()),
            name: sa.name.clone(),
        }));
    // Checked by `check_grant` before any grant is merged.
    entry
        .oidc_subjects
        .extend(oidc_subjects(spec).unwrap_or_default());
    entry.api_keys.extend(key);
}
