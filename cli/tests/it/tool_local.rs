//! `mcc tool …` on local tool files (examples/), through the gateway's engine.

use crate::support;

use serde_json::Value;
use support::{fails, mcc, mcc_in, ok};

const PUBLIC: &str = "examples/public.yaml";
const USERS: &str = "examples/users/users.yaml";

#[test]
fn lists_describes_and_calls_example_tools() {
    let list = ok(mcc(&["tool", "list", "--tools", PUBLIC]));
    assert!(
        list.contains("public.echo") && list.contains("Echo a message back."),
        "{list}"
    );

    let json: Value =
        serde_json::from_str(&ok(mcc(&["--json", "tool", "ls", "-t", PUBLIC]))).unwrap();
    let keys: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains(&"public.word_count"), "{keys:?}");
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);

    let info = ok(mcc(&["tool", "info", "public.echo", "-t", PUBLIC]));
    assert!(
        info.starts_with("## public.echo (message:str) -> str"),
        "{info}"
    );
    let info: Value = serde_json::from_str(&ok(mcc(&[
        "tool",
        "info",
        "public.echo",
        "-t",
        PUBLIC,
        "-o",
        "json",
    ])))
    .unwrap();
    assert_eq!(info["params"][0]["name"], "message");

    // The value is quoted by the tool's template: printed, not run.
    let out = ok(mcc(&[
        "tool",
        "call",
        "public.echo",
        "message=hi $(echo no)",
        "-t",
        PUBLIC,
    ]));
    assert_eq!(out, "hi $(echo no)\n");
    // MCC's verbs and a JSON object of params; shell output that is JSON is JSON.
    let out = ok(mcc(&[
        "tool",
        "exec",
        "public.word_count",
        r#"{"text": "a b c"}"#,
        "-t",
        PUBLIC,
    ]));
    assert_eq!(out.trim(), "3");
    let out = ok(mcc(&[
        "--json",
        "tool",
        "run",
        "public.word_count",
        "text=one two",
        "-t",
        PUBLIC,
    ]));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["ok"].clone(), v["result"].clone()),
        (Value::Bool(true), Value::from(2))
    );
    // MCC's own form: `--json '{…}'` (the object is the params, the result JSON).
    let out = ok(mcc(&[
        "tool",
        "call",
        "public.echo",
        "--json",
        r#"{"message": "m"}"#,
        "-t",
        PUBLIC,
    ]));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["result"], "m\n");
}

#[test]
fn session_variables_reach_the_tool() {
    let out = ok(mcc(&[
        "tool",
        "call",
        "public.whoami_echo",
        "--set",
        "budget=5",
        "-t",
        PUBLIC,
    ]));
    assert!(
        out.contains("called by cli") && out.contains("budget: 5"),
        "{out}"
    );
    let out = ok(mcc(&[
        "tool",
        "call",
        "public.whoami_echo",
        "--session",
        "s1",
        "--set",
        "budget=7",
        "-t",
        PUBLIC,
        "--users",
        USERS,
        "--as",
        "bob",
    ]));
    assert!(
        out.contains("called by bob") && out.contains("budget: 7"),
        "{out}"
    );
}

#[test]
fn as_user_applies_rbac() {
    // bob is in osint, not admin.
    let all = ok(mcc(&["tool", "list", "--users", USERS, "--as", "bob"]));
    assert!(
        all.contains("osint.stats") && !all.contains("admin."),
        "{all}"
    );
    let e = fails(mcc(&[
        "tool",
        "call",
        "admin.tool_env",
        "--users",
        USERS,
        "--as",
        "bob",
    ]));
    assert!(e.contains("Unauthorized") && e.contains("bob"), "{e}");
    let e = fails(mcc(&["tool", "list", "--users", USERS, "--as", "nobody"]));
    assert!(e.contains("--as nobody") && e.contains(USERS), "{e}");
}

#[test]
fn failures_keep_the_tools_streams_and_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("t.yaml"),
        "groups: [public]\ntools:\n  - name: fail\n    exec: \"echo out; echo err >&2; exit 3\"\n",
    )
    .unwrap();
    let o = mcc_in(dir.path(), &["tool", "call", "public.fail", "-t", "t.yaml"]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(support::stdout(&o), "out\n");
    assert!(support::stderr(&o).contains("err\n"));
}

#[test]
fn bad_input_names_the_key_flag_or_file() {
    let e = fails(mcc(&["tool", "call", "public.nope", "-t", PUBLIC]));
    assert!(
        e.contains("Unknown tool: public.nope") && e.contains(PUBLIC),
        "{e}"
    );
    let e = fails(mcc(&["tool", "call", "public.echo", "-t", PUBLIC]));
    assert!(
        e.contains("Validation error for tool 'public.echo'") && e.contains("message"),
        "{e}"
    );
    let e = fails(mcc(&["tool", "call", "public.echo", "oops", "-t", PUBLIC]));
    assert!(e.contains("parameter 'oops'"), "{e}");
    let e = fails(mcc(&[
        "tool",
        "call",
        "public.echo",
        "n:=nojson",
        "-t",
        PUBLIC,
    ]));
    assert!(e.contains("parameter 'n'"), "{e}");
    let e = fails(mcc(&["tool", "list", "-t", "no/such.yaml"]));
    assert!(e.contains("no/such.yaml"), "{e}");
    // Outside the repository, the defaults (examples/) are missing: say how to choose.
    let empty = tempfile::tempdir().unwrap();
    let e = fails(mcc_in(empty.path(), &["tool", "list"]));
    assert!(e.contains("examples/") && e.contains("--tools"), "{e}");
    let e = fails(mcc_in(empty.path(), &["key", "list"]));
    assert!(e.contains("users.yaml") && e.contains("--users"), "{e}");
    let e = fails(mcc(&["tool", "list", "--users", "missing-users.yaml"]));
    assert!(e.contains("--users missing-users.yaml"), "{e}");
    let e = fails(mcc(&[
        "tool",
        "list",
        "--url",
        "http://127.0.0.1:9/mcp",
        "--as",
        "bob",
    ]));
    assert!(e.contains("--as bob") && e.contains("impersonation"), "{e}");
    let e = fails(mcc(&[
        "tool",
        "list",
        "--url",
        "http://127.0.0.1:9/mcp",
        "--tools",
        PUBLIC,
    ]));
    assert!(e.contains("--tools"), "{e}");
}

#[test]
fn check_import_and_completions() {
    let out = ok(mcc(&["check", PUBLIC]));
    assert!(
        out.contains("## public.echo") && out.ends_with("tools OK\n"),
        "{out}"
    );
    let e = fails(mcc(&["check", "no/such.yaml"]));
    assert!(e.contains("no/such.yaml"), "{e}");
    let out = ok(mcc(&["import", PUBLIC, "--users", USERS, "-n", "tools"]));
    assert!(
        out.contains("kind: Tool")
            && out.contains("kind: UserGrant")
            && out.contains("namespace: tools"),
        "{out}"
    );
    for shell in ["bash", "zsh", "fish"] {
        let out = ok(mcc(&["completions", shell]));
        assert!(out.contains("mcc") && out.len() > 1000, "{shell}");
    }
}
