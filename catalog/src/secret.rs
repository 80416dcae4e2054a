//! [`Secret`]: the one type for a credential held in settings or in memory (a token, a
//! password, an API key). It prints `<redacted>` wherever it is formatted (`{:?}` in a
//! log line or a panic message, `{}` by mistake), reads from a settings file as the plain
//! string it is, and gives its value only through [`Secret::expose`], so every use of the
//! value is written out and can be found with grep.
//!
//! Not here: values that are partly secret (a Redis URL with a password keeps its host
//! visible: `mcc_gateway::redis_conn::redact_url`), and maps of secret values (tool env,
//! upstream headers), whose `Debug` shows the names only.

use serde::Deserialize;

/// What a [`Secret`] prints instead of its value.
pub const REDACTED: &str = "<redacted>";

/// A secret string: `Debug` and `Display` print [`REDACTED`]; the value is read with
/// [`Secret::expose`]. Deserializes from a plain string (`token: abc` in YAML).
///
/// ```
/// use mcc_catalog::secret::Secret;
/// let token = Secret::from("s3cr3t");
/// assert_eq!(format!("{token:?} {token}"), "<redacted> <redacted>");
/// assert_eq!(token.expose(), "s3cr3t");
/// ```
#[derive(Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// The value itself: for the one place that sends or checks it, never for a log.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret(value.to_owned())
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Settings {
        token: Secret,
        other: Option<Secret>,
    }

    #[test]
    fn formatting_never_shows_the_value() {
        let s = Secret::from("hunter2-very-secret");
        for shown in [
            format!("{s:?}"),
            format!("{s:#?}"),
            format!("{s}"),
            format!("{:?}", Some(&s)),
            format!("{:?}", vec![s.clone()]),
        ] {
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.contains(REDACTED), "{shown}");
        }
        assert_eq!(s.expose(), "hunter2-very-secret");
    }

    #[test]
    fn reads_from_settings_as_a_plain_string() {
        let yaml = "token: hunter2\nother: null\n";
        let parsed: Settings = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(parsed.token.expose(), "hunter2");
        assert!(parsed.other.is_none());
        let shown = format!("{parsed:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        let json: Settings = serde_json::from_str(r#"{"token":"t0k","other":"o"}"#).unwrap();
        assert_eq!(json.other.as_ref().map(Secret::expose), Some("o"));
        // A non-string is refused, as it was for the plain `String` field.
        assert!(serde_json::from_str::<Settings>(r#"{"token":5,"other":null}"#).is_err());
    }
}
