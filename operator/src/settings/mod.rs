//! The operator's tenancy settings (flags with env vars), parsed and validated once at
//! startup into a [`Tenancy`], then resolved into the [`Policy`] the operator applies. A
//! bad value stops startup with a message naming the flag and its variable; nothing here
//! is read again later.
//!
//! | flag | env | value |
//! | --- | --- | --- |
//! | `--trusted-namespaces` | `MCC_TRUSTED_NAMESPACES` | comma list; default: the operator's namespace |
//! | `--watch-namespaces` | `MCC_WATCH_NAMESPACES` | comma list; empty: all namespaces |
//! | `--watch-namespace-selector` | `MCC_WATCH_NAMESPACE_SELECTOR` | label selector of namespaces |
//! | `--local-runtime-namespaces` | `MCC_LOCAL_RUNTIME_NAMESPACES` | comma list; default: the trusted namespaces |
//! | `--namespace-groups` | `MCC_NAMESPACE_GROUPS` | `ns-a=g1,g2;ns-b=*`; unset: any namespace, any group |
//! | `--pod-namespaces` | `MCC_POD_NAMESPACES` | `*`, or a comma list: where the gateway may create Pods; unset: the pod runtime is off |
//! | `--pod-policy` | `MCC_POD_POLICY` | JSON: namespace (or `*`) → what its pod Tools may ask for ([`pods`]) |
//! | `--namespace-tool-bytes` | `MCC_NAMESPACE_TOOL_BYTES` | `ns-a=2Mi;*=1Mi`: catalog bytes each namespace's Tools may take ([`budget`]); unset: no budget |
//! | `--upstream-namespaces` | `MCC_UPSTREAM_NAMESPACES` | `*`, or a comma list: where `MCPServer`s may be declared ([`upstreams`]); unset: nowhere |
//! | `--upstream-allowed-urls` | `MCC_UPSTREAM_ALLOWED_URLS` | comma list of URL prefixes and hosts (`*.example.com`): the upstreams' egress allow-list; unset: none |
//! | `--upstream-token-audiences` | `MCC_UPSTREAM_TOKEN_AUDIENCES` | comma list: audiences of projected ServiceAccount tokens MCPServers may ask for ([`upstreams`]); never the API server's or `--gateway-token-audience`; unset: none |
//! | `--gateway-token-audience` | `MCC_GATEWAY_TOKEN_AUDIENCE` | the audience the gateway accepts (`MCC_TOKEN_AUDIENCE`), refused as an upstream token audience |
//! | `--upstream-identity-namespaces` | `MCC_UPSTREAM_IDENTITY_NAMESPACES` | comma list: namespaces besides the trusted ones whose MCPServers may send the caller's identity (`sessionContext.identity`); unset: none |
//! | `--session-all-namespaces` | `MCC_SESSION_ALL_NAMESPACES` | comma list: namespaces outside the trusted ones whose Tools may ask for every session variable (`sessionKeys: ["*"]`); unset: none |
//! | `--approval-namespaces` | `MCC_APPROVAL_NAMESPACES` | comma list: namespaces whose tools (Tools and MCPServers' tools) all need a person's approval per call; unset: none |
//!
//! An empty value counts as unset.

use std::collections::{BTreeMap, BTreeSet};

use kube::core::{Expression, Selector};

use crate::policy::{Groups, PodAllowance, PodScope, Policy};

mod budget;
mod pods;
mod upstreams;

pub use budget::quantity;

/// The tenancy flags of `mcc-operator run` (flattened into its arguments).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TenancyArgs {
    /// Namespaces whose UserGrants count, comma-separated (default: the operator's).
    #[arg(long, env = "MCC_TRUSTED_NAMESPACES")]
    pub trusted_namespaces: Option<String>,
    /// The namespaces this operator reconciles, comma-separated (default: all).
    #[arg(long, env = "MCC_WATCH_NAMESPACES")]
    pub watch_namespaces: Option<String>,
    /// Reconcile only namespaces matching this label selector (instead of a list).
    #[arg(long, env = "MCC_WATCH_NAMESPACE_SELECTOR")]
    pub watch_namespace_selector: Option<String>,
    /// Namespaces whose `runtime: local` Tools may run in the gateway's shared executor,
    /// comma-separated (default: the trusted namespaces).
    #[arg(long, env = "MCC_LOCAL_RUNTIME_NAMESPACES")]
    pub local_runtime_namespaces: Option<String>,
    /// The groups each namespace may publish Tools under: `ns-a=g1,g2;ns-b=*`
    /// (default: any namespace, any group).
    #[arg(long, env = "MCC_NAMESPACE_GROUPS")]
    pub namespace_groups: Option<String>,
    /// The namespaces where the gateway may create Pods for `runtime: pod` Tools (its RBAC
    /// scope): `*` for every namespace, or a comma list (default: none, the pod runtime
    /// is off).
    #[arg(long, env = "MCC_POD_NAMESPACES")]
    pub pod_namespaces: Option<String>,
    /// What pod Tools may ask for beyond the defaults, per namespace, as JSON:
    /// `{"team-a": {"images": ["registry.example.com/team-a/"], "serviceAccounts":
    /// ["runner"], "nodeSelector": {"pool": ["tools"]}, "tolerations": ["dedicated"],
    /// "automountServiceAccountToken": false}}`; `"*"`: every namespace without its own
    /// entry.
    #[arg(long, env = "MCC_POD_POLICY")]
    pub pod_policy: Option<String>,
    /// The catalog bytes each namespace's Tools may take together: `ns-a=2Mi;*=1Mi`
    /// (`*`: every namespace without its own entry; default: no budget). Over it, the
    /// namespace's newest Tools are left out (`NamespaceBudgetExceeded`).
    #[arg(long, env = "MCC_NAMESPACE_TOOL_BYTES")]
    pub namespace_tool_bytes: Option<String>,
    /// Namespaces outside the trusted ones whose Tools may ask for every session
    /// variable of their callers (`sessionKeys: ["*"]`), comma-separated (default: none;
    /// such Tools get only the variables they list).
    #[arg(long, env = "MCC_SESSION_ALL_NAMESPACES")]
    pub session_all_namespaces: Option<String>,
    /// Namespaces whose every tool (Tools and MCPServers' tools) needs a person's
    /// approval before each call, comma-separated (default: none).
    #[arg(long, env = "MCC_APPROVAL_NAMESPACES")]
    pub approval_namespaces: Option<String>,
    /// `*`, or namespaces where MCPServers may be declared, comma-separated (unset: none).
    #[arg(long, env = "MCC_UPSTREAM_NAMESPACES")]
    pub upstream_namespaces: Option<String>,
    /// The upstream egress allow-list: URL prefixes (`https://api.example.com/mcp`) and
    /// hosts (`mcp.internal`, `*.example.com`), comma-separated (unset: none).
    #[arg(long, env = "MCC_UPSTREAM_ALLOWED_URLS")]
    pub upstream_allowed_urls: Option<String>,
    /// Audiences of projected ServiceAccount tokens MCPServers may ask for,
    /// comma-separated (unset: none).
    #[arg(long, env = "MCC_UPSTREAM_TOKEN_AUDIENCES")]
    pub upstream_token_audiences: Option<String>,
    /// Namespaces besides the trusted ones whose MCPServers may send every caller's
    /// identity to their upstream (`sessionContext.identity`), comma-separated (unset:
    /// none).
    #[arg(long, env = "MCC_UPSTREAM_IDENTITY_NAMESPACES")]
    pub upstream_identity_namespaces: Option<String>,
    /// The audience the gateway accepts tokens for: never an upstream token audience.
    #[arg(long, env = "MCC_GATEWAY_TOKEN_AUDIENCE")]
    pub gateway_token_audience: Option<String>,
}

/// A setting that cannot be used, naming its flag and variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag} ({env}): {message}")]
pub struct SettingsError {
    pub flag: &'static str,
    pub env: &'static str,
    pub message: String,
}

const TRUSTED: (&str, &str) = ("--trusted-namespaces", "MCC_TRUSTED_NAMESPACES");
const WATCH: (&str, &str) = ("--watch-namespaces", "MCC_WATCH_NAMESPACES");
const SELECTOR: (&str, &str) = ("--watch-namespace-selector", "MCC_WATCH_NAMESPACE_SELECTOR");
const LOCAL: (&str, &str) = ("--local-runtime-namespaces", "MCC_LOCAL_RUNTIME_NAMESPACES");
const GROUPS: (&str, &str) = ("--namespace-groups", "MCC_NAMESPACE_GROUPS");
const SESSION_ALL: (&str, &str) = ("--session-all-namespaces", "MCC_SESSION_ALL_NAMESPACES");
const APPROVAL: (&str, &str) = ("--approval-namespaces", "MCC_APPROVAL_NAMESPACES");

fn error(setting: (&'static str, &'static str), message: impl Into<String>) -> SettingsError {
    SettingsError {
        flag: setting.0,
        env: setting.1,
        message: message.into(),
    }
}

/// Which namespaces the operator reconciles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchScope {
    All,
    Namespaces(BTreeSet<String>),
    /// Namespaces whose labels match (the operator watches Namespaces to know which).
    Selector(Selector),
}

/// The validated settings; defaults that depend on the operator's namespace are filled in
/// by [`Tenancy::resolve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenancy {
    pub trusted: Option<BTreeSet<String>>,
    pub watch: WatchScope,
    pub local_runtime: Option<BTreeSet<String>>,
    pub groups: Option<BTreeMap<String, Groups>>,
    pub pod_namespaces: PodScope,
    pub pod_policy: BTreeMap<String, PodAllowance>,
    pub tool_bytes: BTreeMap<String, u64>,
    pub session_all: BTreeSet<String>,
    pub upstream_namespaces: PodScope,
    pub upstream_urls: Vec<String>,
    pub upstream_token_audiences: Vec<String>,
    pub upstream_identity: BTreeSet<String>,
    pub approval_namespaces: BTreeSet<String>,
}

impl TenancyArgs {
    /// Parses and validates every setting.
    pub fn parse(&self) -> Result<Tenancy, SettingsError> {
        let trusted = namespace_list(&self.trusted_namespaces, TRUSTED)?;
        let watch_list = namespace_list(&self.watch_namespaces, WATCH)?;
        let selector = given(&self.watch_namespace_selector)
            .map(|s| parse_selector(s).map_err(|m| error(SELECTOR, m)))
            .transpose()?;
        let watch = match (watch_list, selector) {
            (Some(_), Some(_)) => {
                return Err(error(
                    SELECTOR,
                    "set either --watch-namespaces or --watch-namespace-selector, not both",
                ));
            }
            (Some(list), None) => WatchScope::Namespaces(list),
            (None, Some(sel)) => WatchScope::Selector(sel),
            (None, None) => WatchScope::All,
        };
        Ok(Tenancy {
            trusted,
            watch,
            local_runtime: namespace_list(&self.local_runtime_namespaces, LOCAL)?,
            groups: given(&self.namespace_groups)
                .map(parse_namespace_groups)
                .transpose()?,
            pod_namespaces: pods::pod_scope(&self.pod_namespaces)?,
            pod_policy: pods::pod_policy(&self.pod_policy)?,
            tool_bytes: budget::tool_bytes(&self.namespace_tool_bytes)?,
            session_all: namespace_list(&self.session_all_namespaces, SESSION_ALL)?
                .unwrap_or_default(),
            upstream_namespaces: upstreams::namespaces(&self.upstream_namespaces)?,
            upstream_urls: upstreams::allowed_urls(&self.upstream_allowed_urls)?,
            upstream_token_audiences: upstreams::token_audiences(
                &self.upstream_token_audiences,
                &self.gateway_token_audience,
                &upstreams::api_server_audiences(),
            )?,
            upstream_identity: upstreams::identity_namespaces(&self.upstream_identity_namespaces)?,
            approval_namespaces: namespace_list(&self.approval_namespaces, APPROVAL)?
                .unwrap_or_default(),
        })
    }
}

impl Tenancy {
    /// The policy of an operator running in `operator_namespace`. With a namespace list as
    /// the watch scope, every trusted namespace must be in it (its grants would never be
    /// seen otherwise). With a selector, `watched` is left to the caller, which fills it
    /// from the Namespaces it sees.
    pub fn resolve(&self, operator_namespace: &str) -> Result<Policy, SettingsError> {
        let trusted = self
            .trusted
            .clone()
            .unwrap_or_else(|| BTreeSet::from([operator_namespace.to_string()]));
        let watched = match &self.watch {
            WatchScope::Namespaces(list) => {
                if let Some(missing) = trusted.iter().find(|t| !list.contains(*t)) {
                    return Err(error(
                        WATCH,
                        format!(
                            "the trusted namespace {missing} is not watched, so its UserGrants would never be seen; add it to the list"
                        ),
                    ));
                }
                Some(list.clone())
            }
            WatchScope::All | WatchScope::Selector(_) => None,
        };
        Ok(Policy {
            watched,
            local_runtime: self
                .local_runtime
                .clone()
                .unwrap_or_else(|| trusted.clone()),
            trusted,
            groups: self.groups.clone(),
            pod_namespaces: self.pod_namespaces.clone(),
            pod_policy: self.pod_policy.clone(),
            tool_bytes: self.tool_bytes.clone(),
            session_all: self.session_all.clone(),
            upstream_namespaces: self.upstream_namespaces.clone(),
            upstream_urls: self.upstream_urls.clone(),
            upstream_token_audiences: self.upstream_token_audiences.clone(),
            upstream_identity: self.upstream_identity.clone(),
            approval_namespaces: self.approval_namespaces.clone(),
        })
    }

    /// The namespace label selector, when that is the watch scope.
    pub fn selector(&self) -> Option<&Selector> {
        match &self.watch {
            WatchScope::Selector(s) => Some(s),
            _ => None,
        }
    }
}

fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// A Kubernetes namespace name: a DNS-1123 label.
fn check_namespace(name: &str) -> Result<(), String> {
    if mcc_catalog::limits::is_dns_label(name) {
        Ok(())
    } else {
        Err(format!(
            "'{name}' is not a namespace name (lowercase letters, digits and '-', at most 63)"
        ))
    }
}

fn namespace_list(
    value: &Option<String>,
    setting: (&'static str, &'static str),
) -> Result<Option<BTreeSet<String>>, SettingsError> {
    let Some(text) = given(value) else {
        return Ok(None);
    };
    let mut out = BTreeSet::new();
    for part in text.split(',').map(str::trim) {
        check_namespace(part).map_err(|m| error(setting, m))?;
        out.insert(part.to_string());
    }
    Ok(Some(out))
}

/// `ns-a=g1,g2;ns-b=*`: each namespace once, each with at least one group.
fn parse_namespace_groups(text: &str) -> Result<BTreeMap<String, Groups>, SettingsError> {
    let mut out = BTreeMap::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (ns, groups) = entry.split_once('=').ok_or_else(|| {
            error(
                GROUPS,
                format!("'{entry}' has no '=': expected namespace=group1,group2;namespace2=*"),
            )
        })?;
        let ns = ns.trim();
        check_namespace(ns).map_err(|m| error(GROUPS, m))?;
        let names: Vec<&str> = groups
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .collect();
        if names.is_empty() {
            return Err(error(
                GROUPS,
                format!(
                    "{ns} lists no group (leave it out instead: a namespace not listed may publish no Tools)"
                ),
            ));
        }
        let allowed = if names.contains(&"*") {
            Groups::Any
        } else {
            for g in &names {
                if g.len() > 63 || g.chars().any(|c| c.is_whitespace() || c == '.') {
                    return Err(error(
                        GROUPS,
                        format!(
                            "{ns}: '{g}' is not a group name (no dots or whitespace, at most 63)"
                        ),
                    ));
                }
            }
            Groups::Only(names.iter().map(|g| g.to_string()).collect())
        };
        if out.insert(ns.to_string(), allowed).is_some() {
            return Err(error(GROUPS, format!("{ns} is listed twice")));
        }
    }
    Ok(out)
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters (alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric).
fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let bad = || Err(format!("'{key}' is not a label key"));
    if let Some(p) = prefix
        && (p.is_empty()
            || p.len() > 253
            || !p
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'))
    {
        return bad();
    }
    if name.is_empty() || !label_value_ok(name) {
        return bad();
    }
    Ok(())
}

fn label_value_ok(v: &str) -> bool {
    let edge = |c: Option<char>| c.is_none_or(|c| c.is_ascii_alphanumeric());
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && edge(v.chars().next())
        && edge(v.chars().last())
}

fn label_value(v: &str) -> Result<String, String> {
    let v = v.trim();
    if label_value_ok(v) {
        Ok(v.to_string())
    } else {
        Err(format!("'{v}' is not a label value"))
    }
}

/// Splits at commas outside parentheses.
fn requirements(text: &str) -> Result<Vec<&str>, String> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err("unbalanced parentheses".into());
        }
    }
    if depth != 0 {
        return Err("unbalanced parentheses".into());
    }
    out.push(text[start..].trim());
    Ok(out)
}

/// A Kubernetes label selector (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`,
/// `!a`, joined by commas).
pub fn parse_selector(text: &str) -> Result<Selector, String> {
    let mut exprs = Vec::new();
    for req in requirements(text)? {
        if req.is_empty() {
            return Err(format!("'{text}' has an empty requirement"));
        }
        let expr = if let Some(key) = req.strip_prefix('!') {
            check_label_key(key.trim())?;
            Expression::DoesNotExist(key.trim().to_string())
        } else if let Some((key, rest)) = req
            .split_once(" in ")
            .map(|(k, r)| (k, r, true))
            .or_else(|| req.split_once(" notin ").map(|(k, r)| (k, r, false)))
            .map(|(k, r, is_in)| (k.trim(), (r.trim(), is_in)))
        {
            let (set, is_in) = rest;
            let inner = set
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| format!("'{req}': the values must be in parentheses"))?;
            check_label_key(key)?;
            let values = inner
                .split(',')
                .map(label_value)
                .collect::<Result<BTreeSet<_>, _>>()?;
            if is_in {
                Expression::In(key.to_string(), values)
            } else {
                Expression::NotIn(key.to_string(), values)
            }
        } else if let Some((key, value)) = req.split_once("!=") {
            check_label_key(key.trim())?;
            Expression::NotEqual(key.trim().to_string(), label_value(value)?)
        } else if let Some((key, value)) = req.split_once("==").or_else(|| req.split_once('=')) {
            check_label_key(key.trim())?;
            Expression::Equal(key.trim().to_string(), label_value(value)?)
        } else {
            check_label_key(req)?;
            Expression::Exists(req.to_string())
        };
        exprs.push(expr);
    }
    Ok(exprs.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> TenancyArgs {
        TenancyArgs::default()
    }

    #[test]
    fn defaults_trust_the_operator_namespace_only() {
        let policy = args().parse().unwrap().resolve("mcc-system").unwrap();
        assert_eq!(policy, Policy::single_tenant(["mcc-system"]));
        // Empty values count as unset.
        let a = TenancyArgs {
            trusted_namespaces: Some(" ".into()),
            watch_namespaces: Some(String::new()),
            ..args()
        };
        assert_eq!(
            a.parse().unwrap().resolve("ops").unwrap(),
            Policy::single_tenant(["ops"])
        );
    }

    #[test]
    fn every_setting_is_parsed() {
        let a = TenancyArgs {
            trusted_namespaces: Some("mcc-system, platform".into()),
            watch_namespaces: Some("mcc-system,platform,team-a".into()),
            local_runtime_namespaces: Some("mcc-system".into()),
            namespace_groups: Some("mcc-system=*; team-a = team-a, public ;".into()),
            ..args()
        };
        let p = a.parse().unwrap().resolve("ignored").unwrap();
        assert_eq!(
            p.trusted,
            BTreeSet::from(["mcc-system".into(), "platform".into()])
        );
        assert!(p.watches("team-a") && !p.watches("team-b"));
        assert!(p.may_run_locally("mcc-system") && !p.may_run_locally("platform"));
        let groups = p.groups.unwrap();
        assert_eq!(groups["mcc-system"], Groups::Any);
        assert_eq!(
            groups["team-a"],
            Groups::Only(BTreeSet::from(["team-a".into(), "public".into()]))
        );
    }

    #[test]
    fn bad_values_name_the_flag() {
        let cases = [
            (
                TenancyArgs {
                    trusted_namespaces: Some("Team_A".into()),
                    ..args()
                },
                "--trusted-namespaces (MCC_TRUSTED_NAMESPACES): 'Team_A' is not a namespace name",
            ),
            (
                TenancyArgs {
                    namespace_groups: Some("team-a".into()),
                    ..args()
                },
                "--namespace-groups (MCC_NAMESPACE_GROUPS): 'team-a' has no '='",
            ),
            (
                TenancyArgs {
                    namespace_groups: Some("a=x;a=y".into()),
                    ..args()
                },
                "a is listed twice",
            ),
            (
                TenancyArgs {
                    namespace_groups: Some("a=ops.prod".into()),
                    ..args()
                },
                "'ops.prod' is not a group name",
            ),
            (
                TenancyArgs {
                    namespace_groups: Some("a=".into()),
                    ..args()
                },
                "a lists no group",
            ),
            (
                TenancyArgs {
                    watch_namespace_selector: Some("team in (a".into()),
                    ..args()
                },
                "--watch-namespace-selector (MCC_WATCH_NAMESPACE_SELECTOR): unbalanced",
            ),
            (
                TenancyArgs {
                    watch_namespaces: Some("a".into()),
                    watch_namespace_selector: Some("x=y".into()),
                    ..args()
                },
                "not both",
            ),
            (
                TenancyArgs {
                    local_runtime_namespaces: Some("a,,b".into()),
                    ..args()
                },
                "--local-runtime-namespaces (MCC_LOCAL_RUNTIME_NAMESPACES): '' is not",
            ),
        ];
        for (a, want) in cases {
            let e = a.parse().unwrap_err().to_string();
            assert!(e.contains(want), "{e} (wanted {want})");
        }
        // A trusted namespace outside the watch list is refused once it is known.
        let t = TenancyArgs {
            watch_namespaces: Some("team-a".into()),
            ..args()
        }
        .parse()
        .unwrap();
        let e = t.resolve("mcc-system").unwrap_err().to_string();
        assert!(
            e.starts_with("--watch-namespaces (MCC_WATCH_NAMESPACES): the trusted namespace mcc-system is not watched"),
            "{e}"
        );
    }

    #[test]
    fn selectors_parse_into_their_api_form() {
        for (text, api) in [
            ("mcc.dev/tenant=a", "mcc.dev/tenant=a"),
            ("env==prod, !legacy", "env=prod,!legacy"),
            (
                "tier in (a, b),team notin (x)",
                "tier in (a,b),team notin (x)",
            ),
            ("mcc-managed", "mcc-managed"),
            ("a!=b", "a!=b"),
        ] {
            assert_eq!(parse_selector(text).unwrap().to_string(), api, "{text}");
        }
        for bad in ["a=b c", "=x", "a in b", "a,", "a/b/=c", "bad key=1"] {
            assert!(parse_selector(bad).is_err(), "{bad}");
        }
        let t = TenancyArgs {
            watch_namespace_selector: Some("mcc.dev/tenant".into()),
            ..args()
        }
        .parse()
        .unwrap();
        assert!(t.selector().is_some());
        assert_eq!(t.resolve("mcc-system").unwrap().watched, None);
    }
}
