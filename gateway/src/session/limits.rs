//! Bounds on what a session may hold: one variable's size, variables and bytes per
//! bucket, and live `new_session` handles per user.
//!
//! Sizes are measured on the text a tool actually receives: a variable's value as
//! Python's `json.dumps` writes it (non-ASCII escaped, so `é` counts 6 bytes), which is
//! also how it is stored in Redis. A bucket's size is the sum of its names and value
//! texts: the `MCC_CTX` blob is that plus 6 bytes per variable and the identity. The
//! defaults keep `MCC_CTX` (and so every `MCC_CTX_<NAME>`) under the kernel's 128 KiB
//! limit on one environment string, so a stored context cannot make a tool's `execve`
//! fail with `Argument list too long`; [`mcc_catalog::context::fit_env`] guards the rest
//! (lowered limits, large identities) at run time.

use serde_json::Value;

use super::SessionError;

/// Highest accepted `session.max_bucket_bytes`: 8 KiB under the kernel's 128 KiB per
/// environment string, left for the identity and the JSON punctuation of `MCC_CTX`.
pub const MAX_BUCKET_BYTES_CEILING: usize = 120 * 1024;

/// The enforced limits (from the `session` settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest value text of one variable, in bytes.
    pub max_value_bytes: usize,
    /// Most variables in one bucket.
    pub max_vars: usize,
    /// Largest sum of names and value texts in one bucket, in bytes.
    pub max_bucket_bytes: usize,
    /// Most live `new_session` handles one user may hold.
    pub max_handles_per_user: usize,
}

pub const DEFAULT_MAX_VALUE_BYTES: usize = 32 * 1024;
pub const DEFAULT_MAX_VARS: usize = 256;
pub const DEFAULT_MAX_BUCKET_BYTES: usize = 96 * 1024;
pub const DEFAULT_MAX_HANDLES_PER_USER: usize = 100;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
            max_vars: DEFAULT_MAX_VARS,
            max_bucket_bytes: DEFAULT_MAX_BUCKET_BYTES,
            max_handles_per_user: DEFAULT_MAX_HANDLES_PER_USER,
        }
    }
}

/// The stored (and injected) text of a value.
pub fn value_text(value: &Value) -> String {
    mcc_catalog::pyfmt::json_dumps(value)
}

/// What a variable counts towards its bucket's size.
pub fn entry_bytes(name: &str, text: &str) -> usize {
    name.len() + text.len()
}

impl Limits {
    /// Checks settings: each at least 1, the value limit within the bucket limit, the
    /// bucket limit under [`MAX_BUCKET_BYTES_CEILING`]. Errors name the key.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let positive = [
            ("max_value_bytes", self.max_value_bytes),
            ("max_vars", self.max_vars),
            ("max_bucket_bytes", self.max_bucket_bytes),
            ("max_handles_per_user", self.max_handles_per_user),
        ];
        if let Some((key, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err((key, "must be at least 1".into()));
        }
        if self.max_bucket_bytes > MAX_BUCKET_BYTES_CEILING {
            return Err((
                "max_bucket_bytes",
                format!(
                    "must be at most {MAX_BUCKET_BYTES_CEILING} (a tool receives the whole \
                     session as one environment string, which the kernel caps at 128 KiB)"
                ),
            ));
        }
        if self.max_value_bytes > self.max_bucket_bytes {
            return Err((
                "max_value_bytes",
                format!(
                    "must not exceed session.max_bucket_bytes ({})",
                    self.max_bucket_bytes
                ),
            ));
        }
        Ok(())
    }

    /// One variable's value text against `max_value_bytes`.
    pub fn check_value(&self, name: &str, text: &str) -> Result<(), SessionError> {
        if text.len() > self.max_value_bytes {
            return Err(SessionError::ValueTooLarge {
                name: name.to_string(),
                size: text.len(),
                limit: self.max_value_bytes,
            });
        }
        Ok(())
    }

    /// A bucket's would-be shape against `max_vars` and `max_bucket_bytes`.
    pub fn check_bucket(&self, vars: usize, bytes: usize) -> Result<(), SessionError> {
        if vars > self.max_vars {
            return Err(SessionError::TooManyVars {
                count: vars,
                limit: self.max_vars,
            });
        }
        if bytes > self.max_bucket_bytes {
            return Err(SessionError::BucketTooLarge {
                size: bytes,
                limit: self.max_bucket_bytes,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_fit_one_environment_string() {
        let d = Limits::default();
        assert_eq!(d.validate(), Ok(()));
        // MCC_CTX = bucket + 6 bytes of punctuation per variable + braces, under 128 KiB
        // with room for an identity.
        let blob = d.max_bucket_bytes + 6 * d.max_vars + 2 + "MCC_CTX=".len();
        assert!(blob + 16 * 1024 < 128 * 1024, "{blob}");
    }

    #[test]
    fn sizes_are_the_injected_text() {
        assert_eq!(value_text(&json!("é")), "\"\\u00e9\"");
        assert_eq!(entry_bytes("ab", &value_text(&json!([1, 2]))), 2 + 6);
    }

    #[test]
    fn bad_limits_name_the_key() {
        let zero = Limits {
            max_vars: 0,
            ..Limits::default()
        };
        assert_eq!(zero.validate().unwrap_err().0, "max_vars");
        let huge = Limits {
            max_bucket_bytes: 1 << 20,
            ..Limits::default()
        };
        assert_eq!(huge.validate().unwrap_err().0, "max_bucket_bytes");
        let inverted = Limits {
            max_value_bytes: 50_000,
            max_bucket_bytes: 40_000,
            ..Limits::default()
        };
        assert_eq!(inverted.validate().unwrap_err().0, "max_value_bytes");
    }

    #[test]
    fn refusals_name_the_setting() {
        let l = Limits::default();
        let e = l.check_value("x", &"a".repeat(40_000)).unwrap_err();
        assert!(e.to_string().contains("session.max_value_bytes"), "{e}");
        let e = l.check_bucket(300, 10).unwrap_err();
        assert!(e.to_string().contains("session.max_vars"), "{e}");
        let e = l.check_bucket(3, 200_000).unwrap_err();
        assert!(e.to_string().contains("session.max_bucket_bytes"), "{e}");
        assert!(l.check_bucket(256, 96 * 1024).is_ok());
    }
}
