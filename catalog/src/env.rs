//! The environment of a tool process, assembled in one place and one order:
//! env floor → `env_passthrough` → `env_file` (in Kubernetes mode: the `envFrom` sources)
//! → `env` → `env` entries with `valueFrom` → the session context (last, so no tool can
//! spoof the caller; every `MCC_CTX*` name a lower layer set is dropped first, so a
//! context without an email leaves no `MCC_CTX_EMAIL` at all). Nothing here reads the process environment itself: the
//! caller passes the spawning process's environment in, which keeps the rule testable
//! and pure.
//!
//! The first two layers come from the environment of the process that spawns the tool
//! (the gateway in file mode, the executor container in Kubernetes mode), so they are
//! applied where the tool is spawned: an [`EnvSpec`] carries the floor names, the
//! passthrough rule and the variables set over them, and [`EnvSpec::resolve`] finishes
//! the job there. Whatever the passthrough says, the gateway's own settings
//! ([`is_gateway_setting`]) are never inherited.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use crate::pattern::fnmatch;
use crate::tool::{EnvPassthrough, Tool, ToolKind};

/// Variables outside the `MCC_` prefix that the gateway reads as its own settings.
pub const GATEWAY_SETTINGS: &[&str] = &["REDIS_URL"];

/// Whether `name` is one of the gateway's settings (`MCC_*`, its OpenTelemetry
/// exporter's `OTEL_*`, [`GATEWAY_SETTINGS`]). A tool never inherits one, even with
/// `env_passthrough: true` or a `*` glob: the gateway's configuration (an OTLP
/// exporter's headers may hold an API key) is not the tool's environment (a narrowing of
/// seed 002's "`true` passes everything"); a tool that exports traces of its own gets its
/// `OTEL_*` from its `env`. The context variables (`MCC_CTX`, `MCC_CTX_<NAME>`) a tool
/// sees are set by the context layer, never inherited.
pub fn is_gateway_setting(name: &str) -> bool {
    name.starts_with("MCC_") || name.starts_with("OTEL_") || GATEWAY_SETTINGS.contains(&name)
}

/// The variables a tool takes from the spawning process's environment `parent`: the
/// floor names and what `passthrough` admits, minus the gateway's settings.
pub fn inherited<'a>(
    parent: &'a [(String, String)],
    floor: &'a [String],
    passthrough: &'a EnvPassthrough,
) -> impl Iterator<Item = (String, String)> + 'a {
    parent
        .iter()
        .filter(move |(k, _)| {
            !is_gateway_setting(k) && (floor.iter().any(|f| f == k) || passthrough.admits(k))
        })
        .cloned()
}

/// A tool process's environment as the runtime that spawns it receives it: what to
/// inherit from the runtime's own environment, and what to set over that. Holds secret
/// values: its `Debug` shows names only.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvSpec {
    /// Names of the env floor.
    pub floor: Vec<String>,
    /// The tool's `env_passthrough`.
    pub passthrough: EnvPassthrough,
    /// Set over the inherited variables: env_file / envFrom, env, valueFrom, context.
    pub set: BTreeMap<String, String>,
    /// fn tools: the working directory goes first on `PYTHONPATH` (the callable's module
    /// is imported from there).
    pub cwd_on_pythonpath: bool,
    /// Where `env_passthrough` reads from when it is not the runtime's own environment:
    /// the pod runtime's configured environment (the values travel in the per-call
    /// Secret, never in the Pod object). `None`: the runtime's environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passthrough_from: Option<Vec<(String, String)>>,
    /// Pod runtime: `envFrom` and `valueFrom` reach the process as Kubernetes references
    /// of the Pod spec, under [`ENV_FROM_PREFIX`] and [`VALUE_FROM_PREFIX`] in the
    /// runtime's own environment (their values never pass through the gateway);
    /// [`EnvSpec::resolve`] puts them in the layers where the local runtime puts them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub references_in_env: bool,
}

/// Pod runtime: the prefix under which the Pod spec's `envFrom` sources are delivered.
pub const ENV_FROM_PREFIX: &str = "MCC_ENVFROM_";
/// Pod runtime: the prefix under which the Pod spec's `valueFrom` entries are delivered.
pub const VALUE_FROM_PREFIX: &str = "MCC_VALUEFROM_";

impl std::fmt::Debug for EnvSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvSpec")
            .field("floor", &self.floor)
            .field("passthrough", &self.passthrough)
            .field("set (names only)", &self.set.keys().collect::<Vec<_>>())
            .field("cwd_on_pythonpath", &self.cwd_on_pythonpath)
            .field(
                "passthrough_from (names only)",
                &self
                    .passthrough_from
                    .as_ref()
                    .map(|v| v.iter().map(|(k, _)| k).collect::<Vec<_>>()),
            )
            .field("references_in_env", &self.references_in_env)
            .finish()
    }
}

impl EnvSpec {
    /// The spec of `tool`'s process: `set` comes from [`build_env`] without a parent.
    pub fn for_tool(tool: &Tool, floor: &[String], set: BTreeMap<String, String>) -> Self {
        Self {
            floor: floor.to_vec(),
            // `None` (the field left out) cannot be serialized; it means `false`.
            passthrough: match &tool.env_passthrough {
                EnvPassthrough::None => EnvPassthrough::All(false),
                other => other.clone(),
            },
            set,
            cwd_on_pythonpath: tool.kind.is_fn(),
            passthrough_from: None,
            references_in_env: false,
        }
    }

    /// The complete environment, in the spawning process: `parent` is its environment,
    /// `cwd` the tool's working directory there.
    pub fn resolve(&self, parent: &[(String, String)], cwd: &Path) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = match &self.passthrough_from {
            None => inherited(parent, &self.floor, &self.passthrough).collect(),
            Some(source) => inherited(parent, &self.floor, &EnvPassthrough::All(false))
                .chain(inherited(source, &[], &self.passthrough))
                .collect(),
        };
        // The context layer (in `set`) owns every `MCC_CTX*` name, as in [`build_env`].
        let delivered = |prefix: &'static str| {
            parent.iter().filter_map(move |(k, v)| {
                let name = k.strip_prefix(prefix)?;
                (self.references_in_env && !name.is_empty() && !is_context_name(name))
                    .then(|| (name.to_string(), v.clone()))
            })
        };
        env.extend(delivered(ENV_FROM_PREFIX));
        env.extend(self.set.iter().map(|(k, v)| (k.clone(), v.clone())));
        env.extend(delivered(VALUE_FROM_PREFIX));
        if self.cwd_on_pythonpath {
            let pythonpath = prepend_pythonpath(
                &cwd.display().to_string(),
                env.get("PYTHONPATH").map(String::as_str),
            );
            env.insert("PYTHONPATH".into(), pythonpath);
        }
        env
    }
}

/// The default env floor: "machine works" variables, no secrets.
pub const DEFAULT_FLOOR: [&str; 10] = [
    "PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "LANG", "LC_ALL", "TZ", "TERM", "SHELL",
];

/// Builds a tool's environment. `parent` is the spawning process's environment (empty
/// when the runtime adds the inherited layers, see [`EnvSpec`]), `floor` the
/// deployment's floor names, `env_file` the parsed dotenv pairs of the tool's env file
/// (or the resolved `envFrom` sources, in order), `value_from` the resolved `valueFrom`
/// entries of a Kubernetes `Tool`.
pub fn build_env(
    tool: &Tool,
    parent: &[(String, String)],
    floor: &[String],
    env_file: &[(String, String)],
    value_from: &[(String, String)],
    context: &Map<String, Value>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> =
        inherited(parent, floor, &tool.env_passthrough).collect();
    env.extend(env_file.iter().cloned());
    env.extend(tool.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.extend(value_from.iter().cloned());
    // The context layer owns every `MCC_CTX*` name: a caller without an email must not
    // see an `MCC_CTX_EMAIL` that the tool's env, env_file or a Secret supplied.
    env.retain(|name, _| !is_context_name(name));
    match &tool.kind {
        ToolKind::Fn { .. } => {
            env.insert(
                "MCC_CTX".into(),
                crate::pyfmt::json_dumps(&Value::Object(context.clone())),
            );
            // The reference's runner skips autoloading its own catalog in the child.
            env.insert("MCC_SKIP_AUTOLOAD".into(), "1".into());
        }
        ToolKind::Exec { .. } | ToolKind::Curl { .. } => {
            env.extend(context_vars(context));
        }
        // No process: an upstream gets no environment (and no context) from us.
        ToolKind::Mcp { .. } => {}
    }
    env
}

/// Whether `name` belongs to the context layer (`MCC_CTX`, `MCC_CTX_<NAME>`, and
/// anything else starting `MCC_CTX`): only [`build_env`]'s context sets such a name.
pub fn is_context_name(name: &str) -> bool {
    name.starts_with("MCC_CTX")
}

/// `MCC_CTX_<NAME>` variables of exec tools: strings raw, everything else as Python's
/// `json.dumps` writes it (numbers bare, `true`/`false`, `["admin", "osint"]`).
pub fn context_vars(context: &Map<String, Value>) -> impl Iterator<Item = (String, String)> + '_ {
    context.iter().map(|(k, v)| {
        let value = match v {
            Value::String(s) => s.clone(),
            other => crate::pyfmt::json_dumps(other),
        };
        (format!("MCC_CTX_{}", k.to_uppercase()), value)
    })
}

/// Prepends `dir` to a `PYTHONPATH` value.
pub fn prepend_pythonpath(dir: &str, existing: Option<&str>) -> String {
    match existing {
        Some(rest) if !rest.is_empty() => format!("{dir}:{rest}"),
        _ => dir.to_string(),
    }
}

/// A line of a dotenv file that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct DotenvError {
    pub line: usize,
    pub reason: String,
}

/// Parses dotenv text: `KEY=value`, `export KEY=value`, `#` comments, blank lines,
/// single quotes (literal), double quotes (with `\n`, `\"`, `\\` escapes), and inline
/// ` #` comments after unquoted values.
pub fn parse_dotenv(text: &str) -> Result<Vec<(String, String)>, DotenvError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line
            .strip_prefix("export ")
            .map(str::trim_start)
            .unwrap_or(line);
        let err = |reason: &str| DotenvError {
            line: i + 1,
            reason: reason.to_string(),
        };
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| err("expected KEY=value"))?;
        let key = key.trim();
        let valid_key = key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        if !valid_key {
            return Err(err(&format!("invalid variable name '{key}'")));
        }
        let value = value.trim();
        let value = if let Some(rest) = value.strip_prefix('\'') {
            rest.split_once('\'')
                .map(|(v, _)| v.to_string())
                .ok_or_else(|| err("unterminated single quote"))?
        } else if let Some(rest) = value.strip_prefix('"') {
            unquote_double(rest).ok_or_else(|| err("unterminated double quote"))?
        } else {
            match value.find(" #") {
                Some(at) => value[..at].trim_end().to_string(),
                None => value.to_string(),
            }
        };
        out.push((key.to_string(), value));
    }
    Ok(out)
}

fn unquote_double(rest: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn exec_tool() -> Tool {
        serde_json::from_value(json!({"key": "t", "name": "t", "kind": "exec", "command": "env"}))
            .unwrap()
    }
    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }
    fn floor() -> Vec<String> {
        DEFAULT_FLOOR.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn precedence_floor_passthrough_file_env_context() {
        let parent = pairs(&[
            ("PATH", "/bin"),
            ("AWS_KEY", "a"),
            ("SECRET", "s"),
            ("MCC_CTX_USER", "spoof"),
        ]);
        let mut tool = exec_tool();
        tool.env_passthrough = EnvPassthrough::Globs(vec!["AWS_*".into()]);
        tool.env.insert("FROM".into(), "env".into());
        tool.env.insert("MCC_CTX_USER".into(), "mallory".into());
        let file = pairs(&[("FROM", "file"), ("ONLY_FILE", "1"), ("AWS_KEY", "file")]);
        let ctx = json!({"user": "alice", "budget": 1000, "ok": true, "groups": ["a"]});
        let env = build_env(
            &tool,
            &parent,
            &floor(),
            &file,
            &[],
            ctx.as_object().unwrap(),
        );
        assert_eq!(env["PATH"], "/bin");
        assert_eq!(env["AWS_KEY"], "file");
        assert_eq!(env["FROM"], "env");
        assert_eq!(env["ONLY_FILE"], "1");
        assert_eq!(env["MCC_CTX_USER"], "alice");
        assert_eq!(env["MCC_CTX_BUDGET"], "1000");
        assert_eq!(env["MCC_CTX_OK"], "true");
        assert_eq!(env["MCC_CTX_GROUPS"], "[\"a\"]");
        assert_eq!(
            build_env(
                &tool,
                &parent,
                &floor(),
                &file,
                &[],
                json!({"l": ["a", "b"]}).as_object().unwrap()
            )["MCC_CTX_L"],
            "[\"a\", \"b\"]"
        );
        assert!(!env.contains_key("SECRET"));
        assert!(!env.contains_key("MCC_CTX"));
    }

    #[test]
    fn no_context_name_survives_from_a_lower_layer() {
        // A caller without an email: no layer below the context may supply one.
        let ctx = json!({"user": "anonymous"});
        let mut exec = exec_tool();
        exec.env.insert("MCC_CTX_EMAIL".into(), "boss@corp".into());
        exec.env.insert("MCC_CTX".into(), "{}".into());
        let file = pairs(&[("MCC_CTX_GROUPS", "[\"admin\"]"), ("KEEP", "1")]);
        let secret = pairs(&[("MCC_CTXFOO", "x")]);
        let env = build_env(
            &exec,
            &[],
            &floor(),
            &file,
            &secret,
            ctx.as_object().unwrap(),
        );
        let ctx_names: Vec<&String> = env.keys().filter(|k| is_context_name(k)).collect();
        assert_eq!(ctx_names, ["MCC_CTX_USER"], "{env:?}");
        assert_eq!(env["KEEP"], "1");

        let mut func: Tool =
            serde_json::from_value(json!({"key": "f", "name": "f", "kind": "fn", "path": "m:f"}))
                .unwrap();
        func.env.insert("MCC_CTX_EMAIL".into(), "boss@corp".into());
        let env = build_env(&func, &[], &floor(), &file, &[], ctx.as_object().unwrap());
        let ctx_names: Vec<&String> = env.keys().filter(|k| is_context_name(k)).collect();
        assert_eq!(ctx_names, ["MCC_CTX"], "{env:?}");
        assert_eq!(env["MCC_CTX"], r#"{"user": "anonymous"}"#);
    }

    #[test]
    fn value_from_comes_after_env_and_before_context() {
        let mut tool = exec_tool();
        tool.env.insert("PLAIN".into(), "env".into());
        let from = pairs(&[("SHARED", "envFrom"), ("TOKEN", "envFrom")]);
        let value_from = pairs(&[("TOKEN", "secret"), ("MCC_CTX_USER", "spoof")]);
        let ctx = json!({"user": "alice"});
        let env = build_env(
            &tool,
            &[],
            &floor(),
            &from,
            &value_from,
            ctx.as_object().unwrap(),
        );
        assert_eq!(env["SHARED"], "envFrom");
        assert_eq!(env["TOKEN"], "secret");
        assert_eq!(env["PLAIN"], "env");
        assert_eq!(env["MCC_CTX_USER"], "alice");
    }

    #[test]
    fn passthrough_modes() {
        let parent = pairs(&[
            ("PATH", "/bin"),
            ("path", "x"),
            ("GIT_DIR", "g"),
            ("TOKEN", "t"),
        ]);
        let mut tool = exec_tool();
        let names = |t: &Tool| {
            build_env(t, &parent, &floor(), &[], &[], &Map::new())
                .into_keys()
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&tool), ["PATH"]);
        tool.env_passthrough = EnvPassthrough::Globs(vec!["GIT_?IR".into(), "PATH".into()]);
        assert_eq!(names(&tool), ["GIT_DIR", "PATH"]);
        tool.env_passthrough = EnvPassthrough::Globs(vec![]);
        assert_eq!(names(&tool), ["PATH"]);
        tool.env_passthrough = EnvPassthrough::All(true);
        assert_eq!(names(&tool), ["GIT_DIR", "PATH", "TOKEN", "path"]);
    }

    #[test]
    fn gateway_settings_are_never_inherited() {
        let parent = pairs(&[
            ("PATH", "/bin"),
            ("MCC_AUTH__JWT__HS256_SECRET", "s"),
            ("MCC_CTX_USER", "mallory"),
            ("REDIS_URL", "redis://:pw@r"),
            ("MCC_ENV_FLOOR", "PATH"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=k"),
            ("OTHER", "o"),
        ]);
        let mut tool = exec_tool();
        for passthrough in [
            EnvPassthrough::All(true),
            EnvPassthrough::Globs(vec!["*".into()]),
            EnvPassthrough::Globs(vec!["MCC_*".into(), "REDIS_URL".into(), "OTEL_*".into()]),
        ] {
            tool.env_passthrough = passthrough;
            let mut floor = floor();
            floor.push("REDIS_URL".into());
            floor.push("MCC_AUTH__JWT__HS256_SECRET".into());
            let env = build_env(&tool, &parent, &floor, &[], &[], &Map::new());
            let names: Vec<&str> = env.keys().map(String::as_str).collect();
            assert!(
                names == ["OTHER", "PATH"] || names == ["PATH"],
                "{:?}: {names:?}",
                tool.env_passthrough
            );
        }
    }

    #[test]
    fn env_spec_resolves_like_build_env_in_the_spawning_process() {
        let parent = pairs(&[("PATH", "/bin"), ("PYTHONPATH", "/lib"), ("GIT_DIR", "g")]);
        let mut tool = exec_tool();
        tool.env_passthrough = EnvPassthrough::Globs(vec!["GIT_*".into()]);
        tool.env = BTreeMap::from([("PATH".to_string(), "/tool/bin".to_string())]);
        let context = Map::from_iter([("user".to_string(), Value::from("alice"))]);
        let whole = build_env(&tool, &parent, &floor(), &[], &[], &context);
        let set = build_env(&tool, &[], &floor(), &[], &[], &context);
        let spec = EnvSpec::for_tool(&tool, &floor(), set);
        assert_eq!(spec.resolve(&parent, Path::new("/w")), whole);
        assert!(
            !format!("{spec:?}").contains("alice"),
            "Debug shows no values"
        );

        tool.kind = ToolKind::Fn {
            path: "m:f".into(),
            python: None,
        };
        let set = build_env(&tool, &[], &floor(), &[], &[], &context);
        let env = EnvSpec::for_tool(&tool, &floor(), set).resolve(&parent, Path::new("/w"));
        assert_eq!(env["PYTHONPATH"], "/w", "PYTHONPATH is not in the floor");
        let mut floor = floor();
        floor.push("PYTHONPATH".into());
        let set = build_env(&tool, &[], &floor, &[], &[], &context);
        let env = EnvSpec::for_tool(&tool, &floor, set).resolve(&parent, Path::new("/w"));
        assert_eq!(env["PYTHONPATH"], "/w:/lib");
    }

    /// The pod runtime's layering gives what a local run with resolved values gives.
    #[test]
    fn pod_layers_match_the_local_order() {
        let mut tool = exec_tool();
        tool.env_passthrough = EnvPassthrough::Globs(vec!["GIT_*".into()]);
        tool.env = BTreeMap::from([
            ("FROM".to_string(), "env".to_string()),
            ("TOKEN".to_string(), "env".to_string()),
        ]);
        let context = Map::from_iter([("user".to_string(), Value::from("alice"))]);
        let env_from = pairs(&[("FROM", "secret"), ("ONLY_SECRET", "1")]);
        let value_from = pairs(&[("TOKEN", "secret")]);
        let configured = pairs(&[("GIT_DIR", "configured"), ("OTHER", "x")]);
        let local = build_env(&tool, &configured, &[], &env_from, &value_from, &context);

        // In the pod: the image's own PATH, the references under their prefixes, a
        // spoofing attempt through a Secret key, and a GIT_DIR of the image's.
        let pod_env = pairs(&[
            ("PATH", "/image/bin"),
            ("GIT_DIR", "image"),
            ("MCC_ENVFROM_FROM", "secret"),
            ("MCC_ENVFROM_ONLY_SECRET", "1"),
            ("MCC_ENVFROM_MCC_CTX_USER", "mallory"),
            ("MCC_VALUEFROM_TOKEN", "secret"),
            ("MCC_VALUEFROM_MCC_CTX_USER", "mallory"),
        ]);
        let set = build_env(&tool, &[], &floor(), &[], &[], &context);
        let mut spec = EnvSpec::for_tool(&tool, &floor(), set);
        spec.passthrough_from = Some(configured.clone());
        spec.references_in_env = true;
        let env = spec.resolve(&pod_env, Path::new("/w"));
        let mut expected = local;
        expected.insert("PATH".into(), "/image/bin".into());
        assert_eq!(env, expected);
        assert_eq!(env["MCC_CTX_USER"], "alice");
        assert_eq!(
            env["GIT_DIR"], "configured",
            "passthrough reads the configured env"
        );

        spec.references_in_env = false;
        let env = spec.resolve(&pod_env, Path::new("/w"));
        assert!(!env.contains_key("ONLY_SECRET") && env["TOKEN"] == "env");
    }

    #[test]
    fn fn_tools_get_one_blob() {
        let mut tool = exec_tool();
        tool.kind = ToolKind::Fn {
            path: "m:f".into(),
            python: None,
        };
        let ctx = json!({"user": "alice"});
        let env = build_env(&tool, &[], &floor(), &[], &[], ctx.as_object().unwrap());
        assert_eq!(env["MCC_CTX"], "{\"user\": \"alice\"}");
        assert!(!env.contains_key("MCC_CTX_USER"));
    }

    #[test]
    fn dotenv_forms() {
        let text = "# c\n\nA=1\nexport B = two \nC='x # y'\nD=\"q\\\"\\n\"\nE=v # note\n";
        assert_eq!(
            parse_dotenv(text).unwrap(),
            pairs(&[
                ("A", "1"),
                ("B", "two"),
                ("C", "x # y"),
                ("D", "q\"\n"),
                ("E", "v")
            ])
        );
        assert_eq!(parse_dotenv("oops").unwrap_err().line, 1);
        assert_eq!(parse_dotenv("A=1\nB='open").unwrap_err().line, 2);
    }
}
