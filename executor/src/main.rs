//! `mcc-executor`: wiring only. `serve` runs tools for the gateway of its pod over a Unix
//! socket; `probe` asks a running executor whether it answers (an exec probe).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use mcc_executor::address::{self, Address};
use mcc_executor::runtime::Runtime as _;
use mcc_executor::{ExecutorClient, InProcess, podio, server};

#[derive(Parser)]
#[command(
    name = "mcc-executor",
    version,
    about = "Runs MCC tool processes for the gateway, away from its credentials"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Listen on the socket and run each call the gateway sends. The env floor and
    /// passthrough of every tool draw from this process's environment.
    Serve {
        /// `@name` (an abstract socket, the default) or a path.
        #[arg(long, env = "MCC_EXECUTOR_SOCKET", default_value = address::DEFAULT)]
        socket: Address,
        /// The uid(s) whose processes may call: the gateway's (the chart's 65532). Every
        /// other connection is refused unread. Required: tools run as this executor's
        /// uid, which therefore is refused unless listed here (list it only where tools
        /// may call the executor themselves: a laptop).
        #[arg(
            long,
            env = "MCC_EXECUTOR_ALLOW_UID",
            value_delimiter = ',',
            required = true,
            value_name = "UID"
        )]
        allow_uid: Vec<u32>,
        /// Calls run at once; more wait.
        #[arg(long, env = "MCC_EXECUTOR_MAX_CALLS", default_value_t = 256)]
        max_calls: usize,
    },
    /// Inside a pod-runtime Pod: run the call in `input` (a file of the per-call Secret)
    /// as the executor would, with this container's environment as the env floor, and
    /// print the result as one line on stdout. Exits 0 whenever a result was printed.
    PodRun {
        #[arg(long, default_value = "/mcc/input/request.json")]
        input: std::path::PathBuf,
    },
    /// Exit 0 when an executor answers on the socket (serving this process or refusing it).
    Probe {
        /// `@name` (an abstract socket, the default) or a path.
        #[arg(long, env = "MCC_EXECUTOR_SOCKET", default_value = address::DEFAULT)]
        socket: Address,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mcc-executor: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "mcc-executor: {}",
                mcc_catalog::error_chain::render(e.as_ref())
            );
            ExitCode::FAILURE
        }
    }
}

/// How long no call must have run, after SIGTERM, before the executor exits.
const DRAIN_QUIET: Duration = Duration::from_secs(2);

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve {
            socket,
            allow_uid,
            max_calls,
        } => {
            // Tools run as this user: keep them from attaching to this process or reading
            // its memory and environment through /proc.
            // SAFETY: prctl(PR_SET_DUMPABLE) takes plain integers and touches no memory.
            unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
            // SAFETY: geteuid has no preconditions.
            let me = unsafe { libc::geteuid() };
            if allow_uid.contains(&me) {
                tracing::warn!(
                    uid = me,
                    "--allow-uid lists this executor's own uid: tools (which run as it) \
                     can send it calls of their own"
                );
            }
            let listener =
                server::bind(&socket).with_context(|| format!("cannot listen on {socket}"))?;
            let stop = mcc_catalog::shutdown::signal();
            tracing::info!(%socket, allowed_uids = ?allow_uid, "executor listening");
            let policy = server::Policy {
                allowed_uids: allow_uid.into_iter().collect(),
                max_calls,
                read_timeout: server::READ_TIMEOUT,
            };
            // SIGTERM: the gateway beside it drains its requests now; serve its calls
            // until none has run for DRAIN_QUIET (the kubelet's SIGKILL bounds it).
            server::serve_draining(
                listener,
                InProcess::from_environment(),
                policy,
                stop,
                DRAIN_QUIET,
            )
            .await;
            tracing::info!("executor stopping");
            if let Address::Path(path) = &socket {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Command::PodRun { input } => {
            let bytes = std::fs::read(&input)
                .with_context(|| format!("cannot read the call from {}", input.display()))?;
            let request = podio::PodInput::decode(&bytes)
                .map_err(|e| anyhow::anyhow!("{}: {e}", input.display()))?;
            let result = InProcess::from_environment().run(&request).await;
            use std::io::Write as _;
            let mut out = std::io::stdout().lock();
            out.write_all(podio::result_line(&result).as_bytes())?;
            out.flush()?;
            Ok(())
        }
        // Runs in the executor's container, as its uid, which the executor refuses: a
        // refusal is an answer (the executor accepts and answers connections).
        Command::Probe { socket } => ExecutorClient::new(socket)
            .answers()
            .await
            .map_err(anyhow::Error::msg),
    }
}
