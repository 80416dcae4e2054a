//! The shell command lines of exec and curl tools and of transforms: Jinja templates
//! (see [`mcc_catalog::template`]) rendered with the call's params and run by `/bin/sh -c`.
//! Rendering happens before anything is spawned, so a template error runs nothing.

use minijinja::Environment;
use serde_json::{Map, Value};

use mcc_catalog::Tool;

use super::ExecError;

/// The shell, by absolute path: the tool's own `PATH` must not decide which shell runs,
/// and an absolute program lets std spawn with posix_spawn.
pub const SHELL: &str = "/bin/sh";

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
pub fn render(
    templates: &Environment<'_>,
    tool: &Tool,
    part: Part,
    source: &str,
    params: &Map<String, Value>,
) -> Result<String, ExecError> {
    mcc_catalog::template::render(templates, source, params).map_err(|e| ExecError::Template {
        tool: tool.key.clone(),
        part,
        error: e.to_string(),
    })
}

/// The arguments that make [`SHELL`] run `line`.
pub fn shell_args(line: &str) -> [&str; 2] {
    ["-c", line]
}
