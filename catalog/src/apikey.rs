//! API keys: the `mcc_<prefix>_<secret>` format, its hash, and the public record a
//! catalog carries. Minting takes random bytes from the caller (this crate does no I/O);
//! checking compares SHA-256 digests in constant time. This is the one definition of the
//! format: the operator's minting, the gateway's minting (`mcc_gateway::auth::api_key`)
//! and every check of a presented key or a stored prefix call it.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Every key starts with this.
pub const KEY_PREFIX: &str = "mcc_";
/// Random bytes in the public prefix (12 hex characters).
pub const PREFIX_BYTES: usize = 6;
/// Random bytes in the secret part (64 hex characters).
pub const SECRET_BYTES: usize = 32;
/// Characters of the prefix.
pub const PREFIX_LEN: usize = PREFIX_BYTES * 2;

/// What a catalog publishes about a key: never the key itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyRecord {
    /// The 12 hex characters after `mcc_`; keys are looked up by it.
    pub prefix: String,
    /// Hex SHA-256 of the whole raw key (`mcc_<prefix>_<secret>`).
    pub sha256: String,
    /// UTC in [`EXPIRY_FORMAT`] (`2027-01-31T12:00:00Z`); `None` never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// The one form of `expires_at` (strftime): UTC, whole seconds, so that two expiries
/// compare as text.
pub const EXPIRY_FORMAT: &str = "%Y-%m-%dT%H:%M:%SZ";

/// Builds a raw key from random bytes.
pub fn format_key(prefix: &[u8; PREFIX_BYTES], secret: &[u8; SECRET_BYTES]) -> String {
    format!(
        "{KEY_PREFIX}{}_{}",
        hex::encode(prefix),
        hex::encode(secret)
    )
}

/// The prefix of a well-formed raw key (`mcc_` + 12 lowercase hex + `_` + secret). The
/// secret is not checked beyond being non-empty: keys minted before the hex secret
/// (URL-safe base64, which may contain `_`) stay valid.
pub fn prefix_of(raw: &str) -> Option<&str> {
    let rest = raw.strip_prefix(KEY_PREFIX)?;
    let (prefix, secret) = rest.split_once('_')?;
    (is_prefix(prefix) && !secret.is_empty()).then_some(prefix)
}

/// Whether `prefix` is a well-formed stored prefix: [`PREFIX_LEN`] lowercase hex digits.
pub fn is_prefix(prefix: &str) -> bool {
    prefix.len() == PREFIX_LEN
        && prefix
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// SHA-256 of a raw key.
pub fn digest(raw: &str) -> [u8; 32] {
    Sha256::digest(raw.as_bytes()).into()
}

/// Hex SHA-256 of a raw key: what a record stores.
pub fn hash_key(raw: &str) -> String {
    hex::encode(digest(raw))
}

/// Whether two digests are equal, in time independent of where they differ.
pub fn digests_equal(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl ApiKeyRecord {
    /// The record of a raw key, or `None` when it is not a well-formed key.
    pub fn of(raw: &str, expires_at: Option<String>) -> Option<Self> {
        Some(Self {
            prefix: prefix_of(raw)?.to_string(),
            sha256: hash_key(raw),
            expires_at,
        })
    }

    /// Whether the key has expired at `now` (formatted as [`EXPIRY_FORMAT`]).
    pub fn expired(&self, now: &str) -> bool {
        self.expires_at.as_deref().is_some_and(|e| e <= now)
    }

    /// Whether `raw` is this key (constant time in the digest comparison; a record whose
    /// hash is not 64 hex digits matches nothing).
    pub fn matches(&self, raw: &str) -> bool {
        let mut stored = [0u8; 32];
        hex::decode_to_slice(&self.sha256, &mut stored).is_ok()
            && digests_equal(&digest(raw), &stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_prefix_hash_and_match() {
        let raw = format_key(&[0xab; PREFIX_BYTES], &[7; SECRET_BYTES]);
        assert!(raw.starts_with("mcc_abababababab_0707"));
        assert_eq!(prefix_of(&raw), Some("abababababab"));
        let rec = ApiKeyRecord::of(&raw, None).unwrap();
        assert!(rec.matches(&raw));
        assert!(!rec.matches(&format!("{raw}x")));
        assert_eq!(prefix_of("mcc_ABABABABABAB_x"), None);
        assert_eq!(prefix_of("mcc_abab_x"), None);
        assert_eq!(prefix_of("mcc_abababababab_"), None);
        assert_eq!(prefix_of("mcc_abababababab_se_cr_et"), Some("abababababab"));
        assert!(is_prefix("0123456789ab") && !is_prefix("0123456789AB") && !is_prefix("0123"));
        assert!(digests_equal(&digest(&raw), &digest(&raw)));
        assert!(!digests_equal(&digest(&raw), &digest("other")));
        let dated = ApiKeyRecord::of(&raw, Some("2027-01-31T12:00:00Z".into())).unwrap();
        assert!(!dated.expired("2027-01-31T11:59:59Z"));
        assert!(dated.expired("2027-01-31T12:00:00Z"));
        assert!(!rec.expired("2999-01-01T00:00:00Z"));
    }
}
