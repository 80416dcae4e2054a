//! `examples/` must keep loading as the gateway loads it by default (the directory, from
//! the repository root), with every key as documented, grants that name real keys, and
//! tools that run: the Python tools through the shipped runner, the shell tools through
//! `sh -c` with their rendered templates.
//!
//! One test only: it changes the process's working directory to the repository root,
//! as the gateway runs, so the relative `cwd: examples/python` resolves.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use mcc_catalog::env::{DEFAULT_FLOOR, build_env};
use mcc_catalog::introspect::{DEFAULT_PYTHON, Introspector, runner_args};
use mcc_catalog::{Tool, ToolKind, User, context, template};
use serde_json::{Map, Value, json};

#[derive(serde::Deserialize)]
struct UsersFile {
    users: Vec<User>,
}

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap()
}

/// Runs a tool the way the engine does, minus limits: the environment from
/// [`build_env`], the template rendered with the params, stdin JSON where asked.
fn run(tool: &Tool, params: Value, ctx: &Map<String, Value>) -> (bool, String) {
    let parent: Vec<(String, String)> = std::env::vars().collect();
    let floor: Vec<String> = DEFAULT_FLOOR.iter().map(|s| s.to_string()).collect();
    let params = mcc_catalog::params::validate(tool, &obj(params)).unwrap();
    let mut env = build_env(tool, &parent, &floor, &[], &[], ctx);
    let (mut cmd, stdin) = match &tool.kind {
        ToolKind::Fn { path, .. } => {
            let cwd = tool.cwd.clone().unwrap();
            env.insert("PYTHONPATH".into(), cwd.display().to_string());
            let mut cmd = Command::new(DEFAULT_PYTHON);
            cmd.args(runner_args("exec", [path.as_str()]))
                .current_dir(cwd);
            (cmd, Some(Value::Object(params.clone())))
        }
        _ => {
            let source = tool.kind.command().unwrap();
            let rendered = template::render(&template::environment(), source, &params).unwrap();
            let mut cmd = Command::new("sh");
            cmd.arg("-c").arg(rendered);
            (cmd, tool.stdin.then(|| Value::Object(params.clone())))
        }
    };
    let mut child = cmd
        .env_clear()
        .envs(&env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    if let Some(v) = stdin {
        pipe.write_all(mcc_catalog::pyfmt::json_dumps(&v).as_bytes())
            .unwrap();
    }
    drop(pipe);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(if out.status.success() {
        &out.stdout
    } else {
        &out.stderr
    });
    (out.status.success(), text.into_owned())
}

#[test]
fn examples_load_with_their_keys_grants_and_run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    std::env::set_current_dir(root).unwrap();
    let loaded = mcc_catalog::load(&["examples/".to_string()], &Introspector::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let keys: Vec<&str> = loaded.tools.iter().map(|t| t.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "admin.largest_files",
            "admin.tool_env",
            "public.echo",
            "public.whoami_echo",
            "public.word_count",
            "public.my_ip",
            "osint.paginate",
            "osint.report",
            "public.osint.slow_hello",
            "osint.stats",
        ]
    );
    let tool = |key: &str| loaded.tools.iter().find(|t| t.key == key).unwrap();
    let sig = |key: &str| mcc_catalog::signature(tool(key));
    assert_eq!(
        sig("osint.paginate"),
        "## osint.paginate (page_size:int=3) -> list\n\
         Return the next page of items; the cursor is kept in the session between calls.\n\
         paginate(page_size=2)\n"
    );
    assert!(
        sig("public.osint.slow_hello")
            .starts_with("## public.osint.slow_hello (name:str, delay:float=0.1) -> str\n")
    );
    assert!(sig("osint.stats").starts_with("## osint.stats (numbers:list) -> dict\n"));
    assert!(sig("osint.report").starts_with("## osint.report (target:str) -> dict\n"));

    // The users file sits in a subdirectory, so the tool loader never reads it.
    let text = std::fs::read_to_string("examples/users/users.yaml").unwrap();
    let users = serde_saphyr::from_str::<UsersFile>(&text).unwrap().users;
    let user = |name: &str| users.iter().find(|u| u.username == name).unwrap();
    for grant in users.iter().flat_map(|u| &u.tools) {
        assert!(
            keys.contains(&grant.as_str()),
            "grant of unknown key {grant}"
        );
    }
    let allowed = |u: Option<&User>| -> Vec<&str> {
        loaded
            .tools
            .iter()
            .filter(|t| t.allows(u))
            .map(|t| t.key.as_str())
            .collect()
    };
    assert_eq!(allowed(Some(user("alice"))), keys, "admin runs everything");
    assert_eq!(
        allowed(Some(user("bob"))),
        [
            "public.echo",
            "public.whoami_echo",
            "public.word_count",
            "public.my_ip",
            "osint.paginate",
            "osint.report",
            "public.osint.slow_hello",
            "osint.stats"
        ]
    );
    assert_eq!(
        allowed(Some(user("carol"))),
        [
            "admin.largest_files",
            "public.echo",
            "public.whoami_echo",
            "public.word_count",
            "public.my_ip",
            "osint.report",
            "public.osint.slow_hello"
        ]
    );
    assert_eq!(
        allowed(None),
        [
            "public.echo",
            "public.whoami_echo",
            "public.word_count",
            "public.my_ip",
            "public.osint.slow_hello"
        ]
    );

    let alice = context::assemble(
        Some(user("alice")),
        &obj(json!({"budget": 1000, "cursor": 5})),
    );
    assert_eq!(
        run(
            tool("public.echo"),
            json!({"message": "it's $(not run)"}),
            &alice
        ),
        (true, "it's $(not run)\n".to_string())
    );
    let (ok, out) = run(tool("public.whoami_echo"), json!({}), &alice);
    assert!(ok, "{out}");
    let first_lines: Vec<&str> = out.lines().take(3).collect();
    assert_eq!(
        first_lines,
        [
            "called by alice",
            "groups json: [\"admin\", \"osint\"]",
            "budget: 1000"
        ]
    );
    assert_eq!(
        run(
            tool("public.word_count"),
            json!({"text": "one two  three"}),
            &alice
        ),
        (true, "3\n".to_string())
    );
    assert_eq!(
        run(tool("osint.paginate"), json!({}), &alice),
        (true, r#"[["foxtrot", "golf"], {"budget": 1000, "cursor": 0, "user": "alice", "email": "alice@example.com", "groups": ["admin", "osint"], "tools": []}]"#.to_string()),
        "the cursor wraps around and is written back through the context"
    );
    let (ok, out) = run(tool("osint.report"), json!({"target": "10.0.0.5"}), &alice);
    assert!(
        ok && out.starts_with(r#"[{"target": "10.0.0.5", "called_by": "alice""#),
        "{out}"
    );
    assert_eq!(
        run(
            tool("public.osint.slow_hello"),
            json!({"name": "bob", "delay": 0}),
            &alice
        ),
        (true, r#"["hello bob", null]"#.to_string())
    );
    assert_eq!(
        run(tool("osint.stats"), json!({"numbers": [1, 2, 3.5]}), &alice),
        (
            true,
            r#"[{"count": 3, "sum": 6.5, "mean": 2.1666666666666665, "min": 1, "max": 3.5}, null]"#
                .to_string()
        )
    );
}
