//! Conversion between the `Tool` resource and the catalog model, both ways, in one place.
//!
//! - [`catalog_tool`]: a `Tool` resource → a [`CatalogTool`], through
//!   [`mcc_catalog::spec::build_tool`] (the file loader's rules; none is repeated here).
//!   Only what has no MCC YAML form is checked here: the Kubernetes env references, and
//!   the size limits of [`mcc_catalog::limits`] (the CRD schema's, for older objects).
//! - [`tool_resource`]: a catalog [`Tool`] loaded from an MCC YAML file → a `Tool`
//!   resource, every field preserved; an `env_file` becomes an `envFrom` reference to a
//!   Secret that [`crate::manifests`] generates from the dotenv file.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{EnvFromSource, EnvVar, SecretEnvSource};
use mcc_catalog::context::SessionAccess;
use mcc_catalog::crd::{self, ToolLimits, ToolParam, ToolSpec};
use mcc_catalog::document::{
    CatalogTool, EnvFromRef, EnvValueRef, PodSpec, RefKind, Runtime as DocRuntime,
};
use mcc_catalog::rate::RateLimit;
use mcc_catalog::spec::{ParamEntry, Scalar, ToolEntry, Transform, build_tool};
use mcc_catalog::tool::{EnvPassthrough, Limits, Param, Tool, ToolKind};
use sha2::{Digest, Sha256};

/// A rule a `Tool` resource breaks, with the spec field it concerns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("spec.{field}: {message}")]
pub struct Invalid {
    pub field: String,
    pub message: String,
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> Invalid {
    Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// Builds the catalog form of a `Tool` resource, or says which field is wrong.
pub fn catalog_tool(resource: &crd::Tool) -> Result<CatalogTool, Invalid> {
    let namespace = resource.metadata.namespace.clone().unwrap_or_default();
    let name = resource.metadata.name.clone().unwrap_or_default();
    let spec = &resource.spec;
    // First: the API server applies these limits only to objects written after the CRD
    // that has them; one stored before must not reach the catalog either.
    mcc_catalog::crd::check_tool(spec).map_err(|e| invalid(e.field, e.message))?;
    let (plain_env, env_value_from) = split_env(&spec.env)?;
    let env_from = env_from_refs(&spec.env_from)?;
    let env_passthrough = raw_field::<EnvPassthrough>(&spec.env_passthrough, "envPassthrough")?;
    let transform = raw_field::<Transform>(&spec.transform, "transform")?;
    let rate_limit = rate_limit(spec.rate_limit.as_ref())?;
    let session = declared_session(spec.session_keys.as_deref())?;
    let entry = ToolEntry {
        func: spec.func.clone(),
        exec: spec.exec.clone(),
        curl: spec.curl.clone(),
        name: spec.name.clone(),
        groups: spec.groups.clone(),
        description: spec.description.clone(),
        example: spec.example.clone().map(Scalar::Text),
        params: spec
            .params
            .as_ref()
            .map(|ps| ps.iter().map(param_entry).collect()),
        stdin: spec.stdin.unwrap_or(false),
        limits: spec.limits.as_ref().map(limits).unwrap_or_default(),
        cwd: spec.cwd.clone(),
        env: plain_env
            .into_iter()
            .map(|(k, v)| (k, Scalar::Text(v)))
            .collect(),
        env_file: None,
        env_passthrough: env_passthrough.unwrap_or_default(),
        transform,
        cache_ttl: spec.cache_ttl,
        rate_limit,
        return_type: spec.return_type.clone(),
        python: spec.python.clone(),
        title: spec.title.clone(),
        read_only_hint: spec.read_only_hint,
        destructive_hint: spec.destructive_hint,
        idempotent_hint: spec.idempotent_hint,
        open_world_hint: spec.open_world_hint,
        output_schema: spec.output_schema.clone(),
        approval: spec.approval.clone().map(serde_json::Value::String),
    };
    let source = format!("Tool {namespace}/{name}");
    let built = build_tool(entry, &source).map_err(|e| invalid(camel_case(&e.field), e.message))?;
    let runtime = runtime(spec.runtime.as_ref())?;
    // A pod fn tool's module is in its image: nobody can introspect it here or in the
    // gateway, so it is published as declared.
    let declared_only = !runtime.is_local() && built.tool.kind.is_fn();
    if declared_only {
        pod_fn_declared(spec)?;
    }
    Ok(CatalogTool {
        tool: built.tool,
        namespace,
        resource: name,
        env_from,
        env_value_from,
        runtime,
        introspect: built.needs_introspection && !declared_only,
        name_from_callable: built.name_from_callable && !declared_only,
        session,
    })
}

/// A tool file's field name as the `Tool` spec spells it (`output_schema` →
/// `outputSchema`), so the status names the field the author wrote.
fn camel_case(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut upper = false;
    for c in field.chars() {
        match c {
            '_' => upper = true,
            c if upper => {
                out.extend(c.to_uppercase());
                upper = false;
            }
            c => out.push(c),
        }
    }
    out
}

/// What `sessionKeys` declares: session variable names, or `["*"]` (all; also what no
/// declaration means until [`crate::assemble`] applies the namespace's trust).
fn declared_session(keys: Option<&[String]>) -> Result<SessionAccess, Invalid> {
    let Some(keys) = keys else {
        return Ok(SessionAccess::All);
    };
    if keys.iter().any(|k| k == "*") {
        return match keys.len() {
            1 => Ok(SessionAccess::All),
            _ => Err(invalid(
                "sessionKeys",
                "'*' (every variable) stands alone: list names, or only '*'",
            )),
        };
    }
    for (i, key) in keys.iter().enumerate() {
        if mcc_catalog::context::is_reserved(key) {
            return Err(invalid(
                format!("sessionKeys[{i}]"),
                format!("'{key}' is an identity key: every tool receives it, none writes it"),
            ));
        }
        if !mcc_catalog::context::is_slug(key) {
            return Err(invalid(
                format!("sessionKeys[{i}]"),
                format!(
                    "'{key}' is not a session variable name ({})",
                    mcc_catalog::context::SLUG_RULE
                ),
            ));
        }
    }
    let mut keys = keys.to_vec();
    keys.sort();
    keys.dedup();
    Ok(SessionAccess::Keys(keys))
}

/// An fn tool with `runtime: pod` declares its return type and its params (`params: []`
/// for none): its module lives in its image, so they cannot be introspected. Without a
/// `name` it is named after the callable path's last segment.
fn pod_fn_declared(spec: &ToolSpec) -> Result<(), Invalid> {
    const WHY: &str = "its module lives in the tool's image, so it cannot be introspected";
    if spec
        .return_type
        .as_deref()
        .is_none_or(|r| r.trim().is_empty())
    {
        return Err(invalid(
            "returnType",
            format!(
                "an fn tool with runtime: pod must declare its return type (e.g. returnType: str): {WHY}"
            ),
        ));
    }
    if spec.params.is_none() {
        return Err(invalid(
            "params",
            format!(
                "an fn tool with runtime: pod must declare its params (params: [] when it takes none): {WHY}"
            ),
        ));
    }
    Ok(())
}

/// Reads a field kept as raw JSON into the catalog's type, naming the field on error.
fn raw_field<T: serde::de::DeserializeOwned>(
    value: &Option<serde_json::Value>,
    field: &str,
) -> Result<Option<T>, Invalid> {
    value
        .clone()
        .map(serde_json::from_value)
        .transpose()
        .map_err(|_| {
            invalid(
                field,
                match field {
                    "envPassthrough" => "must be true, false or a list of strings",
                    _ => "must be a string or a list of strings",
                },
            )
        })
}

/// `rateLimit`: text in any spelling [`mcc_catalog::rate`] accepts, or the number -1.
pub(crate) fn rate_limit(value: Option<&serde_json::Value>) -> Result<Option<RateLimit>, Invalid> {
    value
        .map(|v| {
            serde_json::from_value::<RateLimit>(v.clone())
                .map_err(|e| invalid("rateLimit", e.to_string()))
        })
        .transpose()
}

fn param_entry(p: &ToolParam) -> ParamEntry {
    ParamEntry {
        name: p.name.clone(),
        ty: p.ty.clone(),
        required: p.required.unwrap_or(false),
        default: p.default.clone(),
        description: p.description.clone(),
        example: p.example.clone(),
        override_value: p.override_value.clone(),
    }
}

fn limits(l: &ToolLimits) -> Limits {
    Limits {
        timeout: l.timeout,
        mem_mb: l.mem_mb,
        cpu_sec: l.cpu_sec,
        fsize_mb: l.fsize_mb,
        nofile: l.nofile,
    }
}

type PlainEnv = Vec<(String, String)>;

/// Splits `env` into plain values (catalog `env`) and references (resolved by the
/// gateway). A name may appear once: the catalog keeps values and references apart, so a
/// Pod's "last one wins" between the two could not be kept.
fn split_env(env: &[EnvVar]) -> Result<(PlainEnv, Vec<EnvValueRef>), Invalid> {
    let mut seen = BTreeSet::new();
    let mut plain = Vec::new();
    let mut refs = Vec::new();
    for (i, var) in env.iter().enumerate() {
        if !seen.insert(var.name.as_str()) {
            return Err(invalid(
                format!("env[{i}]"),
                format!("variable '{}' is set twice", var.name),
            ));
        }
        let Some(from) = &var.value_from else {
            plain.push((var.name.clone(), var.value.clone().unwrap_or_default()));
            continue;
        };
        let field = format!("env[{i}].valueFrom");
        let reference = match (&from.secret_key_ref, &from.config_map_key_ref) {
            (Some(s), None) => EnvValueRef {
                env: var.name.clone(),
                source: RefKind::Secret,
                name: s.name.clone(),
                key: s.key.clone(),
                optional: s.optional.unwrap_or(false),
            },
            (None, Some(c)) => EnvValueRef {
                env: var.name.clone(),
                source: RefKind::ConfigMap,
                name: c.name.clone(),
                key: c.key.clone(),
                optional: c.optional.unwrap_or(false),
            },
            _ => {
                return Err(invalid(
                    field,
                    "exactly one of secretKeyRef or configMapKeyRef is supported (fieldRef, resourceFieldRef and fileKeyRef have no meaning outside a Pod)",
                ));
            }
        };
        if reference.name.is_empty() || reference.key.is_empty() {
            return Err(invalid(field, "the reference needs a name and a key"));
        }
        refs.push(reference);
    }
    Ok((plain, refs))
}

fn env_from_refs(sources: &[EnvFromSource]) -> Result<Vec<EnvFromRef>, Invalid> {
    sources
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let (source, name, optional) = match (&s.secret_ref, &s.config_map_ref) {
                (Some(r), None) => (RefKind::Secret, r.name.clone(), r.optional),
                (None, Some(r)) => (RefKind::ConfigMap, r.name.clone(), r.optional),
                _ => {
                    return Err(invalid(
                        format!("envFrom[{i}]"),
                        "exactly one of secretRef or configMapRef must be set",
                    ));
                }
            };
            if name.is_empty() {
                return Err(invalid(
                    format!("envFrom[{i}]"),
                    "the reference needs a name",
                ));
            }
            Ok(EnvFromRef {
                source,
                name,
                prefix: s.prefix.clone().filter(|p| !p.is_empty()),
                optional: optional.unwrap_or(false),
            })
        })
        .collect()
}

fn runtime(rt: Option<&crd::Runtime>) -> Result<DocRuntime, Invalid> {
    match rt {
        None | Some(crd::Runtime::Local(_)) => Ok(DocRuntime::Local),
        Some(crd::Runtime::Pod(pod)) => {
            if pod.image.as_deref().is_some_and(|i| i.trim().is_empty()) {
                return Err(invalid(
                    "runtime.pod.image",
                    "an image name, or leave the field out for the default runtime image",
                ));
            }
            let resources = pod
                .resources
                .as_ref()
                .map(serde_json::to_value)
                .transpose()
                .map_err(|e| invalid("runtime.pod.resources", e.to_string()))?;
            Ok(DocRuntime::Pod(PodSpec {
                image: pod.image.clone(),
                resources,
                service_account_name: pod.service_account_name.clone(),
                automount_service_account_token: pod.automount_service_account_token,
                node_selector: pod.node_selector.clone(),
                tolerations: pod
                    .tolerations
                    .iter()
                    .map(serde_json::to_value)
                    .collect::<Result<_, _>>()
                    .map_err(|e| invalid("runtime.pod.tolerations", e.to_string()))?,
            }))
        }
    }
}

/// A DNS-1123 object name for `text` (a key or a username): lowercased, other characters
/// replaced by `-`, with a short hash of the original appended whenever that changed
/// anything, so `Foo` and `foo` stay distinct.
pub fn object_name(text: &str) -> String {
    let mut name: String = text
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '.' | '-') => c,
            _ => '-',
        })
        .collect();
    name = name
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string();
    if name != text || name.len() > 253 {
        let digest = hex::encode(&Sha256::digest(text.as_bytes())[..3]);
        name.truncate(253 - 7);
        let name = name.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
        return if name.is_empty() {
            format!("x-{digest}")
        } else {
            format!("{name}-{digest}")
        };
    }
    name
}

/// The `Tool` resource for a catalog tool loaded from a file. `name_from_callable`: the
/// entry gave no name (it stays unset, so introspection names the tool as MCC does).
/// `env_file_secret` names the Secret generated from the tool's `env_file`, if any.
pub fn tool_resource(
    tool: &Tool,
    name_from_callable: bool,
    namespace: &str,
    env_file_secret: Option<&str>,
) -> crd::Tool {
    let (exec, func, curl, python) = match &tool.kind {
        ToolKind::Exec { command } => (Some(command.clone()), None, None, None),
        ToolKind::Fn { path, python } => (None, Some(path.clone()), None, python.clone()),
        ToolKind::Curl { target, .. } => (None, None, Some(target.clone()), None),
        // Never from a tool file's `tools:` (upstream tools are discovered, not declared
        // as entries); a Tool resource has no form for them.
        ToolKind::Mcp { .. } => (None, None, None, None),
    };
    // Undeclared params stay undeclared so the gateway introspects them, as MCC does.
    let params = (!tool.params.is_empty()).then(|| tool.params.iter().map(tool_param).collect());
    let spec = ToolSpec {
        name: (!name_from_callable).then(|| tool.name.clone()),
        groups: tool.groups.clone(),
        description: non_empty(&tool.description),
        example: non_empty(&tool.example),
        exec,
        func,
        curl,
        python,
        params,
        stdin: tool.stdin.then_some(true),
        limits: (!tool.limits.is_empty()).then_some(ToolLimits {
            timeout: tool.limits.timeout,
            mem_mb: tool.limits.mem_mb,
            cpu_sec: tool.limits.cpu_sec,
            fsize_mb: tool.limits.fsize_mb,
            nofile: tool.limits.nofile,
        }),
        cwd: tool.cwd.as_ref().map(|p| p.display().to_string()),
        env: tool
            .env
            .iter()
            .map(|(k, v)| EnvVar {
                name: k.clone(),
                value: Some(v.clone()),
                value_from: None,
            })
            .collect(),
        env_from: env_file_secret
            .map(|name| EnvFromSource {
                secret_ref: Some(SecretEnvSource {
                    name: name.to_string(),
                    optional: None,
                }),
                ..Default::default()
            })
            .into_iter()
            .collect(),
        env_passthrough: match &tool.env_passthrough {
            EnvPassthrough::None | EnvPassthrough::All(false) => None,
            other => serde_json::to_value(other).ok(),
        },
        transform: tool.transform.clone().map(serde_json::Value::String),
        cache_ttl: tool.cache_ttl,
        rate_limit: tool
            .rate_limit
            .map(|r| serde_json::Value::String(r.to_string())),
        return_type: tool.return_type.clone(),
        runtime: None,
        session_keys: None,
        title: tool.annotations.title.clone(),
        read_only_hint: tool.annotations.read_only_hint,
        destructive_hint: tool.annotations.destructive_hint,
        idempotent_hint: tool.annotations.idempotent_hint,
        open_world_hint: tool.annotations.open_world_hint,
        output_schema: tool.output_schema.clone(),
        approval: tool
            .approval_required
            .then(|| mcc_catalog::approval::REQUIRED.to_string()),
    };
    let mut resource = crd::Tool::new(&object_name(&tool.key), spec);
    resource.metadata.namespace = Some(namespace.to_string());
    resource
}

fn tool_param(p: &Param) -> ToolParam {
    ToolParam {
        name: p.name.clone(),
        ty: Some(p.ty.as_str().to_string()),
        required: p.required.then_some(true),
        default: p.default.clone(),
        description: non_empty(&p.description),
        example: p.example.clone(),
        override_value: p.override_value.clone(),
    }
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
