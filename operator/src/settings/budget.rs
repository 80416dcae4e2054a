//! `--namespace-tool-bytes` (`MCC_NAMESPACE_TOOL_BYTES`): how many bytes of the catalog
//! each namespace's Tools may take, parsed and validated into the policy's `tool_bytes`.
//! The rule that applies it is [`crate::assemble::tools`]', not here.

use std::collections::BTreeMap;

use super::{SettingsError, check_namespace, error, given};

pub(super) const TOOL_BYTES: (&str, &str) = ("--namespace-tool-bytes", "MCC_NAMESPACE_TOOL_BYTES");

/// `ns-a=2Mi;ns-b=500000;*=1Mi`: each namespace (or `*`, every namespace without an entry
/// of its own) once, with a size in bytes (`Ki`, `Mi`, `k`, `M` suffixes as in a
/// Kubernetes quantity). Empty/unset: no budget anywhere.
pub(super) fn tool_bytes(value: &Option<String>) -> Result<BTreeMap<String, u64>, SettingsError> {
    let Some(text) = given(value) else {
        return Ok(BTreeMap::new());
    };
    let mut out = BTreeMap::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (ns, size) = entry.split_once('=').ok_or_else(|| {
            error(
                TOOL_BYTES,
                format!("'{entry}' has no '=': expected namespace=2Mi;*=1Mi"),
            )
        })?;
        let ns = ns.trim();
        if ns != "*" {
            check_namespace(ns).map_err(|m| error(TOOL_BYTES, m))?;
        }
        let bytes = quantity(size.trim()).ok_or_else(|| {
            error(
                TOOL_BYTES,
                format!(
                    "{ns}: '{}' is not a size in bytes (e.g. 2Mi, 500Ki, 1M, 250000)",
                    size.trim()
                ),
            )
        })?;
        if out.insert(ns.to_string(), bytes).is_some() {
            return Err(error(TOOL_BYTES, format!("{ns} is listed twice")));
        }
    }
    Ok(out)
}

/// A whole, non-negative number of bytes as a Kubernetes quantity (`2Mi`, `500000`,
/// `1M`; [`crate::quantity`]).
pub fn quantity(text: &str) -> Option<u64> {
    let v = crate::quantity::parse(text)?;
    (v.fract() == 0.0 && v <= u64::MAX as f64).then_some(v as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_per_namespace_with_a_default() {
        let got = tool_bytes(&Some(" team-a = 2Mi; team-b=500000 ;*=64Ki;".into())).unwrap();
        assert_eq!(
            got,
            BTreeMap::from([
                ("team-a".to_string(), 2 * 1024 * 1024),
                ("team-b".to_string(), 500_000),
                ("*".to_string(), 65_536),
            ])
        );
        assert!(tool_bytes(&Some("  ".into())).unwrap().is_empty());
        assert_eq!(quantity("3M"), Some(3_000_000));
        assert_eq!(quantity("2k"), Some(2000));
    }

    #[test]
    fn bad_values_name_the_flag() {
        for (text, want) in [
            (
                "team-a",
                "--namespace-tool-bytes (MCC_NAMESPACE_TOOL_BYTES): 'team-a' has no '='",
            ),
            ("team-a=2MB", "team-a: '2MB' is not a size in bytes"),
            ("team-a=Mi", "team-a: 'Mi' is not a size in bytes"),
            ("team-a=-1", "'-1' is not a size"),
            ("Team_A=1", "'Team_A' is not a namespace name"),
            ("a=1;a=2", "a is listed twice"),
        ] {
            let e = tool_bytes(&Some(text.into())).unwrap_err().to_string();
            assert!(e.contains(want), "{e} (wanted {want})");
        }
    }
}
