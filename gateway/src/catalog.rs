//! The live catalog: one immutable [`Catalog`] snapshot, swapped atomically when its
//! source changes. File mode loads tool files and the users file (polled by [`watch`]);
//! Kubernetes mode builds the same snapshot from the operator's document
//! ([`crate::published`]) and installs it with [`LiveCatalog::install`]. A broken edit
//! keeps the last good snapshot and records the error for `/readyz` and the log.
//!
//! Loading rules (YAML, keys, introspection) are `mcc_catalog`'s; this module only decides
//! when to load and what to keep.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use mcc_catalog::document::{EnvFromRef, EnvValueRef};
use mcc_catalog::introspect::Introspector;
use mcc_catalog::{Tool, User};
use serde::Deserialize;

use crate::auth::{Directory, SharedDirectory, UserEntry};

/// One consistent view of tools and users. Never mutated; replaced whole.
#[derive(Debug, Default)]
pub struct Catalog {
    tools: Vec<Tool>,
    by_key: HashMap<String, usize>,
    users: Vec<User>,
    /// Kubernetes mode: what each tool (by key) takes from the Kubernetes API.
    refs: HashMap<String, ToolRefs>,
}

/// What a tool of the operator's catalog needs from the Kubernetes API at execution time
/// (references only: values are resolved per call and never stored in the catalog).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolRefs {
    /// The Tool's namespace: references resolve there.
    pub namespace: String,
    /// The Tool resource's name (for messages).
    pub resource: String,
    pub env_from: Vec<EnvFromRef>,
    pub env_value_from: Vec<EnvValueRef>,
    /// `runtime: pod`: the tool runs in an ephemeral Pod, not as a local process.
    pub pod: bool,
}

impl ToolRefs {
    /// Nothing to resolve and a local runtime.
    pub fn is_empty(&self) -> bool {
        self.env_from.is_empty() && self.env_value_from.is_empty() && !self.pod
    }
}

impl Catalog {
    pub fn new(tools: Vec<Tool>, users: Vec<User>) -> Self {
        let by_key = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.key.clone(), i))
            .collect();
        Self {
            tools,
            by_key,
            users,
            refs: HashMap::new(),
        }
    }

    /// The same snapshot with the Kubernetes references of its tools (by key).
    pub fn with_refs(mut self, refs: HashMap<String, ToolRefs>) -> Self {
        self.refs = refs;
        self
    }

    /// The Kubernetes references of a tool, if it has any.
    pub fn refs(&self, key: &str) -> Option<&ToolRefs> {
        self.refs.get(key)
    }

    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    pub fn tool(&self, key: &str) -> Option<&Tool> {
        self.by_key.get(key).map(|&i| &self.tools[i])
    }

    pub fn users(&self) -> &[User] {
        &self.users
    }

    /// The first user of the users file in `group` (what the dev auth backends act as).
    pub fn first_user_in(&self, group: &str) -> Option<&User> {
        self.users.iter().find(|u| u.in_group(group))
    }
}

/// Why a catalog could not be loaded; names the file.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error(transparent)]
    Tools(#[from] mcc_catalog::LoadError),
    #[error("{path}: {message}")]
    Users { path: PathBuf, message: String },
}

/// The keys of a users-file entry.
const USER_KEYS: [&str; 5] = ["username", "email", "groups", "tools", "api_keys"];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UsersFile {
    users: Vec<UserEntry>,
}

/// Reads a users file: `users:` with username, email, groups, tools and api_keys (the
/// entry shape is [`crate::auth::UserEntry`]), checked as the auth directory needs it.
pub fn load_users(path: &Path) -> Result<Directory, CatalogError> {
    let err = |message: String| CatalogError::Users {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let raw: serde_json::Value = serde_saphyr::from_str(&text).map_err(|e| err(e.to_string()))?;
    if let Some(users) = raw.get("users").and_then(|u| u.as_array()) {
        for (i, user) in users.iter().enumerate() {
            let unknown = user
                .as_object()
                .into_iter()
                .flat_map(|m| m.keys())
                .find(|k| !USER_KEYS.contains(&k.as_str()));
            if let Some(key) = unknown {
                return Err(err(format!(
                    "users[{i}]: unknown key '{key}' (expected one of: {})",
                    USER_KEYS.join(", ")
                )));
            }
        }
    }
    let file: UsersFile = serde_json::from_value(raw).map_err(|e| err(e.to_string()))?;
    if let Some(i) = file
        .users
        .iter()
        .position(|u| u.user.username.trim().is_empty())
    {
        return Err(err(format!("users[{i}]: username: must not be empty")));
    }
    Directory::new(file.users).map_err(|e| err(e.to_string()))
}

/// Loads tools (files, directories, globs) and the users file into a snapshot. Runs
/// Python for fn introspection, so call it off the async runtime.
pub fn load(
    tool_entries: &[String],
    users_file: Option<&Path>,
) -> Result<(Catalog, Directory), CatalogError> {
    let loaded = mcc_catalog::load(tool_entries, &Introspector::default())?;
    for warning in &loaded.warnings {
        tracing::warn!(%warning, "tool file warning");
    }
    let directory = match users_file {
        Some(path) => load_users(path)?,
        None => Directory::default(),
    };
    let catalog = Catalog::new(loaded.tools, directory.users().to_vec());
    Ok((catalog, directory))
}

/// What `/readyz` reports about the catalog.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ReloadStatus {
    /// Times a snapshot was installed (the first load counts).
    pub generation: u64,
    pub tools: usize,
    pub users: usize,
    /// The error of the latest failed reload, while the last good catalog is served.
    pub last_error: Option<String>,
    /// Kubernetes mode: the `mcc.dev/catalog-hash` of the document being served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
}

/// The catalog every request reads, plus where it came from. Cheap to share.
pub struct LiveCatalog {
    current: ArcSwap<Catalog>,
    /// The users (and API keys) authentication resolves against; swapped with the catalog.
    directory: SharedDirectory,
    status: RwLock<ReloadStatus>,
    tool_entries: Vec<String>,
    users_file: Option<PathBuf>,
    /// The files as they were just before the first load read them: the watcher starts
    /// from here, so an edit made while the gateway was starting is not missed.
    loaded: Fingerprint,
}

/// Every watched file with its modification time and size (`None`: missing).
pub type Fingerprint = Vec<(PathBuf, Option<(SystemTime, u64)>)>;

impl LiveCatalog {
    /// Loads the initial catalog; an error here stops startup.
    pub fn load(
        tool_entries: Vec<String>,
        users_file: Option<PathBuf>,
    ) -> Result<Self, CatalogError> {
        let before = fingerprint(&tool_entries, users_file.as_deref());
        let (catalog, directory) = load(&tool_entries, users_file.as_deref())?;
        let mut live = Self::with_catalog(catalog, tool_entries, users_file);
        live.loaded = before;
        live.directory.replace(directory);
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
            last_error: None,
            hash: None,
        };
        let directory = SharedDirectory::new(
            Directory::from_users(catalog.users().to_vec()).unwrap_or_default(),
        );
        let loaded = fingerprint(&tool_entries, users_file.as_deref());
        Self {
            current: ArcSwap::from_pointee(catalog),
            directory,
            status: RwLock::new(status),
            tool_entries,
            users_file,
            loaded,
        }
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
        self.status.read().expect("status lock").clone()
    }

    /// A live catalog with nothing loaded yet (generation 0: `/readyz` says not ready)
    /// that says why in its status; Kubernetes mode starts so and [`Self::install`]s.
    pub fn waiting(reason: String) -> Self {
        let live = Self::with_catalog(Catalog::default(), vec![], None);
        {
            let mut status = live.status.write().expect("status lock");
            status.generation = 0;
            status.last_error = Some(reason);
        }
        live
    }

    /// Swaps in a new snapshot and its users; requests already running keep the old one.
    pub fn install(&self, catalog: Catalog, directory: Directory, hash: Option<String>) {
        let mut status = self.status.write().expect("status lock");
        status.generation += 1;
        status.tools = catalog.tools().len();
        status.users = catalog.users().len();
        status.last_error = None;
        status.hash = hash;
        self.current.store(Arc::new(catalog));
        self.directory.replace(directory);
        tracing::info!(
            tools = status.tools,
            users = status.users,
            generation = status.generation,
            "catalog installed"
        );
    }

    /// Records why the source could not be loaded; the last good catalog stays.
    pub fn record_error(&self, message: String) {
        tracing::error!(error = %message, "catalog reload failed; keeping the last good catalog");
        self.status.write().expect("status lock").last_error = Some(message);
    }

    /// The source answered again with the catalog already served: clear a stale error.
    pub fn clear_error(&self) {
        self.status.write().expect("status lock").last_error = None;
    }

    /// Reloads from the files: swaps in the new catalog, or keeps the old one and records
    /// the error. Blocking (runs introspection).
    pub fn reload(&self) -> Result<(), String> {
        match load(&self.tool_entries, self.users_file.as_deref()) {
            Ok((catalog, directory)) => {
                self.install(catalog, directory, None);
                Ok(())
            }
            Err(e) => {
                let message = e.to_string();
                self.record_error(message.clone());
                Err(message)
            }
        }
    }

    /// What the watcher compares: every file the settings name, with size and mtime.
    /// Directory and glob listings are re-expanded, so added and removed files count.
    pub fn fingerprint(&self) -> Fingerprint {
        fingerprint(&self.tool_entries, self.users_file.as_deref())
    }
}

fn fingerprint(tool_entries: &[String], users_file: Option<&Path>) -> Fingerprint {
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in tool_entries {
        match mcc_catalog::load::expand(entry) {
            Ok(paths) => files.extend(paths),
            Err(_) => files.push(PathBuf::from(entry)),
        }
    }
    files.extend(users_file.map(Path::to_path_buf));
    files
        .into_iter()
        .map(|p| {
            let meta = std::fs::metadata(&p)
                .ok()
                .and_then(|m| Some((m.modified().ok()?, m.len())));
            (p, meta)
        })
        .collect()
}

/// How long files must stay unchanged before a reload.
const SETTLE: Duration = Duration::from_millis(200);

/// Called (on a blocking thread) with each newly installed catalog, e.g. to rebuild the
/// search index.
pub type OnReload = Arc<dyn Fn(&Catalog) + Send + Sync>;

/// Polls the files every `interval` and reloads on any change, until `stop` fires.
pub async fn watch(
    live: Arc<LiveCatalog>,
    interval: Duration,
    stop: tokio_util::sync::CancellationToken,
    on_reload: OnReload,
) {
    let mut seen = live.loaded.clone();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        let live2 = live.clone();
        let Ok(now) = tokio::task::spawn_blocking(move || live2.fingerprint()).await else {
            continue;
        };
        if now == seen {
            continue;
        }
        // Wait until the files stop changing, so a save in progress (truncate, then
        // write) is not loaded half-written.
        let mut now = now;
        loop {
            tokio::time::sleep(SETTLE.min(interval)).await;
            let live2 = live.clone();
            let Ok(again) = tokio::task::spawn_blocking(move || live2.fingerprint()).await else {
                break;
            };
            if again == now {
                break;
            }
            now = again;
        }
        seen = now;
        let live2 = live.clone();
        let on_reload = on_reload.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if live2.reload().is_ok() {
                on_reload(&live2.snapshot());
            }
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn users_file_rules() {
        let dir = tempfile::tempdir().unwrap();
        let ok = write(
            dir.path(),
            "u.yaml",
            "users:\n  - username: alice\n    email: a@x\n    groups: [admin]\n  - username: bob\n    tools: [ops.t]\n    api_keys: []\n",
        );
        let users = load_users(&ok).unwrap();
        assert_eq!(users.users()[0].username, "alice");
        assert_eq!(users.users()[1].tools, vec!["ops.t"]);

        let dup = write(
            dir.path(),
            "d.yaml",
            "users:\n  - username: a\n  - username: a\n",
        );
        let e = load_users(&dup).unwrap_err().to_string();
        assert!(
            e.contains("d.yaml") && e.contains("'a' is listed more than once"),
            "{e}"
        );

        let unknown = write(
            dir.path(),
            "x.yaml",
            "users:\n  - username: a\n    grups: [x]\n",
        );
        let e = load_users(&unknown).unwrap_err().to_string();
        assert!(e.contains("x.yaml") && e.contains("grups"), "{e}");
    }

    #[test]
    fn broken_edit_keeps_last_good_catalog() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(
            dir.path(),
            "t.yaml",
            "tools:\n  - name: one\n    exec: echo 1\n",
        );
        let live = LiveCatalog::load(vec![file.display().to_string()], None).unwrap();
        assert!(live.snapshot().tool("one").is_some());
        let before = live.fingerprint();

        std::fs::write(&file, "tools:\n  - name: two\n    exec: [broken\n").unwrap();
        assert_ne!(live.fingerprint(), before);
        let e = live.reload().unwrap_err();
        assert!(e.contains("t.yaml"), "{e}");
        assert!(live.snapshot().tool("one").is_some());
        assert_eq!(live.status().last_error.as_deref(), Some(e.as_str()));

        std::fs::write(&file, "tools:\n  - name: two\n    exec: echo 2\n").unwrap();
        live.reload().unwrap();
        assert!(live.snapshot().tool("two").is_some());
        assert!(live.snapshot().tool("one").is_none());
        assert_eq!(live.status().generation, 2);
        assert!(live.status().last_error.is_none());
    }
}
