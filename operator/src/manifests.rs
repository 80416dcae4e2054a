//! `mcc-operator convert`: MCC YAML tool files (and a users file) into `Tool`,
//! `UserGrant` and `Secret` manifests.
//!
//! Tool files are parsed by the catalog's own loader ([`mcc_catalog::load::parse_file`]:
//! cascading, anchors, the entry rules), without fn introspection: an fn tool without
//! declared params stays that way and the gateway introspects it, as MCC does. `$VAR`
//! references stay literal unless substitution is asked for, so a converting machine's
//! environment (secrets included) does not end up in manifests by accident. Each distinct
//! `env_file` becomes one Secret (from the dotenv file) that its tools name in `envFrom`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;
use mcc_catalog::crd::{UserGrant, UserGrantSpec};
use mcc_catalog::env::parse_dotenv;
use mcc_catalog::load::{self, LoadError, Warning};
use mcc_catalog::spec::BuiltTool;
use mcc_catalog::tool::Tool;
use mcc_catalog::users::UserEntry;
use sha2::{Digest, Sha256};

use crate::convert::{object_name, tool_resource};

/// Why a conversion failed. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("cannot write manifests: {0}")]
    Yaml(String),
}

/// What to convert and how.
#[derive(Debug, Clone, Default)]
pub struct ConvertOptions {
    /// Tool files, directories or globs (as the gateway's tools setting).
    pub tool_files: Vec<String>,
    pub users_file: Option<PathBuf>,
    pub namespace: String,
    /// Substitute `$VAR`/`${VAR}` from this process's environment, as MCC does at load.
    pub substitute_env: bool,
    /// Directory relative `env_file` paths are read from (MCC reads them relative to the
    /// server's working directory; `None` means the current directory, as MCC).
    pub env_file_base: Option<PathBuf>,
}

/// The manifests of one conversion, in apply order, plus the loader's warnings.
#[derive(Debug, Default)]
pub struct Converted {
    pub secrets: Vec<Secret>,
    pub tools: Vec<mcc_catalog::crd::Tool>,
    pub grants: Vec<UserGrant>,
    pub warnings: Vec<Warning>,
}

impl Converted {
    /// All manifests as one multi-document YAML stream.
    pub fn to_yaml(&self) -> Result<String, ConvertError> {
        let mut out = String::new();
        let mut push = |doc: Result<String, _>| -> Result<(), ConvertError> {
            out.push_str("---\n");
            out.push_str(
                &doc.map_err(|e: serde_saphyr::SerializeError| ConvertError::Yaml(e.to_string()))?,
            );
            Ok(())
        };
        for s in &self.secrets {
            push(serde_saphyr::to_string(s))?;
        }
        for t in &self.tools {
            push(serde_saphyr::to_string(t))?;
        }
        for g in &self.grants {
            push(serde_saphyr::to_string(g))?;
        }
        Ok(out)
    }
}

/// Converts tool files and an optional users file.
pub fn convert(opts: &ConvertOptions) -> Result<Converted, ConvertError> {
    let vars: BTreeMap<String, String> = if opts.substitute_env {
        std::env::vars().collect()
    } else {
        BTreeMap::new()
    };
    let mut out = Converted::default();
    let tools = parse_tools(
        &opts.tool_files,
        &|n| vars.get(n).cloned(),
        &mut out.warnings,
    )?;
    let mut secrets: BTreeMap<PathBuf, String> = BTreeMap::new();
    for built in &tools {
        let tool = &built.tool;
        let secret_name = match &tool.env_file {
            Some(path) => Some(match secrets.get(path) {
                Some(name) => name.clone(),
                None => {
                    let file = match &opts.env_file_base {
                        Some(base) if path.is_relative() => base.join(path),
                        _ => path.clone(),
                    };
                    let secret = env_file_secret(&file, &opts.namespace)?;
                    let name = secret.metadata.name.clone().unwrap_or_default();
                    secrets.insert(path.clone(), name.clone());
                    out.secrets.push(secret);
                    name
                }
            }),
            None => None,
        };
        if !opts.substitute_env {
            out.warnings.extend(literal_references(tool));
        }
        out.tools.push(tool_resource(
            tool,
            built.name_from_callable,
            &opts.namespace,
            secret_name.as_deref(),
        ));
    }
    if let Some(path) = &opts.users_file {
        let entries = read_users(path)?;
        for e in entries.iter().filter(|e| !e.api_keys.is_empty()) {
            out.warnings.push(Warning {
                path: path.clone(),
                message: format!(
                    "user '{}': api_keys are not converted; set apiKey.enabled on the UserGrant for a key minted by the operator",
                    e.user.username
                ),
            });
        }
        out.grants = entries
            .into_iter()
            .map(|u| grant_resource(u, &opts.namespace))
            .collect();
    }
    Ok(out)
}

/// Warnings for `$VAR` references left in env values and param overrides/defaults: MCC
/// substitutes them when it loads a file, Kubernetes never does. (Commands are not
/// checked: `$VAR` there is the shell's.)
fn literal_references(tool: &Tool) -> Vec<Warning> {
    let has_ref = |s: &str| mcc_catalog::load::substitute(s, &|_| Some(String::new())) != s;
    let mut places: Vec<String> = tool
        .env
        .iter()
        .filter(|(_, v)| has_ref(v))
        .map(|(k, _)| format!("env {k}"))
        .collect();
    for p in &tool.params {
        for (what, value) in [("override", &p.override_value), ("default", &p.default)] {
            if let Some(serde_json::Value::String(v)) = value
                && has_ref(v)
            {
                places.push(format!("param {} {what}", p.name));
            }
        }
    }
    places
        .into_iter()
        .map(|place| Warning {
            path: PathBuf::from(&tool.source),
            message: format!(
                "{}: {place} holds a $VAR reference that Kubernetes will not substitute; use --substitute-env or a valueFrom reference",
                tool.key
            ),
        })
        .collect()
}

/// Parses tool files into catalog tools (no introspection), rejecting duplicate keys
/// (provisional for fn tools named by introspection).
pub fn parse_tools(
    entries: &[String],
    lookup: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<Warning>,
) -> Result<Vec<BuiltTool>, ConvertError> {
    let mut tools = Vec::new();
    for entry in entries {
        for path in load::expand(entry)? {
            let text = std::fs::read_to_string(&path).map_err(|source| LoadError::Io {
                path: path.clone(),
                source,
            })?;
            let file = load::parse_file(&path, &text, lookup)?;
            warnings.extend(file.warnings);
            tools.extend(file.tools);
        }
    }
    let plain: Vec<Tool> = tools.iter().map(|b| b.tool.clone()).collect();
    load::check_duplicates(&plain)?;
    Ok(tools)
}

/// The Secret holding a dotenv file's variables.
pub fn env_file_secret(path: &Path, namespace: &str) -> Result<Secret, ConvertError> {
    let file_err = |message: String| ConvertError::File {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| file_err(format!("cannot read env_file: {e}")))?;
    let pairs = parse_dotenv(&text).map_err(|e| file_err(format!("invalid dotenv: {e}")))?;
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("env")
        .trim_start_matches('.');
    let digest = hex::encode(&Sha256::digest(path.display().to_string().as_bytes())[..3]);
    let name = object_name(&format!("mcc-env-{stem}-{digest}"));
    Ok(Secret {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.to_string()),
            annotations: Some(BTreeMap::from([(
                "mcc.dev/env-file".to_string(),
                path.display().to_string(),
            )])),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        string_data: Some(pairs.into_iter().collect()),
        ..Default::default()
    })
}

/// Reads a users file with the catalog's one reader ([`mcc_catalog::users::parse`]),
/// naming the file and the entry on error.
pub fn read_users(path: &Path) -> Result<Vec<UserEntry>, ConvertError> {
    let file_err = |message: String| ConvertError::File {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| file_err(e.to_string()))?;
    mcc_catalog::users::parse(&text).map_err(|e| file_err(e.to_string()))
}

/// The `UserGrant` for a user of a users file. Its API-key records are not carried over
/// (a grant's key is minted by the operator; the raw keys behind the file's hashes are
/// unknown here): [`convert`] warns about them.
pub fn grant_resource(entry: UserEntry, namespace: &str) -> UserGrant {
    let user = entry.user;
    let spec = UserGrantSpec {
        username: user.username,
        email: user.email,
        groups: user.groups,
        tools: user.tools,
        oidc_subjects: entry
            .oidc_subjects
            .iter()
            .map(|s| serde_json::to_value(s).unwrap_or_default())
            .collect(),
        ..Default::default()
    };
    let mut grant = UserGrant::new(&object_name(&spec.username), spec);
    grant.metadata.namespace = Some(namespace.to_string());
    grant
}
