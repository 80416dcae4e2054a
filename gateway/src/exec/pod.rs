//! The engine's side of the pod runtime: what a `runtime: pod` call hands to a
//! [`PodRunner`]. The runner itself (Pods and Secrets over the Kubernetes API) lives in
//! [`crate::kube::pods`]; the engine knows only this trait, as it knows
//! [`super::environment::EnvResolver`], so file mode builds without the kube crates.

use std::sync::Arc;

use mcc_catalog::document::PodSpec;
use mcc_executor::{Finished, Request, RunError};

use super::Call;
use crate::catalog::ToolRefs;

/// One process of a `runtime: pod` call (the tool, or its transform) to run in its own Pod.
#[derive(Debug, Clone, Copy)]
pub struct PodTarget<'a> {
    /// The tool's catalog key.
    pub tool: &'a str,
    /// The Tool's namespace and name, and the `envFrom`/`valueFrom` references the Pod
    /// spec carries (their values never pass through the gateway).
    pub refs: &'a ToolRefs,
    pub pod: &'a PodSpec,
}

/// Runs one [`Request`] in a Pod. Dropping the future deletes the Pod.
#[async_trait::async_trait]
pub trait PodRunner: Send + Sync {
    async fn run(&self, target: PodTarget<'_>, request: &Request) -> Result<Finished, RunError>;
}

/// The engine's [`PodRunner`], shown by name in `Debug`.
#[derive(Clone)]
pub(super) struct Runner(pub Arc<dyn PodRunner>);

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PodRunner")
    }
}

/// The Pod shape of a `runtime: pod` call; `None`: the call runs locally.
pub(super) fn spec_of<'a>(call: &Call<'a>) -> Option<&'a PodSpec> {
    call.refs.and_then(|r| r.pod.as_ref())
}

/// What a `runtime: pod` call hands to the runner.
pub(super) fn target<'a>(call: &Call<'a>) -> Option<PodTarget<'a>> {
    let refs = call.refs?;
    Some(PodTarget {
        tool: &call.tool.key,
        refs,
        pod: refs.pod.as_ref()?,
    })
}
