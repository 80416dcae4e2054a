//! The pod runtime's two settings: where the gateway may create Pods
//! (`--pod-namespaces`) and what each namespace's pod Tools may ask for (`--pod-policy`),
//! parsed and validated into [`PodScope`] and [`PodAllowance`]s. The rule that applies
//! them is [`crate::policy::Policy::refused_pod_spec`], not here.

use std::collections::BTreeMap;

use super::{SettingsError, check_label_key, check_namespace, error, given, label_value_ok};
use crate::policy::{PodAllowance, PodScope};

pub(super) const PODS: (&str, &str) = ("--pod-namespaces", "MCC_POD_NAMESPACES");
pub(super) const POD_POLICY: (&str, &str) = ("--pod-policy", "MCC_POD_POLICY");

/// `*`, a comma list of namespaces, or empty/unset (the pod runtime is off).
pub(super) fn pod_scope(value: &Option<String>) -> Result<PodScope, SettingsError> {
    namespace_scope(value, PODS)
}

/// `*`, or a comma list of namespaces; unset: none ([`PodScope::Off`]). Also the form of
/// `--upstream-namespaces`.
pub(super) fn namespace_scope(
    value: &Option<String>,
    setting: (&'static str, &'static str),
) -> Result<PodScope, SettingsError> {
    let Some(text) = given(value) else {
        return Ok(PodScope::Off);
    };
    if text == "*" {
        return Ok(PodScope::All);
    }
    let mut out = std::collections::BTreeSet::new();
    for part in text.split(',').map(str::trim) {
        if part == "*" {
            return Err(error(
                setting,
                "'*' (every namespace) stands alone, not in a list",
            ));
        }
        check_namespace(part).map_err(|m| error(setting, m))?;
        out.insert(part.to_string());
    }
    Ok(PodScope::Only(out))
}

/// `{"<namespace>" or "*": {"images": [..], "serviceAccounts": [..], "nodeSelector":
/// {"key": [values]}, "tolerations": [keys], "automountServiceAccountToken": bool}}`;
/// empty/unset: no entry (only the defaults anywhere).
pub(super) fn pod_policy(
    value: &Option<String>,
) -> Result<BTreeMap<String, PodAllowance>, SettingsError> {
    let Some(text) = given(value) else {
        return Ok(BTreeMap::new());
    };
    let shape = r#"expected {"<namespace>" or "*": {"images": [...], "serviceAccounts": [...], "nodeSelector": {"key": ["value"]}, "tolerations": ["key"], "automountServiceAccountToken": false, "resources": {"cpu": "2", "memory": "4Gi"}}}"#;
    let entries: BTreeMap<String, serde_json::Value> = serde_json::from_str(text)
        .map_err(|e| error(POD_POLICY, format!("not a JSON object ({e}); {shape}")))?;
    let mut out = BTreeMap::new();
    for (ns, raw) in entries {
        if ns != "*" {
            check_namespace(&ns).map_err(|m| error(POD_POLICY, m))?;
        }
        let allowance: PodAllowance =
            serde_json::from_value(raw).map_err(|e| error(POD_POLICY, format!("{ns}: {e}")))?;
        check_allowance(&allowance).map_err(|m| error(POD_POLICY, format!("{ns}.{m}")))?;
        out.insert(ns, allowance);
    }
    Ok(out)
}

/// Each value of one entry is usable; the message starts with the field's path.
fn check_allowance(a: &PodAllowance) -> Result<(), String> {
    for (name, max) in &a.resources {
        if crate::quantity::parse(max).is_none() {
            return Err(format!(
                "resources.{name}: '{max}' is not a quantity (e.g. \"2\", \"500m\", \"4Gi\")"
            ));
        }
    }
    for (i, image) in a.images.iter().enumerate() {
        if image.is_empty() || image.chars().any(char::is_whitespace) {
            return Err(format!(
                "images[{i}]: '{image}' is not an image prefix (write \"*\" to allow any image)"
            ));
        }
    }
    for sa in &a.service_accounts {
        if sa != "*" && !dns_subdomain(sa) {
            return Err(format!(
                "serviceAccounts: '{sa}' is not a ServiceAccount name (lowercase letters, digits, '-' and '.', at most 253)"
            ));
        }
    }
    for (key, values) in &a.node_selector {
        check_label_key(key).map_err(|m| format!("nodeSelector: {m}"))?;
        if values.is_empty() {
            return Err(format!(
                "nodeSelector.{key}: lists no value (list values, or \"*\" for any)"
            ));
        }
        if let Some(v) = values.iter().find(|v| *v != "*" && !label_value_ok(v)) {
            return Err(format!("nodeSelector.{key}: '{v}' is not a label value"));
        }
    }
    for key in &a.tolerations {
        if !key.is_empty() {
            check_label_key(key).map_err(|m| {
                format!("tolerations: {m} (a taint key; \"\" allows tolerating every taint)")
            })?;
        }
    }
    Ok(())
}

fn dns_subdomain(name: &str) -> bool {
    let edge = |c: Option<u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && edge(name.bytes().next())
        && edge(name.bytes().last())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::settings::TenancyArgs;

    fn args(pods: Option<&str>, policy: Option<&str>) -> TenancyArgs {
        TenancyArgs {
            pod_namespaces: pods.map(str::to_string),
            pod_policy: policy.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn the_pod_scope_is_star_a_list_or_off() {
        let scope = |v: Option<&str>| {
            args(v, None)
                .parse()
                .unwrap()
                .resolve("mcc-system")
                .unwrap()
                .pod_namespaces
        };
        assert_eq!(scope(None), PodScope::Off);
        assert_eq!(scope(Some(" ")), PodScope::Off, "empty counts as unset");
        assert_eq!(scope(Some("*")), PodScope::All);
        assert_eq!(
            scope(Some("team-a, team-b")),
            PodScope::Only(BTreeSet::from(["team-a".into(), "team-b".into()]))
        );
    }

    #[test]
    fn the_pod_policy_is_parsed() {
        let json = r#"{
            "*": {"images": ["registry.example.com/shared/"]},
            "team-a": {"images": ["registry.example.com/team-a/"], "serviceAccounts": ["runner"],
                       "nodeSelector": {"pool": ["tools"], "topology.kubernetes.io/zone": ["*"]},
                       "tolerations": ["dedicated", ""], "automountServiceAccountToken": true},
            "team-b": {}
        }"#;
        let p = args(Some("*"), Some(json))
            .parse()
            .unwrap()
            .resolve("mcc-system")
            .unwrap();
        assert_eq!(p.pod_policy.len(), 3);
        let a = &p.pod_policy["team-a"];
        assert_eq!(a.images, ["registry.example.com/team-a/"]);
        assert!(a.service_accounts.contains("runner"));
        assert!(a.node_selector["topology.kubernetes.io/zone"].contains("*"));
        assert!(a.tolerations.contains("") && a.automount_service_account_token);
        assert_eq!(p.pod_policy["team-b"], PodAllowance::default());
        assert!(
            args(None, Some("")).parse().unwrap().pod_policy.is_empty(),
            "empty counts as unset"
        );
    }

    #[test]
    fn bad_pod_settings_name_the_flag() {
        let flag = "--pod-policy (MCC_POD_POLICY): ";
        for (a, want) in [
            (
                args(Some("*,team-a"), None),
                "--pod-namespaces (MCC_POD_NAMESPACES): '*' (every namespace) stands alone"
                    .to_string(),
            ),
            (
                args(Some("Team_A"), None),
                "--pod-namespaces (MCC_POD_NAMESPACES): 'Team_A' is not a namespace name".into(),
            ),
            (
                args(None, Some("team-a=registry/x")),
                format!("{flag}not a JSON object (expected ident"),
            ),
            (
                args(None, Some(r#"["team-a"]"#)),
                format!("{flag}not a JSON object (invalid type: sequence"),
            ),
            (
                args(None, Some(r#"{"Team A": {}}"#)),
                format!("{flag}'Team A' is not a namespace name"),
            ),
            (
                args(None, Some(r#"{"team-a": {"image": ["x/"]}}"#)),
                format!("{flag}team-a: unknown field `image`"),
            ),
            (
                args(None, Some(r#"{"team-a": {"images": "x/"}}"#)),
                format!("{flag}team-a: invalid type: string"),
            ),
            (
                args(None, Some(r#"{"team-a": {"images": [""]}}"#)),
                format!("{flag}team-a.images[0]: '' is not an image prefix"),
            ),
            (
                args(None, Some(r#"{"*": {"serviceAccounts": ["Admin"]}}"#)),
                format!("{flag}*.serviceAccounts: 'Admin' is not a ServiceAccount name"),
            ),
            (
                args(None, Some(r#"{"team-a": {"nodeSelector": {"pool": []}}}"#)),
                format!("{flag}team-a.nodeSelector.pool: lists no value"),
            ),
            (
                args(
                    None,
                    Some(r#"{"team-a": {"nodeSelector": {"pool": ["a b"]}}}"#),
                ),
                format!("{flag}team-a.nodeSelector.pool: 'a b' is not a label value"),
            ),
            (
                args(
                    None,
                    Some(r#"{"team-a": {"nodeSelector": {"bad key": ["a"]}}}"#),
                ),
                format!("{flag}team-a.nodeSelector: 'bad key' is not a label key"),
            ),
            (
                args(
                    None,
                    Some(r#"{"team-a": {"tolerations": ["no/such/key"]}}"#),
                ),
                format!("{flag}team-a.tolerations: 'no/such/key' is not a label key"),
            ),
            (
                args(
                    None,
                    Some(r#"{"team-a": {"automountServiceAccountToken": "yes"}}"#),
                ),
                format!("{flag}team-a: invalid type: string \"yes\", expected a boolean"),
            ),
        ] {
            let e = a.parse().unwrap_err().to_string();
            assert!(e.starts_with(&want), "{e}\n(wanted {want})");
        }
    }
}
