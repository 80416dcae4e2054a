//! The sweeper: Pods a gateway replica created and never deleted (it crashed, or lost the
//! API mid-call) are deleted by any replica of the same install once they are older than
//! the longest a call may take plus a grace. Pods are found by the labels
//! [`super::spec::labels`] gives them (managed by the gateway, this install's instance);
//! their per-call Secrets go with them (owner references). A live call's Pod is never
//! that old: the call's timeout is at most `execution.max_timeout_secs`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PropagationPolicy};
use tokio_util::sync::CancellationToken;

use super::spec::{LABEL_INSTANCE, LABEL_MANAGED_BY, MANAGED_BY, label_value};

/// Deletes this install's leftover tool Pods, periodically.
#[derive(Clone)]
pub struct Sweeper {
    client: Client,
    /// Where to list; empty: cluster-wide.
    namespaces: Vec<String>,
    /// The install's instance label value.
    instance: String,
    /// Pods older than this are leftovers (the maximum timeout plus the grace).
    max_age: Duration,
}

impl Sweeper {
    pub fn new(client: Client, namespaces: Vec<String>, instance: &str, max_age: Duration) -> Self {
        Self {
            client,
            namespaces,
            instance: label_value(instance),
            max_age,
        }
    }

    /// The label selector of this install's tool Pods.
    pub fn selector(&self) -> String {
        format!(
            "{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_INSTANCE}={}",
            self.instance
        )
    }

    /// Sweeps now, then every `interval`, until `shutdown`.
    pub async fn run(self, interval: Duration, shutdown: CancellationToken) {
        loop {
            let deleted = self.sweep(Timestamp::now()).await;
            if deleted > 0 {
                tracing::info!(deleted, "pod runtime: deleted leftover tool Pods");
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
        }
    }

    /// One pass at `now`: how many Pods it deleted. Failures are logged; the next pass
    /// tries again.
    pub async fn sweep(&self, now: Timestamp) -> usize {
        let apis: Vec<Api<Pod>> = if self.namespaces.is_empty() {
            vec![Api::all(self.client.clone())]
        } else {
            self.namespaces
                .iter()
                .map(|ns| Api::namespaced(self.client.clone(), ns))
                .collect()
        };
        let mut deleted = 0;
        for api in apis {
            deleted += self.sweep_in(&api, now).await;
        }
        deleted
    }

    async fn sweep_in(&self, all: &Api<Pod>, now: Timestamp) -> usize {
        let mut params = ListParams::default().labels(&self.selector()).limit(500);
        let mut deleted = 0;
        loop {
            let list = match all.list(&params).await {
                Ok(list) => list,
                Err(e) => {
                    tracing::warn!(error = %e, "pod runtime sweeper: listing tool Pods failed");
                    return deleted;
                }
            };
            for pod in &list.items {
                if self.is_leftover(pod, now) && delete(&self.client, pod).await {
                    deleted += 1;
                }
            }
            match list.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return deleted,
            }
        }
    }

    /// Old enough, and this install's (the selector says so; checked again here).
    fn is_leftover(&self, pod: &Pod, now: Timestamp) -> bool {
        let labels = pod.metadata.labels.as_ref();
        let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
        if label(LABEL_MANAGED_BY) != Some(MANAGED_BY)
            || label(LABEL_INSTANCE) != Some(self.instance.as_str())
        {
            return false;
        }
        let Some(created) = &pod.metadata.creation_timestamp else {
            return false;
        };
        let age_ms = now.as_millisecond() - created.0.as_millisecond();
        u128::try_from(age_ms).is_ok_and(|age| age > self.max_age.as_millis())
    }
}

/// Deletes one Pod at once; gone already counts as done.
async fn delete(client: &Client, pod: &Pod) -> bool {
    let (Some(ns), Some(name)) = (&pod.metadata.namespace, &pod.metadata.name) else {
        return false;
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => {
            tracing::info!(pod = %format!("{ns}/{name}"), "pod runtime sweeper: deleted a leftover tool Pod");
            true
        }
        Err(kube::Error::Api(s)) if s.code == 404 => true,
        Err(e) => {
            tracing::warn!(pod = %format!("{ns}/{name}"), error = %e, "pod runtime sweeper: deleting failed");
            false
        }
    }
}
