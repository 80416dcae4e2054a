//! File mode's catalog source: tool files (files, directories, globs) and the users
//! file, loaded at startup and polled by [`watch`].
//!
//! Tools and users reload independently: an edit of the users file is swapped in at once
//! (it is read in microseconds), while tool files are rebuilt by a serial worker
//! ([`super::follow::Latest`]: introspection may take up to its timeout), so a revoked key
//! never waits for Python. A fn tool that cannot be introspected is left out
//! ([`super::exclude`]); a tool file that does not parse keeps the last good tools.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use mcc_catalog::introspect::Introspector;
use mcc_catalog::{Tool, load};

use super::exclude::{self, DeclaredDuplicates, ExcludedTool};
use super::follow::{Latest, OnReload, follower};
use super::{CatalogError, LiveCatalog};

/// Tools ready to swap in, and those left out.
#[derive(Debug, Default)]
pub struct Tools {
    pub tools: Vec<Tool>,
    pub excluded: Vec<ExcludedTool>,
    /// The upstream MCP servers the files declare (their tools come from
    /// [`crate::upstream`]).
    pub servers: Vec<mcc_catalog::upstream::UpstreamSpec>,
}

/// Loads the tool files: parse errors and keys declared twice refuse the load (MCC's
/// rules, as `mcc-gateway check` reports them); a fn tool whose introspection fails or
/// whose introspected key collides is left out and logged. Runs Python: call it off the
/// async runtime.
pub fn load_tools(
    tool_entries: &[String],
    introspector: &Introspector,
) -> Result<Tools, CatalogError> {
    let (loaded, pending) = load::parse_entries(tool_entries)?;
    for warning in &loaded.warnings {
        tracing::warn!(%warning, "tool file warning");
    }
    let mut tools = loaded.tools;
    let places: Vec<String> = tools.iter().map(|t| t.source.clone()).collect();
    let selection = exclude::introspect(
        &mut tools,
        &pending,
        introspector,
        &places,
        DeclaredDuplicates::Refuse,
    )?;
    selection.log("tool files");
    Ok(Tools {
        tools: selection.retain(tools),
        excluded: selection.excluded,
        servers: loaded.servers,
    })
}

/// Every watched file with its modification time and size (`None`: missing): the tool
/// files (directory and glob listings re-expanded, so added and removed files count) and
/// the users file, apart, since each reloads on its own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fingerprint {
    pub tools: Vec<(PathBuf, Option<(SystemTime, u64)>)>,
    pub users: Option<(PathBuf, Option<(SystemTime, u64)>)>,
}

/// The [`Fingerprint`] of the files the settings name.
pub fn fingerprint(tool_entries: &[String], users_file: Option<&Path>) -> Fingerprint {
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in tool_entries {
        match load::expand(entry) {
            Ok(paths) => files.extend(paths),
            Err(_) => files.push(PathBuf::from(entry)),
        }
    }
    let stat = |p: PathBuf| {
        let meta = std::fs::metadata(&p)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())));
        (p, meta)
    };
    Fingerprint {
        tools: files.into_iter().map(stat).collect(),
        users: users_file.map(|p| stat(p.to_path_buf())),
    }
}

/// How long files must stay unchanged before a reload.
const SETTLE: Duration = Duration::from_millis(200);

/// Polls the files every `interval` until `stop` fires: a users-file change is swapped in
/// at once, a tool-file change is handed to the tool builder; each installed tool set is
/// then handed to `on_reload` (the search index), which never delays a swap.
pub async fn watch(
    live: Arc<LiveCatalog>,
    interval: Duration,
    stop: tokio_util::sync::CancellationToken,
    on_reload: OnReload,
) {
    let search = follower(stop.clone(), on_reload);
    // Upstream MCP servers' tools change on their own schedule: re-merged with the
    // files' last tools (no file is read again), then searched.
    let merges = {
        let live = live.clone();
        let search = search.clone();
        Latest::spawn(stop.clone(), move |()| {
            live.merge_upstreams();
            search.submit(live.snapshot());
        })
    };
    let tools = {
        let live = live.clone();
        Latest::spawn(stop.clone(), move |()| {
            if live.reload_tools().is_ok() {
                search.submit(live.snapshot());
            }
        })
    };
    let mut upstream_changes = live.upstreams().map(|u| u.subscribe());
    let mut seen = live.loaded_fingerprint();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        if let Some(changes) = upstream_changes.as_mut()
            && changes.has_changed().unwrap_or(false)
        {
            changes.mark_unchanged();
            merges.submit(());
        }
        let Some(mut now) = current(&live).await else {
            continue;
        };
        if now == seen {
            continue;
        }
        // Wait until the files stop changing, so a save in progress (truncate, then
        // write) is not loaded half-written.
        loop {
            tokio::time::sleep(SETTLE.min(interval)).await;
            let Some(again) = current(&live).await else {
                break;
            };
            if again == now {
                break;
            }
            now = again;
        }
        if now.users != seen.users {
            let live = live.clone();
            let _ = tokio::task::spawn_blocking(move || live.reload_users()).await;
        }
        if now.tools != seen.tools {
            tools.submit(());
        }
        seen = now;
    }
}

async fn current(live: &Arc<LiveCatalog>) -> Option<Fingerprint> {
    let live = live.clone();
    tokio::task::spawn_blocking(move || live.fingerprint())
        .await
        .ok()
}
