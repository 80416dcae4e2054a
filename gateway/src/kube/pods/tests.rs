//! The pod lifecycle and the sweeper against the mocked API server: each request is
//! asserted (method, path, query, body) and answered as Kubernetes would.

use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use mcc_catalog::document::PodSpec;
use mcc_catalog::kube_mock::{ApiServer, Seen};
use mcc_executor::podio::{self, PodInput};
use mcc_executor::process::{Captured, Ending, Finished};
use mcc_executor::{Request, RunError};

use super::{PodRuntime, PodSettings};
use crate::catalog::ToolRefs;
use crate::exec::pod::{PodRunner, PodTarget};

pub(super) const NS: &str = "tools";
const PODS: &str = "/api/v1/namespaces/tools/pods";
const SECRETS: &str = "/api/v1/namespaces/tools/secrets";

pub(super) fn settings() -> PodSettings {
    PodSettings {
        default_image: "registry.x/mcc-executor:1".into(),
        runner_image: "registry.x/mcc-executor:1".into(),
        replica: "gw-0".into(),
        instance: "mcc".into(),
        passthrough_env: vec![
            ("LANG".into(), "C.UTF-8".into()),
            ("DEPLOY_TOKEN".into(), "s3cr3t".into()),
        ],
        max_per_tool: 4,
        sweep_grace: Duration::from_secs(60),
    }
}

pub(super) fn refs(image: Option<&str>) -> ToolRefs {
    ToolRefs {
        namespace: NS.into(),
        resource: "hello".into(),
        env_from: vec![],
        env_value_from: vec![],
        pod: Some(PodSpec {
            image: image.map(str::to_string),
            resources: Some(json!({"limits": {"memory": "64Mi"}})),
            ..Default::default()
        }),
        session: Default::default(),
    }
}

fn request(timeout_ms: u64) -> Request {
    Request {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), "echo hi".into()],
        timeout: Some(Duration::from_millis(timeout_ms)),
        max_output: 1000,
        env: mcc_catalog::env::EnvSpec {
            passthrough: mcc_catalog::EnvPassthrough::All(false),
            ..Default::default()
        },
        ..Request::default()
    }
}

fn finished(ending: Ending, stdout: &str) -> Finished {
    Finished {
        ending,
        stdout: Captured {
            bytes: stdout.as_bytes().to_vec(),
            total: stdout.len() as u64,
            tail: vec![],
        },
        stderr: Captured::default(),
    }
}

/// A container status as the kubelet writes it.
pub(super) fn container(name: &str, image: &str, state: Value) -> Value {
    json!({"name": name, "image": image, "imageID": "", "ready": false, "restartCount": 0,
           "state": state})
}

/// The tool container terminated.
pub(super) fn ended(exit_code: i32, reason: &str) -> Value {
    let phase = if exit_code == 0 {
        "Succeeded"
    } else {
        "Failed"
    };
    json!({"phase": phase, "containerStatuses": [container("tool", "img",
        json!({"terminated": {"exitCode": exit_code, "reason": reason}}))]})
}

/// The tool container waits for a reason.
fn waiting(reason: &str, message: &str) -> Value {
    json!({"phase": "Pending", "containerStatuses": [container("tool", "registry.x/y:1",
        json!({"waiting": {"reason": reason, "message": message}}))]})
}

fn unschedulable() -> Value {
    json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
        "reason": "Unschedulable",
        "message": "0/3 nodes are available: 3 Insufficient memory."}]})
}

/// The mocked API server, with the steps of a pod-runtime call.
pub(super) struct Fake(pub ApiServer);

impl Fake {
    /// The Pod's creation: answered as created (uid, resource version); its name.
    pub async fn create_pod(&mut self) -> (String, Seen) {
        let seen = self
            .0
            .expect_with("POST", PODS, |seen| {
                let mut pod = seen.body.clone();
                pod["metadata"]["uid"] = json!("uid-1");
                pod["metadata"]["resourceVersion"] = json!("100");
                pod["status"] = json!({"phase": "Pending"});
                (201, pod)
            })
            .await;
        let name = seen.body["metadata"]["name"].as_str().unwrap().to_string();
        (name, seen)
    }

    /// The per-call Secret's creation (echoed); its decoded input.
    pub async fn create_secret(&mut self, pod: &str) -> Request {
        let seen = self.0.expect_echo("POST", SECRETS).await;
        let meta = &seen.body["metadata"];
        assert_eq!(meta["name"], pod);
        assert_eq!(
            meta["ownerReferences"][0]["uid"], "uid-1",
            "owned by the Pod"
        );
        assert_eq!(meta["ownerReferences"][0]["kind"], "Pod");
        let data = seen.body["data"][podio::INPUT_KEY].as_str().unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .unwrap();
        PodInput::decode(&bytes).unwrap()
    }

    /// A watch of the Pod from `version`, answered with these statuses in turn.
    pub async fn watch(&mut self, pod: &str, version: &str, statuses: &[Value]) -> Seen {
        let mut body = Vec::new();
        for (i, status) in statuses.iter().enumerate() {
            let object = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod, "namespace": NS, "resourceVersion": format!("{}", 101 + i)},
                "status": status});
            let event = json!({"type": "MODIFIED", "object": object});
            body.extend(serde_json::to_vec(&event).unwrap());
            body.push(b'\n');
        }
        let seen = self.0.expect_raw("GET", PODS, 200, body).await;
        for part in [
            "watch=true".to_string(),
            format!("fieldSelector=metadata.name%3D{pod}"),
            format!("resourceVersion={version}"),
        ] {
            assert!(seen.query.contains(&part), "{part} in {}", seen.query);
        }
        seen
    }

    /// The tool container's log.
    pub async fn log(&mut self, pod: &str, log: &[u8]) {
        let seen = self
            .0
            .expect_raw("GET", &format!("{PODS}/{pod}/log"), 200, log.to_vec())
            .await;
        let limit = podio::max_log_bytes(1000);
        assert!(seen.query.contains("container=tool"), "{}", seen.query);
        assert!(
            seen.query.contains(&format!("limitBytes={limit}")),
            "{}",
            seen.query
        );
    }

    /// The Pod, then its Secret, deleted at once.
    pub async fn delete_both(&mut self, pod: &str) {
        for (path, kind) in [(PODS, "Pod"), (SECRETS, "Secret")] {
            let seen = self
                .0
                .expect(
                    "DELETE",
                    &format!("{path}/{pod}"),
                    200,
                    json!({"kind": "Status",
                    "apiVersion": "v1", "status": "Success", "code": 200}),
                )
                .await;
            assert_eq!(seen.body["gracePeriodSeconds"], 0, "{kind}");
            assert_eq!(seen.body["propagationPolicy"], "Background", "{kind}");
        }
    }

    /// Everything up to the first watch.
    pub async fn start(&mut self) -> String {
        let (name, _) = self.create_pod().await;
        self.create_secret(&name).await;
        name
    }
}

fn runtime() -> (PodRuntime, Fake) {
    let (client, api) = ApiServer::new();
    (PodRuntime::new(client, settings()), Fake(api))
}

fn target<'a>(refs: &'a ToolRefs) -> PodTarget<'a> {
    PodTarget {
        tool: "ops.hello",
        refs,
        pod: refs.pod.as_ref().unwrap(),
    }
}

/// Runs one call whose Pod goes through `statuses` and leaves `log`.
async fn run_to_end(statuses: &[Value], log: Option<&[u8]>) -> Result<Finished, RunError> {
    let (runtime, mut fake) = runtime();
    let refs = refs(Some("registry.x/y:1"));
    let request = request(30_000);
    let server = async {
        let name = fake.start().await;
        fake.watch(&name, "100", statuses).await;
        if let Some(log) = log {
            fake.log(&name, log).await;
        }
        fake.delete_both(&name).await;
        fake
    };
    let (result, mut fake) = tokio::join!(runtime.run(target(&refs), &request), server);
    fake.0.expect_nothing().await;
    result
}

fn result_line(finished: Finished) -> Vec<u8> {
    format!("noise\n{}", podio::result_line(&Ok(finished))).into_bytes()
}

#[tokio::test]
async fn success_reads_the_result_line_and_deletes_the_pod() {
    let (runtime, mut fake) = runtime();
    let refs = refs(None);
    let mut request = request(30_000);
    request.env.passthrough = mcc_catalog::EnvPassthrough::Globs(vec!["LANG".into()]);
    let server = async {
        let (name, created) = fake.create_pod().await;
        let meta = &created.body["metadata"];
        assert_eq!(meta["namespace"], NS);
        assert_eq!(
            meta["labels"]["app.kubernetes.io/managed-by"],
            "mcc-gateway"
        );
        assert_eq!(meta["labels"]["app.kubernetes.io/instance"], "mcc");
        let image = &created.body["spec"]["containers"][0]["image"];
        assert_eq!(image, "registry.x/mcc-executor:1", "the default image");
        let input = fake.create_secret(&name).await;
        assert_eq!(input.args, ["-c", "echo hi"]);
        assert!(input.env.references_in_env);
        // Only what the Tool's envPassthrough admits travels in the Secret the tool reads.
        assert_eq!(
            input.env.passthrough_from,
            Some(vec![("LANG".to_string(), "C.UTF-8".to_string())])
        );
        let pending = json!({"phase": "Pending"});
        fake.watch(&name, "100", &[pending, ended(0, "Completed")])
            .await;
        fake.log(&name, &result_line(finished(Ending::Exited(0), "hi\n")))
            .await;
        fake.delete_both(&name).await;
    };
    let (result, ()) = tokio::join!(runtime.run(target(&refs), &request), server);
    let done = result.unwrap();
    assert_eq!(done.ending, Ending::Exited(0));
    assert_eq!(done.stdout.bytes, b"hi\n");
}

#[tokio::test]
async fn a_non_zero_exit_is_the_tools_result() {
    let log = result_line(finished(Ending::Exited(3), "partial"));
    let done = run_to_end(&[ended(0, "Completed")], Some(&log))
        .await
        .unwrap();
    assert_eq!(done.ending, Ending::Exited(3));
    assert_eq!(done.stdout.bytes, b"partial");
}

#[tokio::test]
async fn the_runners_own_error_comes_back_as_is() {
    let log = podio::result_line(&Err(RunError::NotFound {
        program: "python3".into(),
    }));
    let e = run_to_end(&[ended(0, "Completed")], Some(log.as_bytes()))
        .await
        .unwrap_err();
    assert_eq!(
        e,
        RunError::NotFound {
            program: "python3".into()
        }
    );
}

#[tokio::test]
async fn oom_killed_is_a_failure_that_says_so() {
    let done = run_to_end(&[ended(137, "OOMKilled")], Some(b""))
        .await
        .unwrap();
    assert_eq!(done.ending, Ending::Signaled(9));
    let stderr = String::from_utf8(done.stderr.bytes).unwrap();
    assert!(
        stderr.contains("OOMKilled") && stderr.contains("64Mi"),
        "{stderr}"
    );
    assert!(stderr.contains("runtime.pod.resources.limits.memory"));
}

#[tokio::test]
async fn an_ended_container_without_a_result_is_a_pod_error() {
    let e = run_to_end(&[ended(127, "Error")], Some(b"exec format error"))
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with("pod tools/mcc-ops-hello-"), "{text}");
    assert!(
        text.contains("exit code 127") && text.contains("no result"),
        "{text}"
    );
}

#[tokio::test]
async fn the_pods_deadline_is_the_local_timeout() {
    let deadline = json!({"phase": "Failed", "reason": "DeadlineExceeded",
                          "message": "Pod was active on the node longer than the specified deadline"});
    let done = run_to_end(&[deadline], None).await.unwrap();
    assert_eq!(done.ending, Ending::TimedOut);
}

#[tokio::test]
async fn an_image_that_cannot_be_pulled_fails_at_once_and_the_pod_goes() {
    let pull = waiting(
        "ErrImagePull",
        "rpc error: code = NotFound desc = registry.x/y:1: not found",
    );
    let e = run_to_end(&[json!({"phase": "Pending"}), pull], None)
        .await
        .unwrap_err();
    let RunError::Pod {
        namespace, reason, ..
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!(namespace, NS);
    assert!(
        reason.starts_with("image registry.x/y:1 could not be pulled: rpc error"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_missing_secret_key_names_it() {
    let config = waiting(
        "CreateContainerConfigError",
        "couldn't find key token in Secret tools/api",
    );
    let e = run_to_end(&[config], None).await.unwrap_err().to_string();
    assert!(
        e.contains("Secret or ConfigMap missing: couldn't find key token in Secret tools/api"),
        "{e}"
    );
}

#[tokio::test]
async fn a_runner_image_that_cannot_be_pulled_names_the_setting() {
    let status = json!({"phase": "Pending", "initContainerStatuses": [container("runner",
        "registry.x/mcc-executor:1", json!({"waiting": {"reason": "ImagePullBackOff",
        "message": "Back-off pulling image"}}))]});
    let e = run_to_end(&[status], None).await.unwrap_err().to_string();
    assert!(
        e.contains("execution.pod.runner_image") && e.contains("could not be pulled"),
        "{e}"
    );
}

/// Never scheduled: when the timeout passes, the scheduler's reason is the error; the
/// watch is renewed meanwhile, and the Pod deleted.
#[tokio::test]
async fn unschedulable_until_the_deadline_names_the_reason() {
    let (runtime, mut fake) = runtime();
    let refs = refs(None);
    let request = request(1_000);
    let server = async {
        let name = fake.start().await;
        fake.watch(&name, "100", &[unschedulable()]).await;
        // The watch ended: renewed from the last version seen; left unanswered.
        let (renewed, held) = fake.0.0.next_request().await.unwrap();
        assert!(
            renewed
                .uri()
                .query()
                .unwrap()
                .contains("resourceVersion=101")
        );
        fake.delete_both(&name).await;
        drop(held);
    };
    let (result, ()) = tokio::join!(runtime.run(target(&refs), &request), server);
    let e = result.unwrap_err().to_string();
    assert!(
        e.contains("no node fits: 0/3 nodes are available: 3 Insufficient memory."),
        "{e}"
    );
}

#[tokio::test]
async fn the_calls_timeout_covers_a_pod_that_never_starts() {
    let (runtime, mut fake) = runtime();
    let refs = refs(None);
    let request = request(1_000);
    let server = async {
        let name = fake.start().await;
        let (_watch, held) = fake.0.0.next_request().await.unwrap();
        fake.delete_both(&name).await;
        drop(held);
    };
    let (result, ()) = tokio::join!(runtime.run(target(&refs), &request), server);
    assert_eq!(result.unwrap().ending, Ending::TimedOut);
}

/// The caller goes away (its future dropped) while the Pod runs: the Pod and its Secret
/// are deleted at once.
#[tokio::test]
async fn a_cancelled_call_deletes_its_pod() {
    let (runtime, mut fake) = runtime();
    let refs = refs(None);
    let request = request(30_000);
    let call = runtime.run(target(&refs), &request);
    let server = async {
        let name = fake.start().await;
        let (_watch, held) = fake.0.0.next_request().await.unwrap();
        (name, held)
    };
    let (name, held) = tokio::select! {
        _ = call => panic!("the call cannot end while its Pod runs"),
        started = server => started,
    };
    fake.delete_both(&name).await;
    drop(held);
}

#[tokio::test]
async fn an_api_error_on_create_leaves_nothing_behind() {
    let (runtime, mut fake) = runtime();
    let refs = refs(None);
    let request = request(30_000);
    let server = fake.0.expect(
        "POST",
        PODS,
        403,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
               "code": 403, "message": "pods is forbidden: User \"system:serviceaccount:mcc:gw\" cannot create"}),
    );
    let (result, _) = tokio::join!(runtime.run(target(&refs), &request), server);
    let e = result.unwrap_err().to_string();
    assert!(e.contains("creating the Pod") && e.contains("RBAC"), "{e}");
    assert!(!e.contains("system:serviceaccount"), "{e}");
    fake.0.expect_nothing().await;
}

#[tokio::test]
async fn a_secret_that_cannot_be_created_deletes_the_pod() {
    let (runtime, mut fake) = runtime();
    let refs = refs(None);
    let request = request(30_000);
    let server = async {
        let (name, _) = fake.create_pod().await;
        fake.0
            .expect(
                "POST",
                SECRETS,
                500,
                json!({"kind": "Status", "apiVersion": "v1",
                "status": "Failure", "code": 500, "message": "etcdserver: timeout"}),
            )
            .await;
        let seen = fake
            .0
            .expect(
                "DELETE",
                &format!("{PODS}/{name}"),
                404,
                json!({"kind": "Status",
                "apiVersion": "v1", "status": "Failure", "code": 404, "reason": "NotFound"}),
            )
            .await;
        assert_eq!(seen.body["gracePeriodSeconds"], 0);
    };
    let (result, ()) = tokio::join!(runtime.run(target(&refs), &request), server);
    let e = result.unwrap_err().to_string();
    assert!(e.contains("creating the call's input Secret"), "{e}");
    fake.0.expect_nothing().await;
}

/// A watch version too old (410) starts again from the Pod as it is now; a failing watch
/// is retried.
#[tokio::test]
async fn the_watch_recovers_from_an_expired_version_and_a_failure() {
    let (runtime, mut fake) = runtime();
    let refs = refs(None);
    let request = request(30_000);
    let server = async {
        let name = fake.start().await;
        let gone = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
            "status": "Failure", "reason": "Expired", "code": 410, "message": "too old"}});
        fake.0
            .expect_raw("GET", PODS, 200, format!("{gone}\n").into_bytes())
            .await;
        fake.0
            .expect("GET", &format!("{PODS}/{name}"), 200, json!({"apiVersion": "v1",
                "kind": "Pod", "metadata": {"name": name, "namespace": NS, "resourceVersion": "500"},
                "status": {"phase": "Running"}}))
            .await;
        fake.0
            .expect(
                "GET",
                PODS,
                500,
                json!({"kind": "Status", "apiVersion": "v1",
                "status": "Failure", "code": 500, "message": "etcd"}),
            )
            .await;
        fake.watch(&name, "500", &[ended(0, "Completed")]).await;
        fake.log(&name, &result_line(finished(Ending::Exited(0), "ok")))
            .await;
        fake.delete_both(&name).await;
    };
    let (result, ()) = tokio::join!(runtime.run(target(&refs), &request), server);
    assert_eq!(result.unwrap().stdout.bytes, b"ok");
}

#[tokio::test]
async fn a_pod_deleted_by_someone_else_is_an_error() {
    let (runtime, mut fake) = runtime();
    let refs = refs(None);
    let request = request(30_000);
    let server = async {
        let name = fake.start().await;
        let deleted = json!({"type": "DELETED", "object": {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "resourceVersion": "102"}}});
        fake.0
            .expect_raw("GET", PODS, 200, format!("{deleted}\n").into_bytes())
            .await;
        fake.delete_both(&name).await;
    };
    let (result, ()) = tokio::join!(runtime.run(target(&refs), &request), server);
    let e = result.unwrap_err().to_string();
    assert!(e.contains("the Pod was deleted before it finished"), "{e}");
}
