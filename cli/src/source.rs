//! Where a command's tools come from: local tool files (the default) or a running
//! gateway (`--url`). Shared by the command-line definitions and both back ends.

use std::path::PathBuf;

use clap::Args;

/// Where tools come from: local tool files (the default) or a running gateway.
#[derive(Args, Clone, Default)]
pub struct Source {
    /// A running gateway's MCP endpoint (e.g. https://mcc.example.com/mcp; a bare
    /// https://mcc.example.com means its /mcp); without it, tools run locally from tool
    /// files.
    #[arg(long, env = "MCC_URL")]
    pub url: Option<String>,
    /// The credential for --url (an API key or a bearer token).
    #[arg(long, env = "MCC_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The gateway settings file whose `tools`, `users_file` and execution settings are
    /// used locally (default: MCC_SETTINGS_FILE, else the gateway's defaults).
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,
    /// Tool files, directories or globs (repeatable; default: the settings' `tools`).
    #[arg(long = "tools", short = 't')]
    pub tools: Vec<String>,
    /// The users file (default: the settings' `users_file`).
    #[arg(long)]
    pub users: Option<PathBuf>,
    /// Act as this user of the users file (local tool files only; default: the
    /// synthetic admin `cli`, as MCC does).
    #[arg(long = "as", value_name = "USER")]
    pub as_user: Option<String>,
}
