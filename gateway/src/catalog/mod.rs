//! The live catalog: what tools are served and who may call them, kept current from its
//! source. One file per concern:
//!
//! - the immutable [`Catalog`] a request reads is `mcc_catalog`'s (search reads it too);
//! - [`users`]: the users file (file mode) read into the auth directory;
//! - [`files`]: file mode's tool loading and the polling [`watch`] of tool and users files
//!   (Kubernetes mode builds the same parts from the operator's document in
//!   [`published`] and watches its ConfigMap in `kube::watch`);
//! - [`published`]: Kubernetes mode's source, the operator's published document decoded
//!   into the same parts;
//! - [`settings`]: the `catalog` section (which source);
//! - [`exclude`]: which tools are left out (introspection failed, key collided);
//! - [`live`]: the [`LiveCatalog`] and its status — tools and users swap on their own;
//! - [`follow`]: work that follows a swap without delaying the next one (building
//!   tools, rebuilding the search index).
//!
//! Loading rules (YAML, keys, introspection) are `mcc_catalog`'s; this module decides
//! when to load, what to leave out and what to keep. One bad tool never freezes the
//! catalog: it is left out and logged, and everything else — revocations included —
//! keeps applying.

pub mod exclude;
pub mod files;
pub mod follow;
pub mod live;
pub mod published;
pub mod settings;
pub mod users;

use std::path::PathBuf;

pub use exclude::ExcludedTool;
pub use files::{Fingerprint, watch};
pub use follow::OnReload;
pub use live::{LiveCatalog, Part, ReloadStatus};
pub use mcc_catalog::snapshot::{Catalog, ToolRefs};
pub use users::{Users, load_users};

/// Why a catalog could not be loaded; names the file.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error(transparent)]
    Tools(#[from] mcc_catalog::LoadError),
    #[error("{path}: {message}")]
    Users { path: PathBuf, message: String },
}

impl CatalogError {
    /// The error as unauthenticated `/readyz` may show it: which file and what kind of
    /// problem, never a user name, a key or introspection output (the log has those).
    pub fn public(&self) -> String {
        use mcc_catalog::LoadError;
        match self {
            CatalogError::Tools(LoadError::Introspection(e)) => {
                let place = e.to_string();
                let place = place.split(": ").next().unwrap_or_default();
                format!("{place}: introspection failed (details in the gateway log)")
            }
            CatalogError::Tools(LoadError::Yaml { path, message }) => {
                // The position only: the parser's message may quote the file's text.
                let at = message
                    .split(": ")
                    .next()
                    .filter(|p| p.starts_with("line "))
                    .map(|p| format!(" at {p}"))
                    .unwrap_or_default();
                format!(
                    "{}: invalid YAML{at} (details in the gateway log)",
                    path.display()
                )
            }
            CatalogError::Tools(e) => e.to_string(),
            CatalogError::Users { path, .. } => format!(
                "{}: the users file cannot be used (details in the gateway log)",
                path.display()
            ),
        }
    }
}
