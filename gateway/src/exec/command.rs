//! The shell command lines of exec and curl tools and of transforms: Jinja templates
//! (see [`mcc_catalog::template`]) rendered with the call's params and run by `/bin/sh -c`.
//! Rendering happens before anything is spawned, so a template error runs nothing; where
//! it happens (a worker process, bounded in memory) is [`super::render`]'s business.
//!
//! exec commands and transforms render as in MCC (a value lands as written; the author
//! quotes with `| quote`). A curl tool's command renders with
//! [`mcc_catalog::template::render_curl`]: no value can leave its shell word, and a value
//! in the URL is percent-encoded.

use serde_json::{Map, Value};

use mcc_catalog::{Tool, ToolKind};

use super::ExecError;
use super::render::{Kind, Renderer};

/// The shell, by absolute path: the tool's own `PATH` must not decide which shell runs,
/// and an absolute program lets std spawn with posix_spawn.
pub const SHELL: &str = "/bin/sh";

/// Linux's `MAX_ARG_STRLEN`: one process argument, its NUL included, is at most 32 pages.
const MAX_ARG_BYTES: usize = 32 * 4096;

/// Which template of a tool is rendered, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Command,
    Transform,
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Part::Command => "command",
            Part::Transform => "transform",
        })
    }
}

/// Renders one of `tool`'s templates with `params`.
pub async fn render(
    renderer: &Renderer,
    tool: &Tool,
    part: Part,
    source: &str,
    params: &Map<String, Value>,
) -> Result<String, ExecError> {
    let kind = match (&tool.kind, part) {
        (ToolKind::Curl { .. }, Part::Command) => Kind::Curl,
        _ => Kind::Jinja,
    };
    let error = |error: String| ExecError::Template {
        tool: tool.key.clone(),
        part,
        error,
    };
    let line = renderer.render(kind, source, params).await.map_err(error)?;
    // A NUL cannot be part of a process argument: say so instead of failing the spawn.
    if line.contains('\0') {
        return Err(error(
            "a param value holds a NUL byte, which a shell command line cannot carry".into(),
        ));
    }
    // The whole line is one argument of `sh -c`: say what is too long instead of E2BIG.
    if line.len() >= MAX_ARG_BYTES {
        return Err(error(format!(
            "the rendered command line is {} bytes; a process argument holds at most {} \
             (Linux's MAX_ARG_STRLEN): large values belong on the tool's stdin (`stdin: true`)",
            line.len(),
            MAX_ARG_BYTES - 1
        )));
    }
    Ok(line)
}

/// The arguments that make [`SHELL`] run `line`.
pub fn shell_args(line: &str) -> [&str; 2] {
    ["-c", line]
}
