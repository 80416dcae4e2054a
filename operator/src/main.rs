//! `mcc-operator`: wiring only. Subcommands: `run` (the controllers, leader-elected),
//! `crdgen` (writes `crds/`), `convert` (MCC YAML files → manifests).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use kube::Client;
use mcc_operator::leader::{self, LeaderElector};
use mcc_operator::manifests::{ConvertOptions, convert};
use mcc_operator::metrics::{self, Metrics};
use mcc_operator::runner::{self, RunSettings};
use mcc_operator::settings::TenancyArgs;

#[derive(Parser)]
#[command(
    name = "mcc-operator",
    version,
    about = "MCC operator: Tool and UserGrant resources into the catalog gateways load"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the controllers (in a cluster, or against the current kubeconfig).
    // Boxed: its settings make it far larger than the other subcommands.
    Run(Box<RunArgs>),
    /// Write the CRD manifests (run from the repository root).
    Crdgen {
        /// Directories to write into (default: crds and charts/mcc/crds).
        #[arg(long)]
        out: Vec<PathBuf>,
    },
    /// Convert MCC YAML tool files (and a users file) into Tool/UserGrant/Secret manifests
    /// on stdout.
    Convert {
        /// Tool files, directories (their *.yaml/*.yml) or globs.
        #[arg(required = true)]
        tool_files: Vec<String>,
        /// A users file (`users:` list of username, email, groups, tools).
        #[arg(long)]
        users: Option<PathBuf>,
        /// Namespace of the generated objects.
        #[arg(long, default_value = "default")]
        namespace: String,
        /// Substitute $VAR/${VAR} from this environment (MCC does so at load time); off by
        /// default so local secrets do not land in manifests.
        #[arg(long)]
        substitute_env: bool,
        /// Read relative env_file paths from this directory (default: the current one,
        /// as MCC does).
        #[arg(long)]
        env_file_base: Option<PathBuf>,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Namespace of the catalog ConfigMap and the leader Lease (default: the pod's).
    #[arg(long, env = "MCC_OPERATOR_NAMESPACE")]
    namespace: Option<String>,
    /// Name of the catalog ConfigMap.
    #[arg(long, env = "MCC_CATALOG_CONFIGMAP", default_value = "mcc-catalog")]
    configmap: String,
    /// Address of the /metrics and /healthz server.
    #[arg(long, env = "MCC_METRICS_ADDR", default_value = "0.0.0.0:9090")]
    metrics_addr: SocketAddr,
    /// Name of the leader-election Lease.
    #[arg(long, env = "MCC_LEASE_NAME", default_value = "mcc-operator")]
    lease: String,
    /// Lease duration in seconds.
    #[arg(long, env = "MCC_LEASE_SECONDS", default_value_t = 15)]
    lease_seconds: u64,
    /// Debounce of catalog publishes, in milliseconds.
    #[arg(long, env = "MCC_PUBLISH_DEBOUNCE_MS", default_value_t = 1000)]
    debounce_ms: u64,
    #[command(flatten)]
    tenancy: TenancyArgs,
}

fn main() -> std::process::ExitCode {
    init_logging();
    let result = match Cli::parse().command {
        Command::Crdgen { out } => {
            let dirs = if out.is_empty() {
                mcc_operator::crdgen::CRD_DIRS
                    .iter()
                    .map(PathBuf::from)
                    .collect()
            } else {
                out
            };
            dirs.iter().try_for_each(|d| mcc_operator::crdgen::write(d))
        }
        Command::Convert {
            tool_files,
            users,
            namespace,
            substitute_env,
            env_file_base,
        } => run_convert(ConvertOptions {
            tool_files,
            users_file: users,
            namespace,
            substitute_env,
            env_file_base,
        }),
        Command::Run(args) => tokio::runtime::Runtime::new()
            .context("cannot start the async runtime")
            .and_then(|rt| rt.block_on(run(*args))),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", mcc_catalog::error_chain::render(e.as_ref()));
            std::process::ExitCode::FAILURE
        }
    }
}

fn run_convert(opts: ConvertOptions) -> anyhow::Result<()> {
    let converted = convert(&opts)?;
    for w in &converted.warnings {
        eprintln!("warning: {w}");
    }
    print!("{}", converted.to_yaml()?);
    Ok(())
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    // Settings first: a bad value stops here, before anything touches the cluster.
    let tenancy = args.tenancy.parse()?;
    let config = kube::Config::infer()
        .await
        .context("cannot find Kubernetes credentials (in-cluster or kubeconfig)")?;
    let client = Client::try_from(config.clone()).context("cannot reach the Kubernetes API")?;
    let namespace = args
        .namespace
        .unwrap_or_else(|| client.default_namespace().to_string());
    let policy = tenancy.resolve(&namespace)?;
    tracing::info!(
        trusted = ?policy.trusted,
        watched = ?policy.watched,
        watch_selector = tenancy.selector().map(|s| s.to_string()),
        local_runtime = ?policy.local_runtime,
        namespace_groups = ?policy.groups,
        pod_namespaces = ?policy.pod_namespaces,
        pod_policy = ?policy.pod_policy,
        namespace_tool_bytes = ?policy.tool_bytes,
        "tenancy settings"
    );
    let metrics = Arc::new(Metrics::default());
    tokio::spawn(metrics::serve(args.metrics_addr, metrics.clone()));

    let identity = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| format!("mcc-operator-{}", std::process::id()));
    let lease_duration = Duration::from_secs(args.lease_seconds.max(3));
    let elector = LeaderElector::new(
        client.clone(),
        &namespace,
        &args.lease,
        &identity,
        lease_duration,
    );
    // SIGTERM too: in a container the operator is PID 1, and PID 1 has no default action
    // for it, so without a handler a deleted Pod lingers its whole grace period. The
    // handler is in place before the line below says the operator is waiting.
    let stop = mcc_catalog::shutdown::signal();
    tokio::pin!(stop);
    tracing::info!(%identity, lease = %args.lease, "waiting for leadership");
    tokio::select! {
        () = elector.acquire() => {}
        () = &mut stop => {
            tracing::info!("stopping while following");
            return Ok(());
        }
    }
    tracing::info!(%identity, "leading: starting controllers");
    let lease_lost =
        leader::hold_on_own_thread(config, &namespace, &args.lease, &identity, lease_duration)
            .context("cannot start the thread that renews the Lease")?;

    let settings = RunSettings {
        publish: runner::settings(
            &namespace,
            &args.configmap,
            Duration::from_millis(args.debounce_ms),
        ),
        policy,
        watch_selector: tenancy.selector().cloned(),
    };
    tokio::select! {
        r = runner::run(client, metrics, settings) => r.context("the controllers stopped"),
        _ = lease_lost => anyhow::bail!("lost the leader Lease; exiting so a new leader takes over"),
        () = &mut stop => {
            // A follower takes over at its next try, not a lease duration later.
            match elector.release().await {
                Ok(released) => tracing::info!(released, "stopping; the leader Lease is handed back"),
                Err(e) => tracing::warn!(error = %e, "stopping; handing the leader Lease back failed"),
            }
            Ok(())
        }
    }
}

/// Log lines on stderr, filtered by `RUST_LOG`: JSON lines with `MCC_LOG_FORMAT=json`
/// (what the chart sets: one object per line for log collectors), else text, coloured
/// only on a terminal.
fn init_logging() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,kube=warn".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if std::env::var("MCC_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json")) {
        builder.json().init();
    } else {
        builder.with_ansi(std::io::stderr().is_terminal()).init();
    }
}
