//! The MCC YAML loader: files, directories and globs of tool files into one catalog.
//!
//! Per file: YAML parsed (anchors and `<<` merge keys included); then `$VAR`/`${VAR}`
//! substituted in every string value from the process environment ([`substitute`]: unset
//! variables stay literal, `$$` is a `$`); file-level `groups`/`env`/`env_file` cascaded
//! into each entry; entries built by [`crate::spec`]. Across files: fn tools introspected
//! in batches ([`crate::introspect`]), duplicate keys rejected naming both places.
//!
//! MCC (EnvYAML) substitutes the raw file text before parsing; we substitute parsed
//! string values, so a value can never break the YAML or change type, keys and comments
//! are never touched, and `${NAME|default}` is not a form we know (it stays literal).
//! Like MCC, a `$HOME` in an exec command is expanded at load time when the gateway's
//! environment has `HOME`; write `$$HOME` for the shell to see `$HOME`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::introspect::{self, Introspector, Pending};
use crate::key::union_groups;
use crate::spec::{BuiltTool, build_tool, parse_entry, strip_unknown_param_keys, unknown_keys};
use crate::tool::Tool;
use crate::upstream::{self, UpstreamSpec};

/// Why a catalog could not be loaded. Every variant names the file; entry errors name the
/// tool (index and name) and the field.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: invalid YAML: {message}")]
    Yaml { path: PathBuf, message: String },
    #[error("{path}: {field}: {message}")]
    File {
        path: PathBuf,
        field: String,
        message: String,
    },
    #[error("{path}: {tool}: {field}: {message}")]
    Entry {
        path: PathBuf,
        tool: ToolRef,
        field: String,
        message: String,
    },
    /// MCC's message (groups as a Python list), then the key and both places.
    #[error(
        "Duplicate tool {name} in groups {groups}: key '{key}' is defined twice, in {first} and in {second}",
        groups = crate::pyfmt::repr(&serde_json::Value::from(.groups.clone()))
    )]
    Duplicate {
        key: String,
        name: String,
        groups: Vec<String>,
        first: String,
        second: String,
    },
    /// An `mcp_servers:` entry ([`crate::upstream`]).
    #[error("{path}: mcp_servers[{index}]{name}: {field}: {message}", name = .name.as_ref().map(|n| format!(" '{n}'")).unwrap_or_default())]
    Server {
        path: PathBuf,
        index: usize,
        name: Option<String>,
        field: String,
        message: String,
    },
    #[error("{pattern}: no tool files match")]
    NoMatch { pattern: String },
    #[error(transparent)]
    Introspection(#[from] introspect::IntrospectError),
}

/// Which entry of a file an error is about: its index in `tools:` and its name if known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRef {
    pub index: usize,
    pub name: Option<String>,
}

impl fmt::Display for ToolRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(n) => write!(f, "tools[{}] '{n}'", self.index),
            None => write!(f, "tools[{}]", self.index),
        }
    }
}

/// Something worth telling the user that does not stop the load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub path: PathBuf,
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

/// A loaded catalog: tools in load order, and the warnings met on the way.
#[derive(Debug, Default)]
pub struct Loaded {
    pub tools: Vec<Tool>,
    /// The upstream MCP servers declared (`mcp_servers:`), names unique across files.
    pub servers: Vec<UpstreamSpec>,
    pub warnings: Vec<Warning>,
}

/// Expands a tools setting entry: a file, a directory (its `*.yaml`/`*.yml`, sorted, not
/// recursive) or a glob (`*`, `?`, `[`, `**`).
pub fn expand(entry: &str) -> Result<Vec<PathBuf>, LoadError> {
    let path = Path::new(entry);
    if entry.contains(['*', '?', '[']) {
        let mut files: Vec<PathBuf> = glob::glob(entry)
            .map_err(|e| LoadError::File {
                path: path.into(),
                field: "pattern".into(),
                message: e.to_string(),
            })?
            .filter_map(Result::ok)
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(LoadError::NoMatch {
                pattern: entry.to_string(),
            });
        }
        return Ok(files);
    }
    if path.is_dir() {
        let read = std::fs::read_dir(path).map_err(|source| LoadError::Io {
            path: path.into(),
            source,
        })?;
        let mut files: Vec<PathBuf> = read
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.is_file()
                    && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
            })
            .collect();
        files.sort();
        return Ok(files);
    }
    if !path.exists() {
        return Err(LoadError::Io {
            path: path.into(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file or directory"),
        });
    }
    Ok(vec![path.to_path_buf()])
}

/// Loads every entry (file, directory or glob) with the process environment for
/// substitution, introspects fn tools, and rejects duplicate keys.
pub fn load(entries: &[String], introspector: &Introspector) -> Result<Loaded, LoadError> {
    let (mut loaded, pending) = parse_entries(entries)?;
    introspector.fill(&mut loaded.tools, &pending)?;
    check_duplicates(&loaded.tools)?;
    Ok(loaded)
}

/// [`load`] up to introspection: every entry parsed (with the process environment for
/// substitution), and the fn tools introspection still has to fill in. A caller that
/// leaves out the tools it cannot introspect (the gateway) goes on with
/// [`Introspector::fill_each`].
pub fn parse_entries(entries: &[String]) -> Result<(Loaded, Vec<Pending>), LoadError> {
    let vars: BTreeMap<String, String> = std::env::vars().collect();
    let mut loaded = Loaded::default();
    let mut pending = Vec::new();
    for entry in entries {
        for path in expand(entry)? {
            let text = std::fs::read_to_string(&path).map_err(|source| LoadError::Io {
                path: path.clone(),
                source,
            })?;
            let file = parse_file(&path, &text, &|name| vars.get(name).cloned())?;
            loaded.warnings.extend(file.warnings);
            add_servers(&mut loaded.servers, file.servers, &path)?;
            for built in file.tools {
                if built.needs_introspection {
                    pending.push(Pending {
                        index: loaded.tools.len(),
                        name_from_callable: built.name_from_callable,
                    });
                }
                loaded.tools.push(built.tool);
            }
        }
    }
    Ok((loaded, pending))
}

/// Adds one file's upstreams: a name declared twice (in any files) is an error naming
/// both places, as a key declared twice is.
fn add_servers(
    all: &mut Vec<UpstreamSpec>,
    more: Vec<UpstreamSpec>,
    path: &Path,
) -> Result<(), LoadError> {
    for spec in more {
        if let Some(first) = all.iter().find(|s| s.name == spec.name) {
            return Err(file_error(
                path,
                "mcp_servers",
                &format!(
                    "upstream '{}' is declared twice, in {} and in {}",
                    spec.name, first.source, spec.source
                ),
            ));
        }
        if all.len() >= upstream::MAX_SERVERS {
            return Err(file_error(
                path,
                "mcp_servers",
                &format!("at most {} upstream MCP servers", upstream::MAX_SERVERS),
            ));
        }
        all.push(spec);
    }
    Ok(())
}

/// One parsed file: its tools (with what introspection still has to fill in), its
/// upstream MCP servers and warnings. Each tool's `source` is
/// `<file>: tools[<index>] '<name or fn>'`, each server's `<file>: mcp_servers[<index>] '<name>'`.
#[derive(Debug, Default)]
pub struct ParsedFile {
    pub tools: Vec<BuiltTool>,
    pub servers: Vec<UpstreamSpec>,
    pub warnings: Vec<Warning>,
}

/// Parses one tool file's text. `lookup` resolves `$VAR` references.
pub fn parse_file(
    path: &Path,
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<ParsedFile, LoadError> {
    let mut doc: Value =
        serde_saphyr::from_str_with_options(text, yaml_options()).map_err(|e| {
            let message = e.to_string();
            LoadError::Yaml {
                path: path.into(),
                // serde-saphyr starts with its own `error: `; ours says it already.
                message: message
                    .strip_prefix("error: ")
                    .unwrap_or(&message)
                    .to_string(),
            }
        })?;
    substitute_values(&mut doc, lookup);
    let mut out = ParsedFile::default();
    // As in MCC, a document that is not a mapping (empty, a list, a scalar) has no
    // `tools` key and is skipped with a warning: other YAML may share a directory. A file
    // of upstream MCP servers only (`mcp_servers:`) is a tool file too.
    let Some(top) = doc
        .as_object()
        .filter(|t| t.contains_key("tools") || t.contains_key("mcp_servers"))
    else {
        out.warnings.push(skip_warning(path));
        return Ok(out);
    };
    let no_tools = Value::Array(vec![]);
    let entries = top
        .get("tools")
        .unwrap_or(&no_tools)
        .as_array()
        .ok_or_else(|| file_error(path, "tools", "expected a list of tool entries"))?;
    let defaults = file_defaults(path, top)?;
    out.servers = parse_servers(path, top.get("mcp_servers"), &defaults.groups)?;
    for key in top
        .keys()
        .filter(|k| !FILE_KEYS.contains(&k.as_str()) && !k.starts_with("x-"))
    {
        out.warnings.push(Warning {
            path: path.into(),
            message: format!("unknown file-level key '{key}' ignored"),
        });
    }
    for (index, raw) in entries.iter().enumerate() {
        let built = parse_entry_at(path, index, raw, &defaults, &mut out.warnings)?;
        out.tools.push(built);
    }
    Ok(out)
}

/// The keys a tool file may have at the top (besides `x-*`).
const FILE_KEYS: [&str; 5] = ["tools", "groups", "env", "env_file", "mcp_servers"];

/// The file's `mcp_servers:` list ([`crate::upstream::parse_server`]); the file's
/// `groups` go before each server's own.
fn parse_servers(
    path: &Path,
    raw: Option<&Value>,
    file_groups: &[String],
) -> Result<Vec<UpstreamSpec>, LoadError> {
    let entries = match raw {
        None | Some(Value::Null) => return Ok(vec![]),
        Some(Value::Array(entries)) => entries,
        Some(_) => {
            return Err(file_error(
                path,
                "mcp_servers",
                "expected a list of upstream MCP servers",
            ));
        }
    };
    entries
        .iter()
        .enumerate()
        .map(|(index, raw)| {
            let name = raw.get("name").and_then(Value::as_str).map(str::to_string);
            let source = match &name {
                Some(n) => format!("{}: mcp_servers[{index}] '{n}'", path.display()),
                None => format!("{}: mcp_servers[{index}]", path.display()),
            };
            upstream::parse_server(raw, file_groups, &source).map_err(|e| LoadError::Server {
                path: path.into(),
                index,
                name: name.clone(),
                field: e.field,
                message: e.message,
            })
        })
        .collect()
}

/// What a file gives every entry: `groups`, `env`, `env_file`.
struct FileDefaults {
    groups: Vec<String>,
    env: Map<String, Value>,
    env_file: Option<String>,
}

fn file_error(path: &Path, field: &str, message: &str) -> LoadError {
    LoadError::File {
        path: path.into(),
        field: field.into(),
        message: message.into(),
    }
}

fn file_defaults(path: &Path, top: &Map<String, Value>) -> Result<FileDefaults, LoadError> {
    let groups = string_list(top.get("groups"))
        .ok_or_else(|| file_error(path, "groups", "expected a list of group names"))?;
    let env = match top.get("env") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(env)) => env.clone(),
        Some(_) => return Err(file_error(path, "env", "expected a mapping")),
    };
    let env_file = match top.get("env_file") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(file_error(path, "env_file", "expected a path")),
    };
    Ok(FileDefaults {
        groups,
        env,
        env_file,
    })
}

/// Builds entry `index` of the file's `tools:` with the file's defaults cascaded in;
/// unknown keys become warnings.
fn parse_entry_at(
    path: &Path,
    index: usize,
    raw: &Value,
    defaults: &FileDefaults,
    warnings: &mut Vec<Warning>,
) -> Result<BuiltTool, LoadError> {
    let name = raw
        .get("name")
        .and_then(Value::as_str)
        .or_else(|| raw.get("fn").and_then(Value::as_str));
    let tool_ref = ToolRef {
        index,
        name: name.map(str::to_string),
    };
    let entry_err = |field: String, message: String| LoadError::Entry {
        path: path.into(),
        tool: tool_ref.clone(),
        field,
        message,
    };
    let mut warn = |message: String| {
        warnings.push(Warning {
            path: path.into(),
            message,
        })
    };
    let Some(map) = raw.as_object() else {
        return Err(entry_err("(entry)".into(), "expected a mapping".into()));
    };
    for key in unknown_keys(map) {
        warn(format!("{tool_ref}: unknown key '{key}' ignored"));
    }
    let mut merged = cascade(map, defaults).map_err(|(f, m)| entry_err(f, m))?;
    for (i, key) in strip_unknown_param_keys(&mut merged) {
        warn(format!(
            "{tool_ref}: params[{i}]: unknown key '{key}' ignored"
        ));
    }
    let spec = parse_entry(Value::Object(merged)).map_err(|e| entry_err(e.field, e.message))?;
    let source = format!("{}: {tool_ref}", path.display());
    build_tool(spec, &source).map_err(|e| entry_err(e.field, e.message))
}

/// YAML 1.2 booleans only (`true`/`false`): serde-saphyr's YAML 1.1 mode would read `y`
/// and `n` as booleans, which PyYAML does not (`name: n` must stay a name). PyYAML's other
/// words (`yes`, `off`, ...) are accepted where a boolean is expected, see
/// [`crate::spec::yaml11_bool`]. Duplicate mapping keys are an error (PyYAML keeps the
/// last one silently). Anchors, aliases and `<<` merges are expanded, within
/// serde-saphyr's default budget against alias bombs.
fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! { strict_booleans: true }
}

fn skip_warning(path: &Path) -> Warning {
    Warning {
        path: path.into(),
        message: "skipping, not a tool file (no 'tools' key)".into(),
    }
}

fn string_list(v: Option<&Value>) -> Option<Vec<String>> {
    match v {
        None | Some(Value::Null) => Some(vec![]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_string))
            .collect(),
        Some(_) => None,
    }
}

/// File-level defaults under an entry: groups unioned (file first), env merged (entry
/// wins), env_file used when the entry has none (or an empty one).
fn cascade(
    entry: &Map<String, Value>,
    defaults: &FileDefaults,
) -> Result<Map<String, Value>, (String, String)> {
    let mut merged = entry.clone();
    merged.retain(|k, _| !k.starts_with("x-"));
    let own = string_list(entry.get("groups")).ok_or((
        "groups".to_string(),
        "expected a list of group names".to_string(),
    ))?;
    merged.insert(
        "groups".into(),
        Value::from(union_groups(&defaults.groups, &own)),
    );
    if !defaults.env.is_empty() {
        let mut all = defaults.env.clone();
        match entry.get("env") {
            None | Some(Value::Null) => {}
            Some(Value::Object(own)) => all.extend(own.clone()),
            Some(_) => return Err(("env".into(), "expected a mapping of names to values".into())),
        }
        merged.insert("env".into(), Value::Object(all));
    }
    let entry_has_env_file = match entry.get("env_file") {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    };
    if let Some(file) = &defaults.env_file
        && !entry_has_env_file
    {
        merged.insert("env_file".into(), Value::from(file.as_str()));
    }
    Ok(merged)
}

/// Replaces `$VAR` and `${VAR}` in every string value of `v` (keys are left alone).
fn substitute_values(v: &mut Value, lookup: &dyn Fn(&str) -> Option<String>) {
    match v {
        Value::String(s) if s.contains('$') => *s = substitute(s, lookup),
        Value::Array(items) => items.iter_mut().for_each(|i| substitute_values(i, lookup)),
        Value::Object(map) => map.values_mut().for_each(|i| substitute_values(i, lookup)),
        _ => {}
    }
}

/// Load-time substitution on one string: `$NAME` and `${NAME}` (NAME =
/// `[A-Za-z_][A-Za-z0-9_]*`) become the variable's value; an unset variable, or any other
/// `$` form (`${A-B}`, `${X|default}`, `$1`), is left as written; `$$` is a literal `$`.
pub fn substitute(s: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(escaped) = after.strip_prefix('$') {
            out.push('$');
            rest = escaped;
            continue;
        }
        // The reference is the text after `$` that names the variable: `NAME` or `{NAME}`.
        let (name, reference_len) = match after.strip_prefix('{') {
            Some(inner) => match inner.find('}') {
                Some(end) if is_var_name(&inner[..end]) => (&inner[..end], end + 2),
                _ => ("", 0),
            },
            None => {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                if is_var_name(&after[..end]) {
                    (&after[..end], end)
                } else {
                    ("", 0)
                }
            }
        };
        match (reference_len, lookup(name)) {
            (0, _) => {
                out.push('$');
                rest = after;
            }
            (_, None) => {
                out.push_str(&rest[at..at + 1 + reference_len]);
                rest = &after[reference_len..];
            }
            (_, Some(value)) => {
                out.push_str(&value);
                rest = &after[reference_len..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn is_var_name(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Rejects two tools with one key, naming both places (each tool's `source`).
pub fn check_duplicates(tools: &[Tool]) -> Result<(), LoadError> {
    let mut seen: BTreeMap<&str, &Tool> = BTreeMap::new();
    for tool in tools {
        if let Some(first) = seen.insert(&tool.key, tool) {
            return Err(LoadError::Duplicate {
                key: tool.key.clone(),
                name: tool.name.clone(),
                groups: tool.groups.clone(),
                first: first.source.clone(),
                second: tool.source.clone(),
            });
        }
    }
    Ok(())
}
