//! Status of `Tool` and `UserGrant` objects: the `Ready` condition built from a
//! [`Verdict`], and its write by server-side apply (field manager [`FIELD_MANAGER`],
//! forced). A status equal to the current one is not written.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::assemble::Verdict;
use crate::policy::{PodRefusal, UpstreamRefusal};
use crate::{Error, Result};

/// The field manager of every write the operator makes.
pub const FIELD_MANAGER: &str = "mcc-operator";

/// The reason of a UserGrant's `Ready=False` when its API key cannot be issued.
pub const API_KEY_NOT_ISSUED: &str = "ApiKeyNotIssued";

/// The reason of a Tool's `Ready=False` when its namespace's Tools are over their budget.
pub const NAMESPACE_BUDGET_EXCEEDED: &str = "NamespaceBudgetExceeded";

pub use crate::assemble::CATALOG_NOT_PUBLISHED;

/// The `Ready` condition's reason and message for a verdict.
pub fn ready_reason(verdict: &Verdict) -> (bool, &'static str, String) {
    match verdict {
        Verdict::Ready {
            introspect: false, ..
        } => (true, "Published", "in the catalog".into()),
        Verdict::Ready {
            introspect: true,
            renamed,
        } => (
            true,
            "Published",
            format!(
                "in the catalog; params or return type not declared: each gateway introspects this fn tool when it loads the catalog{}",
                if *renamed {
                    " (no name set: the gateway names it after the callable, so its key may differ from status.key)"
                } else {
                    ""
                }
            ),
        ),
        Verdict::Invalid(e) => (false, "InvalidSpec", e.to_string()),
        Verdict::Duplicate { winner } => (
            false,
            "DuplicateKey",
            format!(
                "the key is already served by Tool {winner} of this namespace (older, or same age and first by name)"
            ),
        ),
        Verdict::KeyOwnedByOtherNamespace { owner } => (
            false,
            "KeyOwnedByOtherNamespace",
            format!(
                "the key belongs to namespace {}: Tool {owner} serves it (a key stays with the namespace whose Tool serves it; choose another name or group)",
                owner.split('/').next().unwrap_or_default()
            ),
        ),
        Verdict::GroupNotAllowed { namespace, group } => (
            false,
            "GroupNotAllowed",
            match group {
                Some(g) => format!(
                    "namespace {namespace} may not publish Tools under group '{g}' (the platform team allows groups per namespace: operator setting MCC_NAMESPACE_GROUPS)"
                ),
                None => format!(
                    "the Tool has no groups, so it is open to everyone like group 'public', which namespace {namespace} may not publish under (operator setting MCC_NAMESPACE_GROUPS)"
                ),
            },
        ),
        Verdict::SessionKeysNotAllowed { namespace } => (
            false,
            "SessionKeysNotAllowed",
            format!(
                "sessionKeys: [\"*\"] asks for every session variable of the caller, which Tools of namespace {namespace} may not (operator setting MCC_SESSION_ALL_NAMESPACES; outside the trusted namespaces a Tool lists the variables it uses)"
            ),
        ),
        Verdict::LocalRuntimeNotAllowed { namespace } => (
            false,
            "LocalRuntimeNotAllowed",
            format!(
                "namespace {namespace} may not run Tools in the gateway's shared local runtime (operator setting MCC_LOCAL_RUNTIME_NAMESPACES); use runtime: pod (a Pod per execution; where the platform team allows it: MCC_POD_NAMESPACES), or ask the platform team"
            ),
        ),
        Verdict::PodRuntimeNotAllowed { namespace, off } => (
            false,
            "PodRuntimeNotAllowed",
            if *off {
                "the pod runtime is off in this deployment (operator setting MCC_POD_NAMESPACES is empty; chart value podRuntime.enabled): the gateway creates no Pods; use runtime: local where allowed, or ask the platform team".to_string()
            } else {
                format!(
                    "the gateway may not create Pods in namespace {namespace} (operator setting MCC_POD_NAMESPACES, the gateway's RBAC scope for Pods: chart value podRuntime.namespaces); ask the platform team to add the namespace"
                )
            },
        ),
        Verdict::PodSpecNotAllowed { namespace, refusal } => {
            (false, "PodSpecNotAllowed", pod_refusal(namespace, refusal))
        }
        Verdict::NamespaceBudgetExceeded {
            namespace,
            entry,
            budget,
            total,
            size,
        } => (
            false,
            NAMESPACE_BUDGET_EXCEEDED,
            format!(
                "the Tools of namespace {namespace} take {total} bytes of the catalog, over its budget of {budget} bytes (operator setting MCC_NAMESPACE_TOOL_BYTES, entry '{entry}'; chart value operator.namespaceToolBytes): its newest Tools are left out, this one ({size} bytes) among them; delete or shrink Tools of the namespace, or ask the platform team for a larger budget"
            ),
        ),
        Verdict::UpstreamNotAllowed { namespace, refusal } => (
            false,
            "UpstreamNotAllowed",
            match refusal {
                UpstreamRefusal::Namespace => format!(
                    "namespace {namespace} may not declare MCPServers (operator setting MCC_UPSTREAM_NAMESPACES; chart value upstreams.namespaces): the operator does not connect to it"
                ),
                UpstreamRefusal::Url => "spec.url is not on the platform team's egress allow-list (operator setting MCC_UPSTREAM_ALLOWED_URLS; chart value upstreams.allowed): the operator does not connect to it".to_string(),
                UpstreamRefusal::TokenAudience(audience) => format!(
                    "spec.serviceAccountToken.audience '{}' is not an approved audience (operator setting MCC_UPSTREAM_TOKEN_AUDIENCES; chart value upstreams.tokenAudiences): the operator does not connect to it",
                    audience.chars().take(253).collect::<String>()
                ),
            },
        ),
        Verdict::IdentityNotAllowed { namespace } => (
            false,
            "IdentityNotAllowed",
            format!(
                "spec.sessionContext.identity would send every caller's username and groups to this upstream, which MCPServers of namespace {namespace} may not (operator setting MCC_UPSTREAM_IDENTITY_NAMESPACES; chart value upstreams.identityNamespaces; the trusted namespaces may): remove identity, or ask the platform team"
            ),
        ),
        Verdict::NotDiscovered { error } => (
            false,
            match error {
                Some(_) => "Unreachable",
                None => "Discovering",
            },
            match error {
                Some(e) => format!("no discovery of spec.url has succeeded yet: {e}"),
                None => "the first discovery has not ended yet".to_string(),
            },
        ),
        Verdict::UntrustedNamespace { namespace } => (
            false,
            "UntrustedNamespace",
            format!(
                "namespace {namespace} is not trusted for UserGrants (operator setting MCC_TRUSTED_NAMESPACES): this grant adds no user, groups, ServiceAccount binding or API key"
            ),
        ),
        Verdict::DuplicateApiKeyPrefix { prefix, holder } => (
            false,
            "DuplicateApiKeyPrefix",
            format!(
                "served without an API key: its prefix {prefix} is already used by the key of UserGrant {holder}; delete this grant's API-key Secret to have a new key minted"
            ),
        ),
    }
}

/// What a `PodSpecNotAllowed` says: the field, the value, what is allowed instead, and
/// the setting that would allow it.
fn pod_refusal(namespace: &str, r: &PodRefusal) -> String {
    let value = match (r.field.as_str(), r.value.as_str()) {
        (f, "") if f.ends_with(".key") => "'' (no key: tolerates every taint)".to_string(),
        (_, v) => format!("'{v}'"),
    };
    let default = match r.field.as_str() {
        "runtime.pod.image" => "leave the field out for the default runtime image",
        "runtime.pod.serviceAccountName" => "leave the field out for the default ServiceAccount",
        "runtime.pod.automountServiceAccountToken" => "leave the field out or set false",
        f if f.starts_with("runtime.pod.nodeSelector") => "leave the key out",
        _ => "leave the toleration out",
    };
    let allowed = match &r.entry {
        None => format!(
            "MCC_POD_POLICY has no entry for {namespace} or '*', so only the defaults are allowed"
        ),
        Some(entry) if r.allowed.is_empty() => {
            format!("its MCC_POD_POLICY entry '{entry}' allows nothing here beyond the default")
        }
        Some(entry) => format!(
            "its MCC_POD_POLICY entry '{entry}' allows here: {}",
            r.allowed.join(", ")
        ),
    };
    format!(
        "spec.{} {value} is not allowed for pod Tools of namespace {namespace}: {allowed}; {default}, or ask the platform team to allow it (operator setting MCC_POD_POLICY, chart value podRuntime.policy)",
        r.field
    )
}

/// The `Ready` condition, keeping `lastTransitionTime` when the status did not change.
pub fn ready_condition(
    ready: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    previous: &[Condition],
) -> Condition {
    let status = if ready { "True" } else { "False" };
    let since = previous
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| Time(k8s_openapi::jiff::Timestamp::now()));
    Condition {
        type_: "Ready".into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time: since,
    }
}

/// The current `Ready` condition's (status, reason, message), for change detection.
pub fn ready_state(conditions: &[Condition]) -> Option<(&str, &str, &str)> {
    conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()))
}

/// Applies `status` to `obj`'s status subresource.
pub async fn apply_status<K, S>(obj: &K, api: &Api<K>, status: &S) -> Result<()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize,
{
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        &obj.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(patch),
    )
    .await
    .map_err(Error::Kube)?;
    Ok(())
}
