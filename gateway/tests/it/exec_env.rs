//! The environment of tool processes, end to end with real processes: precedence
//! (floor → passthrough → env_file → env → context), identity winning over a tool's own
//! env, passthrough modes, env_file forms, fn tools' `MCC_CTX`/`PYTHONPATH`, and the
//! clear errors for a bad env_file or cwd. (The gateway's own environment never reaching
//! a tool: `tests/process_env.rs`.)

use crate::common;

use common::*;
use mcc_gateway::exec::{Engine, ExecError, Outcome};
use serde_json::json;

fn stdout(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Success(v) => v.as_str().expect("exec stdout is a string").to_string(),
        failure => panic!("expected success, got {failure:?}"),
    }
}

#[tokio::test]
async fn precedence_is_floor_passthrough_env_file_env_then_context() {
    let dir = tempfile::tempdir().unwrap();
    let env_file = dir.path().join("tool.env");
    std::fs::write(
        &env_file,
        "# layered\nLAYER=file\nexport ONLY_FILE='from file'\nQUOTED=\"say \\\"hi\\\"\" # note\nAWS_KEY=file\nMCC_CTX_USER=file-spoof\nHOME=/from/file\n",
    )
    .unwrap();
    let parent = parent_env(&[
        ("HOME", "/home/gw"),
        ("LANG", "C.UTF-8"),
        ("AWS_KEY", "parent"),
        ("AWS_REGION", "eu-west-1"),
        ("LAYER", "parent"),
        ("MCC_CTX_USER", "parent-spoof"),
        ("GATEWAY_SECRET", "never"),
    ]);
    let engine = Engine::new(settings(parent));
    let tool = tool(json!({
        "kind": "exec",
        "command": "env",
        "env_passthrough": ["AWS_*", "LAYER", "MCC_CTX_*"],
        "env_file": env_file,
        "env": {"LAYER": "env", "ONLY_ENV": "1", "MCC_CTX_USER": "env-spoof", "MCC_CTX_BUDGET": "0"},
    }));
    let context = obj(json!({
        "user": "alice", "email": "a@x.io", "groups": ["ops", "dev"], "tools": [],
        "budget": 1000, "ratio": 0.5, "flag": true, "target": "10.0.0.5", "conf": {"k": [1]}
    }));
    let out = call(&engine, &tool, json!({}), context).await.unwrap();
    let env = env_lines(&stdout(&out.outcome));

    assert_eq!(env["LANG"], "C.UTF-8", "floor");
    assert_eq!(env["HOME"], "/from/file", "env_file over floor");
    assert_eq!(env["AWS_REGION"], "eu-west-1", "passthrough");
    assert_eq!(env["AWS_KEY"], "file", "env_file over passthrough");
    assert_eq!(env["ONLY_FILE"], "from file");
    assert_eq!(env["QUOTED"], "say \"hi\"");
    assert_eq!(env["LAYER"], "env", "env over env_file over passthrough");
    assert_eq!(env["ONLY_ENV"], "1");
    // The context is applied last: neither the parent, the env_file nor env spoofs it.
    assert_eq!(env["MCC_CTX_USER"], "alice");
    assert_eq!(env["MCC_CTX_BUDGET"], "1000");
    assert_eq!(env["MCC_CTX_EMAIL"], "a@x.io");
    assert_eq!(
        env["MCC_CTX_GROUPS"], r#"["ops", "dev"]"#,
        "as the seeds show it"
    );
    assert_eq!(env["MCC_CTX_RATIO"], "0.5");
    assert_eq!(env["MCC_CTX_FLAG"], "true");
    assert_eq!(env["MCC_CTX_TARGET"], "10.0.0.5");
    assert_eq!(env["MCC_CTX_CONF"], r#"{"k": [1]}"#);
    assert!(!env.contains_key("GATEWAY_SECRET"));
    assert!(!env.contains_key("MCC_CTX"), "exec tools get no blob");
}

#[tokio::test]
async fn passthrough_false_list_and_true() {
    let parent = parent_env(&[
        ("HOME", "/home/gw"),
        ("GIT_DIR", "/repo"),
        ("GITHUB_TOKEN", "ghp_secret"),
        ("path", "lowercase"),
    ]);
    let engine = Engine::new(settings(parent));
    let names = |passthrough: serde_json::Value| {
        let tool = tool(json!({"kind": "exec", "command": "env", "env_passthrough": passthrough}));
        let engine = engine.clone();
        async move {
            let out = run(&engine, &tool, json!({})).await;
            env_lines(&stdout(&out.outcome))
                .into_keys()
                .filter(|k| !k.starts_with("MCC_CTX_") && k != "PWD" && k != "SHLVL" && k != "_")
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(names(json!(false)).await, ["HOME", "PATH"]);
    assert_eq!(names(json!([])).await, ["HOME", "PATH"]);
    assert_eq!(names(json!(["GIT_?IR"])).await, ["GIT_DIR", "HOME", "PATH"]);
    // Case-sensitive: "PATH" does not match "path".
    assert_eq!(names(json!(["PATH"])).await, ["HOME", "PATH"]);
    assert_eq!(
        names(json!(true)).await,
        ["GITHUB_TOKEN", "GIT_DIR", "HOME", "PATH", "path"]
    );
}

#[test]
fn debug_output_of_the_settings_shows_no_values() {
    let s = settings(parent_env(&[("API_TOKEN", "tok-123-secret")]));
    let shown = format!("{:?}", Engine::new(s));
    assert!(shown.contains("API_TOKEN"), "{shown}");
    assert!(!shown.contains("tok-123-secret"), "{shown}");
}

#[tokio::test]
async fn the_floor_is_configurable_and_takes_only_present_names() {
    let mut s = settings(parent_env(&[("HOME", "/home/gw"), ("TZ", "UTC")]));
    s.env_floor = vec!["PATH".into(), "TZ".into(), "LC_ALL".into()];
    let engine = Engine::new(s);
    let out = run(&engine, &exec_tool("env"), json!({})).await;
    let env = env_lines(&stdout(&out.outcome));
    assert_eq!(env["TZ"], "UTC");
    assert!(!env.contains_key("HOME"), "HOME is not in this floor");
    assert!(
        !env.contains_key("LC_ALL"),
        "absent from the gateway, so absent"
    );
}

#[tokio::test]
async fn fn_tools_get_the_blob_and_their_cwd_first_on_pythonpath() {
    let parent = parent_env(&[("HOME", "/home/gw"), ("PYTHONPATH", "/opt/extra")]);
    let engine = Engine::new(settings(parent));
    let mut tool = fn_tool("env_report", json!([]));
    tool.env_passthrough = mcc_catalog::EnvPassthrough::Globs(vec!["PYTHONPATH".into()]);
    tool.env
        .insert("MCC_CTX".into(), r#"{"user":"mallory"}"#.into());
    let out = call(&engine, &tool, json!({}), alice()).await.unwrap();
    let Outcome::Success(env) = out.outcome else {
        panic!("{:?}", out.outcome)
    };
    let fixtures = fixtures().display().to_string();
    assert_eq!(env["PYTHONPATH"], format!("{fixtures}:/opt/extra"));
    let blob: serde_json::Value = serde_json::from_str(env["MCC_CTX"].as_str().unwrap()).unwrap();
    assert_eq!(
        blob,
        json!({"user": "alice", "groups": ["ops"], "tools": []})
    );
    assert!(
        env.get("MCC_CTX_USER").is_none(),
        "fn tools get only the blob"
    );
    assert_eq!(env["HOME"], "/home/gw");
}

#[tokio::test]
async fn exec_tools_run_in_their_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let mut tool = exec_tool("pwd");
    tool.cwd = Some(dir.path().to_path_buf());
    let out = run(&engine(), &tool, json!({})).await;
    let canonical = dir.path().canonicalize().unwrap();
    assert_eq!(stdout(&out.outcome).trim(), canonical.display().to_string());
}

#[tokio::test]
async fn a_missing_or_unreadable_env_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let command = format!("touch {}", marker.display());
    for (path, expect) in [
        (dir.path().join("absent.env"), "No such file or directory"),
        (dir.path().to_path_buf(), "Is a directory"),
    ] {
        let mut tool = exec_tool(&command);
        tool.env_file = Some(path.clone());
        let err = call(&engine(), &tool, json!({}), alice())
            .await
            .unwrap_err();
        assert!(matches!(err, ExecError::EnvFile { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.starts_with("tool 't': cannot read env_file "), "{msg}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains(expect), "{msg}");
    }
    let bad = dir.path().join("bad.env");
    std::fs::write(&bad, "A=1\nnot a pair\n").unwrap();
    let mut tool = exec_tool(&command);
    tool.env_file = Some(bad);
    let msg = call(&engine(), &tool, json!({}), alice())
        .await
        .unwrap_err()
        .to_string();
    assert!(msg.ends_with("line 2: expected KEY=value"), "{msg}");
    assert!(!marker.exists(), "nothing ran");
}

#[tokio::test]
async fn a_missing_cwd_is_a_clear_error() {
    let cases = [
        (exec_tool("true"), json!({})),
        (
            fn_tool("greet", json!([str_param("name")])),
            json!({"name": "x"}),
        ),
    ];
    for (mut tool, params) in cases {
        tool.cwd = Some("/nonexistent/mcc-cwd".into());
        let err = call(&engine(), &tool, params, alice()).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "tool 't': cwd /nonexistent/mcc-cwd is not a directory"
        );
    }
}

#[tokio::test]
async fn a_missing_interpreter_is_a_clear_error() {
    let mut tool = fn_tool("greet", json!([str_param("name")]));
    tool.kind = mcc_catalog::ToolKind::Fn {
        path: "mcc_fixture_tools:greet".into(),
        python: Some("python-that-does-not-exist".into()),
    };
    let err = call(&engine(), &tool, json!({"name": "x"}), alice())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "tool 't': Python interpreter not found: python-that-does-not-exist"
    );
}
