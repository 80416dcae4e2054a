//! Leader election with a `coordination.k8s.io/v1` Lease, so that of several operator
//! replicas exactly one reconciles and publishes.
//!
//! A replica takes the Lease when it is free or its holder stopped renewing it for a
//! whole `leaseDurationSeconds`, then renews it every third of that. Every write replaces
//! the Lease at the resourceVersion just read, so two replicas racing for it cannot both
//! win (the loser gets 409 Conflict). A leader that cannot renew within the lease
//! duration stops: the process exits and its replacement starts as a follower.
//!
//! The leader renews from a thread of its own ([`hold_on_own_thread`]): a publish cycle
//! keeps the runtime's workers busy (assembly and compression are synchronous), and a
//! renewal starved for a lease duration hands the Lease to a follower mid-publish (seen
//! on a real API server with 300 Tools applied at once: e2e/cluster).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::{Error, Result};

/// One replica's view of the Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
}

impl LeaderElector {
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        duration: Duration,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            duration,
        }
    }

    /// Tries once to take or renew the Lease; `Ok(true)` when this replica holds it.
    pub async fn try_acquire_or_renew(&self, now: Timestamp) -> Result<bool> {
        let seconds = i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.name).await.map_err(Error::Kube)? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return conflict_is_false(self.api.create(&PostParams::default(), &lease).await);
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let mine = spec.holder_identity.as_deref() == Some(self.identity.as_str());
        let held_for =
            SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(seconds)));
        let expired = spec
            .renew_time
            .as_ref()
            .is_none_or(|t| t.0 + held_for <= now);
        if !mine && spec.holder_identity.is_some() && !expired {
            return Ok(false);
        }
        if !mine {
            spec.acquire_time = Some(MicroTime(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            spec.holder_identity = Some(self.identity.clone());
        }
        spec.renew_time = Some(MicroTime(now));
        spec.lease_duration_seconds = Some(seconds);
        conflict_is_false(
            self.api
                .replace(&self.name, &PostParams::default(), &lease)
                .await,
        )
    }

    /// Waits until this replica holds the Lease.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire_or_renew(Timestamp::now()).await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "cannot read or take the leader Lease"),
            }
            tokio::time::sleep(self.duration / 3).await;
        }
    }

    /// Hands the Lease back when this replica stops (SIGTERM): a Lease it still holds is
    /// written with no holder, so a follower takes it at its next try instead of waiting
    /// out the lease duration. `Ok(false)` when it was not (or no longer) this replica's.
    pub async fn release(&self) -> Result<bool> {
        let Some(mut lease) = self.api.get_opt(&self.name).await.map_err(Error::Kube)? else {
            return Ok(false);
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(false);
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(false);
        }
        spec.holder_identity = None;
        conflict_is_false(
            self.api
                .replace(&self.name, &PostParams::default(), &lease)
                .await,
        )
    }

    /// Renews the Lease until renewal has failed for a whole lease duration; returns then.
    pub async fn hold(&self) {
        let mut last_ok = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.duration / 3).await;
            match self.try_acquire_or_renew(Timestamp::now()).await {
                Ok(true) => last_ok = tokio::time::Instant::now(),
                Ok(false) => return,
                Err(e) => tracing::warn!(error = %e, "cannot renew the leader Lease"),
            }
            if last_ok.elapsed() >= self.duration {
                return;
            }
        }
    }
}

/// Renews the Lease (as [`LeaderElector::hold`]) on a new thread with a runtime and a
/// client of its own, so that no work on the caller's runtime can delay a renewal. The
/// receiver completes when this replica stops holding the Lease.
pub fn hold_on_own_thread(
    config: kube::Config,
    namespace: &str,
    name: &str,
    identity: &str,
    duration: Duration,
) -> std::io::Result<tokio::sync::oneshot::Receiver<()>> {
    let (lost, lost_rx) = tokio::sync::oneshot::channel();
    let (namespace, name, identity) = (
        namespace.to_string(),
        name.to_string(),
        identity.to_string(),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("leader-lease".to_string())
        .spawn(move || {
            runtime.block_on(async {
                match Client::try_from(config) {
                    Ok(client) => {
                        LeaderElector::new(client, &namespace, &name, &identity, duration)
                            .hold()
                            .await
                    }
                    Err(e) => tracing::error!(error = %e, "cannot make the Lease's client"),
                }
            });
            let _ = lost.send(());
        })?;
    Ok(lost_rx)
}

fn conflict_is_false(r: std::result::Result<Lease, kube::Error>) -> Result<bool> {
    match r {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(Error::Kube(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{ApiServerVerifier, not_found};
    use serde_json::json;

    const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/mcc-system/leases/mcc-operator";
    const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/mcc-system/leases";

    fn elector(client: Client, me: &str) -> LeaderElector {
        LeaderElector::new(
            client,
            "mcc-system",
            "mcc-operator",
            me,
            Duration::from_secs(15),
        )
    }

    fn lease(holder: &str, renewed: &str) -> serde_json::Value {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "mcc-operator", "namespace": "mcc-system", "resourceVersion": "7"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                     "renewTime": renewed, "leaseTransitions": 2}})
    }

    fn now() -> Timestamp {
        "2026-11-30T12:00:00Z".parse().unwrap()
    }

    #[tokio::test]
    async fn first_replica_creates_the_lease() {
        let (client, mut api) = ApiServerVerifier::new();
        let e = elector(client, "pod-a");
        let server = async {
            api.expect("GET", LEASE, 404, not_found("leases", "mcc-operator"))
                .await;
            let seen = api
                .expect_with("POST", LEASES, |s| (201, s.body.clone()))
                .await;
            assert_eq!(seen.body["spec"]["holderIdentity"], "pod-a");
            assert_eq!(seen.body["spec"]["leaseDurationSeconds"], 15);
        };
        let (won, ()) = tokio::join!(e.try_acquire_or_renew(now()), server);
        assert!(won.unwrap());
    }

    #[tokio::test]
    async fn a_live_holder_keeps_it_and_an_expired_one_loses_it() {
        let (client, mut api) = ApiServerVerifier::new();
        let e = elector(client, "pod-b");
        // Renewed 5 s ago: pod-a still leads; no write.
        let server = async {
            api.expect(
                "GET",
                LEASE,
                200,
                lease("pod-a", "2026-11-30T11:59:55.000000Z"),
            )
            .await;
            api.expect_nothing().await;
        };
        let (won, ()) = tokio::join!(e.try_acquire_or_renew(now()), server);
        assert!(!won.unwrap());
        // Not renewed for 20 s: pod-b takes it at the resourceVersion it read.
        let server = async {
            api.expect(
                "GET",
                LEASE,
                200,
                lease("pod-a", "2026-11-30T11:59:40.000000Z"),
            )
            .await;
            let seen = api.expect_echo("PUT", LEASE).await;
            assert_eq!(seen.body["metadata"]["resourceVersion"], "7");
            assert_eq!(seen.body["spec"]["holderIdentity"], "pod-b");
            assert_eq!(seen.body["spec"]["leaseTransitions"], 3);
        };
        let (won, ()) = tokio::join!(e.try_acquire_or_renew(now()), server);
        assert!(won.unwrap());
    }

    #[tokio::test]
    async fn release_frees_the_lease_only_when_held() {
        let (client, mut api) = ApiServerVerifier::new();
        let e = elector(client, "pod-a");
        let server = async {
            api.expect(
                "GET",
                LEASE,
                200,
                lease("pod-a", "2026-11-30T11:59:55.000000Z"),
            )
            .await;
            let seen = api.expect_echo("PUT", LEASE).await;
            assert_eq!(seen.body["metadata"]["resourceVersion"], "7");
            assert!(
                seen.body["spec"].get("holderIdentity").is_none(),
                "{}",
                seen.body
            );
        };
        let (released, ()) = tokio::join!(e.release(), server);
        assert!(released.unwrap());
        // Another replica's Lease is left alone.
        let server = async {
            api.expect(
                "GET",
                LEASE,
                200,
                lease("pod-b", "2026-11-30T11:59:55.000000Z"),
            )
            .await;
            api.expect_nothing().await;
        };
        let (released, ()) = tokio::join!(e.release(), server);
        assert!(!released.unwrap());
    }

    #[tokio::test]
    async fn a_released_lease_is_taken_at_once() {
        let (client, mut api) = ApiServerVerifier::new();
        let e = elector(client, "pod-b");
        let server = async {
            let mut free = lease("pod-a", "2026-11-30T11:59:59.000000Z");
            free["spec"]
                .as_object_mut()
                .unwrap()
                .remove("holderIdentity");
            api.expect("GET", LEASE, 200, free).await;
            let seen = api.expect_echo("PUT", LEASE).await;
            assert_eq!(seen.body["spec"]["holderIdentity"], "pod-b");
        };
        let (won, ()) = tokio::join!(e.try_acquire_or_renew(now()), server);
        assert!(won.unwrap());
    }

    #[tokio::test]
    async fn losing_a_race_is_not_leading() {
        let (client, mut api) = ApiServerVerifier::new();
        let e = elector(client, "pod-b");
        let server = async {
            api.expect(
                "GET",
                LEASE,
                200,
                lease("pod-a", "2026-11-30T11:00:00.000000Z"),
            )
            .await;
            api.expect(
                "PUT",
                LEASE,
                409,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409, "message": "the object has been modified"}),
            )
            .await;
        };
        let (won, ()) = tokio::join!(e.try_acquire_or_renew(now()), server);
        assert!(!won.unwrap());
    }
}
