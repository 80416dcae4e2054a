//! `mcc-gateway`: wiring only. Subcommands: `serve`, `check`.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

/// A request allocates and frees hundreds of small objects (rmcp's JSON-RPC values, header
/// maps, the call's strings); mimalloc's thread-local free lists serve them with a
/// fraction of glibc's work (gateway/benches/RESULTS-execute-floor.md, run 6).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's options by their place in `mi_option_e` (mimalloc.h of the v3 sources
/// libmimalloc-sys builds; the crate names neither). The test below reads their defaults,
/// so a renumbering in an upgrade fails it.
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps the resident size where glibc's malloc had it: by default mimalloc commits its
/// arenas eagerly and returns freed pages only after a delay, which left an idle gateway
/// with the model loaded ~45 MB larger. Commit on use and purge at once instead; a
/// `MIMALLOC_*` variable an operator sets still decides.
fn tune_allocator() {
    for (option, env, value) in [
        (
            MI_OPTION_ARENA_EAGER_COMMIT,
            "MIMALLOC_ARENA_EAGER_COMMIT",
            0,
        ),
        (MI_OPTION_PURGE_DELAY, "MIMALLOC_PURGE_DELAY", 0),
    ] {
        if std::env::var_os(env).is_none() {
            // SAFETY: sets one of mimalloc's option words; any thread may call it.
            unsafe { libmimalloc_sys::mi_option_set(option, value) };
        }
    }
}

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
    /// Serve MCP over streamable HTTP (settings: --config / MCC_SETTINGS_FILE, MCC_* overrides).
    Serve {
        /// The settings YAML file (see docs/configuration.md).
        #[arg(long, short = 'c')]
        config: Option<PathBuf>,
        /// Tool files, directories or globs; replace the settings' `tools`.
        #[arg(long = "tools", short = 't')]
        tools: Vec<String>,
    },
    /// Validate tool files (files, directories or globs) and print every tool's signature.
    Check {
        /// Tool files, directories (their *.yaml/*.yml) or globs.
        paths: Vec<String>,
    },
}

fn main() -> std::process::ExitCode {
    tune_allocator();
    // SAFETY: no other thread exists yet (the runtime and telemetry start in `serve`).
    #[cfg(feature = "embed-local")]
    unsafe {
        mcc_gateway::search::local::settle_threads()
    };
    let result = match Cli::parse().command {
        Command::Serve { config, tools } => serve(config, tools),
        Command::Check { paths } => mcc_gateway::check::run(&paths, &mut std::io::stdout().lock()),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", render(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The error and its causes, each once: most of our errors already name their cause in
/// their own message, so a cause whose text is already shown is skipped.
fn render(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

fn serve(config: Option<PathBuf>, tools: Vec<String>) -> anyhow::Result<()> {
    let env = |name: &str| std::env::var(name).ok();
    let file = mcc_gateway::config::settings_path(config, &env);
    let mut settings = mcc_gateway::config::load(file.as_deref(), &env)?;
    if !tools.is_empty() {
        settings.tools = tools;
    }
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    // The log, and the OTLP exporter when tracing is on (its requests use the runtime).
    let telemetry =
        mcc_gateway::telemetry::init(settings.log.format, &settings.tracing, runtime.handle())?;
    let served = runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        let gateway = mcc_gateway::app::build(&settings, shutdown.clone()).await?;
        let addr = settings.bind_addr();
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("server.host/server.port: cannot bind {addr}"))?;
        tracing::info!(%addr, tools = gateway.catalog.status().tools, "serving MCP at http://{addr}/mcp");
        let stop = shutdown.clone();
        tokio::spawn(async move {
            mcc_gateway::app::shutdown_signal().await;
            tracing::info!("shutting down");
            stop.cancel();
        });
        gateway.serve(listener, shutdown).await?;
        anyhow::Ok(())
    });
    // Spans still queued are sent while the runtime's workers still run.
    telemetry.shutdown();
    served
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allocator_options_are_the_ones_named() {
        // SAFETY: reads option words.
        let (eager, delay) = unsafe {
            (
                libmimalloc_sys::mi_option_get(MI_OPTION_ARENA_EAGER_COMMIT),
                libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY),
            )
        };
        // Their defaults in mimalloc's options.c: 2, and 1000 milliseconds.
        assert_eq!((eager, delay), (2, 1000));
    }
}
