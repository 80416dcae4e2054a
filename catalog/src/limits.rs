//! The size limits of a `Tool`'s free text and lists: one definition of each, used by the
//! CRD schema (`maxLength`, `maxItems`, `maxProperties` in `crd`, checked by the
//! API server at admission) and by `crd::check_tool` (feature `crd`), which the operator
//! applies to every Tool it reads, so an object stored before a limit existed is left out
//! with a status naming the field, not published.
//!
//! Why limits at all: every Tool of every namespace goes into one catalog document of
//! bounded size (16 ConfigMaps, ~12 MB compressed). A field without a bound lets one
//! tenant fill it; the per-namespace budget (the operator's `MCC_NAMESPACE_TOOL_BYTES`)
//! bounds a namespace's total, these bound each object. Text limits count characters, as
//! the API server's `maxLength` does. Each is far above what a real tool holds (the
//! examples' longest description is under 100 characters) and none refuses a tool that
//! could run: command templates get what one `sh -c` argument holds.

/// `description`: what the LLM reads; a long docstring fits several times over.
pub const DESCRIPTION: usize = 16 * 1024;
/// `example`, and each param's `description`.
pub const SHORT_TEXT: usize = 4 * 1024;
/// `exec`, `curl`, and `transform` (its stages together): Linux's `MAX_ARG_STRLEN`
/// without its NUL, the most one `sh -c` argument holds. A longer template could never
/// run ([`crate::template::MAX_RENDERED_BYTES`] bounds every render the same way).
pub const COMMAND: usize = crate::template::MAX_RENDERED_BYTES;
/// `fn` (`module.path:callable`) and `returnType`.
pub const CALLABLE: usize = 1024;
/// `python` and `cwd`: a path (Linux's `PATH_MAX`).
pub const PATH: usize = 4096;
/// A name: a param's `name`, an `env` variable's name, an `envFrom` prefix.
pub const NAME: usize = 253;
/// `params` entries.
pub const PARAMS: usize = 128;
/// A param's `default`, `example` and `override`: any JSON value, bounded by its
/// serialized size in bytes (the schema cannot bound a free-form value; the operator does).
pub const PARAM_VALUE_BYTES: usize = 16 * 1024;
/// `env` entries, and `envFrom` sources.
pub const ENV_ENTRIES: usize = 128;
/// One plain `env` value. Larger values belong in a Secret or ConfigMap (`valueFrom`),
/// which the catalog never copies.
pub const ENV_VALUE: usize = 32 * 1024;
/// `envPassthrough` globs, and `transform` stages.
pub const LIST_ENTRIES: usize = 128;
/// One `envPassthrough` glob.
pub const GLOB: usize = 256;
/// `rateLimit` text (`100/1h`).
pub const RATE_LIMIT: usize = 64;
/// `runtime.pod.nodeSelector` entries and `runtime.pod.tolerations`.
pub const POD_ENTRIES: usize = 64;
/// `title`: one line naming the tool for people (MCP's annotation).
pub const TITLE: usize = 256;
/// `outputSchema`: a JSON Schema, bounded by its serialized size in bytes (the CRD's
/// schema cannot bound a free-form object; the operator does). It is shown in every
/// signature block of the tool, so it stays well below a description's size.
pub const OUTPUT_SCHEMA_BYTES: usize = 16 * 1024;
/// `sessionKeys` entries (session variable names, each bounded by [`NAME`]).
pub const SESSION_KEYS: usize = 64;

/// Whether `name` is a DNS-1123 label (1 to 63 lowercase letters, digits and `-`, not
/// at either end): Kubernetes namespace and object names, and upstream MCP server names.
pub fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// A field over its limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("spec.{field}: {message}")]
pub struct LimitError {
    /// The field's path under `spec` (`params[2].description`).
    pub field: String,
    /// What is over the limit, and the limit.
    pub message: String,
}
