//! The lifecycle of one pod-runtime execution: create the Pod ([`spec::pod`]) and the
//! per-call Secret it mounts ([`spec::input_secret`], owned by the Pod), follow the Pod
//! with a watch until its `tool` container ends or Kubernetes reports a reason it never
//! will, read the runner's result line from the container log
//! ([`mcc_executor::podio::parse_log`]) and delete both objects. The result is the
//! [`Finished`] a local run gives, so the engine shapes, caches, transforms and audits it
//! the same way.
//!
//! The call's timeout covers everything (creating, scheduling, pulling, running); when it
//! passes, the outcome is the local runtime's timeout ([`Ending::TimedOut`]), unless the
//! Pod was never scheduled (then the scheduler's reason is the error). Whatever ends the
//! call (result, error, timeout, the caller going away) deletes the Pod at once (grace 0;
//! a dropped call spawns the delete). Pods a crashed replica left behind are the
//! [`super::sweep`]er's.

use std::sync::Arc;
use std::time::Duration;

use futures::{AsyncReadExt, StreamExt};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, Secret};
use kube::Client;
use kube::api::{
    Api, DeleteParams, LogParams, PostParams, PropagationPolicy, WatchEvent, WatchParams,
};
use tokio::time::Instant;

use mcc_executor::podio;
use mcc_executor::process::{Captured, Ending, Finished};
use mcc_executor::{Request, RunError};

use super::spec::{self, TOOL_CONTAINER};
use super::{CallLabels, PodSettings};
use crate::exec::pod::{PodRunner, PodTarget};
use crate::kube::errors;

/// How long one watch request lasts before it is renewed (the API server's own cap is
/// longer; a renewal costs one request).
const WATCH_SECS: u32 = 240;
/// Consecutive watch failures (API unreachable) before the call gives up.
const WATCH_RETRIES: u32 = 8;
/// The pause after a failed watch.
const WATCH_BACKOFF: Duration = Duration::from_millis(500);

/// Image pull failures: the image cannot be had, now or soon.
const PULL_FAILURES: [&str; 4] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
];

/// Runs calls in Pods over the Kubernetes API. Cheap to share.
pub struct PodRuntime {
    client: Client,
    settings: Arc<PodSettings>,
}

impl PodRuntime {
    pub fn new(client: Client, settings: PodSettings) -> Self {
        Self {
            client,
            settings: Arc::new(settings),
        }
    }
}

/// How a followed Pod came to an end.
#[derive(Debug, PartialEq)]
enum Terminal {
    /// The tool container ended (its runner printed a result, or was killed).
    Ended {
        exit_code: i32,
        reason: Option<String>,
        message: Option<String>,
    },
    /// The Pod's own deadline (`activeDeadlineSeconds`) passed.
    DeadlineExceeded,
    /// It never will run: what Kubernetes reported, as a person can act on it.
    Fatal(String),
}

/// What is remembered while following, for when the timeout passes first.
#[derive(Debug, Default)]
struct Seen {
    /// The scheduler's last "no node fits" message.
    unschedulable: Option<String>,
}

/// Deletes the call's Pod and Secret when dropped armed (a cancelled or timed-out call);
/// [`Cleanup::now`] deletes them in line.
struct Cleanup {
    pods: Api<Pod>,
    secrets: Api<Secret>,
    name: String,
    /// The Pod may exist.
    pod: bool,
    /// The Secret may exist.
    secret: bool,
}

impl Cleanup {
    /// Each flag is cleared once its delete is done: a call dropped meanwhile still
    /// spawns the rest.
    async fn now(mut self) {
        if self.pod {
            delete(&self.pods, &self.secrets, &self.name, true, false).await;
            self.pod = false;
        }
        if self.secret {
            delete(&self.pods, &self.secrets, &self.name, false, true).await;
            self.secret = false;
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if !(self.pod || self.secret) {
            return;
        }
        let (pods, secrets, name) = (self.pods.clone(), self.secrets.clone(), self.name.clone());
        let (pod, secret) = (self.pod, self.secret);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { delete(&pods, &secrets, &name, pod, secret).await });
        }
    }
}

/// Deletes at once (grace 0, dependents in the background). Gone already is fine; any
/// other failure is logged (the sweeper, and the Secret's owner reference, catch up).
async fn delete(pods: &Api<Pod>, secrets: &Api<Secret>, name: &str, pod: bool, secret: bool) {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    if pod && let Err(e) = pods.delete(name, &params).await {
        log_delete_failure("Pod", name, &e);
    }
    if secret && let Err(e) = secrets.delete(name, &params).await {
        log_delete_failure("Secret", name, &e);
    }
}

fn log_delete_failure(kind: &str, name: &str, e: &kube::Error) {
    if !matches!(e, kube::Error::Api(s) if s.code == 404) {
        tracing::warn!(kind, name, error = %e, "deleting a pod-runtime object failed; the sweeper will retry");
    }
}

#[async_trait::async_trait]
impl PodRunner for PodRuntime {
    async fn run(&self, target: PodTarget<'_>, request: &Request) -> Result<Finished, RunError> {
        // One value per Pod: a tool's Pod and its transform's Pod differ.
        let call = CallLabels {
            call: uuid::Uuid::new_v4().simple().to_string(),
        };
        let namespace = target.refs.namespace.clone();
        let name = spec::pod_name(target.tool, &call);
        let fail = |reason: String| RunError::Pod {
            namespace: namespace.clone(),
            pod: name.clone(),
            reason,
        };
        let input = spec::input(request, &self.settings).map_err(fail)?;
        let pod =
            spec::pod(target, request, &call, &self.settings).map_err(|e| fail(e.to_string()))?;
        let call = PodCall {
            pods: Api::namespaced(self.client.clone(), &namespace),
            secrets: Api::namespaced(self.client.clone(), &namespace),
            namespace: &namespace,
            name: &name,
            max_output: request.max_output,
        };
        let mut cleanup = Cleanup {
            pods: call.pods.clone(),
            secrets: call.secrets.clone(),
            name: name.clone(),
            pod: false,
            secret: false,
        };
        let mut seen = Seen::default();
        let lifecycle = call.lifecycle(pod, input, &mut cleanup, &mut seen);
        let result = match request.timeout {
            Some(t) => match tokio::time::timeout_at(Instant::now() + t, lifecycle).await {
                Ok(result) => result,
                Err(_) => match seen.unschedulable.take() {
                    Some(why) => Err(fail(format!(
                        "no node fits: {why} (still not scheduled when the call's timeout passed)"
                    ))),
                    None => {
                        tracing::info!(pod = %format!("{namespace}/{name}"), "pod runtime: the call's timeout passed");
                        Ok(ended_with(Ending::TimedOut))
                    }
                },
            },
            None => lifecycle.await,
        };
        cleanup.now().await;
        result
    }
}

/// A process end without output (a timeout reads as the local runtime reports it).
fn ended_with(ending: Ending) -> Finished {
    Finished {
        ending,
        stdout: Captured::default(),
        stderr: Captured::default(),
    }
}

/// One call's Pod, by namespace and name.
struct PodCall<'a> {
    pods: Api<Pod>,
    secrets: Api<Secret>,
    namespace: &'a str,
    name: &'a str,
    max_output: usize,
}

impl PodCall<'_> {
    fn fail(&self, reason: String) -> RunError {
        RunError::Pod {
            namespace: self.namespace.to_string(),
            pod: self.name.to_string(),
            reason,
        }
    }

    /// A failed API request: the short reason for the caller, the detail in the log.
    fn api_fail(&self, doing: &str, e: &kube::Error) -> RunError {
        tracing::warn!(namespace = self.namespace, pod = self.name, error = %e, "pod runtime: {doing} failed");
        self.fail(format!("{doing}: {}", errors::reason(e)))
    }

    async fn lifecycle(
        &self,
        pod: Pod,
        input: Vec<u8>,
        cleanup: &mut Cleanup,
        seen: &mut Seen,
    ) -> Result<Finished, RunError> {
        cleanup.pod = true;
        let created = match self.pods.create(&PostParams::default(), &pod).await {
            Ok(created) => created,
            Err(e) => {
                // Refused by the API: nothing was created (a lost answer may have: delete).
                cleanup.pod = !matches!(e, kube::Error::Api(_));
                return Err(self.api_fail("creating the Pod", &e));
            }
        };
        cleanup.secret = true;
        let secret = spec::input_secret(&created, input);
        if let Err(e) = self.secrets.create(&PostParams::default(), &secret).await {
            cleanup.secret = !matches!(e, kube::Error::Api(_));
            return Err(self.api_fail("creating the call's input Secret", &e));
        }
        let version = created
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default();
        match self.follow(version, seen).await? {
            Terminal::DeadlineExceeded => Ok(ended_with(Ending::TimedOut)),
            Terminal::Fatal(reason) => Err(self.fail(reason)),
            Terminal::Ended {
                exit_code,
                reason,
                message,
            } => {
                let log = self.log().await?;
                let oom = reason.as_deref() == Some("OOMKilled");
                match podio::parse_log(&log) {
                    Ok(Ok(mut finished)) => {
                        if oom && finished.ending != Ending::Exited(0) {
                            prepend(&mut finished.stderr, &oom_note(&created));
                        }
                        Ok(finished)
                    }
                    Ok(Err(runner_error)) => Err(runner_error),
                    Err(_) if oom => {
                        let mut finished = ended_with(Ending::Signaled(libc::SIGKILL));
                        prepend(&mut finished.stderr, &oom_note(&created));
                        Ok(finished)
                    }
                    Err(why) => Err(self.fail(format!(
                        "the tool container ended (exit code {exit_code}{}) without a result: \
                         {why}{}",
                        reason.map(|r| format!(", {r}")).unwrap_or_default(),
                        message.map(|m| format!(": {m}")).unwrap_or_default(),
                    ))),
                }
            }
        }
    }

    /// Watches the Pod from `version` until it ends or cannot run. A watch that ends is
    /// renewed from the last version seen; one whose version is too old (410) starts
    /// again from the Pod as it is now; failures are retried a few times, then reported.
    async fn follow(&self, mut version: String, seen: &mut Seen) -> Result<Terminal, RunError> {
        let params = WatchParams::default()
            .fields(&format!("metadata.name={}", self.name))
            .timeout(WATCH_SECS);
        let mut failures = 0;
        loop {
            if failures > 0 {
                tokio::time::sleep(WATCH_BACKOFF).await;
            }
            let stream = match self.pods.watch(&params, &version).await {
                Ok(stream) => stream,
                Err(kube::Error::Api(s)) if s.code == 410 => {
                    if let Some(t) = self.reread(&mut version, seen).await? {
                        return Ok(t);
                    }
                    continue;
                }
                Err(e) => {
                    failures += 1;
                    let lasting =
                        matches!(&e, kube::Error::Api(s) if s.code < 500 && s.code != 429);
                    if lasting || failures > WATCH_RETRIES {
                        return Err(self.api_fail("following the Pod", &e));
                    }
                    continue;
                }
            };
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                let pod = match event {
                    Ok(WatchEvent::Added(pod) | WatchEvent::Modified(pod)) => pod,
                    Ok(WatchEvent::Deleted(_)) => {
                        return Ok(Terminal::Fatal(
                            "the Pod was deleted before it finished (by someone else, or its \
                             node went away)"
                                .into(),
                        ));
                    }
                    Ok(WatchEvent::Bookmark(b)) => {
                        version = b.metadata.resource_version;
                        continue;
                    }
                    Ok(WatchEvent::Error(status)) if status.code == 410 => {
                        if let Some(t) = self.reread(&mut version, seen).await? {
                            return Ok(t);
                        }
                        break;
                    }
                    Ok(WatchEvent::Error(status)) => {
                        tracing::debug!(
                            pod = self.name,
                            ?status,
                            "pod watch error; watching again"
                        );
                        failures += 1;
                        break;
                    }
                    Err(e) => {
                        tracing::debug!(pod = self.name, error = %e, "pod watch broke off; watching again");
                        failures += 1;
                        break;
                    }
                };
                failures = 0;
                if let Some(t) = observe(&pod, &mut version, seen) {
                    return Ok(t);
                }
            }
            if failures > WATCH_RETRIES {
                return Err(self.fail(
                    "following the Pod: the Kubernetes API is failing; retry shortly".into(),
                ));
            }
        }
    }

    /// The Pod as it is now (a watch version too old to resume from).
    async fn reread(
        &self,
        version: &mut String,
        seen: &mut Seen,
    ) -> Result<Option<Terminal>, RunError> {
        let pod = self
            .pods
            .get(self.name)
            .await
            .map_err(|e| self.api_fail("reading the Pod", &e))?;
        Ok(observe(&pod, version, seen))
    }

    /// The tool container's log, at most what a result line of `max_output` needs.
    async fn log(&self) -> Result<Vec<u8>, RunError> {
        let limit = podio::max_log_bytes(self.max_output);
        let params = LogParams {
            container: Some(TOOL_CONTAINER.into()),
            limit_bytes: Some(i64::try_from(limit).unwrap_or(i64::MAX)),
            ..Default::default()
        };
        let reading = |e: &kube::Error| self.api_fail("reading the Pod's log", e);
        let stream = self
            .pods
            .log_stream(self.name, &params)
            .await
            .map_err(|e| reading(&e))?;
        let mut log = Vec::new();
        stream
            .take(limit as u64)
            .read_to_end(&mut log)
            .await
            .map_err(|e| self.fail(format!("reading the Pod's log: {e}")))?;
        Ok(log)
    }
}

/// [`assess`] of a Pod seen at its version (kept to resume watching from).
fn observe(pod: &Pod, version: &mut String, seen: &mut Seen) -> Option<Terminal> {
    if let Some(v) = &pod.metadata.resource_version {
        version.clone_from(v);
    }
    assess(pod, seen)
}

/// What the Pod's status says: ended, never going to run, or still on its way (`None`;
/// a scheduling failure is remembered in `seen`).
fn assess(pod: &Pod, seen: &mut Seen) -> Option<Terminal> {
    let status = pod.status.as_ref()?;
    if let Some(c) = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled")
    {
        seen.unschedulable = (c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
            .then(|| c.message.clone().unwrap_or_else(|| "Unschedulable".into()));
    }
    for init in status.init_container_statuses.iter().flatten() {
        if let Some(fatal) = runner_failure(init) {
            return Some(Terminal::Fatal(fatal));
        }
    }
    let tool = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == TOOL_CONTAINER);
    if let Some(state) = tool.and_then(|c| c.state.as_ref()) {
        if let Some(t) = &state.terminated {
            return Some(Terminal::Ended {
                exit_code: t.exit_code,
                reason: t.reason.clone(),
                message: t.message.clone(),
            });
        }
        if let Some(w) = &state.waiting
            && let Some(fatal) = waiting_failure(tool?, w.reason.as_deref()?, w.message.as_deref())
        {
            return Some(Terminal::Fatal(fatal));
        }
    }
    if status.phase.as_deref() == Some("Failed") {
        return Some(match status.reason.as_deref() {
            Some("DeadlineExceeded") => Terminal::DeadlineExceeded,
            reason => Terminal::Fatal(format!(
                "the Pod failed: {}{}",
                reason.unwrap_or("no reason given"),
                status
                    .message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            )),
        });
    }
    None
}

/// A waiting reason of the tool container that will not clear up by itself.
fn waiting_failure(c: &ContainerStatus, reason: &str, message: Option<&str>) -> Option<String> {
    let message = message.unwrap_or(reason);
    Some(match reason {
        "InvalidImageName" => format!(
            "image {} is not a valid image reference: {message}",
            c.image
        ),
        r if PULL_FAILURES.contains(&r) => {
            format!("image {} could not be pulled: {message}", c.image)
        }
        "CreateContainerConfigError" => format!(
            "Secret or ConfigMap missing: {message} (a reference of the Tool's envFrom/valueFrom, \
             in the Tool's namespace)"
        ),
        "CreateContainerError" | "RunContainerError" => {
            format!("the container could not be started: {message}")
        }
        _ => return None,
    })
}

/// The init container that copies the runner in, failed.
fn runner_failure(c: &ContainerStatus) -> Option<String> {
    let state = c.state.as_ref()?;
    if let Some(t) = &state.terminated
        && t.exit_code != 0
    {
        return Some(format!(
            "the runner could not be copied in from image {} (execution.pod.runner_image): \
             exit code {}{}",
            c.image,
            t.exit_code,
            t.message
                .as_deref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        ));
    }
    let w = state.waiting.as_ref()?;
    let fatal = waiting_failure(c, w.reason.as_deref()?, w.message.as_deref())?;
    Some(format!("runner (execution.pod.runner_image): {fatal}"))
}

/// Put `note` before what a stream holds.
fn prepend(stream: &mut Captured, note: &str) {
    let mut bytes = note.as_bytes().to_vec();
    bytes.append(&mut stream.bytes);
    stream.total += note.len() as u64;
    stream.bytes = bytes;
}

/// The line an out-of-memory kill puts before stderr.
fn oom_note(pod: &Pod) -> String {
    let limit = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.iter().find(|c| c.name == TOOL_CONTAINER))
        .and_then(|c| {
            c.resources
                .as_ref()?
                .limits
                .as_ref()?
                .get("memory")
                .cloned()
        });
    match limit {
        Some(q) => format!(
            "OOMKilled: the tool's Pod ran out of memory (limit {}); raise the Tool's \
             runtime.pod.resources.limits.memory\n",
            q.0
        ),
        None => "OOMKilled: the tool's Pod ran out of memory (no memory limit set: the node \
                 ran short); set the Tool's runtime.pod.resources\n"
            .into(),
    }
}
