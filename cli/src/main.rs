//! `mcc`: one command for people. Wiring only: the arguments ([`args`]) are dispatched to
//! the module of each concern — [`tool`] (list, info, call; through [`local`] tool files
//! or a [`remote`] gateway), [`audit`] (the audit trail), [`install`] (MCP client configuration), [`keys`] (API keys
//! of a users file or a UserGrant), `check` and `import` (the gateway's and the
//! operator's own library functions).

mod args;
mod audit;
mod install;
mod keys;
mod local;
mod output;
mod params;
mod remote;
mod source;
mod tool;

use std::process::ExitCode;

use anyhow::Context;
use clap::{CommandFactory, Parser};

use args::{Cli, Command, KeyCommand, McpCommand, SessionCommand, ToolCommand};

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let format = cli.format();
    match run(cli.command, format) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", mcc_catalog::error_chain::render(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command, format: output::Format) -> anyhow::Result<ExitCode> {
    match command {
        Command::Tool { command } => runtime()?.block_on(async move {
            match command {
                ToolCommand::List(a) => tool::list(a, format).await,
                ToolCommand::Info(a) => tool::info(a, format).await,
                ToolCommand::Call(a) => tool::call(a, format).await,
            }
        }),
        Command::Session { command } => runtime()?.block_on(async move {
            match command {
                SessionCommand::New(a) => tool::session_new(a, format).await,
                SessionCommand::Set(a) => tool::session_set(a, format).await,
                SessionCommand::Get(a) => tool::session_get(a, format).await,
            }
        }),
        Command::Mcp { command } => match command {
            McpCommand::Install(a) => install::run(a, format).map(|()| ExitCode::SUCCESS),
        },
        Command::Key { command } => match command {
            KeyCommand::Mint(a) => keys::mint(a, format),
            KeyCommand::List(a) => keys::list(a, format),
            KeyCommand::Revoke(a) => keys::revoke(a, format),
        }
        .map(|()| ExitCode::SUCCESS),
        Command::User { command } => keys::user(command, format).map(|()| ExitCode::SUCCESS),
        Command::Check { paths } => {
            mcc_gateway::check::run(&paths, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Import(a) => {
            let converted = mcc_operator::manifests::convert(&a.into_options())?;
            for w in &converted.warnings {
                eprintln!("warning: {w}");
            }
            print!("{}", converted.to_yaml()?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit(a) => runtime()?.block_on(audit::run(a, format)),
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "mcc", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Warnings of the shared crates (a tool left out, a users-file record skipped) go to
/// stderr; `-v` shows more, `MCC_LOG` sets the filter.
fn init_tracing(verbose: u8) {
    // rmcp logs a failed connection itself; our error says it once, naming the flag.
    let default = match verbose {
        0 => "warn,rmcp=off",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("MCC_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .init();
}
