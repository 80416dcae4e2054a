//! Kubernetes mode (feature `kubernetes`): the gateway's calls to the Kubernetes API.
//!
//! - [`watch`], [`shards`]: the operator's catalog ConfigMap (and the shards it names when
//!   the catalog is large), watched and installed into the
//!   [`crate::catalog::LiveCatalog`];
//! - [`env`]: `envFrom`/`valueFrom` values from Secrets and ConfigMaps at execution time;
//! - [`pods`]: the pod runtime (`runtime: pod` Tools, each call in its own Pod) and the
//!   sweeper of Pods a crashed replica left behind;
//! - [`token_review`], [`sa_keys`], [`review_memory`]: ServiceAccount tokens for the
//!   `kubernetes` auth backend, checked against the API server's signing keys, then with
//!   the TokenReview API, the answers remembered;
//! - [`errors`]: what an API failure may tell callers (the detail is logged).
//!
//! Tests play the API server with `mcc_catalog::kube_mock` (kube `Client` over
//! `tower_test::mock`).

pub mod env;
pub mod errors;
pub mod pods;
pub mod review_memory;
pub mod sa_keys;
pub mod shards;
pub mod token_review;
pub mod watch;

/// Why the Kubernetes API cannot be used at startup.
#[derive(Debug, thiserror::Error)]
#[error(
    "Kubernetes API: {0} (in a pod this needs the ServiceAccount token; elsewhere a KUBECONFIG)"
)]
pub struct KubeSetupError(#[from] pub ::kube::Error);

/// A client from the pod's ServiceAccount or the local kubeconfig.
pub async fn client() -> Result<::kube::Client, KubeSetupError> {
    Ok(::kube::Client::try_default().await?)
}
