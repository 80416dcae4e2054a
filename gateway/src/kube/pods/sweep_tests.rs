//! The sweeper against the mocked API server: it lists this install's tool Pods and
//! deletes only those older than the maximum timeout plus the grace.

use std::time::Duration;

use serde_json::{Value, json};

use mcc_catalog::kube_mock::ApiServer;

use super::Sweeper;
use super::tests::Fake;

fn listed(ns: &str, name: &str, created: &str) -> Value {
    listed_of("mcc", ns, name, created)
}

fn listed_of(instance: &str, ns: &str, name: &str, created: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": ns, "creationTimestamp": created,
                        "labels": {"app.kubernetes.io/managed-by": "mcc-gateway",
                                   "app.kubernetes.io/instance": instance}}})
}

#[tokio::test]
async fn the_sweeper_deletes_only_old_pods_of_its_instance() {
    let (client, api) = ApiServer::new();
    let mut fake = Fake(api);
    let sweeper = Sweeper::new(client, vec![], "mcc", Duration::from_secs(3660));
    let now: k8s_openapi::jiff::Timestamp = "2026-12-01T12:00:00Z".parse().unwrap();
    let server = async {
        let seen = fake
            .0
            .expect(
                "GET",
                "/api/v1/pods",
                200,
                json!({"apiVersion": "v1", "kind": "PodList",
                "metadata": {"resourceVersion": "7"},
                "items": [listed("a", "old", "2026-12-01T10:00:00Z"),
                          listed("b", "young", "2026-12-01T11:30:00Z"),
                          listed("c", "gone", "2026-12-01T09:00:00Z"),
                          // Another install's, should a list ever hold one: never touched.
                          listed_of("staging", "a", "theirs", "2026-12-01T09:00:00Z")]}),
            )
            .await;
        assert!(
            seen.query.contains(
                "labelSelector=app.kubernetes.io%2Fmanaged-by%3Dmcc-gateway%2Capp.kubernetes.io%2Finstance%3Dmcc"
            ),
            "{}",
            seen.query
        );
        let status = |code: u16| json!({"kind": "Status", "apiVersion": "v1", "code": code});
        let seen = fake
            .0
            .expect("DELETE", "/api/v1/namespaces/a/pods/old", 200, status(200))
            .await;
        assert_eq!(seen.body["gracePeriodSeconds"], 0);
        // Deleted meanwhile by its own replica: fine.
        fake.0
            .expect("DELETE", "/api/v1/namespaces/c/pods/gone", 404, status(404))
            .await;
    };
    let (deleted, ()) = tokio::join!(sweeper.sweep(now), server);
    assert_eq!(deleted, 2);
    fake.0.expect_nothing().await;

    // In listed namespaces: one list each.
    let (client, api) = ApiServer::new();
    let mut fake = Fake(api);
    let sweeper = Sweeper::new(client, vec!["a".into(), "b".into()], "mcc", Duration::ZERO);
    let server = async {
        for ns in ["a", "b"] {
            fake.0
                .expect(
                    "GET",
                    &format!("/api/v1/namespaces/{ns}/pods"),
                    200,
                    json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": []}),
                )
                .await;
        }
    };
    let (deleted, ()) = tokio::join!(sweeper.sweep(now), server);
    assert_eq!(deleted, 0);
}
