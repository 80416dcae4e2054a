//! `mcc-gateway check`: validates tool files and prints every tool's key and signature.

use std::io::Write;

use mcc_catalog::introspect::Introspector;

/// Loads `paths` (files, directories, globs) and prints each tool's signature; warnings
/// go to stderr. Any invalid file is an error naming the file, tool and field.
pub fn run(paths: &[String], out: &mut impl Write) -> anyhow::Result<()> {
    if paths.is_empty() {
        anyhow::bail!("no tool files given: pass files, directories or globs");
    }
    let loaded = mcc_catalog::load(paths, &Introspector::default())?;
    for warning in &loaded.warnings {
        eprintln!("warning: {warning}");
    }
    for tool in &loaded.tools {
        writeln!(out, "{}", mcc_catalog::signature(tool))?;
    }
    let n = loaded.tools.len();
    writeln!(out, "{n} tool{} OK", if n == 1 { "" } else { "s" })?;
    Ok(())
}
