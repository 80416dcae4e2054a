//! API keys of the form `mcc_<prefix>_<secret>`: minting, parsing and verification.
//!
//! The prefix (12 lowercase hex characters) is a non-secret lookup handle; the secret
//! carries the entropy. Only the SHA-256 of the whole raw key is stored (as MCC does), and
//! it is compared in constant time. Which user a key belongs to, and whether it still
//! exists, comes from the current [`Directory`], so a reload revokes at once.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::AuthError;
use super::directory::{ApiKeyEntry, Directory};

/// Length of the hex prefix.
pub const PREFIX_LEN: usize = 12;
const PREFIX_BYTES: usize = PREFIX_LEN / 2;
const SECRET_BYTES: usize = 24;

/// A freshly minted key: `raw` is shown to its owner once; `entry` goes in the users file.
#[derive(Clone, PartialEq, Eq)]
pub struct MintedKey {
    pub raw: String,
    pub entry: ApiKeyEntry,
}

impl std::fmt::Debug for MintedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The raw key is a credential: keep it out of logs and panic messages.
        f.debug_struct("MintedKey")
            .field("raw", &"<redacted>")
            .field("entry", &self.entry)
            .finish()
    }
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
    let prefix = hex::encode(prefix);
    let raw = format!("mcc_{prefix}_{}", URL_SAFE_NO_PAD.encode(secret));
    let sha256 = hex::encode(Sha256::digest(raw.as_bytes()));
    Ok(MintedKey {
        raw,
        entry: ApiKeyEntry {
            prefix,
            sha256,
            expires_at,
        },
    })
}

/// The prefix of a well-formed raw key, or `None`. The secret may itself contain `_`.
pub fn parse_prefix(raw: &str) -> Option<&str> {
    let rest = raw.strip_prefix("mcc_")?;
    let (prefix, secret) = rest.split_once('_')?;
    let well_formed = prefix.len() == PREFIX_LEN
        && prefix.bytes().all(|b| b.is_ascii_hexdigit())
        && !secret.is_empty();
    well_formed.then_some(prefix)
}

/// Whether a presented credential looks like an API key (so it is not tried as a JWT).
pub fn looks_like_key(raw: &str) -> bool {
    raw.starts_with("mcc_")
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
    let presented: [u8; 32] = Sha256::digest(raw.as_bytes()).into();
    if !bool::from(presented.ct_eq(&record.sha256)) {
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
        assert_eq!(parse_prefix(&key.raw), Some(key.entry.prefix.as_str()));
        assert_eq!(key.entry.sha256.len(), 64);
        assert!(key.raw.len() > 4 + PREFIX_LEN + 1 + 30);
        assert!(!format!("{key:?}").contains(&key.raw));
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
        ] {
            assert_eq!(parse_prefix(bad), None, "{bad}");
        }
        assert_eq!(
            parse_prefix("mcc_0123456789ab_se_cr_et"),
            Some("0123456789ab")
        );
    }
}
