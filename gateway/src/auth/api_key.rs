//! API keys in the gateway: minting from the system random source and verifying a
//! presented key against the current [`Directory`] (so a reload revokes at once).
//!
//! The format (`mcc_<prefix>_<secret>`: 12 lowercase hex characters of non-secret lookup
//! prefix, 64 hex characters of secret), its hash and its parsing are the catalog's one
//! definition ([`mcc_catalog::apikey`]), which the operator's minting uses too. Only the
//! SHA-256 of the whole raw key is stored (as MCC does), and it is compared in constant
//! time.

use chrono::{DateTime, Utc};
use mcc_catalog::Secret;
use mcc_catalog::apikey::{self as format, PREFIX_BYTES, SECRET_BYTES};

use super::AuthError;
use super::directory::{ApiKeyEntry, Directory};

pub use mcc_catalog::apikey::PREFIX_LEN;

/// A freshly minted key: `raw` is shown to its owner once; `entry` goes in the users file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MintedKey {
    pub raw: Secret,
    pub entry: ApiKeyEntry,
}

/// Why a key could not be minted.
#[derive(Debug, thiserror::Error)]
#[error("cannot mint an API key: the system random source failed: {0}")]
pub struct MintError(String);

/// Mint a new key from the system random source, valid until `expires_at` (or forever).
pub fn mint(expires_at: Option<DateTime<Utc>>) -> Result<MintedKey, MintError> {
    let mut prefix = [0u8; PREFIX_BYTES];
    let mut secret = [0u8; SECRET_BYTES];
    getrandom::fill(&mut prefix).map_err(|e| MintError(e.to_string()))?;
    getrandom::fill(&mut secret).map_err(|e| MintError(e.to_string()))?;
    let raw = format::format_key(&prefix, &secret);
    Ok(MintedKey {
        entry: ApiKeyEntry {
            prefix: hex::encode(prefix),
            sha256: format::hash_key(&raw),
            expires_at,
        },
        raw: raw.into(),
    })
}

/// The prefix of a well-formed raw key, or `None` ([`mcc_catalog::apikey::prefix_of`]).
pub fn parse_prefix(raw: &str) -> Option<&str> {
    format::prefix_of(raw)
}

/// The username a raw key logs in as. Unknown prefix and wrong secret give the same
/// error, so the answer tells an attacker nothing; expiry is reported only for a key
/// whose secret matched.
pub fn verify<'d>(
    directory: &'d Directory,
    raw: &str,
    now: DateTime<Utc>,
) -> Result<&'d str, AuthError> {
    let invalid = || AuthError::InvalidToken("invalid API key".into());
    let prefix = parse_prefix(raw).ok_or_else(invalid)?;
    let record = directory.key(prefix).ok_or_else(invalid)?;
    if !format::digests_equal(&format::digest(raw), &record.sha256) {
        return Err(invalid());
    }
    if record.expires_at.is_some_and(|at| at <= now) {
        return Err(AuthError::InvalidToken("API key expired".into()));
    }
    Ok(&record.username)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_keys_have_the_documented_shape() {
        let key = mint(None).unwrap();
        let raw = key.raw.expose();
        assert_eq!(parse_prefix(raw), Some(key.entry.prefix.as_str()));
        assert_eq!(key.entry.sha256.len(), 64);
        assert_eq!(raw.len(), 4 + PREFIX_LEN + 1 + 2 * SECRET_BYTES);
        assert_eq!(mcc_catalog::apikey::hash_key(raw), key.entry.sha256);
        assert!(!format!("{key:?}").contains(raw));
        assert_ne!(mint(None).unwrap().raw, key.raw);
    }

    #[test]
    fn malformed_keys_have_no_prefix() {
        for bad in [
            "",
            "mcc_",
            "mcc_0123456789ab",
            "mcc_0123456789ab_",
            "mcc_0123_secret",
            "xyz_0123456789ab_secret",
            "mcc_0123456789zz_secret",
            "mcc_0123456789AB_secret",
        ] {
            assert_eq!(parse_prefix(bad), None, "{bad}");
        }
        assert_eq!(
            parse_prefix("mcc_0123456789ab_se_cr_et"),
            Some("0123456789ab")
        );
    }
}
