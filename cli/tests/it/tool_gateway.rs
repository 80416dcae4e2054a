//! `mcc tool …` and `mcc session …` through a real `mcc-gateway serve` process, with a
//! key minted by `mcc key mint` (api_key auth).

use crate::support;

use serde_json::Value;
use support::{fails, mcc, ok, root, spawn_gateway};

#[test]
fn calls_an_example_tool_through_a_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.yaml");
    std::fs::write(&users, "users:\n  - username: alice\n    groups: [osint]\n").unwrap();
    let users_arg = users.to_str().unwrap();
    let key = ok(mcc(&["key", "mint", "alice", "--users", users_arg]));
    let key = key.trim();
    let gateway = spawn_gateway(&[
        ("MCC_AUTH", "api_key".into()),
        (
            "MCC_TOOL_FILES",
            root().join("examples/public.yaml").display().to_string(),
        ),
        ("MCC_USERS_FILE", users.display().to_string()),
    ]);
    let url = gateway.url.as_str();
    let remote = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--url", url, "--token", key]);
        mcc(&all)
    };

    let out = ok(remote(&[
        "tool",
        "call",
        "public.echo",
        "message=hello gateway",
    ]));
    assert_eq!(out, "hello gateway\n");
    let out = ok(remote(&[
        "--json",
        "tool",
        "exec",
        "public.word_count",
        "text=a b c d",
    ]));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["result"], 4, "{out}");

    let list = ok(remote(&["tool", "list"]));
    assert!(
        list.contains("public.echo") && list.contains("public.word_count"),
        "{list}"
    );
    let list: Value = serde_json::from_str(&ok(remote(&["tool", "list", "-o", "json"]))).unwrap();
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|t| t["key"] == "public.echo")
    );
    let info = ok(remote(&["tool", "info", "public.echo"]));
    assert!(info.starts_with("## public.echo (message:str)"), "{info}");
    // A bare base URL means its /mcp.
    let base = url.trim_end_matches("/mcp");
    let info = ok(mcc(&[
        "tool",
        "info",
        "public.echo",
        "--url",
        base,
        "--token",
        key,
    ]));
    assert!(info.starts_with("## public.echo (message:str)"), "{info}");

    // Session variables persist in the caller's bucket across invocations.
    ok(remote(&["session", "set", "budget", "9"]));
    assert_eq!(ok(remote(&["session", "get", "budget"])).trim(), "9");
    let out = ok(remote(&["tool", "call", "public.whoami_echo"]));
    assert!(
        out.contains("called by alice") && out.contains("budget: 9"),
        "{out}"
    );
    let handle = ok(remote(&["session", "new"]));
    let out = ok(remote(&[
        "tool",
        "call",
        "public.whoami_echo",
        "--session",
        handle.trim(),
        "--set",
        "budget=3",
    ]));
    assert!(out.contains("budget: 3"), "{out}");

    // The gateway's answers are errors here, and name the key.
    let e = fails(remote(&["tool", "call", "public.nope"]));
    assert!(e.contains("Unknown tool: public.nope"), "{e}");
    let e = fails(remote(&["tool", "call", "public.echo"]));
    assert!(e.contains("Validation error for tool 'public.echo'"), "{e}");
    let e = fails(remote(&[
        "tool",
        "call",
        "public.echo",
        "message=x",
        "--as",
        "bob",
    ]));
    assert!(e.contains("impersonation"), "{e}");

    // A wrong key is refused by the gateway, and the message names the URL.
    let e = fails(mcc(&[
        "tool",
        "list",
        "--url",
        url,
        "--token",
        "mcc_000000000000_00",
    ]));
    assert!(e.contains(url), "{e}");
    // A revoked key too (the gateway reloads the users file).
    ok(mcc(&["key", "revoke", "alice", "--users", users_arg]));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let o = remote(&["tool", "list"]);
        if !o.status.success() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the revoked key still works"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}
