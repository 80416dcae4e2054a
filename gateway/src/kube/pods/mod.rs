//! The pod runtime: each execution of a `runtime: pod` Tool in its own Pod, in the Tool's
//! namespace. [`spec`] builds the Pod and the per-call Secret that carries the call
//! (params, context and passthrough values never appear in the Pod object); the
//! lifecycle (create, follow, read the result from the log, delete) and the sweeper of
//! Pods a crashed replica left behind live beside it.

pub mod run;
pub mod spec;
pub mod sweep;

#[cfg(test)]
mod engine_tests;
#[cfg(test)]
mod sweep_tests;
#[cfg(test)]
mod tests;

pub use run::PodRuntime;
pub use sweep::Sweeper;

use std::time::Duration;

/// Deployment-wide settings of the pod runtime (`execution.pod`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSettings {
    /// The image of pod Tools that name none (`sh`, `curl`, `python3`: the executor image).
    pub default_image: String,
    /// The image the init container copies the runner (`mcc-executor`) from.
    pub runner_image: String,
    /// This gateway replica (its Pod's name), named in each Pod's labels.
    pub replica: String,
    /// The installation (the Helm release's instance label): the sweeper of one install
    /// touches only its own Pods.
    pub instance: String,
    /// Where `env_passthrough` of pod tools reads from: the configured executor
    /// environment's values, never the gateway container's.
    pub passthrough_env: Vec<(String, String)>,
    /// Executions of one pod Tool at once; more wait (the engine's limiter rule).
    pub max_per_tool: usize,
    /// Pods of this install older than the longest timeout plus this are swept.
    pub sweep_grace: Duration,
}

/// What names one call in its Pod's labels and annotations.
#[derive(Debug, Clone, PartialEq)]
pub struct CallLabels {
    /// Unique per execution (a UUID without dashes).
    pub call: String,
}
