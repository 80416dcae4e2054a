//! The `MCPServer` custom resource (`mcc.dev/v1alpha1`): an upstream MCP server whose
//! tools the operator discovers and publishes with the catalog (Kubernetes form of a tool
//! file's `mcp_servers:` entry, [`crate::upstream`]).
//!
//! A kind of its own rather than a field on `Tool`: one upstream yields many tools whose
//! set changes on the upstream's schedule, it has its own status (reachable, tool count,
//! last refresh, last error) and its own credentials and egress rules; a `Tool` is one
//! tool whose spec is its whole definition. Folding both into one kind would make every
//! `Tool` field meaningless for half the objects.
//!
//! Credentials are references only: a header's value comes from a key of a Secret in the
//! MCPServer's namespace, read by the operator (discovery) and by the gateway (calls);
//! it is never copied into the catalog document or the status.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::limits;
use crate::upstream::session_context::MAX_VARIABLES;
use crate::upstream::{MAX_HEADERS, MAX_NAME};

/// An upstream MCP server (streamable HTTP) whose tools join the catalog.
// Several `printcolumn(type_ = ...)` are not duplicates; clippy reads them as such.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "mcc.dev",
    version = "v1alpha1",
    kind = "MCPServer",
    plural = "mcpservers",
    namespaced,
    status = "MCPServerStatus",
    shortname = "mccs",
    category = "mcc",
    derive = "PartialEq",
    derive = "Default",
    doc = "An upstream MCP server whose tools the MCC operator discovers and publishes in the catalog.",
    printcolumn(name = "URL", type_ = "string", json_path = ".spec.url"),
    printcolumn(name = "Tools", type_ = "integer", json_path = ".status.tools"),
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
        "rule": "self.url.startsWith('http://') || self.url.startsWith('https://')",
        "message": "url must be an http:// or https:// URL"
    },
    {
        "rule": "!has(self.ca) || self.url.startsWith('https://')",
        "message": "ca applies to an https:// url only"
    },
    {
        "rule": "!has(self.serviceAccountToken) || self.url.startsWith('https://')",
        "message": "a serviceAccountToken is sent to an https:// url only"
    }
]))]
pub struct MCPServerSpec {
    /// The upstream's streamable HTTP endpoint. Must match the platform team's egress
    /// allow-list (chart value `upstreams.allowed`), else the operator refuses it.
    #[schemars(length(min = 8, max = limits::PATH))]
    pub url: String,
    /// Groups of every tool taken from this upstream: RBAC and the key's prefix. Only
    /// groups the namespace may publish under.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 32),
        inner(length(min = 1, max = 63), regex(pattern = r"^[^.\s]+$"))
    )]
    pub groups: Vec<String>,
    /// Prepended to every upstream tool name (`ev_` + `echo`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = MAX_NAME), regex(pattern = r"^[A-Za-z0-9_-]*$"))]
    pub prefix: String,
    /// fnmatch globs over upstream tool names: only matching tools are taken.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = limits::LIST_ENTRIES), inner(length(max = limits::GLOB)))]
    pub include: Vec<String>,
    /// fnmatch globs over upstream tool names: matching tools are left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = limits::LIST_ENTRIES), inner(length(max = limits::GLOB)))]
    pub exclude: Vec<String>,
    /// Static headers sent with every request, each from a key of a Secret in this
    /// namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_HEADERS))]
    pub headers: Vec<UpstreamHeader>,
    /// CA certificates (PEM, at most 256 KiB) trusted for this https:// upstream beside
    /// the system roots: a key of a ConfigMap or of a Secret in this namespace, read by
    /// the operator (discovery) and the gateway (calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<UpstreamCa>,
    /// Send a projected ServiceAccount token as `Authorization: Bearer` (https:// only):
    /// the gateway's own for calls, the operator's for discovery, each with this
    /// audience, which must be one the platform team approved (chart value
    /// `upstreams.tokenAudiences`; never the API server's or the gateway's own). Not
    /// with a header named `Authorization`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_token: Option<UpstreamToken>,
    /// What of the caller's session each `tools/call` carries, as `_meta` keys (off when
    /// absent). `identity: true` only where the platform team allows it (the trusted
    /// namespaces, and chart value `upstreams.identityNamespaces`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_context: Option<UpstreamSessionContext>,
    /// Seconds one `tools/call` may take (default: the gateway's tool timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.001, max = 86400.0))]
    pub timeout: Option<f64>,
    /// Calls in flight to this upstream at once, per gateway replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub max_concurrency: Option<u32>,
    /// Seconds between discoveries (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 86400))]
    pub refresh_seconds: Option<u64>,
    /// Seconds a successful result is cached (as a Tool's `cacheTtl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 86400))]
    pub cache_ttl: Option<u64>,
    /// Per-user rate limit of each tool, as a Tool's `rateLimit` (raw, checked by the
    /// operator with the same rule, so one bad object cannot break the watch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::rate_limit_text")]
    pub rate_limit: Option<serde_json::Value>,
}

/// One header from a Secret key.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpstreamHeader {
    /// The HTTP header's name (e.g. `Authorization`).
    #[schemars(
        length(min = 1, max = 128),
        regex(pattern = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
    )]
    pub name: String,
    /// The Secret (in the MCPServer's namespace) and key holding the value.
    pub secret_key_ref: SecretKey,
}

/// What of the caller's session an upstream is sent with each call (a tool file's
/// `session_context:`; the rules are `mcc_catalog::upstream::session_context`'s).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct UpstreamSessionContext {
    /// Send the caller's username and groups (`_meta` keys `dev.mcc/user`,
    /// `dev.mcc/groups`), as the gateway authenticated them.
    #[serde(default)]
    pub identity: bool,
    /// Send these session variables, those the caller's session holds (`_meta` key
    /// `dev.mcc/session`, at most 16 KiB): session variable names, not `user`, `email`,
    /// `groups` or `tools`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_VARIABLES), inner(length(min = 1, max = limits::NAME)))]
    pub variables: Vec<String>,
}

/// A projected ServiceAccount token for an upstream.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct UpstreamToken {
    /// The token's audience (`aud`): one of the chart's `upstreams.tokenAudiences`.
    #[schemars(length(min = 1, max = 253))]
    pub audience: String,
}

/// Where an upstream's CA certificates are: exactly one of the two.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.configMapKeyRef) != has(self.secretKeyRef)",
        "message": "give exactly one of configMapKeyRef and secretKeyRef"
    }
]))]
pub struct UpstreamCa {
    /// A ConfigMap key (in the MCPServer's namespace) holding PEM certificates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_key_ref: Option<SecretKey>,
    /// A Secret key (in the MCPServer's namespace) holding PEM certificates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<SecretKey>,
}

/// A key of a Secret (or ConfigMap) in the object's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SecretKey {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// What the operator last saw of the upstream.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MCPServerStatus {
    /// `Ready`: its tools are in the published catalog and it answered the last
    /// discovery; else why not (`Unreachable` keeps the last good tools, unavailable).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Tools published from this upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<u32>,
    /// Upstream tools refused (bad name, schema, key taken): the reasons are in the
    /// operator's log and in `refusedReasons` (at most 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_tools: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_reasons: Vec<String>,
    /// Upstream tools left out by `include`/`exclude`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filtered_tools: Option<u32>,
    /// The last failure (its kind; never a URL, header or upstream body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When the last discovery succeeded (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_refresh: Option<String>,
    /// Why that discovery ran: `Initial`, `SpecChanged`, `Schedule` (`refreshSeconds`),
    /// `Retry` (after a failure), `ListChanged` (the upstream's
    /// `notifications/tools/list_changed`) or `StreamReopened` (its standing stream was
    /// lost and opened again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_refresh_reason: Option<String>,
    /// The standing stream that carries `notifications/tools/list_changed`: `Listening`
    /// (legacy-generation upstream, refreshed on notification and on schedule),
    /// `ScheduleOnly` (a 2026-07-28 upstream: no standing stream), `Connecting` or
    /// `Reconnecting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
