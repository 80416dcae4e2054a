//! The `mcc-operator` binary as a user runs it: `crdgen`, `convert`, and clear errors.

use std::path::Path;
use std::process::Command;

fn operator() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mcc-operator"))
}

fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn crdgen_writes_what_is_committed() {
    let dir = tempfile::tempdir().unwrap();
    let out = operator()
        .args(["crdgen", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds");
    for name in ["tools.mcc.dev.yaml", "usergrants.mcc.dev.yaml"] {
        assert_eq!(
            std::fs::read_to_string(dir.path().join(name)).unwrap(),
            std::fs::read_to_string(committed.join(name)).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn convert_prints_manifests_and_warnings_go_to_stderr() {
    let out = operator()
        .args(["convert", &data("ops.yaml"), "--users", &data("users.yaml")])
        .args(["--namespace", "tools", "--env-file-base", &data("")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.matches("\nkind: Tool\n").count(), 5, "{stdout}");
    assert_eq!(stdout.matches("\nkind: UserGrant\n").count(), 2);
    assert_eq!(stdout.matches("\nkind: Secret\n").count(), 1);
    assert!(stdout.contains("namespace: tools"));
}

#[test]
fn bad_input_exits_non_zero_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "tools:\n  - name: x\n    exec: ls\n    fn: m:f\n").unwrap();
    let out = operator().arg("convert").arg(&bad).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.yaml")
            && stderr.contains("Tool must specify either 'fn' or 'exec', not both"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing half-written on stdout");

    let out = operator()
        .args(["convert", "/nonexistent/tools.yaml"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/tools.yaml"));
}

#[test]
fn a_bad_tenancy_setting_stops_startup_naming_the_flag() {
    // Checked before the cluster is contacted: no kubeconfig is needed to see the error.
    let out = operator()
        .args(["run", "--namespace-groups", "team-a"])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--namespace-groups (MCC_NAMESPACE_GROUPS): 'team-a' has no '='"),
        "{stderr}"
    );
    let out = operator()
        .arg("run")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env("MCC_WATCH_NAMESPACE_SELECTOR", "tier in (a")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--watch-namespace-selector (MCC_WATCH_NAMESPACE_SELECTOR)"),
        "{stderr}"
    );
    // The pod runtime's settings, as the chart passes them (env).
    for (env, value, want) in [
        (
            "MCC_POD_POLICY",
            r#"{"team-a": {"image": ["x/"]}}"#,
            "--pod-policy (MCC_POD_POLICY): team-a: unknown field `image`",
        ),
        (
            "MCC_POD_NAMESPACES",
            "team-a,*",
            "--pod-namespaces (MCC_POD_NAMESPACES): '*' (every namespace) stands alone",
        ),
    ] {
        let out = operator()
            .arg("run")
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .env(env, value)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{stderr}");
    }
}

/// `run` stops on SIGTERM, the signal Kubernetes stops a Pod with, and exits 0: in a
/// container the operator is PID 1, which has no default action for SIGTERM, so a
/// process that only handled SIGINT lingered its whole grace period holding the Lease.
/// Here it waits for leadership against an API server that does not answer.
#[test]
fn run_exits_cleanly_on_sigterm_while_following() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n\
         users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n\
         current-context: c\n",
    )
    .unwrap();
    let mut child = operator()
        .arg("run")
        .env("KUBECONFIG", &kubeconfig)
        .env("MCC_OPERATOR_NAMESPACE", "mcc-system")
        .env("MCC_METRICS_ADDR", "127.0.0.1:0")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    // Up to the point where it waits for the Lease.
    let mut seen = String::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut buf = [0u8; 4096];
    while !seen.contains("waiting for leadership") {
        assert!(
            std::time::Instant::now() < deadline,
            "never waited for leadership: {seen}"
        );
        let n = std::io::Read::read(&mut stderr, &mut buf).unwrap();
        assert!(n > 0, "the operator exited: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running 10 s after SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(
        status.success(),
        "{status:?} (killed by the signal, not stopped by it)"
    );
}
