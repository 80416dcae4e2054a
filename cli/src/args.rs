//! The command line: every subcommand, flag and MCC 0.4.0 spelling (`tool exec|run`,
//! `tool ls`, `--json`, `user key add|list|revoke`, `mcp install mcp-json|gemini-cli|goose`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::Shell;

use crate::output::Format;
use crate::source::Source;

#[derive(Parser)]
#[command(
    name = "mcc",
    version,
    about = "MCC: run catalog tools, set up MCP clients, manage API keys",
    long_about = "MCC: run catalog tools from tool files or a running gateway, write MCP client \
                  configuration, mint and revoke API keys, check and import tool files.\n\
                  See docs/cli.md."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Output format of what is listed or returned.
    #[arg(long, short = 'o', global = true, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// Same as `--output json` (MCC's spelling).
    #[arg(long, global = true)]
    pub json: bool,
    /// More log output on stderr (-v info, -vv debug; MCC_LOG sets a filter).
    #[arg(long, short = 'v', global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

impl Cli {
    pub fn format(&self) -> Format {
        if self.json { Format::Json } else { self.output }
    }
}

#[derive(Subcommand)]
pub enum Command {
    /// List, describe and call tools (local tool files, or a gateway with --url).
    Tool {
        #[command(subcommand)]
        command: ToolCommand,
    },
    /// Session variables tools see in their context (get_session / set_session).
    Session {
        #[command(subcommand)]
        command: SessionCommand,
    },
    /// Configure MCP clients for a gateway.
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
    /// API keys: in a users file (file mode) or as a UserGrant (--kubernetes).
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
    /// MCC's `user key add|list|revoke` spellings of `mcc key mint|list|revoke`.
    #[command(hide = true)]
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Validate tool files (files, directories or globs) and print every tool's signature.
    Check {
        /// Tool files, directories (their *.yaml/*.yml) or globs.
        paths: Vec<String>,
    },
    /// Convert MCC YAML tool files (and a users file) into Tool/UserGrant/Secret manifests
    /// on stdout (what `mcc-operator convert` does).
    #[command(alias = "convert")]
    Import(ImportArgs),
    /// The audit trail: execute and search events, filtered, as a table, JSON lines,
    /// JSON or CSV (the settings' Redis stream, or a gateway's GET /v1/audit with --url).
    Audit(crate::audit::AuditArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: Shell,
    },
}

#[derive(Subcommand)]
pub enum ToolCommand {
    /// The tools you may run.
    #[command(visible_alias = "ls")]
    List(ListArgs),
    /// One tool's signature and description.
    Info(InfoArgs),
    /// Run a tool: `mcc tool call KEY name=value… ['{"json": "params"}']`.
    #[command(visible_aliases = ["exec", "run"])]
    Call(CallArgs),
}

#[derive(Args)]
pub struct ListArgs {
    /// Show each tool's full signature.
    #[arg(long, short = 'l')]
    pub long: bool,
    #[command(flatten)]
    pub source: Source,
}

#[derive(Args)]
pub struct InfoArgs {
    /// The tool key.
    pub key: String,
    #[command(flatten)]
    pub source: Source,
}

#[derive(Args)]
pub struct CallArgs {
    /// The tool key.
    pub key: String,
    /// Parameters: `name=value` (a string, coerced to the parameter's type),
    /// `name:=JSON` (a JSON value), or one JSON object of parameters.
    pub params: Vec<String>,
    /// The session whose variables the tool sees (a handle from `mcc session new`).
    #[arg(long)]
    pub session: Option<String>,
    /// Set a session variable before the call: NAME=JSON (repeatable).
    #[arg(long = "set", value_name = "NAME=JSON")]
    pub set: Vec<String>,
    /// Pretty-print a JSON result.
    #[arg(long, short = 'p')]
    pub pretty: bool,
    #[command(flatten)]
    pub source: Source,
}

#[derive(Subcommand)]
pub enum SessionCommand {
    /// Mint a session handle (new_session) to pass as --session.
    New(SessionArgs),
    /// Set a variable: NAME VALUE (VALUE is JSON, or else a string).
    Set(SessionSetArgs),
    /// Print a variable's JSON value (`null` when unset).
    Get(SessionGetArgs),
}

#[derive(Args)]
pub struct SessionArgs {
    #[command(flatten)]
    pub source: Source,
}

#[derive(Args)]
pub struct SessionSetArgs {
    pub name: String,
    pub value: String,
    #[arg(long)]
    pub session: Option<String>,
    #[command(flatten)]
    pub source: Source,
}

#[derive(Args)]
pub struct SessionGetArgs {
    pub name: String,
    #[arg(long)]
    pub session: Option<String>,
    #[command(flatten)]
    pub source: Source,
}

#[derive(Subcommand)]
pub enum McpCommand {
    /// Write an MCP client's configuration for a gateway (merged into its file).
    Install(InstallArgs),
}

/// The MCP clients `mcc mcp install` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Client {
    /// Claude Desktop (claude_desktop_config.json; through the mcp-remote bridge).
    ClaudeDesktop,
    /// Claude Code (.mcp.json, project scope).
    ClaudeCode,
    /// Cursor (.cursor/mcp.json).
    Cursor,
    /// VS Code (.vscode/mcp.json).
    Vscode,
    /// Gemini CLI (.gemini/settings.json).
    GeminiCli,
    /// goose (~/.config/goose/config.yaml).
    Goose,
    /// A plain `mcpServers` JSON document (MCC's `mcp-json`).
    #[value(alias = "mcp-json")]
    Json,
}

#[derive(Args)]
pub struct InstallArgs {
    #[arg(value_enum)]
    pub client: Client,
    /// The gateway's MCP endpoint, e.g. https://mcc.example.com/mcp (a bare host means
    /// its /mcp).
    #[arg(long, env = "MCC_URL", default_value = "http://127.0.0.1:8000/mcp")]
    pub url: String,
    /// The credential sent as `Authorization: Bearer …` (an API key); MCC_TOKEN if unset.
    #[arg(long, env = "MCC_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Write a reference to this environment variable instead of the credential itself
    /// (`${VAR}` / `${env:VAR}` in the clients that expand it).
    #[arg(long, value_name = "VAR", conflicts_with = "token")]
    pub token_env: Option<String>,
    /// The server's name in the client's configuration.
    #[arg(long, default_value = "mcc")]
    pub name: String,
    /// The file to merge into (default: the client's documented location).
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Print the configuration instead of writing it.
    #[arg(long)]
    pub print: bool,
}

#[derive(Subcommand)]
pub enum KeyCommand {
    /// Mint a key for a user: the users file gets its hash, the key is printed once.
    #[command(visible_alias = "add")]
    Mint(MintArgs),
    /// The keys of the users file (prefix, user, expiry; never a secret).
    #[command(visible_alias = "ls")]
    List(KeyListArgs),
    /// Remove a user's keys (all, or the one with --prefix).
    Revoke(RevokeArgs),
}

#[derive(Subcommand)]
pub enum UserCommand {
    /// `user key add|list|revoke`.
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
}

/// Where keys live.
#[derive(Args, Clone)]
pub struct KeyStore {
    /// The users file (default: MCC_USERS_FILE, else examples/users/users.yaml).
    #[arg(long, env = "MCC_USERS_FILE")]
    pub users: Option<PathBuf>,
    /// Kubernetes mode: a UserGrant with `apiKey` (the operator mints the key).
    #[arg(long)]
    pub kubernetes: bool,
    /// Namespace of the UserGrant (--kubernetes).
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,
    /// Run `kubectl apply` / `kubectl` instead of printing (--kubernetes; needs a cluster).
    #[arg(long, requires = "kubernetes")]
    pub apply: bool,
}

#[derive(Args)]
pub struct MintArgs {
    /// The user the key logs in as.
    pub username: String,
    /// Days until the key expires, or `never` (default: 90, as MCC).
    #[arg(long, default_value = "90")]
    pub expires: String,
    /// Add the user to the users file when missing, with these groups (repeatable).
    #[arg(long = "group", short = 'g')]
    pub groups: Vec<String>,
    /// Keep the user's other keys (default: minting replaces them, as MCC's one key per user).
    #[arg(long)]
    pub keep: bool,
    #[command(flatten)]
    pub store: KeyStore,
}

#[derive(Args)]
pub struct KeyListArgs {
    #[command(flatten)]
    pub store: KeyStore,
}

#[derive(Args)]
pub struct RevokeArgs {
    pub username: String,
    /// Only the key with this prefix (12 hex characters).
    #[arg(long)]
    pub prefix: Option<String>,
    #[command(flatten)]
    pub store: KeyStore,
}

#[derive(Args)]
pub struct ImportArgs {
    /// Tool files, directories (their *.yaml/*.yml) or globs.
    #[arg(required = true)]
    pub tool_files: Vec<String>,
    /// A users file (`users:` list of username, email, groups, tools).
    #[arg(long)]
    pub users: Option<PathBuf>,
    /// Namespace of the generated objects.
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,
    /// Substitute $VAR/${VAR} from this environment (MCC does so at load time); off by
    /// default so local secrets do not land in manifests.
    #[arg(long)]
    pub substitute_env: bool,
    /// Read relative env_file paths from this directory (default: the current one).
    #[arg(long)]
    pub env_file_base: Option<PathBuf>,
}

impl ImportArgs {
    pub fn into_options(self) -> mcc_operator::manifests::ConvertOptions {
        mcc_operator::manifests::ConvertOptions {
            tool_files: self.tool_files,
            users_file: self.users,
            namespace: self.namespace,
            substitute_env: self.substitute_env,
            env_file_base: self.env_file_base,
        }
    }
}
