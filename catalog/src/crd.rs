//! The `Tool` and `UserGrant` custom resources (`mcc.dev/v1alpha1`), behind the `crd`
//! feature so the file-mode build stays free of kube.
//!
//! These types are the Kubernetes form of an MCC tool entry and of a user's grants. They
//! carry the OpenAPI schema (with CEL rules) the API server checks before admission; the
//! catalog's own rules (templates compile, param types, keys) are applied by the operator
//! through [`crate::spec::build_tool`], the same code the file loader uses. Field types
//! here stay lenient where a strict Rust type would make one bad object break a watch
//! (e.g. a param `type` is a string checked by the schema enum and by `build_tool`).
//! [`check_tool`] (in `crd/check.rs`) applies [`crate::limits`] to objects stored before
//! a limit existed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvFromSource, EnvVar, ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::limits;
use crate::tool::ParamType;

mod check;
mod mcpserver;
pub use check::check_tool;
pub use mcpserver::{
    MCPServer, MCPServerSpec, MCPServerStatus, SecretKey, UpstreamCa, UpstreamHeader, UpstreamToken,
};

/// The API group of both resources.
pub const GROUP: &str = "mcc.dev";
/// The API version of both resources.
pub const VERSION: &str = "v1alpha1";

/// One catalog tool: every field of an MCC YAML tool entry, in Kubernetes form.
// Several `printcolumn(type_ = ...)` are not duplicates; clippy reads them as such.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "mcc.dev",
    version = "v1alpha1",
    kind = "Tool",
    namespaced,
    status = "ToolStatus",
    shortname = "mcct",
    category = "mcc",
    derive = "PartialEq",
    derive = "Default",
    doc = "An MCC catalog tool: an exec, fn or curl tool served by the MCC gateways.",
    printcolumn(name = "Key", type_ = "string", json_path = ".status.key"),
    printcolumn(name = "Kind", type_ = "string", json_path = ".status.toolKind"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "(has(self.exec) ? 1 : 0) + (has(self.fn) ? 1 : 0) + (has(self.curl) ? 1 : 0) == 1",
        "message": "exactly one of exec, fn or curl must be set"
    },
    {
        "rule": "has(self.fn) || has(self.name)",
        "message": "exec and curl tools must specify a name"
    },
    {
        "rule": "!has(self.python) || has(self.fn)",
        "message": "python can only be used with fn"
    },
    {
        "rule": "(has(self.groups) ? self.groups.map(g, g.size() + 1).sum() : 0) + (has(self.name) ? self.name.size() : 0) <= 253",
        "message": "the tool key (groups and name joined by dots) must be at most 253 characters"
    }
]))]
pub struct ToolSpec {
    /// The tool's name; the last part of its key. Required for exec and curl tools; fn
    /// tools default to the callable's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[^.\s]+$"))]
    pub name: Option<String>,
    /// Groups: RBAC and the key's prefix (`public` and `admin` sort first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 32),
        inner(length(min = 1, max = 63), regex(pattern = r"^[^.\s]+$"))
    )]
    pub groups: Vec<String>,
    /// What the tool does, shown to the LLM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::DESCRIPTION))]
    pub description: Option<String>,
    /// An example call, shown in the signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::SHORT_TEXT))]
    pub example: Option<String>,
    /// A Jinja shell template run by `sh -c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::COMMAND))]
    pub exec: Option<String>,
    /// A Python callable `module:attr` run by the stdlib-only runner.
    #[serde(default, rename = "fn", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = limits::CALLABLE))]
    pub func: Option<String>,
    /// MCC's curl shorthand: a URL (quoted) or curl arguments (raw).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::COMMAND))]
    pub curl: Option<String>,
    /// The Python interpreter of an fn tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::PATH))]
    pub python: Option<String>,
    /// Declared parameters. An fn tool without them is introspected by the gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::PARAMS))]
    pub params: Option<Vec<ToolParam>>,
    /// Send the validated params as JSON on stdin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<bool>,
    /// Per-execution resource limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ToolLimits>,
    /// Working directory of the tool process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::PATH))]
    pub cwd: Option<String>,
    /// Environment variables, as in a Pod: `value`, or `valueFrom` a Secret or ConfigMap
    /// key (resolved by the gateway at execution time; never copied into the catalog).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = limits::ENV_ENTRIES), transform = env_item_limits)]
    pub env: Vec<EnvVar>,
    /// Whole Secrets or ConfigMaps as environment (the form of MCC's `env_file`),
    /// applied before `env`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = limits::ENV_ENTRIES), transform = env_from_item_limits)]
    pub env_from: Vec<EnvFromSource>,
    /// `true`: the gateway's whole environment; a list: fnmatch globs of names passed
    /// through; `false` (default): the env floor only.
    /// Kept as raw JSON (its shape is checked by the operator) so that one malformed
    /// object cannot break the operator's watch of all Tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "bool_or_string_list")]
    pub env_passthrough: Option<Value>,
    /// A shell pipeline applied to successful output, or a list of stages joined by `|`.
    /// Raw JSON, for the same reason as `envPassthrough`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "string_or_string_list")]
    pub transform: Option<Value>,
    /// Cache results of this tool for this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_ttl: Option<u64>,
    /// Calls each caller may make in a window: `<count>/<n><s|min|h>` (`10/1min`,
    /// `100/1h`; MCC's `hr` too), or `unlimited` / `-1`. Wins over the gateway's group and
    /// global limits. Checked by the operator (raw, like `transform`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "rate_limit_text")]
    pub rate_limit: Option<Value>,
    /// The return type shown in an fn tool's signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::CALLABLE))]
    pub return_type: Option<String>,
    /// Where the tool runs: a local subprocess of the gateway (default) or a Pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
    /// The caller's session variables the tool receives and may write back, besides the
    /// identity keys it always gets. A Tool outside the trusted namespaces gets none it
    /// does not list; `["*"]` asks for all of them, where the platform team allows it
    /// (operator setting `MCC_SESSION_ALL_NAMESPACES`). In a trusted namespace, leaving
    /// it out means all of them (MCC's rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::SESSION_KEYS))]
    pub session_keys: Option<Vec<String>>,
    /// A human-readable name shown beside the key (MCP's `title` annotation); one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::TITLE), regex(pattern = r"^[^\r\n]*$"))]
    pub title: Option<String>,
    /// MCP hint: the tool does not modify its environment. Hints are the author's word,
    /// shown to agents; nothing enforces them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// MCP hint: the tool may perform destructive updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// MCP hint: repeating a call with the same arguments has no further effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// MCP hint: the tool reaches an open world of external entities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
    /// A JSON Schema (root `type: object`) every successful result must match; the
    /// result is then also returned as MCP's `structuredContent`. Checked as a schema by
    /// the operator (`spec.outputSchema` in the status when it is not one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "json_schema_object")]
    pub output_schema: Option<Value>,
    /// `required`: every call needs a person's approval before it runs (the caller's
    /// client asks them; see docs/approval.md). Leaving it out does not opt out of what
    /// the platform team requires for the Tool's groups or namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "approval_word")]
    pub approval: Option<String>,
}

/// One declared parameter.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolParam {
    #[schemars(length(min = 1, max = limits::NAME))]
    pub name: String,
    /// One of `str`, `int`, `float`, `bool`, `list`, `dict` (default `str`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "param_type_name")]
    pub ty: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_value")]
    pub default: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = limits::SHORT_TEXT))]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_value")]
    pub example: Option<Value>,
    /// A forced value (`null` included): hidden from callers, always wins.
    #[serde(
        default,
        rename = "override",
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    #[schemars(schema_with = "any_value")]
    pub override_value: Option<Value>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Resource limits of one execution (camelCase forms of MCC's `limits`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolLimits {
    /// Wall-clock seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub timeout: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_mb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_sec: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsize_mb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nofile: Option<u64>,
}

/// Where a tool runs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Runtime {
    /// A subprocess of the gateway (MCC's behaviour).
    Local(LocalRuntime),
    /// An ephemeral Pod per execution.
    Pod(PodRuntime),
}

/// The local runtime has no settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct LocalRuntime {}

/// An ephemeral Pod per execution.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodRuntime {
    /// The container image that holds the tool's command or Python module; left out:
    /// the deployment's default runtime image (`sh`, `curl`, `python3`). The platform
    /// team allows images per namespace (operator setting `MCC_POD_POLICY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub image: Option<String>,
    /// Requests and limits of the tool's container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// The Pod's ServiceAccount (in the Tool's namespace); left out: `default`. Others
    /// only where the platform team allows them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub service_account_name: Option<String>,
    /// Mount the ServiceAccount's token into the tool's container. Off unless asked
    /// (and allowed by the platform team).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automount_service_account_token: Option<bool>,
    /// Node labels the Pod must be scheduled on; keys and values only as the platform
    /// team allows them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = limits::POD_ENTRIES))]
    pub node_selector: BTreeMap<String, String>,
    /// Taints the Pod tolerates; keys only as the platform team allows them (a
    /// toleration without a key tolerates every taint).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = limits::POD_ENTRIES))]
    pub tolerations: Vec<Toleration>,
}

/// What the operator found for a Tool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolStatus {
    /// The catalog key (groups and name joined by dots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `exec`, `fn` or `curl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_kind: Option<String>,
    /// `Ready`: in the published catalog, or why not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A user's identity and grants. Several grants for one username are unioned.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "mcc.dev",
    version = "v1alpha1",
    kind = "UserGrant",
    namespaced,
    status = "UserGrantStatus",
    shortname = "mccug",
    category = "mcc",
    derive = "PartialEq",
    derive = "Default",
    doc = "An MCC user: identity, groups and explicit tool grants, optional bindings and API key.",
    printcolumn(name = "User", type_ = "string", json_path = ".spec.username"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct UserGrantSpec {
    /// The username tools see as `user` and RBAC checks.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^\S+$"))]
    pub username: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(length(min = 1, max = 63), regex(pattern = r"^[^.\s]+$")))]
    pub groups: Vec<String>,
    /// Tool keys granted explicitly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(length(min = 1, max = 253)))]
    pub tools: Vec<String>,
    /// In-cluster ServiceAccounts that act as this user (checked by TokenReview).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_accounts: Vec<ServiceAccountBinding>,
    /// OIDC identities that act as this user (`jwt` backend): `{issuer, subject}`, the
    /// token's `iss` and `sub` compared exactly. The old form, a bare subject string, is
    /// still read: it binds that subject under the gateway's pinned issuer only.
    // Items are raw JSON (the operator checks their shape and reports
    // `oidcSubjects[i]`): a structural schema cannot say "string or object", and one
    // malformed object must not break the operator's watch of all grants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "oidc_subject_list")]
    pub oidc_subjects: Vec<Value>,
    /// Ask the operator for an API key, stored in a Secret owned by this grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<ApiKeySpec>,
}

/// A ServiceAccount bound to a user. `namespace` defaults to the grant's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountBinding {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub namespace: Option<String>,
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// API key issuance.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeySpec {
    pub enabled: bool,
    /// Days until the key expires and is rotated; absent or 0: never (MCC's default is 90).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 3650))]
    pub ttl_days: Option<u32>,
}

/// What the operator found for a UserGrant.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserGrantStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The issued API key's public part; the raw key is only in the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<ApiKeyStatus>,
}

/// The public part of an issued API key.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyStatus {
    /// The Secret (in the grant's namespace) holding the raw key under `apiKey`.
    pub secret_name: String,
    pub prefix: String,
    /// Hex SHA-256 of the whole raw key.
    pub sha256: String,
    /// RFC 3339; absent: never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

// `env[].name` and `.value`, `envFrom[].prefix`: fields of the Kubernetes types, bounded
// here (the same limits [`check_tool`] applies to objects admitted before them).
fn env_item_limits(schema: &mut Schema) {
    item_property_max(schema, "name", limits::NAME);
    item_property_max(schema, "value", limits::ENV_VALUE);
}

fn env_from_item_limits(schema: &mut Schema) {
    item_property_max(schema, "prefix", limits::NAME);
}

/// Sets `maxLength` on a string property of an array's (inlined) item schema. A schema of
/// another shape is a generator change that the CRD tests catch (the limit is missing).
fn item_property_max(schema: &mut Schema, property: &str, max: usize) {
    if let Some(p) = schema
        .get_mut("items")
        .and_then(|i| i.get_mut("properties"))
        .and_then(|p| p.get_mut(property))
        .and_then(|p| p.as_object_mut())
    {
        p.insert("maxLength".into(), max.into());
    }
}

fn any_value(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "x-kubernetes-preserve-unknown-fields": true, "nullable": true })
}

// A structural schema cannot say "boolean or list" (no `type` inside anyOf), and the API
// server compiles no CEL rule on an untyped node; the operator checks these shapes and
// reports `spec.envPassthrough` / `spec.transform` in the Tool's status.
fn bool_or_string_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "true, false, or a list of fnmatch globs over variable names",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

fn rate_limit_text(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "<count>/<n><s|min|h> (e.g. 10/1min), or unlimited / -1",
        "x-kubernetes-int-or-string": true
    })
}

fn string_or_string_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "a shell pipeline, or a list of stages joined with ' | '",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

fn oidc_subject_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "description": "{issuer: <iss>, subject: <sub>}; or a bare subject string (old form: the gateway's pinned issuer only)",
            "x-kubernetes-preserve-unknown-fields": true
        }
    })
}

// Any JSON object: a structural schema cannot describe JSON Schema itself; the operator
// checks it (`mcc_catalog::annotations::check_schema`) and bounds its size
// (`limits::OUTPUT_SCHEMA_BYTES`).
fn json_schema_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "a JSON Schema whose root is type: object",
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

fn approval_word(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "enum": [crate::approval::REQUIRED] })
}

fn param_type_name(_: &mut SchemaGenerator) -> Schema {
    let names: Vec<&str> = ParamType::ALL.iter().map(|t| t.as_str()).collect();
    json_schema!({ "type": "string", "enum": names })
}
