//! The live catalog: the [`Catalog`] snapshot every request reads and the auth
//! [`Directory`] every credential is checked against, each swapped atomically and on its
//! own, so user, grant and key changes apply even while tools are still being built (or
//! cannot be). Also what `/readyz` and the metrics say about them: counts only, never a
//! key, a user name or introspection output.
//!
//! A source that cannot be read keeps what was last installed and records the error; the
//! full error goes to the log, a redacted one to the status.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use arc_swap::ArcSwap;
use mcc_catalog::introspect::Introspector;

use super::files::{self, Fingerprint};
use super::users::{self, Users};
use super::{Catalog, CatalogError};
use crate::auth::{Directory, SharedDirectory};
use crate::metrics::Metrics;
use crate::upstream::Upstreams;

/// What `/readyz` reports about the catalog (unauthenticated: counts only).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ReloadStatus {
    /// Times a tool set was installed (the first load counts); 0 = not ready.
    pub generation: u64,
    pub tools: usize,
    pub users: usize,
    /// Tools of the source left out (introspection failed, key collided).
    pub excluded_tools: usize,
    /// API-key records of the source left out (malformed, or a prefix held twice).
    pub excluded_api_keys: usize,
    /// Why the latest reload of some part failed, while the last good one is served:
    /// where it failed, never user names or introspection output (those are logged).
    pub last_error: Option<String>,
    /// Kubernetes mode: the `mcc.dev/catalog-hash` of the document whose tools are served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// File mode: each upstream MCP server's state (name, available, counts, the kind of
    /// its last error; never its URL).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub upstreams: Vec<crate::upstream::UpstreamStatus>,
}

/// Which part of the source an error is about; each is cleared by its own next success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Tool files (file mode).
    Tools,
    /// The users file (file mode).
    Users,
    /// The ConfigMap, its watch or its document (Kubernetes mode).
    Source,
}

#[derive(Debug, Default)]
struct State {
    status: ReloadStatus,
    errors: [Option<String>; 3],
}

impl State {
    fn view(&self) -> ReloadStatus {
        let errors: Vec<&str> = self.errors.iter().flatten().map(String::as_str).collect();
        ReloadStatus {
            last_error: (!errors.is_empty()).then(|| errors.join("; ")),
            ..self.status.clone()
        }
    }
}

/// The catalog every request reads, plus where it came from. Cheap to share.
pub struct LiveCatalog {
    current: ArcSwap<Catalog>,
    /// The users (and API keys) authentication resolves against; swapped on its own.
    directory: SharedDirectory,
    state: RwLock<State>,
    metrics: OnceLock<Metrics>,
    tool_entries: Vec<String>,
    users_file: Option<PathBuf>,
    /// The files as they were just before the first load read them: the watcher starts
    /// from here, so an edit made while the gateway was starting is not missed.
    loaded: Fingerprint,
    /// File mode's fn introspection (through the gateway's runtime).
    introspector: Introspector,
    /// File mode's upstream MCP servers (attached once, after the first load).
    upstreams: OnceLock<Upstreams>,
    /// The files' tools as last loaded, with their excluded count and declared upstreams:
    /// an upstream's change is merged with these, no file read again.
    local: Mutex<LocalTools>,
}

/// What the tool files gave at their last good load.
#[derive(Debug, Default, Clone)]
struct LocalTools {
    tools: Vec<mcc_catalog::Tool>,
    excluded: usize,
    servers: Vec<mcc_catalog::upstream::UpstreamSpec>,
}

impl LiveCatalog {
    /// Loads the initial catalog from files; an error here stops startup. Tools that
    /// cannot be introspected are left out, not fatal.
    /// `introspector` runs fn introspection at this load and every reload.
    pub fn load(
        tool_entries: Vec<String>,
        users_file: Option<PathBuf>,
        introspector: Introspector,
    ) -> Result<Self, CatalogError> {
        let before = files::fingerprint(&tool_entries, users_file.as_deref());
        let tools = files::load_tools(&tool_entries, &introspector)?;
        let users = match users_file.as_deref() {
            Some(path) => users::load_users(path)?,
            None => Users::default(),
        };
        let local = LocalTools {
            tools: tools.tools.clone(),
            excluded: tools.excluded.len(),
            servers: tools.servers,
        };
        let catalog = Catalog::new(tools.tools, users.directory.users().to_vec());
        let mut live = Self::with_catalog(catalog, tool_entries, users_file);
        live.local = Mutex::new(local);
        live.loaded = before;
        live.introspector = introspector;
        live.state_mut().status.excluded_tools = tools.excluded.len();
        live.install_users(users);
        Ok(live)
    }

    /// A live catalog around an already built snapshot (tests, benchmarks).
    pub fn with_catalog(
        catalog: Catalog,
        tool_entries: Vec<String>,
        users_file: Option<PathBuf>,
    ) -> Self {
        let status = ReloadStatus {
            generation: 1,
            tools: catalog.tools().len(),
            users: catalog.users().len(),
            ..ReloadStatus::default()
        };
        let directory = SharedDirectory::new(
            Directory::from_users(catalog.users().to_vec()).unwrap_or_default(),
        );
        let loaded = files::fingerprint(&tool_entries, users_file.as_deref());
        Self {
            current: ArcSwap::from_pointee(catalog),
            directory,
            state: RwLock::new(State {
                status,
                errors: Default::default(),
            }),
            metrics: OnceLock::new(),
            tool_entries,
            users_file,
            loaded,
            introspector: Introspector::default(),
            upstreams: OnceLock::new(),
            local: Mutex::new(LocalTools::default()),
        }
    }

    /// Serves the upstream MCP servers the tool files declare through `upstreams` from
    /// now on (file mode; once): their discovery starts, and each change of their tools
    /// is merged in by [`Self::merge_upstreams`].
    pub fn attach_upstreams(&self, upstreams: Upstreams) {
        let servers = self.local.lock().expect("local tools").servers.clone();
        if self.upstreams.set(upstreams.clone()).is_ok() {
            upstreams.set_specs(servers);
        }
    }

    /// The upstreams attached, if any.
    pub fn upstreams(&self) -> Option<Upstreams> {
        self.upstreams.get().cloned()
    }

    /// Installs the files' last good tools plus the upstreams' current tools (a key
    /// taken by a file's tool or an earlier upstream leaves the later tool out).
    pub fn merge_upstreams(&self) {
        let Some(upstreams) = self.upstreams.get() else {
            return;
        };
        let local = self.local.lock().expect("local tools").clone();
        let (tools, dropped) = crate::upstream::merge::merge(&local.tools, upstreams.tools());
        self.install_tools(Catalog::new(tools, vec![]), local.excluded + dropped, None);
    }

    /// A live catalog with nothing loaded yet (generation 0: `/readyz` says not ready)
    /// that says why in its status; Kubernetes mode starts so and installs as documents
    /// arrive.
    pub fn waiting(reason: String) -> Self {
        let live = Self::with_catalog(Catalog::default(), vec![], None);
        {
            let mut state = live.state_mut();
            state.status.generation = 0;
            state.errors[Part::Source as usize] = Some(reason);
        }
        live
    }

    /// Reports the exclusion counts to `metrics` from now on (the gateway's registry).
    pub fn attach_metrics(&self, metrics: &Metrics) {
        let _ = self.metrics.set(metrics.clone());
        self.publish_counts(&self.state.read().expect("status lock").status);
    }

    /// The current snapshot; holding it keeps one consistent view for a whole request.
    pub fn snapshot(&self) -> Arc<Catalog> {
        self.current.load_full()
    }

    /// The users authentication resolves against (follows reloads).
    pub fn directory(&self) -> SharedDirectory {
        self.directory.clone()
    }

    pub fn status(&self) -> ReloadStatus {
        let mut status = self.state.read().expect("status lock").view();
        if let Some(upstreams) = self.upstreams.get() {
            status.upstreams = upstreams.status();
        }
        status
    }

    /// Swaps in users and API keys now: the next request authenticates against them
    /// (a key missing from them is revoked), whatever the state of the tools.
    pub fn install_users(&self, users: Users) {
        let mut state = self.state_mut();
        state.status.users = users.directory.users().len();
        state.status.excluded_api_keys = users.excluded_api_keys;
        self.directory.replace(users.directory);
        self.publish_counts(&state.status);
        tracing::info!(
            users = state.status.users,
            excluded_api_keys = state.status.excluded_api_keys,
            "users installed"
        );
    }

    /// Swaps in a tool set; requests already running keep the old one. `hash` names the
    /// document it came from (Kubernetes mode).
    pub fn install_tools(&self, catalog: Catalog, excluded_tools: usize, hash: Option<String>) {
        let catalog = catalog.with_users(self.directory.current().users().to_vec());
        let mut state = self.state_mut();
        state.status.generation += 1;
        state.status.tools = catalog.tools().len();
        state.status.excluded_tools = excluded_tools;
        state.status.hash = hash;
        self.current.store(Arc::new(catalog));
        self.publish_counts(&state.status);
        tracing::info!(
            tools = state.status.tools,
            excluded_tools,
            generation = state.status.generation,
            "catalog installed"
        );
    }

    /// Records why `part` could not be loaded (the last good one stays): `detail` goes to
    /// the log only, `public` to `/readyz`.
    pub fn record_error(&self, part: Part, detail: &str, public: String) {
        tracing::error!(error = %detail, "catalog reload failed; keeping the last good one");
        self.state_mut().errors[part as usize] = Some(public);
    }

    /// `part` loaded again (or answered with what is already served): clear its error.
    pub fn clear_error(&self, part: Part) {
        self.state_mut().errors[part as usize] = None;
    }

    /// Reloads everything from the files (users, then tools), keeping the last good part
    /// on an error. Blocking (runs introspection).
    pub fn reload(&self) -> Result<(), String> {
        let users = self.reload_users();
        let tools = self.reload_tools();
        users.and(tools)
    }

    /// Reloads the users file (no-op without one). Blocking, but no Python.
    pub fn reload_users(&self) -> Result<(), String> {
        let Some(path) = self.users_file.as_deref() else {
            return Ok(());
        };
        self.settle(
            Part::Users,
            users::load_users(path).map(|u| self.install_users(u)),
        )
    }

    /// Reloads the tool files. Blocking (runs introspection).
    pub fn reload_tools(&self) -> Result<(), String> {
        let loaded = files::load_tools(&self.tool_entries, &self.introspector).map(|tools| {
            let local = LocalTools {
                tools: tools.tools,
                excluded: tools.excluded.len(),
                servers: tools.servers,
            };
            if let Some(upstreams) = self.upstreams.get() {
                upstreams.set_specs(local.servers.clone());
            }
            let merge = self.upstreams.get().is_some();
            *self.local.lock().expect("local tools") = local.clone();
            if merge {
                self.merge_upstreams();
            } else {
                self.install_tools(Catalog::new(local.tools, vec![]), local.excluded, None);
            }
        });
        self.settle(Part::Tools, loaded)
    }

    fn settle(&self, part: Part, result: Result<(), CatalogError>) -> Result<(), String> {
        match result {
            Ok(()) => {
                self.clear_error(part);
                Ok(())
            }
            Err(e) => {
                let message = e.to_string();
                self.record_error(part, &message, e.public());
                Err(message)
            }
        }
    }

    /// What the watcher compares (see [`Fingerprint`]).
    pub fn fingerprint(&self) -> Fingerprint {
        files::fingerprint(&self.tool_entries, self.users_file.as_deref())
    }

    /// The files as the first load saw them.
    pub fn loaded_fingerprint(&self) -> Fingerprint {
        self.loaded.clone()
    }

    fn state_mut(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().expect("status lock")
    }

    fn publish_counts(&self, status: &ReloadStatus) {
        if let Some(metrics) = self.metrics.get() {
            metrics.catalog_excluded(status.excluded_tools, status.excluded_api_keys);
            // The only tool label values the metrics accept (see crate::metrics).
            metrics.catalog_tools(self.current.load().tools().iter().map(|t| t.key.as_str()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn broken_edit_keeps_last_good_catalog() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(
            dir.path(),
            "t.yaml",
            "tools:\n  - name: one\n    exec: echo 1\n",
        );
        let live = LiveCatalog::load(
            vec![file.display().to_string()],
            None,
            Introspector::default(),
        )
        .unwrap();
        assert!(live.snapshot().tool("one").is_some());
        let before = live.fingerprint();

        std::fs::write(&file, "tools:\n  - name: two\n    exec: [broken\n").unwrap();
        assert_ne!(live.fingerprint(), before);
        let e = live.reload().unwrap_err();
        assert!(e.contains("t.yaml"), "{e}");
        assert!(live.snapshot().tool("one").is_some());
        let public = live.status().last_error.unwrap();
        assert_eq!(
            public,
            format!(
                "{}: invalid YAML at line 3 column 11 (details in the gateway log)",
                file.display()
            )
        );

        std::fs::write(&file, "tools:\n  - name: two\n    exec: echo 2\n").unwrap();
        live.reload().unwrap();
        assert!(live.snapshot().tool("two").is_some());
        assert!(live.snapshot().tool("one").is_none());
        assert_eq!(live.status().generation, 2);
        assert!(live.status().last_error.is_none());
    }

    /// A users file that cannot be read keeps the last good users and says where in the
    /// status, without the user names its error message carries (those are logged).
    #[test]
    fn users_errors_are_redacted_in_the_status_and_tools_still_reload() {
        let dir = tempfile::tempdir().unwrap();
        let tools = write(
            dir.path(),
            "t.yaml",
            "tools:\n  - name: one\n    exec: echo\n",
        );
        let users = write(dir.path(), "u.yaml", "users:\n  - username: zed\n");
        let live = LiveCatalog::load(
            vec![tools.display().to_string()],
            Some(users.clone()),
            Introspector::default(),
        )
        .unwrap();
        std::fs::write(&users, "users:\n  - username: zed\n  - username: zed\n").unwrap();
        std::fs::write(&tools, "tools:\n  - name: two\n    exec: echo\n").unwrap();
        let e = live.reload().unwrap_err();
        assert!(e.contains("'zed'"), "the log has it: {e}");
        let status = live.status();
        let public = status.last_error.unwrap();
        assert!(
            public.contains("u.yaml") && !public.contains("zed"),
            "{public}"
        );
        assert!(
            live.snapshot().tool("two").is_some(),
            "tools reloaded anyway"
        );
        assert_eq!(live.directory().current().users()[0].username, "zed");
    }

    /// A fn tool whose module is missing is left out, its file-mates are served, and the
    /// count (not the tool) shows in the status and the metrics.
    #[test]
    fn a_tool_that_cannot_be_introspected_is_left_out_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "good.py",
            "def hello(name: str) -> str:\n    \"\"\"Says hello.\"\"\"\n    return name\n",
        );
        let file = write(
            dir.path(),
            "t.yaml",
            &format!(
                "x-py: &py\n  cwd: {}\ntools:\n  - fn: good:hello\n    <<: *py\n\
                 \x20 - fn: nowhere:f\n    name: broken\n    <<: *py\n\
                 \x20 - name: plain\n    exec: echo\n",
                dir.path().display()
            ),
        );
        let live = LiveCatalog::load(
            vec![file.display().to_string()],
            None,
            Introspector::default(),
        )
        .unwrap();
        let metrics = Metrics::new();
        live.attach_metrics(&metrics);
        let snapshot = live.snapshot();
        let keys: Vec<&str> = snapshot.tools().iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["hello", "plain"]);
        let status = live.status();
        assert_eq!((status.tools, status.excluded_tools), (2, 1));
        assert!(status.last_error.is_none(), "an exclusion is not an error");
        assert!(
            metrics.render().contains("mcc_catalog_excluded_tools 1"),
            "{}",
            metrics.render()
        );
    }
}
