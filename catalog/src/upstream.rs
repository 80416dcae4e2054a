//! Upstream MCP servers as a catalog source: the `mcp_servers:` entries of a tool file
//! ([`UpstreamSpec`], parsed by [`parse_server`]) and the one rule that turns the tools an
//! upstream lists into catalog [`Tool`]s ([`convert`]): filters, name normalization,
//! input schema → params, output schema and annotations, keys.
//!
//! No I/O here: connecting and listing (`tools/list`) are [`client`]'s (feature
//! `upstream-client`), used by the gateway (file mode; and every `tools/call`) and by the
//! operator (Kubernetes mode's discovery). What an upstream lists arrives as
//! [`Discovered`] (plain data, no MCP library types), so both discover into the same
//! rule. `upstream/published.rs` holds Kubernetes mode's upstream table ([`PublishedUpstream`])
//! and the egress allow-list rule ([`url_allowed`]).
//!
//! A header value is a credential: it is never part of a [`Tool`] (so never in the
//! catalog document, a signature or a log), and [`UpstreamSpec`]'s `Debug` hides it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::annotations::{self, Annotations};
pub use crate::input_schema::InputSchema;
use crate::key::{tool_key, union_groups};
use crate::rate::RateLimit;
use crate::tool::{Param, ParamType, Tool, ToolKind};

#[cfg(feature = "upstream-client")]
pub mod call_events;
#[cfg(feature = "upstream-client")]
pub mod client;
#[cfg(feature = "upstream-client")]
pub mod direct;
mod published;
pub mod session_context;
pub mod stdio;

pub use published::{
    CaRef, HeaderRef, MAX_TOKEN_BYTES, PublishedUpstream, read_token, token_dir, token_file,
    url_allowed, url_host,
};

/// At most this many tools are taken from one upstream; more is an error of the whole
/// listing (the last good tools stay), not a silent cut.
pub const MAX_TOOLS: usize = 1000;
/// At most this many `tools/list` pages per discovery.
pub const MAX_PAGES: usize = 100;
/// The longest tool name taken from an upstream (after the prefix).
pub const MAX_NAME: usize = 128;
/// An upstream tool's input schema, serialized, at most (it is shown in describe output
/// and compiled into a validator once per tool).
pub const MAX_INPUT_SCHEMA_BYTES: usize = 64 * 1024;
/// Headers per upstream.
pub const MAX_HEADERS: usize = 32;
/// The largest CA bundle (`ca_file`, an MCPServer's `ca` key) taken, in bytes.
pub const MAX_CA_BYTES: usize = 256 * 1024;
/// The largest response (JSON body or SSE event) taken from an upstream.
pub const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;
/// Upstreams per file (and per gateway: the loader counts across files).
pub const MAX_SERVERS: usize = 64;

/// One `mcp_servers:` entry of a tool file, file-level `groups` already merged in.
#[derive(Clone, PartialEq)]
pub struct UpstreamSpec {
    /// The upstream's name: unique across the files, a slug (`[a-z0-9-]`).
    pub name: String,
    /// The streamable HTTP endpoint (`http://` or `https://`); empty for a stdio
    /// upstream (`command`).
    pub url: String,
    /// A stdio upstream: the process to start instead of connecting to `url` (file
    /// mode only; exactly one of the two).
    pub command: Option<stdio::StdioCommand>,
    pub groups: Vec<String>,
    /// Prepended to every tool name taken from this upstream (`ev_` + `echo`).
    pub prefix: String,
    /// fnmatch globs over upstream tool names: only matching tools are taken (empty: all).
    pub include: Vec<String>,
    /// fnmatch globs over upstream tool names: matching tools are left out (after include).
    pub exclude: Vec<String>,
    /// Static headers sent with every request to the upstream (`$VAR` substituted at
    /// load from the gateway's environment). Never shown.
    pub headers: BTreeMap<String, String>,
    /// A PEM file of CA certificates trusted for this upstream (beside the system roots;
    /// file mode's `ca_file:`, read by the gateway when it connects).
    pub ca_file: Option<PathBuf>,
    /// The same as text (Kubernetes mode: an `MCPServer`'s `ca` key, read from its
    /// ConfigMap or Secret by the operator for discovery and by the gateway for calls).
    pub ca_pem: Option<String>,
    /// Seconds one `tools/call` may take (default: the gateway's tool timeout).
    pub timeout: Option<f64>,
    /// Calls in flight to this upstream at once, across callers.
    pub max_concurrency: usize,
    /// Seconds between discoveries.
    pub refresh: u64,
    pub cache_ttl: Option<u64>,
    pub rate_limit: Option<RateLimit>,
    /// What of the caller's session is sent with each call (file mode's
    /// `session_context:`, an MCPServer's `sessionContext`; nothing by default).
    pub session_context: session_context::SessionContext,
    /// Where it was declared (`file.yaml: mcp_servers[0] 'everything'`).
    pub source: String,
}

impl fmt::Debug for UpstreamSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamSpec")
            .field("name", &self.name)
            .field("url", &self.url)
            .field("command", &self.command)
            .field("groups", &self.groups)
            .field("prefix", &self.prefix)
            .field("include", &self.include)
            .field("exclude", &self.exclude)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("ca_file", &self.ca_file)
            .field("ca_pem (bytes)", &self.ca_pem.as_ref().map(String::len))
            .field("timeout", &self.timeout)
            .field("max_concurrency", &self.max_concurrency)
            .field("refresh", &self.refresh)
            .field("session_context", &self.session_context)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// Default of `max_concurrency`.
pub const DEFAULT_CONCURRENCY: usize = 16;
/// Default of `refresh` (seconds).
pub const DEFAULT_REFRESH: u64 = 300;

/// The entry as written (after `$VAR` substitution).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerEntry {
    name: String,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    command: Option<stdio::CommandField>,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    env_passthrough: Option<crate::tool::EnvPassthrough>,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    include: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    ca_file: Option<PathBuf>,
    #[serde(default)]
    timeout: Option<f64>,
    #[serde(default)]
    max_concurrency: Option<usize>,
    #[serde(default)]
    refresh: Option<u64>,
    #[serde(default)]
    cache_ttl: Option<u64>,
    #[serde(default)]
    rate_limit: Option<RateLimit>,
    #[serde(default)]
    session_context: session_context::SessionContext,
}

/// What is wrong with an `mcp_servers:` entry: the field and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerError {
    pub field: String,
    pub message: String,
}

fn bad(field: &str, message: impl Into<String>) -> ServerError {
    ServerError {
        field: field.into(),
        message: message.into(),
    }
}

/// Parses one `mcp_servers:` entry; `file_groups` go before its own groups. `x-…` keys
/// are dropped; any other unknown key is an error (a misspelt `exclude` must not let
/// every tool through).
pub fn parse_server(
    raw: &Value,
    file_groups: &[String],
    source: &str,
) -> Result<UpstreamSpec, ServerError> {
    let Some(map) = raw.as_object() else {
        return Err(bad("(entry)", "expected a mapping"));
    };
    let map: Map<String, Value> = map
        .iter()
        .filter(|(k, _)| !k.starts_with("x-"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut entry: ServerEntry =
        serde_path_to_error::deserialize(Value::Object(map)).map_err(|e| {
            let field = e.path().to_string();
            let field = if field == "." {
                "(entry)".into()
            } else {
                field
            };
            ServerError {
                field,
                message: e.into_inner().to_string(),
            }
        })?;
    check_slug(&entry.name).map_err(|m| bad("name", m))?;
    let (url, command) = transport_of(&mut entry)?;
    if !entry.prefix.is_empty() && normalize(&entry.prefix) != entry.prefix {
        return Err(bad(
            "prefix",
            "only letters, digits, '_' and '-' may be used in a prefix",
        ));
    }
    if entry.headers.len() > MAX_HEADERS {
        return Err(bad("headers", format!("at most {MAX_HEADERS} headers")));
    }
    for name in entry.headers.keys() {
        let token = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            return Err(bad(&format!("headers.{name}"), "not an HTTP header name"));
        }
    }
    if let Some((name, _)) = entry
        .headers
        .iter()
        .find(|(_, v)| v.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0))
    {
        // The value is never echoed: it is a credential.
        return Err(bad(
            &format!("headers.{name}"),
            "a header value may not hold a line break",
        ));
    }
    if let Some(t) = entry.timeout
        && !(t.is_finite() && t > 0.0)
    {
        return Err(bad("timeout", "expected a positive number of seconds"));
    }
    if entry.max_concurrency == Some(0) {
        return Err(bad("max_concurrency", "expected at least 1"));
    }
    if entry.refresh == Some(0) {
        return Err(bad("refresh", "expected at least 1 second"));
    }
    for (field, globs) in [("include", &entry.include), ("exclude", &entry.exclude)] {
        if globs.len() > crate::limits::LIST_ENTRIES
            || globs.iter().any(|g| g.len() > crate::limits::GLOB)
        {
            return Err(bad(field, "too many or too long patterns"));
        }
    }
    entry
        .session_context
        .check()
        .map_err(|(field, message)| ServerError { field, message })?;
    Ok(UpstreamSpec {
        groups: union_groups(file_groups, &entry.groups),
        name: entry.name,
        url,
        command,
        prefix: entry.prefix,
        include: entry.include,
        exclude: entry.exclude,
        headers: entry.headers,
        ca_file: entry.ca_file,
        ca_pem: None,
        timeout: entry.timeout,
        max_concurrency: entry.max_concurrency.unwrap_or(DEFAULT_CONCURRENCY),
        refresh: entry.refresh.unwrap_or(DEFAULT_REFRESH),
        cache_ttl: entry.cache_ttl,
        rate_limit: entry.rate_limit,
        session_context: entry.session_context,
        source: source.to_string(),
    })
}

/// Exactly one of `url` (streamable HTTP) and `command` (stdio), each with only its own
/// fields.
fn transport_of(
    entry: &mut ServerEntry,
) -> Result<(String, Option<stdio::StdioCommand>), ServerError> {
    let as_error = |(field, message): (String, String)| ServerError { field, message };
    let Some(url) = entry.url.take() else {
        if let Some(field) = [
            ("headers", !entry.headers.is_empty()),
            ("ca_file", entry.ca_file.is_some()),
        ]
        .iter()
        .find_map(|(f, set)| set.then_some(*f))
        {
            return Err(as_error(stdio::misplaced(field, true)));
        }
        let fields = stdio::StdioFields {
            command: entry.command.take(),
            args: entry.args.take(),
            env: entry.env.take(),
            env_passthrough: entry.env_passthrough.take(),
        };
        let command = stdio::parse(fields).map_err(as_error)?;
        return Ok((String::new(), Some(command)));
    };
    if entry.ca_file.is_some() && !url.starts_with("https://") {
        return Err(bad("ca_file", "a CA applies to an https:// url only"));
    }
    if entry.command.is_some() {
        return Err(bad(
            "command",
            "give either url (a streamable HTTP endpoint) or command (a stdio server), not both",
        ));
    }
    if let Some(field) = [
        ("args", entry.args.is_some()),
        ("env", entry.env.is_some()),
        ("env_passthrough", entry.env_passthrough.is_some()),
    ]
    .iter()
    .find_map(|(f, set)| set.then_some(*f))
    {
        return Err(as_error(stdio::misplaced(field, false)));
    }
    let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
    if !scheme_ok || url.len() > crate::limits::PATH {
        return Err(bad("url", "expected an http:// or https:// URL"));
    }
    Ok((url, None))
}

fn check_slug(name: &str) -> Result<(), String> {
    if crate::limits::is_dns_label(name) {
        Ok(())
    } else {
        Err("expected 1 to 63 lowercase letters, digits and '-' (not at either end)".into())
    }
}

/// One tool as an upstream listed it (`tools/list`), in plain data.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Discovered {
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub annotations: Annotations,
}

/// An upstream tool that is not served, and why (logged and counted; never shown to
/// callers, who cannot tell a refused tool from one that does not exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The upstream's name of the tool (bounded for logs).
    pub name: String,
    pub reason: String,
}

/// What [`convert`] made of a listing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Converted {
    pub tools: Vec<Tool>,
    /// Left out by `include`/`exclude` (a count: the names are the upstream's business).
    pub filtered: usize,
    pub refused: Vec<Refused>,
}

/// Normalizes an upstream tool name to the catalog's name rule: letters, digits, `_` and
/// `-` stay, every other character (a `.`, a space, `/`, a non-ASCII letter) becomes `_`.
pub fn normalize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Whether `name` passes `include` (empty: everything) and not `exclude`.
pub fn admitted(spec: &UpstreamSpec, name: &str) -> bool {
    let included = spec.include.is_empty()
        || spec
            .include
            .iter()
            .any(|g| crate::pattern::fnmatch(g, name));
    included
        && !spec
            .exclude
            .iter()
            .any(|g| crate::pattern::fnmatch(g, name))
}

/// Turns an upstream's listing into catalog tools: filtered, names normalized (a name
/// that normalizes to nothing, runs too long, or to a name an earlier tool of the listing
/// took is refused), schemas checked. Keys across sources are checked where the catalog
/// is assembled, as for every tool.
pub fn convert(spec: &UpstreamSpec, listed: &[Discovered]) -> Converted {
    let mut out = Converted::default();
    let mut taken: BTreeMap<String, String> = BTreeMap::new();
    for d in listed {
        if !admitted(spec, &d.name) {
            out.filtered += 1;
            continue;
        }
        let refuse = |reason: String| Refused {
            name: d.name.chars().take(MAX_NAME).collect(),
            reason,
        };
        let name = format!("{}{}", spec.prefix, normalize(&d.name));
        if d.name.is_empty() {
            out.refused.push(refuse("the upstream gave no name".into()));
            continue;
        }
        if name.len() > MAX_NAME {
            out.refused.push(refuse(format!(
                "the name is longer than {MAX_NAME} characters"
            )));
            continue;
        }
        if let Some(first) = taken.get(&name) {
            out.refused.push(refuse(format!(
                "its name normalizes to '{name}', which upstream tool '{first}' already has"
            )));
            continue;
        }
        match tool_of(spec, d, &name) {
            Ok(tool) => {
                taken.insert(name, d.name.clone());
                out.tools.push(tool);
            }
            Err(reason) => out.refused.push(refuse(reason)),
        }
    }
    out
}

fn tool_of(spec: &UpstreamSpec, d: &Discovered, name: &str) -> Result<Tool, String> {
    let schema_len = d.input_schema.to_string().len();
    if schema_len > MAX_INPUT_SCHEMA_BYTES {
        return Err(format!(
            "its input schema is {schema_len} bytes (at most {MAX_INPUT_SCHEMA_BYTES})"
        ));
    }
    let params = params_of(&d.input_schema)?;
    let input_schema = InputSchema::compiled(d.input_schema.clone())
        .map_err(|e| format!("its input schema is not a valid JSON Schema: {e}"))?;
    if let Some(schema) = &d.output_schema {
        if schema.to_string().len() > crate::limits::OUTPUT_SCHEMA_BYTES {
            return Err("its output schema is too large".into());
        }
        annotations::check_schema(schema).map_err(|e| format!("its output schema is {e}"))?;
    }
    let description = d.description.clone().unwrap_or_default();
    if description.chars().count() > crate::limits::DESCRIPTION {
        return Err("its description is too long".into());
    }
    if d.annotations
        .title
        .as_ref()
        .is_some_and(|t| t.chars().count() > crate::limits::TITLE)
    {
        return Err("its title is too long".into());
    }
    Ok(Tool {
        key: tool_key(&spec.groups, name),
        name: name.to_string(),
        groups: spec.groups.clone(),
        description,
        example: String::new(),
        kind: ToolKind::Mcp {
            server: spec.name.clone(),
            tool: d.name.clone(),
            input_schema,
        },
        params,
        stdin: false,
        limits: crate::tool::Limits {
            timeout: spec.timeout,
            ..Default::default()
        },
        cwd: None,
        env: BTreeMap::new(),
        env_file: None,
        env_passthrough: Default::default(),
        transform: None,
        cache_ttl: spec.cache_ttl,
        rate_limit: spec.rate_limit,
        return_type: None,
        annotations: d.annotations.clone(),
        output_schema: d.output_schema.clone(),
        approval_required: false,
        source: format!(
            "{}: tool '{}'",
            spec.source,
            d.name.chars().take(MAX_NAME).collect::<String>()
        ),
    })
}

/// The params a signature shows for an input schema: its `properties` in order, each
/// with the type MCC's six types come closest to (a property without one `type` shows
/// as `dict`: calls are validated against the schema itself, not these params).
fn params_of(schema: &Value) -> Result<Vec<Param>, String> {
    let Some(root) = schema.as_object() else {
        return Err("its input schema is not an object".into());
    };
    if root.get("type").and_then(Value::as_str) != Some("object") {
        return Err("its input schema's root is not \"type\": \"object\"".into());
    }
    let required: Vec<&str> = root
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = root.get("properties") else {
        return Ok(vec![]);
    };
    let Some(properties) = properties.as_object() else {
        return Err("its input schema's properties are not a mapping".into());
    };
    if properties.len() > crate::limits::PARAMS {
        return Err(format!(
            "it takes {} params (at most {})",
            properties.len(),
            crate::limits::PARAMS
        ));
    }
    Ok(properties
        .iter()
        .map(|(name, prop)| {
            let ty = match prop.get("type").and_then(Value::as_str) {
                Some("string") => ParamType::Str,
                Some("integer") => ParamType::Int,
                Some("number") => ParamType::Float,
                Some("boolean") => ParamType::Bool,
                Some("array") => ParamType::List,
                _ => ParamType::Dict,
            };
            let description: String = prop
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .chars()
                .take(crate::limits::SHORT_TEXT)
                .collect();
            Param {
                name: name.clone(),
                ty,
                required: required.contains(&name.as_str()),
                default: prop.get("default").cloned(),
                description,
                example: None,
                override_value: None,
            }
        })
        .collect())
}

#[cfg(test)]
#[path = "upstream_tests.rs"]
mod tests;
