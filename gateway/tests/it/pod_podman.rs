//! The pod runtime's Pod spec run for real as containers: `spec::pod` for an fn tool and
//! an exec tool, its input from `spec::input`, played with `podman kube play` (podman 4.3,
//! see ../shared/dependencies.md), and the result line read back from the tool
//! container's log with `podio::parse_log` must be the result the local runtime
//! (`InProcess`) gives for the same call: same exit, same stdout, same stderr.
//!
//! Gated on `MCC_PODMAN_E2E=1` (e2e/pod.sh sets it after building the images; without it
//! each test prints a loud SKIPPED and passes). Needs `localhost/mcc-executor:<tag>` from
//! `scripts/images.sh executor` (tag `MCC_IMAGE_TAG`, default `dev`), `buildah` for the two
//! tool images it makes (an fn module on top of the executor image, and a `FROM scratch`
//! image holding only a static busybox, from the host's busybox-static), and `runc`.
//!
//! What differs from a cluster, and why (`for_podman`): podman 4.3 crashes on Secret
//! volumes, so the per-call Secret becomes a hostPath directory holding the same
//! `request.json` (the Secret object itself is `spec::input_secret`, checked in the unit
//! tests); concurrent pods shared emptyDirs of the same name, so each becomes a
//! directory of the pod's own; it ignores `envFrom` prefixes, so the prefix is applied to
//! a copy of the ConfigMap; and it has no API server, so `valueFrom`/`envFrom` resolve
//! from ConfigMaps in the played YAML.

#![cfg(feature = "kubernetes")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, HostPathVolumeSource, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use mcc_catalog::EnvPassthrough;
use mcc_catalog::document::{EnvFromRef, EnvValueRef, PodSpec, RefKind};
use mcc_catalog::env::EnvSpec;
use mcc_catalog::introspect::runner_args;
use mcc_executor::podio;
use mcc_executor::runtime::Runtime as _;
use mcc_executor::{Finished, InProcess, Request, RunError};
use mcc_gateway::catalog::ToolRefs;
use mcc_gateway::exec::pod::PodTarget;
use mcc_gateway::kube::pods::spec;
use mcc_gateway::kube::pods::{CallLabels, PodSettings};

/// The fn tool's module, in the tool image at [`MODULE_DIR`] (its cwd).
const MODULE: &str = r#"
import os, sys

def greet(name: str, times: int = 1, context: dict = None) -> dict:
    print("greeting", name, file=sys.stderr)
    print("print() goes to stderr too")
    context["greeted"] = name
    return {
        "hello": " ".join([name] * times),
        "user": context.get("user"),
        "region": os.environ.get("REGION"),
        "settings_region": os.environ.get("CFG_REGION"),
        "passthrough": os.environ.get("E2E_PASSTHROUGH"),
        "proxy_leaked": os.environ.get("E2E_NOT_PASSED"),
        "pythonpath_first": os.environ.get("PYTHONPATH", "").split(":")[0] == os.getcwd(),
    }
"#;
const MODULE_DIR: &str = "/opt/mcc-tool";

/// The exec tool: stdin, the context variable, the referenced and passed-through values,
/// both streams and a non-zero exit.
const EXEC_LINE: &str = r#"read -r params; printf 'stdin=%s\n' "$params"; printf 'user=%s region=%s cfg=%s pass=%s leaked=%s\n' "$MCC_CTX_USER" "$REGION" "$CFG_REGION" "$E2E_PASSTHROUGH" "$E2E_NOT_PASSED"; echo "to stderr" >&2; exit 3"#;

fn enabled(test: &str) -> bool {
    if std::env::var("MCC_PODMAN_E2E").as_deref() == Ok("1") {
        return true;
    }
    // Straight to stderr, not eprintln!: the test harness would hide it in a passing test.
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "\n########################################################################\n\
         SKIPPED pod_podman::{test}: set MCC_PODMAN_E2E=1 to run the pod spec with podman\n\
         (e2e/pod.sh does, after scripts/images.sh executor).\n\
         ########################################################################"
    );
    false
}

fn tag() -> String {
    std::env::var("MCC_IMAGE_TAG").unwrap_or_else(|_| "dev".into())
}

fn executor_image() -> String {
    format!("localhost/mcc-executor:{}", tag())
}

fn cache_dir() -> PathBuf {
    std::env::var_os("MCC_IMAGES_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/mcc-images"))
}

/// `podman --runtime runc …` with the containers.conf scripts/images.sh writes (this VM
/// refuses raising RLIMIT_NOFILE; crun refuses its hybrid cgroup layout).
fn container_tool(tool: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(tool);
    if std::env::var_os("CONTAINERS_CONF").is_none() {
        cmd.env("CONTAINERS_CONF", cache_dir().join("containers.conf"));
    }
    if tool == "podman" {
        cmd.args(["--runtime", "runc"]);
    }
    cmd.args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool}: {e}"))
}

fn podman(args: &[&str]) -> Output {
    container_tool("podman", args)
}

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Builds `image` from `containerfile` and the files in `context` (layer-cached: a
/// rebuild with nothing changed is quick).
fn build_image(image: &str, containerfile: &str, files: &[(&str, &Path)]) {
    let ctx = tempfile::tempdir().unwrap();
    std::fs::write(ctx.path().join("Containerfile"), containerfile).unwrap();
    for (name, src) in files {
        std::fs::copy(src, ctx.path().join(name)).unwrap();
    }
    let ctx = ctx.path().to_str().unwrap();
    let out = container_tool(
        "buildah",
        &[
            "bud",
            "--pull=never",
            "--runtime",
            "runc",
            "--network",
            "host",
            "--layers",
            "--quiet",
            "-t",
            image,
            ctx,
        ],
    );
    ok(out, &format!("buildah bud {image}"));
}

fn ensure_executor_image() {
    let image = executor_image();
    assert!(
        podman(&["image", "exists", &image]).status.success(),
        "{image} is missing: run scripts/images.sh executor (e2e/pod.sh does)"
    );
}

/// The fn tool's image: the executor image (python3) plus the module. The runner in
/// `/usr/local/bin` is not what runs: the Pod copies its own into `/mcc/bin`.
fn python_tool_image() -> String {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(build_python_tool_image).clone()
}

fn build_python_tool_image() -> String {
    ensure_executor_image();
    let image = format!("localhost/mcc-e2e-pytool:{}", tag());
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("greeter.py");
    std::fs::write(&module, MODULE).unwrap();
    build_image(
        &image,
        &format!(
            "FROM {}\nCOPY greeter.py {MODULE_DIR}/greeter.py\n",
            executor_image()
        ),
        &[("greeter.py", &module)],
    );
    image
}

/// The exec tool's image: nothing but a static busybox (no libc, no Debian), so the
/// runner must bring everything it needs. Built from the host's busybox-static.
fn busybox_image() -> String {
    // Built once per test binary: the tests run in parallel.
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(build_busybox_image).clone()
}

fn build_busybox_image() -> String {
    let busybox =
        Path::new(&std::env::var("MCC_BUSYBOX").unwrap_or_else(|_| "/bin/busybox".into()))
            .to_path_buf();
    let static_busybox = std::fs::read(&busybox)
        .map(|elf| is_static_elf(&elf))
        .unwrap_or(false);
    assert!(
        static_busybox,
        "{} is not a static busybox: apt-get install busybox-static (e2e/pod.sh does)",
        busybox.display()
    );
    let image = format!("localhost/mcc-e2e-busybox:{}", tag());
    build_image(
        &image,
        "FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n",
        &[("busybox", &busybox)],
    );
    image
}

/// A 64-bit little-endian ELF without a program interpreter (`PT_INTERP`): it needs no
/// dynamic loader or libc from the image.
fn is_static_elf(elf: &[u8]) -> bool {
    let at = |off: usize, len: usize| elf.get(off..off + len);
    let num = |off: usize, len: usize| {
        at(off, len).map(|b| {
            b.iter()
                .rev()
                .fold(0usize, |n, &x| (n << 8) | usize::from(x))
        })
    };
    if at(0, 6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return false;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (num(0x20, 8), num(0x36, 2), num(0x38, 2))
    else {
        return false;
    };
    (0..phnum).all(|i| num(phoff + i * phentsize, 4).is_some_and(|t| t != 3))
}

fn settings() -> PodSettings {
    PodSettings {
        default_image: executor_image(),
        runner_image: executor_image(),
        replica: "pod-podman-test".into(),
        instance: "mcc-podman-e2e".into(),
        passthrough_env: vec![
            (
                "E2E_PASSTHROUGH".into(),
                "from the configured environment".into(),
            ),
            ("E2E_NOT_PASSED".into(), "not admitted by the tool".into()),
        ],
        ..Default::default()
    }
}

/// The ConfigMap the tools reference (`valueFrom` REGION, `envFrom` with prefix `CFG_`),
/// and the same values as the local runtime gets them once resolved.
const SETTINGS_MAP: &str = "mcc-podman-e2e-settings";
const REGION: &str = "eu-west-3";

fn refs() -> ToolRefs {
    ToolRefs {
        namespace: "mcc-podman-e2e".into(),
        resource: "podman-e2e".into(),
        env_from: vec![EnvFromRef {
            source: RefKind::ConfigMap,
            name: SETTINGS_MAP.into(),
            prefix: Some("CFG_".into()),
            optional: false,
        }],
        env_value_from: vec![EnvValueRef {
            env: "REGION".into(),
            source: RefKind::ConfigMap,
            name: SETTINGS_MAP.into(),
            key: "REGION".into(),
            optional: false,
        }],
        ..Default::default()
    }
}

fn settings_map() -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(SETTINGS_MAP.into()),
            ..Default::default()
        },
        data: Some([("REGION".to_string(), REGION.to_string())].into()),
        ..Default::default()
    }
}

/// What the engine would hand the pod runtime: params on stdin, the context variables
/// in `set`, the tool's passthrough rule. The referenced values are not in it: the Pod
/// spec delivers them.
fn base_request(program: &str, args: Vec<String>, stdin: &str, fn_tool: bool) -> Request {
    let mut set = std::collections::BTreeMap::new();
    if fn_tool {
        set.insert(
            "MCC_CTX".into(),
            r#"{"user": "alice", "groups": ["public"]}"#.into(),
        );
        set.insert("MCC_SKIP_AUTOLOAD".into(), "1".into());
    } else {
        set.insert("MCC_CTX_USER".into(), "alice".into());
    }
    Request {
        program: program.into(),
        args,
        env: EnvSpec {
            floor: vec!["PATH".into(), "HOME".into(), "LANG".into()],
            passthrough: EnvPassthrough::Globs(vec!["E2E_PASS*".into()]),
            set,
            cwd_on_pythonpath: fn_tool,
            ..Default::default()
        },
        stdin: Some(stdin.as_bytes().to_vec()),
        timeout: Some(Duration::from_secs(60)),
        max_output: 1 << 20,
        ..Default::default()
    }
}

/// The same call on the local runtime: the references resolved into `set` (where the
/// engine puts them), passthrough from the same configured environment.
async fn run_locally(request: &Request, cwd: Option<PathBuf>) -> Result<Finished, RunError> {
    let mut local = request.clone();
    local.env.set.insert("REGION".into(), REGION.into());
    local.env.set.insert("CFG_REGION".into(), REGION.into());
    local.env.passthrough_from = Some(settings().passthrough_env);
    local.cwd = cwd;
    let parent = vec![
        ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
        ("HOME".into(), "/tmp".into()),
    ];
    InProcess::new(parent).run(&local).await
}

/// Removes the played pod however the test ends.
struct Played {
    pod: String,
}

impl Drop for Played {
    fn drop(&mut self) {
        let out = podman(&["pod", "rm", "--force", "--time", "0", &self.pod]);
        if !out.status.success() {
            eprintln!(
                "pod_podman: cannot remove pod {}: {}",
                self.pod,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// podman 4.3's stand-ins for what it lacks (see the module doc): the Secret volume
/// becomes a hostPath directory holding the input; each emptyDir becomes a directory of
/// this pod's own under `work`, owned by the pod's user (podman 4.3 let concurrent pods
/// share an emptyDir of the same name: one pod's runner copy failed with "Text file
/// busy" over another's running binary); and as podman ignores an
/// `envFrom` prefix, each prefixed ConfigMap source is replaced by a copy of its
/// ConfigMap whose keys carry the prefix (what the kubelet would put in the environment).
fn for_podman(
    mut pod: Pod,
    input_dir: &Path,
    work: &Path,
    maps: &[ConfigMap],
) -> (Pod, Vec<ConfigMap>) {
    let spec = pod.spec.as_mut().unwrap();
    let host_path = |dir: &Path| {
        Some(HostPathVolumeSource {
            path: dir.display().to_string(),
            type_: Some("Directory".into()),
        })
    };
    for volume in spec.volumes.iter_mut().flatten() {
        if volume.secret.take().is_some() {
            volume.host_path = host_path(input_dir);
        } else if volume.empty_dir.take().is_some() {
            let dir = work.join("volumes").join(&volume.name);
            std::fs::create_dir_all(&dir).unwrap();
            let id = u32::try_from(spec::RUN_AS).unwrap();
            std::os::unix::fs::chown(&dir, Some(id), Some(id)).unwrap();
            volume.host_path = host_path(&dir);
        }
    }
    let mut maps = maps.to_vec();
    let sources = spec
        .containers
        .iter_mut()
        .flat_map(|c| c.env_from.iter_mut().flatten());
    for (i, source) in sources.enumerate() {
        let (Some(prefix), Some(map_ref)) = (source.prefix.take(), source.config_map_ref.as_mut())
        else {
            continue;
        };
        let original = maps
            .iter()
            .find(|m| m.metadata.name.as_ref() == Some(&map_ref.name))
            .unwrap_or_else(|| panic!("no ConfigMap {} in the test", map_ref.name))
            .clone();
        let name = format!("{}-prefixed-{i}", map_ref.name);
        let data = original.data.unwrap_or_default();
        maps.push(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            data: Some(
                data.into_iter()
                    .map(|(k, v)| (format!("{prefix}{k}"), v))
                    .collect(),
            ),
            ..Default::default()
        });
        map_ref.name = name;
    }
    (pod, maps)
}

/// Plays `pod` with `input` as its Secret, waits for the tool container to end and
/// returns its log.
fn play(pod: Pod, input: &[u8]) -> (Vec<u8>, Played) {
    let name = pod.metadata.name.clone().unwrap();
    let work = tempfile::tempdir().unwrap();
    let input_dir = work.path().join("input");
    std::fs::create_dir(&input_dir).unwrap();
    let input_file = input_dir.join(podio::INPUT_KEY);
    std::fs::write(&input_file, input).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&input_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&input_file, std::fs::Permissions::from_mode(0o444)).unwrap();

    let (pod, maps) = for_podman(pod, &input_dir, work.path(), &[settings_map()]);
    let mut yaml = String::new();
    for map in &maps {
        yaml += &serde_saphyr::to_string(map).unwrap();
        yaml += "---\n";
    }
    yaml += &serde_saphyr::to_string(&pod).unwrap();
    let file = work.path().join("pod.yaml");
    std::fs::write(&file, &yaml).unwrap();

    let played = Played { pod: name.clone() };
    let started = Instant::now();
    let out = podman(&["kube", "play", "--network", "host", file.to_str().unwrap()]);
    if !out.status.success() {
        // What each container of the pod said (the init container's copy, the runner).
        let names = podman(&[
            "ps",
            "--all",
            "--filter",
            &format!("pod={name}"),
            "--format",
            "{{.Names}}",
        ]);
        for ctr in String::from_utf8_lossy(&names.stdout).lines() {
            let logs = podman(&["logs", ctr]);
            eprintln!(
                "pod_podman: {ctr}:\n{}{}",
                String::from_utf8_lossy(&logs.stdout),
                String::from_utf8_lossy(&logs.stderr)
            );
        }
    }
    ok(out, &format!("podman kube play\n{yaml}\n"));

    let container = format!("{name}-{}", spec::TOOL_CONTAINER);
    let deadline = started + Duration::from_secs(120);
    loop {
        let state = podman(&[
            "container",
            "inspect",
            "--format",
            "{{.State.Status}}",
            &container,
        ]);
        let state = String::from_utf8_lossy(&state.stdout).trim().to_string();
        if state == "exited" || state == "stopped" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{container} still '{state}' after 120 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "pod_podman: {name} played and its tool container ended in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let logs = podman(&["logs", &container]);
    let mut log = logs.stdout;
    log.extend_from_slice(&logs.stderr);
    (log, played)
}

/// The result as one comparable value (Finished has no PartialEq).
fn triple(r: &Result<Finished, RunError>) -> Result<String, RunError> {
    r.as_ref()
        .map(|f| {
            format!(
                "ending: {:?}\nstdout ({} bytes): {}\nstderr ({} bytes): {}\ntails: {:?} {:?}",
                f.ending,
                f.stdout.total,
                String::from_utf8_lossy(&f.stdout.bytes),
                f.stderr.total,
                String::from_utf8_lossy(&f.stderr.bytes),
                f.stdout.tail,
                f.stderr.tail,
            )
        })
        .map_err(Clone::clone)
}

fn call() -> CallLabels {
    CallLabels {
        call: uuid::Uuid::new_v4().simple().to_string(),
    }
}

async fn pod_matches_local(
    tool: &str,
    pod_spec: PodSpec,
    request: Request,
    pod_cwd: Option<PathBuf>,
    local_cwd: Option<PathBuf>,
) -> String {
    let refs = refs();
    let target = PodTarget {
        tool,
        refs: &refs,
        pod: &pod_spec,
    };
    let settings = settings();
    let mut in_pod = request.clone();
    in_pod.cwd = pod_cwd;
    let pod = spec::pod(target, &in_pod, &call(), &settings).expect("the Pod builds");
    let input = spec::input(&in_pod, &settings).expect("the input encodes");
    let (log, _played) = play(pod, &input);
    let from_pod = podio::parse_log(&log).unwrap_or_else(|e| {
        panic!(
            "{e}; the tool container's log:\n{}",
            String::from_utf8_lossy(&log)
        )
    });
    let local = run_locally(&request, local_cwd).await;
    let (from_pod, local) = (triple(&from_pod), triple(&local));
    assert_eq!(
        from_pod, local,
        "the Pod's result differs from the local runtime's"
    );
    from_pod.expect("the tool ran")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fn_tool_pod_gives_the_local_result() {
    if !enabled("fn_tool_pod_gives_the_local_result") {
        return;
    }
    let image = python_tool_image();
    let module_dir = tempfile::tempdir().unwrap();
    std::fs::write(module_dir.path().join("greeter.py"), MODULE).unwrap();

    let args = runner_args("exec", ["greeter:greet"]);
    let request = base_request(
        mcc_catalog::introspect::DEFAULT_PYTHON,
        args.iter().map(|a| a.to_string()).collect(),
        r#"{"name": "pod", "times": 2}"#,
        true,
    );
    let pod_spec = PodSpec {
        image: Some(image),
        resources: Some(serde_json::json!({ "limits": { "memory": "256Mi" } })),
        ..Default::default()
    };
    let result = pod_matches_local(
        "public.e2e.greet",
        pod_spec,
        request,
        Some(MODULE_DIR.into()),
        Some(module_dir.path().to_path_buf()),
    )
    .await;
    eprintln!("pod_podman: fn tool result\n{result}");
    // The callable ran, with the context, the references and the passthrough rule.
    for expected in [
        "Exited(0)",
        r#""hello": "pod pod""#,
        r#""user": "alice""#,
        &format!(r#""region": "{REGION}""#),
        &format!(r#""settings_region": "{REGION}""#),
        r#""passthrough": "from the configured environment""#,
        r#""proxy_leaked": null"#,
        r#""pythonpath_first": true"#,
        r#""greeted": "pod""#,
        "greeting pod",
    ] {
        assert!(
            result.contains(expected),
            "'{expected}' missing from\n{result}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_tool_pod_in_a_busybox_image_gives_the_local_result() {
    if !enabled("exec_tool_pod_in_a_busybox_image_gives_the_local_result") {
        return;
    }
    ensure_executor_image();
    let image = busybox_image();
    let request = base_request(
        "/bin/sh",
        vec!["-c".into(), EXEC_LINE.into()],
        r#"{"query": "a b"}"#,
        false,
    );
    let pod_spec = PodSpec {
        image: Some(image),
        ..Default::default()
    };
    let result = pod_matches_local("public.e2e.shell", pod_spec, request, None, None).await;
    eprintln!("pod_podman: exec tool result\n{result}");
    for expected in [
        "Exited(3)",
        r#"stdin={"query": "a b"}"#,
        &format!(
            "user=alice region={REGION} cfg={REGION} pass=from the configured environment leaked=\n"
        ),
        "stderr (10 bytes): to stderr",
    ] {
        assert!(
            result.contains(expected),
            "'{expected}' missing from\n{result}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_output_and_timeout_in_a_pod_match_the_local_runtime() {
    if !enabled("bounded_output_and_timeout_in_a_pod_match_the_local_runtime") {
        return;
    }
    ensure_executor_image();
    let image = busybox_image();
    // 100 kB on stdout (cut at 1000 bytes, with its tail kept), then past the timeout:
    // the runner kills the process group in the Pod as the local runtime does.
    let mut request = base_request(
        "/bin/sh",
        vec![
            "-c".into(),
            "yes abcdefgh | head -c 100000; echo bye >&2; sleep 30".into(),
        ],
        "{}",
        false,
    );
    request.max_output = 1000;
    request.timeout = Some(Duration::from_secs(2));
    let pod_spec = PodSpec {
        image: Some(image),
        ..Default::default()
    };
    let result = pod_matches_local("public.e2e.limits", pod_spec, request, None, None).await;
    for expected in ["TimedOut", "stdout (100000 bytes)", "stderr (4 bytes): bye"] {
        assert!(
            result.contains(expected),
            "'{expected}' missing from\n{result}"
        );
    }
}
