//! The catalog's data model: a resolved [`Tool`], its [`Param`]s and [`Limits`], and the
//! [`User`] that RBAC checks against.
//!
//! These are the types every other part of the system passes around. They are built from
//! MCC YAML entries by [`crate::spec`] (or from `Tool` resources by the operator) and are
//! serializable, so the operator can publish them as the catalog document gateways load.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::annotations::Annotations;
pub use crate::rbac::User;

/// The six parameter types MCC knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    #[default]
    Str,
    Int,
    Float,
    Bool,
    List,
    Dict,
}

impl ParamType {
    pub const ALL: [ParamType; 6] = [
        ParamType::Str,
        ParamType::Int,
        ParamType::Float,
        ParamType::Bool,
        ParamType::List,
        ParamType::Dict,
    ];

    /// The name as written in tool files and signatures (`str`, `int`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::Str => "str",
            ParamType::Int => "int",
            ParamType::Float => "float",
            ParamType::Bool => "bool",
            ParamType::List => "list",
            ParamType::Dict => "dict",
        }
    }

    /// Parses a type name; `None` for anything but the six names.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// JSON-schema type name, for the input schemas shown to MCP clients.
    pub fn json_schema_type(self) -> &'static str {
        match self {
            ParamType::Str => "string",
            ParamType::Int => "integer",
            ParamType::Float => "number",
            ParamType::Bool => "boolean",
            ParamType::List => "array",
            ParamType::Dict => "object",
        }
    }

    /// Scalar types can be asked for interactively (elicitation) when missing.
    pub fn is_scalar(self) -> bool {
        matches!(
            self,
            ParamType::Str | ParamType::Int | ParamType::Float | ParamType::Bool
        )
    }
}

impl fmt::Display for ParamType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One declared parameter of a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Param {
    pub name: String,
    #[serde(rename = "type", default)]
    pub ty: ParamType,
    /// MCC's code defaults this to `false` (its docs say `true`); we follow the code.
    #[serde(default)]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<Value>,
    /// A forced value: the param is hidden from callers and this value always wins.
    /// `Some(Value::Null)` is a real override with `null`, distinct from `None`.
    #[serde(
        default,
        rename = "override",
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_value"
    )]
    pub override_value: Option<Value>,
}

/// Deserializes a field that may be present with `null` as `Some(Value::Null)`.
fn present_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The name of the fn parameter that receives the session context.
pub const CONTEXT_PARAM: &str = "context";

/// What runs when the tool is executed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum ToolKind {
    /// A shell template rendered with the call's params and run by `sh -c`.
    Exec { command: String },
    /// MCC's `curl:` shorthand; `command` is the curl command line it stands for.
    Curl { target: String, command: String },
    /// A Python callable `module:attr` run by the stdlib-only runner.
    Fn {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        python: Option<String>,
    },
    /// A tool of an upstream MCP server ([`crate::upstream`]): `execute` proxies
    /// `tools/call` of `tool` (the upstream's own name) to the upstream `server`, with
    /// the arguments checked against `input_schema` first.
    Mcp {
        server: String,
        tool: String,
        input_schema: crate::input_schema::InputSchema,
    },
}

impl ToolKind {
    /// The shell command template of exec and curl tools.
    pub fn command(&self) -> Option<&str> {
        match self {
            ToolKind::Exec { command } | ToolKind::Curl { command, .. } => Some(command),
            ToolKind::Fn { .. } | ToolKind::Mcp { .. } => None,
        }
    }

    pub fn is_fn(&self) -> bool {
        matches!(self, ToolKind::Fn { .. })
    }

    /// A tool of an upstream MCP server: nothing runs here, the call is proxied.
    pub fn is_upstream(&self) -> bool {
        matches!(self, ToolKind::Mcp { .. })
    }
}

/// Per-execution resource limits. All optional; `timeout` is wall-clock seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
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

impl Limits {
    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }
}

/// How much of the gateway's environment a tool inherits above the env floor.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EnvPassthrough {
    /// `false` (or `[]`): the floor only. `true`: the whole environment.
    All(bool),
    /// Case-sensitive fnmatch globs over variable names.
    Globs(Vec<String>),
    #[default]
    #[serde(skip)]
    None,
}

impl EnvPassthrough {
    /// Whether a variable name of the gateway's environment passes through.
    pub fn admits(&self, name: &str) -> bool {
        match self {
            EnvPassthrough::All(all) => *all,
            EnvPassthrough::Globs(globs) => globs.iter().any(|g| crate::pattern::fnmatch(g, name)),
            EnvPassthrough::None => false,
        }
    }
}

/// A tool as the catalog holds it: validated, keyed, ready to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Groups (sorted as the key sorts them) and name, joined by dots.
    pub key: String,
    pub name: String,
    /// Groups in declared order (file groups first); the key uses [`crate::key::sorted_groups`].
    #[serde(default)]
    pub groups: Vec<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub example: String,
    #[serde(flatten)]
    pub kind: ToolKind,
    #[serde(default)]
    pub params: Vec<Param>,
    #[serde(default)]
    pub stdin: bool,
    #[serde(default, skip_serializing_if = "Limits::is_empty")]
    pub limits: Limits,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_file: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "is_no_passthrough")]
    pub env_passthrough: EnvPassthrough,
    /// The transform pipeline (a list in the file is joined with ` | `).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_ttl: Option<u64>,
    /// Calls per caller admitted in a window (`10/1min`), or unlimited; `None` leaves
    /// the caller's group or the global limit in force. See [`crate::rate`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<crate::rate::RateLimit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_type: Option<String>,
    /// MCP's title and behaviour hints ([`crate::annotations`]); none in MCC's tools.
    #[serde(default, skip_serializing_if = "Annotations::is_empty")]
    pub annotations: Annotations,
    /// A JSON Schema (root `"type": "object"`) a successful result must match; the result
    /// is then also sent as MCP's `structuredContent` ([`crate::annotations`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// A call needs a person's approval before it runs (the tool's `approval: required`,
    /// or stamped by the operator for its namespace); see [`crate::approval::required`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approval_required: bool,
    /// Where the tool was defined (`file.yaml: tools[2] 'name'` or `Tool ns/name`), for
    /// error messages.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
}

fn is_no_passthrough(p: &EnvPassthrough) -> bool {
    matches!(p, EnvPassthrough::None | EnvPassthrough::All(false))
}

impl Tool {
    /// Whether `param` is shown to callers: overridden params and the fn `context`
    /// parameter are hidden from signatures, schemas and validation.
    pub fn is_visible(&self, param: &Param) -> bool {
        param.override_value.is_none() && !(self.kind.is_fn() && param.name == CONTEXT_PARAM)
    }

    /// The params a caller sees and may pass.
    pub fn visible_params(&self) -> impl Iterator<Item = &Param> {
        self.params.iter().filter(|p| self.is_visible(p))
    }

    /// Whether the fn callable declares a `context` parameter (it then gets the session).
    pub fn takes_context(&self) -> bool {
        self.kind.is_fn() && self.params.iter().any(|p| p.name == CONTEXT_PARAM)
    }

    /// The return type shown in the signature.
    pub fn signature_return_type(&self) -> &str {
        match &self.kind {
            ToolKind::Exec { .. } | ToolKind::Curl { .. } => "str | (int, str, str)",
            ToolKind::Fn { .. } => self.return_type.as_deref().unwrap_or("unknown"),
            // MCP content (text, images, resources); structured content when it declares
            // an output schema.
            ToolKind::Mcp { .. } if self.output_schema.is_some() => "dict",
            ToolKind::Mcp { .. } => "content",
        }
    }

    /// RBAC: may `user` (or an anonymous caller) execute this tool? See [`crate::rbac`].
    pub fn allows(&self, user: Option<&User>) -> bool {
        crate::rbac::allows(&self.groups, &self.key, user)
    }
}
