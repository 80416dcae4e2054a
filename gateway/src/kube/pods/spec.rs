//! The Pod and the per-call Secret of one pod-runtime execution: pure functions from a
//! prepared call to Kubernetes objects (the golden files under `golden/` show what they
//! build). Creating, following and deleting them is the lifecycle's job, not this file's.
//!
//! **What the Pod carries.** Nothing of the call itself: params, context and passthrough
//! values, the rendered command line and stdin all travel in the per-call Secret
//! ([`input_secret`], built from [`input`]), mounted at [`INPUT_DIR`]. The Pod object
//! (readable by anyone with `get pods`) holds only the tool's shape: image, resources,
//! ServiceAccount, scheduling, and its `envFrom`/`valueFrom` *references*, delivered as
//! `MCC_ENVFROM_<prefix>` and `MCC_VALUEFROM_<NAME>` so the runner layers them where the
//! local runtime does ([`mcc_catalog::env::EnvSpec::resolve`]).
//!
//! **How it runs.** An init container copies the static `mcc-executor` out of the runner
//! image into an emptyDir at [`RUNNER_DIR`]; the tool container (the Tool's image, else
//! the default runtime image) runs `mcc-executor pod-run --input /mcc/input/request.json`,
//! which runs the call as the executor would and prints one result line
//! ([`mcc_executor::podio`]). The runner is statically linked, so any image with the
//! tool's own userland will do (no libc, shell or Python needed for the runner itself).
//!
//! **Names.** The Pod is created with a name chosen here, not `generateName`, so the Pod
//! can mount the Secret before either exists: both are named [`pod_name`]
//! (`mcc-<tool slug>-<call suffix>`). The lifecycle creates the Pod first, then the
//! Secret with the Pod as its owner (the kubelet waits for a missing Secret volume), so
//! deleting the Pod deletes the Secret. [`CallLabels::call`] must therefore be unique per
//! Pod: the tool's Pod and its transform's Pod of one execution need two values.
//!
//! The Pod meets the restricted Pod Security Standard: non-root uid/gid [`RUN_AS`],
//! seccomp `RuntimeDefault`, no privilege escalation, all capabilities dropped, read-only
//! root filesystems (`/tmp` is an emptyDir).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapEnvSource, ConfigMapKeySelector, Container, EmptyDirVolumeSource,
    EnvFromSource, EnvVar, EnvVarSource, Pod, PodSecurityContext, PodSpec as KubePodSpec,
    ResourceRequirements, SeccompProfile, Secret, SecretEnvSource, SecretKeySelector,
    SecretVolumeSource, SecurityContext, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use mcc_catalog::document::RefKind;
use mcc_catalog::env::{ENV_FROM_PREFIX, VALUE_FROM_PREFIX};
use mcc_executor::Request;
use mcc_executor::podio::{INPUT_KEY, PodInput};

use super::{CallLabels, PodSettings};
use crate::exec::pod::PodTarget;

/// `app.kubernetes.io/managed-by` of every Pod and Secret of the pod runtime.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The value of [`LABEL_MANAGED_BY`].
pub const MANAGED_BY: &str = "mcc-gateway";
/// The installation ([`PodSettings::instance`]): one install's sweeper selects on it.
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
/// The call ([`CallLabels::call`]).
pub const LABEL_CALL: &str = "mcc.dev/call";
/// The gateway replica, cut to a label value ([`label_value`]); the full name is in the
/// [`ANNOTATION_REPLICA`] annotation.
pub const LABEL_REPLICA: &str = "mcc.dev/replica";
/// The tool's catalog key.
pub const ANNOTATION_TOOL: &str = "mcc.dev/tool";
/// The Tool resource's name (in the Pod's namespace).
pub const ANNOTATION_TOOL_RESOURCE: &str = "mcc.dev/tool-resource";
/// The gateway replica's full name.
pub const ANNOTATION_REPLICA: &str = "mcc.dev/replica";

/// The init container (copies the runner) and the tool's container.
pub const RUNNER_CONTAINER: &str = "runner";
pub const TOOL_CONTAINER: &str = "tool";
/// Where the runner binary is in the runner image.
pub const RUNNER_SOURCE: &str = "/usr/local/bin/mcc-executor";
/// The emptyDir the init container copies the runner into.
pub const RUNNER_DIR: &str = "/mcc/bin";
/// The runner, as the tool container starts it.
pub const RUNNER: &str = "/mcc/bin/mcc-executor";
/// Where the per-call Secret is mounted (its one key is [`INPUT_KEY`]).
pub const INPUT_DIR: &str = "/mcc/input";
/// The uid, gid and fsGroup of every container (the executor image's user).
pub const RUN_AS: i64 = 65533;
/// The longest tool slug in a Pod name.
pub const MAX_SLUG: usize = 40;
/// How many characters of [`CallLabels::call`] end a Pod name (`mcc-` + 40 + `-` + 16 =
/// 61, within a DNS label).
pub const CALL_SUFFIX: usize = 16;

const RUNNER_VOLUME: &str = "mcc-runner";
const INPUT_VOLUME: &str = "mcc-input";
const TMP_VOLUME: &str = "tmp";
/// Owner and group (fsGroup) may read the input; nobody may write it.
const INPUT_MODE: i32 = 0o440;

/// Why a Tool's pod settings cannot become a Pod (the operator admits only well-formed
/// objects, so this means a hand-edited or newer catalog).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool '{tool}': pod {field}: {reason}")]
pub struct SpecError {
    pub tool: String,
    pub field: &'static str,
    pub reason: String,
}

/// The name of the Pod (and of its Secret) that runs `call` of `tool`:
/// `mcc-<slug of the key, at most 40>-<first 16 characters of the call>`.
pub fn pod_name(tool: &str, call: &CallLabels) -> String {
    let suffix: String = call
        .call
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .take(CALL_SUFFIX)
        .collect();
    format!("mcc-{}-{suffix}", slug(tool))
}

/// `key` as a DNS-1123 label fragment: lowercase letters, digits and single dashes, at
/// most [`MAX_SLUG`] characters, never empty (`tool`).
pub fn slug(key: &str) -> String {
    let mut out = String::with_capacity(key.len().min(MAX_SLUG));
    for c in key.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
        if out.len() == MAX_SLUG {
            break;
        }
    }
    let out = out.trim_end_matches('-');
    if out.is_empty() {
        "tool".into()
    } else {
        out.into()
    }
}

/// `value` as a label value: at most 63 of `[A-Za-z0-9._-]`, starting and ending
/// alphanumeric (anything else becomes `-`; empty if nothing is left).
pub fn label_value(value: &str) -> String {
    let mapped: String = value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    mapped
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// The labels of a call's Pod and Secret.
pub fn labels(call: &CallLabels, settings: &PodSettings) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
        (LABEL_INSTANCE.to_string(), label_value(&settings.instance)),
        (LABEL_CALL.to_string(), label_value(&call.call)),
        (LABEL_REPLICA.to_string(), label_value(&settings.replica)),
    ])
}

/// The Secret's content for `request`: the call as the runner reads it, with the pod
/// runtime's environment rules set (the references arrive in the Pod's environment;
/// passthrough reads [`PodSettings::passthrough_env`], never the tool container's). Of
/// that environment only what the Tool's `envPassthrough` admits is written: the Secret
/// is the tool's to read, whatever its process is given.
pub fn input(request: &Request, settings: &PodSettings) -> Result<Vec<u8>, String> {
    let mut request = request.clone();
    request.env.references_in_env = true;
    let admitted = settings
        .passthrough_env
        .iter()
        .filter(|(name, _)| request.env.passthrough.admits(name))
        .cloned()
        .collect();
    request.env.passthrough_from = Some(admitted);
    PodInput::encode(&request)
}

/// The Pod that runs `request` for `target`, named [`pod_name`], in the Tool's namespace.
/// Of the request only its timeout shows (`activeDeadlineSeconds`); the rest is in the
/// Secret ([`input_secret`]).
pub fn pod(
    target: PodTarget<'_>,
    request: &Request,
    call: &CallLabels,
    settings: &PodSettings,
) -> Result<Pod, SpecError> {
    let name = pod_name(target.tool, call);
    let err = |field: &'static str, e: serde_json::Error| SpecError {
        tool: target.tool.to_string(),
        field,
        reason: e.to_string(),
    };
    let resources = target
        .pod
        .resources
        .clone()
        .map(serde_json::from_value::<ResourceRequirements>)
        .transpose()
        .map_err(|e| err("resources", e))?;
    let tolerations = target
        .pod
        .tolerations
        .iter()
        .map(|t| serde_json::from_value::<Toleration>(t.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err("tolerations", e))?;
    let image = target
        .pod
        .image
        .clone()
        .unwrap_or_else(|| settings.default_image.clone());

    let mount = |volume: &str, path: &str| VolumeMount {
        name: volume.into(),
        mount_path: path.into(),
        read_only: (path == INPUT_DIR).then_some(true),
        ..Default::default()
    };
    let runner = Container {
        name: RUNNER_CONTAINER.into(),
        image: Some(settings.runner_image.clone()),
        command: Some(vec![
            "cp".into(),
            RUNNER_SOURCE.into(),
            format!("{RUNNER_DIR}/"),
        ]),
        resources: Some(runner_resources()),
        security_context: Some(container_security()),
        volume_mounts: Some(vec![mount(RUNNER_VOLUME, RUNNER_DIR)]),
        ..Default::default()
    };
    let tool = Container {
        name: TOOL_CONTAINER.into(),
        image: Some(image),
        command: Some(vec![
            RUNNER.into(),
            "pod-run".into(),
            "--input".into(),
            format!("{INPUT_DIR}/{INPUT_KEY}"),
        ]),
        env: non_empty(value_from(target)),
        env_from: non_empty(env_from(target)),
        resources,
        security_context: Some(container_security()),
        volume_mounts: Some(vec![
            mount(RUNNER_VOLUME, RUNNER_DIR),
            mount(INPUT_VOLUME, INPUT_DIR),
            mount(TMP_VOLUME, "/tmp"),
        ]),
        ..Default::default()
    };
    let empty_dir = |volume: &str| Volume {
        name: volume.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    };
    let volumes = vec![
        empty_dir(RUNNER_VOLUME),
        Volume {
            name: INPUT_VOLUME.into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(name.clone()),
                default_mode: Some(INPUT_MODE),
                ..Default::default()
            }),
            ..Default::default()
        },
        empty_dir(TMP_VOLUME),
    ];
    let pod = target.pod;
    Ok(Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(target.refs.namespace.clone()),
            labels: Some(labels(call, settings)),
            annotations: Some(BTreeMap::from([
                (ANNOTATION_TOOL.to_string(), target.tool.to_string()),
                (
                    ANNOTATION_TOOL_RESOURCE.to_string(),
                    target.refs.resource.clone(),
                ),
                (ANNOTATION_REPLICA.to_string(), settings.replica.clone()),
            ])),
            ..Default::default()
        },
        spec: Some(KubePodSpec {
            restart_policy: Some("Never".into()),
            active_deadline_seconds: request.timeout.map(|t| {
                let secs = t.as_secs() + u64::from(t.subsec_nanos() > 0);
                i64::try_from(secs.max(1)).unwrap_or(i64::MAX)
            }),
            service_account_name: pod.service_account_name.clone(),
            automount_service_account_token: Some(
                pod.automount_service_account_token.unwrap_or(false),
            ),
            node_selector: (!pod.node_selector.is_empty()).then(|| pod.node_selector.clone()),
            tolerations: non_empty(tolerations),
            enable_service_links: Some(false),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(RUN_AS),
                run_as_group: Some(RUN_AS),
                fs_group: Some(RUN_AS),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            init_containers: Some(vec![runner]),
            containers: vec![tool],
            volumes: Some(volumes),
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// The Secret that carries the call into `pod` (as created: its name, namespace and uid
/// are read from it), owned by the Pod so the garbage collector deletes it with the Pod.
/// Same name and labels as the Pod; immutable.
pub fn input_secret(pod: &Pod, input: Vec<u8>) -> Secret {
    let meta = &pod.metadata;
    let name = meta.name.clone().unwrap_or_default();
    Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: meta.namespace.clone(),
            labels: meta.labels.clone(),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name,
                uid: meta.uid.clone().unwrap_or_default(),
                ..Default::default()
            }]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            INPUT_KEY.to_string(),
            k8s_openapi::ByteString(input),
        )])),
        immutable: Some(true),
        type_: Some("Opaque".into()),
        ..Default::default()
    }
}

/// Each `envFrom` source of the Tool, under `MCC_ENVFROM_` + its own prefix.
fn env_from(target: PodTarget<'_>) -> Vec<EnvFromSource> {
    target
        .refs
        .env_from
        .iter()
        .map(|r| {
            let prefix = format!("{ENV_FROM_PREFIX}{}", r.prefix.as_deref().unwrap_or(""));
            let (name, optional) = (r.name.clone(), Some(r.optional));
            match r.source {
                RefKind::Secret => EnvFromSource {
                    prefix: Some(prefix),
                    secret_ref: Some(SecretEnvSource { name, optional }),
                    ..Default::default()
                },
                RefKind::ConfigMap => EnvFromSource {
                    prefix: Some(prefix),
                    config_map_ref: Some(ConfigMapEnvSource { name, optional }),
                    ..Default::default()
                },
            }
        })
        .collect()
}

/// Each `valueFrom` entry of the Tool as `MCC_VALUEFROM_<NAME>`, in declared order (a
/// later entry of one name wins, as in any Pod).
fn value_from(target: PodTarget<'_>) -> Vec<EnvVar> {
    target
        .refs
        .env_value_from
        .iter()
        .map(|r| {
            let (name, key, optional) = (r.name.clone(), r.key.clone(), Some(r.optional));
            let source = match r.source {
                RefKind::Secret => EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name,
                        key,
                        optional,
                    }),
                    ..Default::default()
                },
                RefKind::ConfigMap => EnvVarSource {
                    config_map_key_ref: Some(ConfigMapKeySelector {
                        name,
                        key,
                        optional,
                    }),
                    ..Default::default()
                },
            };
            EnvVar {
                name: format!("{VALUE_FROM_PREFIX}{}", r.env),
                value_from: Some(source),
                ..Default::default()
            }
        })
        .collect()
}

/// What the restricted Pod Security Standard asks of every container.
fn container_security() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Default::default()
        }),
        read_only_root_filesystem: Some(true),
        ..Default::default()
    }
}

/// The init container copies one file.
fn runner_resources() -> ResourceRequirements {
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.into())),
            ("memory".to_string(), Quantity(memory.into())),
        ])
    };
    ResourceRequirements {
        requests: Some(quantities("10m", "16Mi")),
        limits: Some(quantities("100m", "64Mi")),
        ..Default::default()
    }
}

fn non_empty<T>(v: Vec<T>) -> Option<Vec<T>> {
    (!v.is_empty()).then_some(v)
}

#[cfg(test)]
mod tests;
