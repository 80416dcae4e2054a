//! `mcc-operator`: reconciles Tool and UserGrant resources into the catalog. Not built yet.

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "mcc-operator",
    version,
    about = "MCC operator (not built yet: see the operator issue)"
)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    Cli::parse();
    anyhow::bail!("the operator is not built yet; run `mcc-operator --help`")
}
