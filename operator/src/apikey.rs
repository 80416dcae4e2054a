//! API keys of `UserGrant`s: minted as `mcc_<12 hex>_<64 hex>` from the OS's randomness,
//! stored raw in a Secret owned by the grant (so deleting the grant deletes it), and
//! published only as prefix, SHA-256 and expiry. Deleting the Secret revokes the key: the
//! grant's reconcile then issues a new one with a new hash. An expired key is replaced
//! the same way.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use mcc_catalog::apikey::{
    ApiKeyRecord, EXPIRY_FORMAT, PREFIX_BYTES, SECRET_BYTES, format_key, prefix_of,
};
use mcc_catalog::crd::{ApiKeyStatus, UserGrant};

use crate::status::FIELD_MANAGER;
use crate::{Error, Result};

/// The Secret data key holding the raw API key.
pub const SECRET_KEY: &str = "apiKey";
/// Annotation on the Secret with the key's expiry (RFC 3339).
pub const EXPIRES_ANNOTATION: &str = "mcc.dev/expires-at";
/// Label on every object the operator creates; its Secret watch selects on it.
pub const MANAGED_LABEL: (&str, &str) = ("app.kubernetes.io/managed-by", "mcc-operator");

/// The name of a grant's API-key Secret.
pub fn secret_name(grant: &UserGrant) -> String {
    format!("{}-api-key", grant.name_any())
}

fn key_error(grant: &UserGrant, message: impl Into<String>) -> Error {
    Error::ApiKey {
        grant: format!(
            "{}/{}",
            grant.namespace().unwrap_or_default(),
            grant.name_any()
        ),
        message: message.into(),
    }
}

/// Makes sure the grant has a valid key; returns its public part and the time left
/// before it expires (for the next reconcile).
pub async fn ensure(
    grant: &UserGrant,
    client: &Client,
    now: Timestamp,
) -> Result<(ApiKeyStatus, Option<Duration>)> {
    let ns = grant.namespace().unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let name = secret_name(grant);
    let existing = api.get_opt(&name).await.map_err(Error::Kube)?;
    if let Some(secret) = &existing {
        if !owned_by(secret, grant) {
            return Err(key_error(
                grant,
                format!("Secret {name} exists and is not owned by this grant; delete or rename it"),
            ));
        }
        if let Some(found) = usable_key(secret, now) {
            return Ok(found);
        }
    }
    let raw = mint().map_err(|e| key_error(grant, e))?;
    let ttl_days = grant
        .spec
        .api_key
        .as_ref()
        .and_then(|k| k.ttl_days)
        .filter(|d| *d > 0);
    let expires = ttl_days.map(|d| now + SignedDuration::from_hours(24 * i64::from(d)));
    let secret = key_secret(grant, &name, &raw, expires)?;
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&secret),
    )
    .await
    .map_err(Error::Kube)?;
    tracing::info!(grant = %grant.name_any(), namespace = %ns, "issued a new API key");
    let record = ApiKeyRecord::of(&raw, expires.map(expiry_text))
        .ok_or_else(|| key_error(grant, "minted key is malformed"))?;
    Ok((public_part(&name, record), expires.map(|e| left(now, e))))
}

/// Deletes the grant's key Secret (a missing one is fine).
pub async fn revoke(grant: &UserGrant, client: &Client, name: &str) -> Result<()> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &grant.namespace().unwrap_or_default());
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Error::Kube(e)),
    }
}

/// An expiry in the catalog's one text form ([`EXPIRY_FORMAT`]).
fn expiry_text(t: Timestamp) -> String {
    t.strftime(EXPIRY_FORMAT).to_string()
}

fn left(now: Timestamp, expires: Timestamp) -> Duration {
    Duration::try_from(expires.duration_since(now)).unwrap_or_default()
}

fn public_part(secret_name: &str, record: ApiKeyRecord) -> ApiKeyStatus {
    ApiKeyStatus {
        secret_name: secret_name.to_string(),
        prefix: record.prefix,
        sha256: record.sha256,
        expires_at: record.expires_at,
    }
}

fn owned_by(secret: &Secret, grant: &UserGrant) -> bool {
    let uid = grant.metadata.uid.as_deref();
    secret
        .owner_references()
        .iter()
        .any(|o| Some(o.uid.as_str()) == uid && o.kind == "UserGrant")
}

/// The key in `secret` if it is well formed and not expired.
fn usable_key(secret: &Secret, now: Timestamp) -> Option<(ApiKeyStatus, Option<Duration>)> {
    let raw = secret.data.as_ref()?.get(SECRET_KEY)?;
    let raw = std::str::from_utf8(&raw.0).ok()?.trim();
    prefix_of(raw)?;
    let expires = match secret.annotations().get(EXPIRES_ANNOTATION) {
        None => None,
        Some(text) => Some(text.parse::<Timestamp>().ok()?),
    };
    if expires.is_some_and(|e| e <= now) {
        return None;
    }
    let record = ApiKeyRecord::of(raw, expires.map(expiry_text))?;
    Some((
        public_part(&secret.name_any(), record),
        expires.map(|e| left(now, e)),
    ))
}

/// A new raw key from the OS's randomness.
fn mint() -> std::result::Result<String, String> {
    let mut prefix = [0u8; PREFIX_BYTES];
    let mut secret = [0u8; SECRET_BYTES];
    getrandom::fill(&mut prefix).map_err(|e| format!("no randomness: {e}"))?;
    getrandom::fill(&mut secret).map_err(|e| format!("no randomness: {e}"))?;
    Ok(format_key(&prefix, &secret))
}

fn key_secret(
    grant: &UserGrant,
    name: &str,
    raw: &str,
    expires: Option<Timestamp>,
) -> Result<Secret> {
    let owner = grant
        .controller_owner_ref(&())
        .ok_or_else(|| key_error(grant, "the grant has no uid yet"))?;
    let mut annotations =
        BTreeMap::from([("mcc.dev/username".to_string(), grant.spec.username.clone())]);
    if let Some(e) = expires {
        annotations.insert(EXPIRES_ANNOTATION.into(), expiry_text(e));
    }
    Ok(Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: grant.namespace(),
            labels: Some(BTreeMap::from([
                (MANAGED_LABEL.0.to_string(), MANAGED_LABEL.1.to_string()),
                ("mcc.dev/user-grant".to_string(), grant.name_any()),
            ])),
            annotations: Some(annotations),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            SECRET_KEY.to_string(),
            ByteString(raw.as_bytes().to_vec()),
        )])),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{GrantBuilder, TestGrant};

    #[test]
    fn keys_expire_and_must_be_well_formed() {
        let grant = TestGrant::new("g", "alice").api_key(Some(1));
        let now: Timestamp = "2026-11-30T00:00:00Z".parse().unwrap();
        let raw = mint().unwrap();
        assert!(prefix_of(&raw).is_some());
        let later = now + SignedDuration::from_hours(24);
        let secret = key_secret(&grant, "g-api-key", &raw, Some(later)).unwrap();
        let (status, left_) = usable_key(&secret, now).unwrap();
        assert_eq!(status.prefix, prefix_of(&raw).unwrap());
        assert_eq!(left_, Some(Duration::from_secs(86_400)));
        assert_eq!(status.expires_at.as_deref(), Some("2026-12-01T00:00:00Z"));
        assert!(usable_key(&secret, later).is_none(), "expired");
        let mut broken = secret.clone();
        broken.data = Some(BTreeMap::from([(
            SECRET_KEY.into(),
            ByteString(b"nope".to_vec()),
        )]));
        assert!(usable_key(&broken, now).is_none());
        assert!(owned_by(&secret, &grant));
    }
}
