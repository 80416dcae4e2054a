//! The MCC YAML entry format: one `tools:` entry as written in a tool file, and the rules
//! that turn it into a catalog [`Tool`]. The file around it (cascading, substitution,
//! duplicates) is [`crate::load`]'s concern.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::annotations::Annotations;
use crate::key::{MAX_KEY_LEN, tool_key};
use crate::template;
use crate::tool::{EnvPassthrough, Limits, Param, ParamType, Tool, ToolKind};

/// Keys a tool entry may carry. Anything else is reported as a warning and ignored.
pub const ENTRY_KEYS: &[&str] = &[
    "fn",
    "exec",
    "curl",
    "name",
    "groups",
    "description",
    "example",
    "params",
    "stdin",
    "limits",
    "cwd",
    "env",
    "env_file",
    "env_passthrough",
    "transform",
    "cache_ttl",
    "rate_limit",
    "return_type",
    "python",
    "title",
    "read_only_hint",
    "destructive_hint",
    "idempotent_hint",
    "open_world_hint",
    "output_schema",
    "approval",
];

/// A tool entry as written. Strings that YAML may type as numbers (`env` values,
/// `example`) are accepted as any scalar and stringified.
#[derive(Debug, Default, Deserialize)]
pub struct ToolEntry {
    #[serde(rename = "fn")]
    pub func: Option<String>,
    pub exec: Option<String>,
    pub curl: Option<String>,
    pub name: Option<String>,
    #[serde(default)]
    pub groups: Vec<String>,
    pub description: Option<String>,
    pub example: Option<Scalar>,
    pub params: Option<Vec<ParamEntry>>,
    #[serde(default, deserialize_with = "yaml_bool_field")]
    pub stdin: bool,
    #[serde(default)]
    pub limits: Limits,
    pub cwd: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, Scalar>,
    pub env_file: Option<String>,
    #[serde(default)]
    pub env_passthrough: EnvPassthrough,
    pub transform: Option<Transform>,
    pub cache_ttl: Option<u64>,
    /// `<count>/<n><s|min|h>` or unlimited (`-1`), see [`crate::rate`].
    pub rate_limit: Option<crate::rate::RateLimit>,
    pub return_type: Option<String>,
    pub python: Option<String>,
    /// MCP's annotations, each its own key in MCC's snake_case (see
    /// [`crate::annotations`]).
    pub title: Option<String>,
    #[serde(default, deserialize_with = "opt_yaml_bool")]
    pub read_only_hint: Option<bool>,
    #[serde(default, deserialize_with = "opt_yaml_bool")]
    pub destructive_hint: Option<bool>,
    #[serde(default, deserialize_with = "opt_yaml_bool")]
    pub idempotent_hint: Option<bool>,
    #[serde(default, deserialize_with = "opt_yaml_bool")]
    pub open_world_hint: Option<bool>,
    /// A JSON Schema object, checked by [`crate::annotations::check_schema`].
    pub output_schema: Option<Value>,
    /// `required`: every call needs a person's approval first ([`crate::approval`]).
    pub approval: Option<Value>,
}

/// One `params:` entry as written; `type` is checked against the six names.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamEntry {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: Option<String>,
    #[serde(default, deserialize_with = "yaml_bool_field")]
    pub required: bool,
    pub default: Option<Value>,
    pub description: Option<String>,
    pub example: Option<Value>,
    #[serde(default, rename = "override", deserialize_with = "present")]
    pub override_value: Option<Value>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The YAML 1.1 boolean words PyYAML (and so MCC) reads as booleans besides
/// `true`/`false`. The loader parses YAML 1.2 booleans only, so that `n` and `y` stay
/// strings as in PyYAML; boolean fields and bool params accept these words.
pub fn yaml11_bool(word: &str) -> Option<bool> {
    match word {
        "yes" | "Yes" | "YES" | "on" | "On" | "ON" => Some(true),
        "no" | "No" | "NO" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

/// A boolean field: `true`/`false` or one of PyYAML's words (`yes`, `off`, ...).
fn yaml_bool_field<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    yaml_bool(Value::deserialize(d)?).map_err(serde::de::Error::custom)
}

fn yaml_bool(v: Value) -> Result<bool, String> {
    match v {
        Value::Bool(b) => Ok(b),
        Value::String(s) if yaml11_bool(&s).is_some() => Ok(yaml11_bool(&s).unwrap_or_default()),
        other => Err(format!("expected a boolean (true/false), got {other}")),
    }
}

/// An optional boolean field (a hint): as [`yaml_bool`], `null` as absent.
fn opt_yaml_bool<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(v) => yaml_bool(v).map(Some).map_err(serde::de::Error::custom),
    }
}

/// A bool param's value written as a PyYAML boolean word becomes a boolean.
fn bool_word(ty: ParamType, v: Option<Value>) -> Option<Value> {
    match (ty, v) {
        (ParamType::Bool, Some(Value::String(s))) if yaml11_bool(&s).is_some() => {
            yaml11_bool(&s).map(Value::Bool)
        }
        (_, v) => v,
    }
}

/// A scalar written where text is meant (`TIMEOUT: 30`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Scalar {
    Text(String),
    Bool(bool),
    Number(serde_json::Number),
}

impl Scalar {
    pub fn into_string(self) -> String {
        match self {
            Scalar::Text(s) => s,
            Scalar::Bool(b) => if b { "True" } else { "False" }.to_string(),
            Scalar::Number(n) => n.to_string(),
        }
    }
}

/// `transform:` as one pipeline or a list of stages joined with ` | `.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Transform {
    One(String),
    Stages(Vec<String>),
}

/// A rule an entry breaks, with the field it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryError {
    pub field: String,
    pub message: String,
}

fn err(field: &str, message: impl Into<String>) -> EntryError {
    EntryError {
        field: field.to_string(),
        message: message.into(),
    }
}

/// Parses one entry's mapping, naming the field a type error concerns.
pub fn parse_entry(value: Value) -> Result<ToolEntry, EntryError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." {
            "(entry)".to_string()
        } else {
            path
        };
        err(&field, e.into_inner().to_string())
    })
}

/// Keys a `params:` entry may carry.
pub const PARAM_KEYS: &[&str] = &[
    "name",
    "type",
    "required",
    "default",
    "description",
    "example",
    "override",
];

/// Removes unknown keys from the entry's `params` mappings and returns them as
/// `(param index, key)` for warnings (`x-*` keys go silently).
pub fn strip_unknown_param_keys(entry: &mut Map<String, Value>) -> Vec<(usize, String)> {
    let mut removed = Vec::new();
    let Some(Value::Array(params)) = entry.get_mut("params") else {
        return removed;
    };
    for (i, param) in params.iter_mut().enumerate() {
        let Value::Object(map) = param else { continue };
        let unknown: Vec<String> = map
            .keys()
            .filter(|k| !PARAM_KEYS.contains(&k.as_str()))
            .cloned()
            .collect();
        for key in unknown {
            map.remove(&key);
            if !key.starts_with("x-") {
                removed.push((i, key));
            }
        }
    }
    removed
}

/// The unknown keys of an entry mapping (reported as warnings; `x-*` keys are silent).
pub fn unknown_keys(entry: &Map<String, Value>) -> Vec<&str> {
    entry
        .keys()
        .map(String::as_str)
        .filter(|k| !ENTRY_KEYS.contains(k) && !k.starts_with("x-"))
        .collect()
}

/// MCC's `curl:` shorthand: `curl -sL -o -` (plus `--json @-` with stdin), then the
/// argument: a bare `http(s)://` URL single-quoted, anything else (flags) passed raw.
/// Only the URL's literal text is quoted, its Jinja tags are kept as written; what they
/// print is placed by [`template::render_curl`], which keeps it inside its shell word.
pub fn curl_command(target: &str, stdin: bool) -> String {
    let mut cmd = String::from("curl -sL -o -");
    if stdin {
        cmd.push_str(" --json @-");
    }
    cmd.push(' ');
    let t = target.trim_start();
    if t.starts_with("http://") || t.starts_with("https://") {
        cmd.push_str(&template::shell_quote_template(target));
    } else {
        cmd.push_str(target);
    }
    cmd
}

/// A tool built from an entry, and what introspection still has to fill in.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltTool {
    pub tool: Tool,
    /// An fn tool whose params or return type are not declared (MCC treats `params: []`
    /// as undeclared): [`crate::introspect`] fills in what the entry left out.
    pub needs_introspection: bool,
    /// The entry gave no `name`: the name is the last segment of the fn path for now, and
    /// introspection replaces it with the callable's `__name__` (and recomputes the key).
    pub name_from_callable: bool,
}

/// Turns an entry into a tool. `source` names where the entry was written (file and
/// tool), for later error messages.
pub fn build_tool(entry: ToolEntry, source: &str) -> Result<BuiltTool, EntryError> {
    let kind = match (entry.func, entry.exec, entry.curl) {
        (Some(_), Some(_), Some(_)) | (None, Some(_), Some(_)) | (Some(_), None, Some(_)) => {
            return Err(err(
                "fn/exec/curl",
                "Tool must specify only one of 'fn', 'exec', or 'curl'",
            ));
        }
        (Some(_), Some(_), None) => {
            return Err(err(
                "fn/exec",
                "Tool must specify either 'fn' or 'exec', not both",
            ));
        }
        (None, None, None) => {
            return Err(err("fn/exec", "Tool must specify either 'fn' or 'exec'"));
        }
        (Some(path), None, None) => {
            if path.trim().is_empty() {
                return Err(err(
                    "fn",
                    "must be a Python callable path like 'module:function'",
                ));
            }
            ToolKind::Fn {
                path,
                python: entry.python.clone(),
            }
        }
        (None, Some(command), None) => ToolKind::Exec { command },
        (None, None, Some(target)) => {
            let command = curl_command(&target, entry.stdin);
            ToolKind::Curl { target, command }
        }
    };
    if !kind.is_fn() && entry.python.is_some() {
        return Err(err(
            "python",
            "'python' can only be used with 'fn', not 'exec'",
        ));
    }
    let name_from_callable = entry.name.as_deref().is_none_or(|n| n.trim().is_empty());
    let name = match (&kind, entry.name) {
        (_, Some(n)) if !n.trim().is_empty() => n,
        (ToolKind::Fn { path, .. }, _) => path_name(path).to_string(),
        _ => return Err(err("name", "Exec tools must specify a 'name'")),
    };
    check_name(&name).map_err(|m| err("name", m))?;
    if let Some(command) = kind.command() {
        template::check(command).map_err(|e| {
            err(
                if matches!(kind, ToolKind::Curl { .. }) {
                    "curl"
                } else {
                    "exec"
                },
                format!("template does not compile: {e}"),
            )
        })?;
    }
    let transform = entry.transform.map(|t| match t {
        Transform::One(s) => s,
        Transform::Stages(stages) => stages.join(" | "),
    });
    if let Some(t) = &transform {
        template::check(t)
            .map_err(|e| err("transform", format!("template does not compile: {e}")))?;
    }
    let mut params = Vec::new();
    for (i, p) in entry.params.unwrap_or_default().into_iter().enumerate() {
        params.push(build_param(p).map_err(|m| err(&format!("params[{i}]"), m))?);
    }
    for (i, p) in params.iter().enumerate() {
        if params[..i].iter().any(|q| q.name == p.name) {
            return Err(err(
                &format!("params[{i}]"),
                format!("duplicate parameter '{}'", p.name),
            ));
        }
    }
    // MCC treats `params: []` like absent params on fn tools.
    let needs_introspection = kind.is_fn() && (params.is_empty() || entry.return_type.is_none());
    let name_from_callable = name_from_callable && needs_introspection;
    // The title is one line of the signature block.
    if entry
        .title
        .as_deref()
        .is_some_and(|t| t.contains(['\n', '\r']))
    {
        return Err(err("title", "must be one line"));
    }
    if let Some(schema) = &entry.output_schema {
        crate::annotations::check_schema(schema).map_err(|m| err("output_schema", m))?;
    }
    let approval_required = match &entry.approval {
        None => Ok(false),
        Some(Value::String(word)) => crate::approval::parse(Some(word)),
        Some(other) => crate::approval::parse(Some(&other.to_string())),
    }
    .map_err(|m| err("approval", m))?;
    let key = tool_key(&entry.groups, &name);
    if key.len() > MAX_KEY_LEN {
        return Err(err(
            "name",
            format!(
                "the key '{key}' is {} characters long; at most {MAX_KEY_LEN} are allowed",
                key.len()
            ),
        ));
    }
    let tool = Tool {
        key,
        name,
        groups: entry.groups,
        description: entry.description.unwrap_or_default(),
        example: entry.example.map(Scalar::into_string).unwrap_or_default(),
        kind,
        params,
        stdin: entry.stdin,
        limits: entry.limits,
        cwd: entry.cwd.map(PathBuf::from),
        env: entry
            .env
            .into_iter()
            .map(|(k, v)| (k, v.into_string()))
            .collect(),
        env_file: entry.env_file.map(PathBuf::from),
        env_passthrough: entry.env_passthrough,
        transform,
        cache_ttl: entry.cache_ttl,
        rate_limit: entry.rate_limit,
        return_type: entry.return_type,
        annotations: Annotations {
            title: entry.title.filter(|t| !t.trim().is_empty()),
            read_only_hint: entry.read_only_hint,
            destructive_hint: entry.destructive_hint,
            idempotent_hint: entry.idempotent_hint,
            open_world_hint: entry.open_world_hint,
        },
        output_schema: entry.output_schema,
        approval_required,
        source: source.to_string(),
    };
    Ok(BuiltTool {
        tool,
        needs_introspection,
        name_from_callable,
    })
}

/// The name an fn tool gets from its path when neither the entry nor introspection gives
/// one: the last `:`- or `.`-separated segment (`pkg.mod:Cls.method` → `method`).
pub fn path_name(path: &str) -> &str {
    path.rsplit([':', '.']).next().unwrap_or(path)
}

/// A tool name becomes the last segment of a dotted key: it must be non-empty and hold no
/// dot or whitespace.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a tool name must not be empty".into());
    }
    match name.chars().find(|c| c.is_whitespace() || *c == '.') {
        Some(bad) => Err(format!(
            "'{name}' must not contain {bad:?}: names are joined into keys with dots"
        )),
        None => Ok(()),
    }
}

fn build_param(p: ParamEntry) -> Result<Param, String> {
    let ty_name = p.ty.as_deref().unwrap_or("str");
    let ty = ParamType::parse(ty_name)
        .ok_or_else(|| format!("Unknown type '{ty_name}' for parameter '{}'", p.name))?;
    if p.name.trim().is_empty() {
        return Err("parameter name must not be empty".into());
    }
    Ok(Param {
        name: p.name,
        ty,
        required: p.required,
        default: bool_word(ty, p.default),
        description: p.description.unwrap_or_default(),
        example: bool_word(ty, p.example),
        override_value: bool_word(ty, p.override_value),
    })
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
