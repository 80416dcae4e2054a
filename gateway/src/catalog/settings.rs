//! The `catalog` section: where the catalog comes from (tool files or the operator's
//! ConfigMap) and, in Kubernetes mode, which ConfigMap.

use serde::Deserialize;

/// The `catalog` section: where tools and users come from.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CatalogSettings {
    /// `files` (the `tools` and `users_file` settings) or `kubernetes` (the ConfigMap the
    /// operator publishes, watched through the Kubernetes API).
    pub source: CatalogSource,
    /// Kubernetes mode: the ConfigMap's name.
    pub configmap: String,
    /// Kubernetes mode: its namespace (default: the namespace of the kubeconfig or of the
    /// pod's ServiceAccount).
    pub namespace: Option<String>,
}

/// Where the catalog comes from.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum CatalogSource {
    #[default]
    Files,
    Kubernetes,
}

impl Default for CatalogSettings {
    fn default() -> Self {
        Self {
            source: CatalogSource::Files,
            configmap: "mcc-catalog".into(),
            namespace: None,
        }
    }
}
