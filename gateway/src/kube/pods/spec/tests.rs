//! The Pods of an exec, a curl and an fn tool against the golden files in `golden/`
//! (`UPDATE_GOLDEN=1 cargo test -p mcc-gateway --lib kube::pods` rewrites them), and the
//! rule that no call value appears anywhere in a Pod.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use mcc_catalog::document::{EnvFromRef, EnvValueRef, PodSpec, RefKind};
use mcc_catalog::env::EnvSpec;
use mcc_catalog::introspect::runner_args;
use mcc_executor::Request;
use mcc_executor::podio::PodInput;
use serde_json::json;

use super::*;
use crate::catalog::ToolRefs;

/// Values of the call that must stay out of the Pod object.
const PARAM: &str = "param-value-7f3a";
const CONTEXT: &str = "context-user-91c2";
const PASSTHROUGH: &str = "passthrough-value-d04e";
const STDIN_ONLY: &str = "stdin-only-5b6d";

fn settings() -> PodSettings {
    PodSettings {
        default_image: "ghcr.io/mcc-k8s/mcc-executor:0.1.0".into(),
        runner_image: "ghcr.io/mcc-k8s/mcc-executor:0.1.0".into(),
        replica: "mcc-gateway-6d8f9c7b5-x2k4q".into(),
        instance: "mcc".into(),
        passthrough_env: vec![("HTTPS_PROXY".into(), PASSTHROUGH.into())],
        ..Default::default()
    }
}

fn call() -> CallLabels {
    CallLabels {
        call: "3f2b9c1d8e7a4b6c9d0e1f2a3b4c5d6e".into(),
    }
}

fn refs(resource: &str) -> ToolRefs {
    ToolRefs {
        namespace: "team-a".into(),
        resource: resource.into(),
        ..Default::default()
    }
}

fn request(program: &str, args: Vec<String>, timeout: Option<Duration>) -> Request {
    Request {
        program: program.into(),
        args,
        env: EnvSpec {
            floor: vec!["PATH".into(), "HOME".into()],
            passthrough: mcc_catalog::EnvPassthrough::All(false),
            set: BTreeMap::from([
                ("MCC_CTX_USER".into(), CONTEXT.into()),
                ("MCC_CTX".into(), json!({ "user": CONTEXT }).to_string()),
            ]),
            ..Default::default()
        },
        stdin: Some(
            json!({ "query": PARAM, "note": STDIN_ONLY })
                .to_string()
                .into_bytes(),
        ),
        timeout,
        max_output: 1 << 20,
        ..Default::default()
    }
}

struct Case {
    tool: &'static str,
    refs: ToolRefs,
    pod: PodSpec,
    request: Request,
}

/// An exec tool in the default image, with `envFrom` and `valueFrom` references.
fn exec_case() -> Case {
    let mut refs = refs("lookup-domain");
    refs.env_from = vec![
        EnvFromRef {
            source: RefKind::Secret,
            name: "osint-api".into(),
            prefix: Some("OSINT_".into()),
            optional: false,
        },
        EnvFromRef {
            source: RefKind::ConfigMap,
            name: "osint-settings".into(),
            prefix: None,
            optional: true,
        },
    ];
    refs.env_value_from = vec![
        EnvValueRef {
            env: "API_TOKEN".into(),
            source: RefKind::Secret,
            name: "osint-api".into(),
            key: "token".into(),
            optional: false,
        },
        EnvValueRef {
            env: "REGION".into(),
            source: RefKind::ConfigMap,
            name: "osint-settings".into(),
            key: "region".into(),
            optional: true,
        },
    ];
    let line = format!("whois '{PARAM}' | head -n 20");
    Case {
        tool: "public.osint.lookup_domain",
        refs,
        pod: PodSpec::default(),
        request: request(
            "/bin/sh",
            vec!["-c".into(), line],
            Some(Duration::from_millis(2500)),
        ),
    }
}

/// A curl tool with resources, a node selector and a toleration.
fn curl_case() -> Case {
    let line = format!("curl -fsS 'https://api.example.com/search?q={PARAM}'");
    Case {
        tool: "public.web.search",
        refs: refs("web-search"),
        pod: PodSpec {
            resources: Some(json!({
                "requests": { "cpu": "50m", "memory": "64Mi" },
                "limits": { "memory": "128Mi" }
            })),
            node_selector: BTreeMap::from([("kubernetes.io/arch".into(), "amd64".into())]),
            tolerations: vec![json!({
                "key": "dedicated", "operator": "Equal", "value": "tools", "effect": "NoSchedule"
            })],
            ..Default::default()
        },
        request: request(
            "/bin/sh",
            vec!["-c".into(), line],
            Some(Duration::from_secs(30)),
        ),
    }
}

/// An fn tool in its own image, with its ServiceAccount and token, no timeout.
fn fn_case() -> Case {
    let args = runner_args("exec", ["reports.quarterly:summarize"]);
    let mut request = request(
        mcc_catalog::introspect::DEFAULT_PYTHON,
        args.iter().map(|a| a.to_string()).collect(),
        None,
    );
    request.env.cwd_on_pythonpath = true;
    Case {
        tool: "admin.finance.Quarterly Summary (v2, with a rather long descriptive name)",
        refs: refs("quarterly-summary"),
        pod: PodSpec {
            image: Some("registry.example.com/finance/reports:2.4.1".into()),
            service_account_name: Some("reports-reader".into()),
            automount_service_account_token: Some(true),
            resources: Some(json!({ "limits": { "cpu": "1", "memory": "512Mi" } })),
            ..Default::default()
        },
        request,
    }
}

fn build(case: &Case) -> Pod {
    let target = PodTarget {
        tool: case.tool,
        refs: &case.refs,
        pod: &case.pod,
    };
    pod(target, &case.request, &call(), &settings()).expect("a well-formed Tool")
}

fn golden(name: &str, pod: &Pod) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/kube/pods/golden")
        .join(format!("{name}.yaml"));
    let yaml = serde_saphyr::to_string(pod).expect("a Pod serializes");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &yaml).expect("write the golden file");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (UPDATE_GOLDEN=1 cargo test -p mcc-gateway --lib kube::pods writes it)",
            path.display()
        )
    });
    assert!(
        yaml == want,
        "{} drifted (UPDATE_GOLDEN=1 to accept):\n--- golden\n{want}\n--- built\n{yaml}",
        path.display()
    );
}

#[test]
fn exec_pod_matches_its_golden_file() {
    golden("exec", &build(&exec_case()));
}

#[test]
fn curl_pod_matches_its_golden_file() {
    golden("curl", &build(&curl_case()));
}

#[test]
fn fn_pod_matches_its_golden_file() {
    golden("fn", &build(&fn_case()));
}

#[test]
fn no_call_value_appears_anywhere_in_the_pod() {
    for case in [exec_case(), curl_case(), fn_case()] {
        let text = serde_json::to_string(&build(&case)).unwrap();
        for value in [
            PARAM,
            CONTEXT,
            PASSTHROUGH,
            STDIN_ONLY,
            "whois",
            "curl -fsS",
        ] {
            assert!(!text.contains(value), "{}: '{value}' in the Pod", case.tool);
        }
        // Not even the runner script of fn tools, nor any other argument of the request
        // (short ones such as `-c` and `exec` are common words).
        for arg in case.request.args.iter().filter(|a| a.len() > 8) {
            assert!(
                !text.contains(arg.as_str()),
                "{}: an argument in the Pod",
                case.tool
            );
        }
        // The call reaches the runner only through the Secret.
        let input = input(&case.request, &settings()).unwrap();
        let decoded = PodInput::decode(&input).unwrap();
        assert_eq!(decoded.args, case.request.args);
        assert_eq!(decoded.stdin, case.request.stdin);
        assert!(decoded.env.references_in_env);
        // These tools pass nothing through: no configured value is written either.
        assert_eq!(decoded.env.passthrough_from, Some(vec![]), "{}", case.tool);
        assert!(!String::from_utf8_lossy(&input).contains(PASSTHROUGH));
    }
}

#[test]
fn names_are_dns_labels_and_labels_are_label_values() {
    let name = pod_name(&"x".repeat(300), &call());
    assert_eq!(name, format!("mcc-{}-3f2b9c1d8e7a4b6c", "x".repeat(40)));
    assert!(name.len() <= 63);
    let fn_pod = build(&fn_case());
    let name = fn_pod.metadata.name.clone().unwrap();
    assert_eq!(
        name,
        "mcc-admin-finance-quarterly-summary-v2-with-3f2b9c1d8e7a4b6c"
    );
    let dns_label = |s: &str| {
        s.len() <= 63
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    };
    assert!(dns_label(&name));
    assert_eq!(slug("..."), "tool");
    assert_eq!(
        slug("Public.OSINT.lookup__domain"),
        "public-osint-lookup-domain"
    );
    // The slug is cut at 40 without ending in a dash.
    assert_eq!(slug(&format!("{}.b", "a".repeat(39))), "a".repeat(39));

    assert_eq!(label_value("-gw_1.x-"), "gw_1.x");
    assert_eq!(label_value(&"r".repeat(80)).len(), 63);
    assert_eq!(label_value("pod/with spaces"), "pod-with-spaces");
    let mut settings = settings();
    settings.replica = format!("{}-tail", "g".repeat(62));
    let labels = labels(&call(), &settings);
    assert_eq!(labels[LABEL_REPLICA], "g".repeat(62));
}

#[test]
fn deadline_is_the_timeout_rounded_up() {
    let mut case = exec_case();
    let deadline = |case: &Case| build(case).spec.unwrap().active_deadline_seconds;
    assert_eq!(deadline(&case), Some(3));
    case.request.timeout = Some(Duration::from_secs(7));
    assert_eq!(deadline(&case), Some(7));
    case.request.timeout = Some(Duration::from_millis(1));
    assert_eq!(deadline(&case), Some(1));
    case.request.timeout = None;
    assert_eq!(deadline(&case), None);
}

#[test]
fn token_is_not_mounted_unless_the_tool_asks() {
    let spec = build(&exec_case()).spec.unwrap();
    assert_eq!(spec.automount_service_account_token, Some(false));
    assert_eq!(spec.service_account_name, None);
    let spec = build(&fn_case()).spec.unwrap();
    assert_eq!(spec.automount_service_account_token, Some(true));
    assert_eq!(spec.service_account_name.as_deref(), Some("reports-reader"));
}

#[test]
fn malformed_resources_or_tolerations_are_refused() {
    let mut case = curl_case();
    case.pod.resources = Some(json!({ "limits": "lots" }));
    let target = PodTarget {
        tool: case.tool,
        refs: &case.refs,
        pod: &case.pod,
    };
    let e = pod(target, &case.request, &call(), &settings()).unwrap_err();
    assert_eq!(
        (e.tool.as_str(), e.field),
        ("public.web.search", "resources")
    );

    let mut case = curl_case();
    case.pod.tolerations = vec![json!("NoSchedule")];
    let target = PodTarget {
        tool: case.tool,
        refs: &case.refs,
        pod: &case.pod,
    };
    let e = pod(target, &case.request, &call(), &settings()).unwrap_err();
    assert_eq!(e.field, "tolerations");
    assert!(
        e.to_string()
            .starts_with("tool 'public.web.search': pod tolerations: ")
    );
}

#[test]
fn the_secret_is_named_and_owned_by_the_pod() {
    let mut created = build(&exec_case());
    created.metadata.uid = Some("0b9e7c52-1111-4a2b-9c3d-4e5f60718293".into());
    let secret = input_secret(&created, b"{\"request\":{}}".to_vec());
    assert_eq!(secret.metadata.name, created.metadata.name);
    assert_eq!(secret.metadata.namespace.as_deref(), Some("team-a"));
    assert_eq!(secret.metadata.labels, created.metadata.labels);
    let owner = &secret.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.api_version.as_str()),
        ("Pod", "v1")
    );
    assert_eq!(owner.uid, "0b9e7c52-1111-4a2b-9c3d-4e5f60718293");
    assert_eq!(Some(&owner.name), created.metadata.name.as_ref());
    assert_eq!(secret.immutable, Some(true));
    assert_eq!(
        secret.data.unwrap()[INPUT_KEY].0,
        b"{\"request\":{}}".to_vec()
    );
    // The Pod mounts exactly this Secret.
    let volumes = created.spec.unwrap().volumes.unwrap();
    let mounted = volumes.iter().find_map(|v| v.secret.as_ref()).unwrap();
    assert_eq!(mounted.secret_name, secret.metadata.name);
}

#[test]
fn restricted_security_everywhere() {
    for case in [exec_case(), curl_case(), fn_case()] {
        let spec = build(&case).spec.unwrap();
        let pod = spec.security_context.unwrap();
        assert_eq!(pod.run_as_non_root, Some(true));
        assert_eq!(pod.seccomp_profile.unwrap().type_, "RuntimeDefault");
        let all = spec
            .init_containers
            .unwrap()
            .into_iter()
            .chain(spec.containers);
        for c in all {
            let s = c.security_context.unwrap();
            assert_eq!(s.allow_privilege_escalation, Some(false), "{}", c.name);
            assert_eq!(s.read_only_root_filesystem, Some(true), "{}", c.name);
            assert_eq!(s.capabilities.unwrap().drop.unwrap(), vec!["ALL"]);
            assert_eq!(c.ports, None);
        }
        assert_eq!(spec.host_network, None);
        assert_eq!(spec.enable_service_links, Some(false));
    }
}
