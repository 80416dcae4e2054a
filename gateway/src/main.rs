//! `mcc-gateway`: wiring only. Subcommands: `serve` (not built yet), `check`.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "mcc-gateway",
    version,
    about = "MCC gateway: a permission-controlled tool catalog over MCP"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP over streamable HTTP.
    Serve,
    /// Validate tool files (files, directories or globs) and print every tool's signature.
    Check {
        /// Tool files, directories (their *.yaml/*.yml) or globs.
        paths: Vec<String>,
    },
}

fn main() -> std::process::ExitCode {
    let result = match Cli::parse().command {
        Command::Serve => Err(anyhow::anyhow!(
            "`serve` is not built yet: it lands with the gateway issue"
        )),
        Command::Check { paths } => mcc_gateway::check::run(&paths, &mut std::io::stdout().lock()),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
