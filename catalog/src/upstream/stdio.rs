//! The stdio form of an `mcp_servers:` entry: a `command` (with `args`, `env` and
//! `env_passthrough`) instead of a `url`. Parsed here, started by the gateway's runtime
//! (the executor in a deployment, the gateway's own process group in the embedded
//! default): [`StdioCommand::env_spec`] is the one environment rule of tool processes
//! ([`crate::env::EnvSpec`]), so a server sees what an exec tool with the same `env` and
//! `env_passthrough` would see, minus the session context (a server serves every caller).
//!
//! `env` values are credentials as much as header values are: `Debug` shows names only.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use crate::env::EnvSpec;
use crate::limits;
use crate::tool::EnvPassthrough;

/// How a stdio upstream's process is started.
#[derive(Clone, PartialEq)]
pub struct StdioCommand {
    /// A bare name (looked up on the server's own `PATH`) or a path.
    pub program: String,
    pub args: Vec<String>,
    /// Set over the env floor and what `env_passthrough` admits. Never shown.
    pub env: BTreeMap<String, String>,
    pub env_passthrough: EnvPassthrough,
}

impl fmt::Debug for StdioCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioCommand")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env (names only)", &self.env.keys().collect::<Vec<_>>())
            .field("env_passthrough", &self.env_passthrough)
            .finish()
    }
}

impl StdioCommand {
    /// The server process's environment as the runtime that starts it receives it: the
    /// floor `floor` and `env_passthrough` from the runtime's own environment, `env` over
    /// them, exactly as for an exec tool; no context variables.
    pub fn env_spec(&self, floor: &[String]) -> EnvSpec {
        let mut set = self.env.clone();
        // The context layer owns `MCC_CTX*` names, for servers too (they get no context).
        set.retain(|name, _| !crate::env::is_context_name(name));
        EnvSpec {
            floor: floor.to_vec(),
            passthrough: match &self.env_passthrough {
                EnvPassthrough::None => EnvPassthrough::All(false),
                other => other.clone(),
            },
            set,
            cwd_on_pythonpath: false,
            passthrough_from: None,
            references_in_env: false,
        }
    }
}

/// `command:` as written: one program, or the program and its first arguments.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum CommandField {
    Program(String),
    Argv(Vec<String>),
}

/// The stdio fields of an entry, as written.
#[derive(Debug, Default)]
pub(super) struct StdioFields {
    pub command: Option<CommandField>,
    pub args: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    pub env_passthrough: Option<EnvPassthrough>,
}

/// The `(field, message)` of what is wrong.
type Bad = (String, String);

fn bad(field: &str, message: impl Into<String>) -> Bad {
    (field.into(), message.into())
}

/// Checks the stdio fields of an entry without a `url`: `command` required, its program
/// not empty, every list and value bounded, no NUL byte anywhere (it cannot reach a
/// process's argv or environment).
pub(super) fn parse(fields: StdioFields) -> Result<StdioCommand, Bad> {
    let mut argv = match fields.command {
        None => {
            return Err(bad(
                "url",
                "expected either url (a streamable HTTP endpoint) or command (a stdio server)",
            ));
        }
        Some(CommandField::Program(p)) => vec![p],
        Some(CommandField::Argv(v)) => v,
    };
    argv.extend(fields.args.unwrap_or_default());
    if argv.first().is_none_or(|p| p.trim().is_empty()) {
        return Err(bad("command", "expected a program to run"));
    }
    if argv.len() > limits::LIST_ENTRIES {
        return Err(bad(
            "args",
            format!("at most {} arguments", limits::LIST_ENTRIES),
        ));
    }
    if argv
        .iter()
        .any(|a| a.len() > limits::PATH || a.contains('\0'))
    {
        return Err(bad(
            "args",
            format!(
                "an argument is longer than {} bytes or holds a NUL byte",
                limits::PATH
            ),
        ));
    }
    let env = fields.env.unwrap_or_default();
    if env.len() > limits::ENV_ENTRIES {
        return Err(bad(
            "env",
            format!("at most {} variables", limits::ENV_ENTRIES),
        ));
    }
    for (name, value) in &env {
        let good_name = !name.is_empty() && !name.contains(['=', '\0']);
        if !good_name {
            return Err(bad(&format!("env.{name}"), "not a variable name"));
        }
        // The value is never echoed: it may be a credential.
        if value.len() > limits::ENV_VALUE || value.contains('\0') {
            return Err(bad(
                &format!("env.{name}"),
                format!(
                    "the value is longer than {} bytes or holds a NUL byte",
                    limits::ENV_VALUE
                ),
            ));
        }
    }
    let env_passthrough = fields.env_passthrough.unwrap_or_default();
    if let EnvPassthrough::Globs(globs) = &env_passthrough
        && (globs.len() > limits::LIST_ENTRIES || globs.iter().any(|g| g.len() > limits::GLOB))
    {
        return Err(bad("env_passthrough", "too many or too long patterns"));
    }
    let program = argv.remove(0);
    Ok(StdioCommand {
        program,
        args: argv,
        env,
        env_passthrough,
    })
}

/// The error for an HTTP-only field on a stdio entry, or a stdio field on an HTTP one.
pub(super) fn misplaced(field: &str, stdio: bool) -> Bad {
    match stdio {
        true => bad(
            field,
            "only an upstream with a url takes this field (this one has a command)",
        ),
        false => bad(
            field,
            "only an upstream with a command takes this field (this one has a url)",
        ),
    }
}
