//! `mcc-gateway`: wiring only. Subcommands: `serve`, `check` (and the hidden
//! `render-worker` that `serve` starts, see `mcc_gateway::exec::render`).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

/// Small blocks from mimalloc, large ones from glibc (see `mcc_gateway::alloc`).
#[global_allocator]
static ALLOCATOR: mcc_gateway::alloc::SplitAlloc = mcc_gateway::alloc::SplitAlloc;

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
    /// A template render worker: started by `serve`, answers on its stdin and stdout.
    #[command(name = mcc_gateway::exec::render::WORKER_SUBCOMMAND, hide = true)]
    RenderWorker {
        /// Its memory limit (RLIMIT_DATA), in bytes.
        #[arg(long)]
        memory_bytes: u64,
    },
}

fn main() -> std::process::ExitCode {
    // SAFETY: no other thread exists yet (the runtime and telemetry start in `serve`).
    #[cfg(feature = "embed-local")]
    unsafe {
        mcc_search::local::settle_threads()
    };
    let result = match Cli::parse().command {
        Command::Serve { config, tools } => serve(config, tools),
        Command::Check { paths } => mcc_gateway::check::run(&paths, &mut std::io::stdout().lock()),
        Command::RenderWorker { memory_bytes } => {
            mcc_gateway::exec::render::worker_main(memory_bytes).context("render worker")
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", mcc_catalog::error_chain::render(e.as_ref()));
            std::process::ExitCode::FAILURE
        }
    }
}

fn serve(config: Option<PathBuf>, tools: Vec<String>) -> anyhow::Result<()> {
    let env = |name: &str| std::env::var(name).ok();
    let file = mcc_gateway::config::settings_path(config, &env);
    let mut settings = mcc_gateway::config::load(file.as_deref(), &env)?;
    if !tools.is_empty() {
        settings.tools = tools;
    }
    // Templates render in workers running this very binary.
    settings.execution.render.program =
        Some(std::env::current_exe().context("finding this program for its render workers")?);
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
        // SIGTERM stops accepting and drains (handler in place before "serving" is said);
        // MCP sessions and watches end after that.
        let signal = mcc_catalog::shutdown::signal();
        tracing::info!(%addr, tools = gateway.catalog.status().tools, "serving MCP at http://{addr}/mcp");
        if settings.auth.checks_no_credential() && !addr.ip().is_loopback() {
            tracing::warn!(
                auth = %settings.auth.backend,
                "this auth checks no credential: only loopback clients are served (others get 403)"
            );
        }
        let stop = CancellationToken::new();
        let stopping = stop.clone();
        tokio::spawn(async move {
            signal.await;
            tracing::info!("shutting down");
            stopping.cancel();
        });
        gateway.serve_draining(listener, stop, shutdown).await?;
        anyhow::Ok(())
    });
    // Spans still queued are sent while the runtime's workers still run.
    telemetry.shutdown();
    served
}
