//! fn tools through the real runner and a real python3: results, stdout isolation, async
//! callables, tracebacks, context injection and write-back, limits.

use crate::common;

use common::*;
use mcc_gateway::exec::{Engine, Outcome};
use serde_json::json;

fn int_param(name: &str) -> serde_json::Value {
    json!({"name": name, "type": "int", "required": true})
}

fn context_param() -> serde_json::Value {
    json!({"name": "context", "type": "dict"})
}

#[tokio::test]
async fn results_keep_their_json_type() {
    let engine = engine();
    let out = run(
        &engine,
        &fn_tool("greet", json!([str_param("name")])),
        json!({"name": "bob"}),
    )
    .await;
    assert_eq!(out.outcome, Outcome::Success(json!("hello bob")));
    assert_eq!(out.outcome.to_text(), "hello bob");
    let add = fn_tool("add", json!([int_param("a"), int_param("b")]));
    let out = run(&engine, &add, json!({"a": 2, "b": 3})).await;
    assert_eq!(out.outcome, Outcome::Success(json!(5)));
    assert_eq!(out.write_back, None, "no context parameter, no write-back");
}

#[tokio::test]
async fn printing_on_stdout_does_not_corrupt_the_result() {
    let tool = fn_tool("noisy", json!([str_param("x")]));
    let out = run(&engine(), &tool, json!({"x": "v"})).await;
    assert_eq!(out.outcome, Outcome::Success(json!({"x": "v", "ok": true})));
}

#[tokio::test]
async fn async_callables_are_awaited() {
    let tool = fn_tool("slow_add", json!([int_param("a"), int_param("b")]));
    let out = run(&engine(), &tool, json!({"a": 20, "b": 22})).await;
    assert_eq!(out.outcome, Outcome::Success(json!(42)));
}

#[tokio::test]
async fn non_json_values_are_stringified() {
    let out = run(&engine(), &fn_tool("odd_values", json!([])), json!({})).await;
    assert_eq!(
        out.outcome,
        Outcome::Success(json!({"when": "2020-01-02", "items": "{1}"}))
    );
}

#[tokio::test]
async fn a_traceback_is_reduced_to_its_last_line_unless_debug() {
    let tool = fn_tool("boom", json!([int_param("n")]));
    let out = run(&engine(), &tool, json!({"n": 3})).await;
    assert_eq!(
        out.outcome,
        Outcome::Failure {
            code: 1,
            stdout: String::new(),
            stderr: "ValueError: boom 3".into()
        }
    );
    let mut s = settings(parent_env(&[]));
    s.debug = true;
    let out = run(&Engine::new(s), &tool, json!({"n": 3})).await;
    let Outcome::Failure { stderr, .. } = out.outcome else {
        panic!("expected failure")
    };
    assert!(
        stderr.starts_with("Traceback (most recent call last):"),
        "{stderr}"
    );
    assert!(stderr.contains("mcc_fixture_tools.py"), "{stderr}");
    assert!(stderr.trim_end().ends_with("ValueError: boom 3"));
}

#[tokio::test]
async fn the_last_line_survives_a_stderr_flood() {
    let mut s = settings(parent_env(&[]));
    s.max_output_bytes = 2_000;
    let tool = fn_tool("flood_then_fail", json!([int_param("n")]));
    let out = run(&Engine::new(s), &tool, json!({"n": 100_000})).await;
    assert_eq!(
        out.outcome,
        Outcome::Failure {
            code: 1,
            stdout: String::new(),
            stderr: "RuntimeError: after the flood".into()
        }
    );
}

#[tokio::test]
async fn an_import_failure_is_a_failure_with_its_reason() {
    let tool = fn_tool("no_such_function", json!([]));
    let out = run(&engine(), &tool, json!({})).await;
    assert_eq!(
        out.outcome,
        Outcome::Failure {
            code: 1,
            stdout: String::new(),
            stderr:
                "AttributeError: module 'mcc_fixture_tools' has no attribute 'no_such_function'"
                    .into()
        }
    );
}

#[tokio::test]
async fn the_context_parameter_receives_the_session() {
    let tool = fn_tool("whoami", json!([context_param()]));
    let mut ctx = alice();
    ctx.insert("budget".into(), json!(1000));
    let out = call(&engine(), &tool, json!({}), ctx.clone())
        .await
        .unwrap();
    assert_eq!(
        out.outcome,
        Outcome::Success(json!({"user": "alice", "budget": 1000}))
    );
    assert_eq!(
        out.write_back,
        Some(ctx),
        "unchanged context comes back as is"
    );
}

#[tokio::test]
async fn the_context_left_behind_is_returned_for_write_back() {
    let tool = fn_tool(
        "remember",
        json!([str_param("name"), str_param("value"), context_param()]),
    );
    let mut ctx = alice();
    ctx.insert("forget_me".into(), json!(1));
    ctx.insert("keep".into(), json!([1, 2]));
    let out = call(
        &engine(),
        &tool,
        json!({"name": "cursor", "value": "c2"}),
        ctx,
    )
    .await
    .unwrap();
    assert_eq!(out.outcome, Outcome::Success(json!("stored cursor")));
    let mut expected = alice();
    expected.insert("keep".into(), json!([1, 2]));
    expected.insert("cursor".into(), json!("c2"));
    assert_eq!(out.write_back, Some(expected));
}

#[tokio::test]
async fn rebinding_the_context_is_not_observed() {
    let tool = fn_tool("rebind", json!([context_param()]));
    let out = call(&engine(), &tool, json!({}), alice()).await.unwrap();
    assert_eq!(out.write_back, Some(alice()));
}

#[tokio::test]
async fn a_failed_fn_writes_nothing_back() {
    let tool = fn_tool("boom", json!([int_param("n"), context_param()]));
    let out = run(&engine(), &tool, json!({"n": 1})).await;
    assert!(!out.outcome.is_success());
    assert_eq!(out.write_back, None);
}

#[tokio::test]
async fn cpu_limits_apply_to_the_interpreter() {
    let mut tool = fn_tool("burn_cpu", json!([]));
    tool.limits = serde_json::from_value(json!({"cpu_sec": 1, "timeout": 20})).unwrap();
    let out = run(&engine(), &tool, json!({})).await;
    let Outcome::Failure { code, stderr, .. } = out.outcome else {
        panic!("expected failure")
    };
    assert_eq!(code, -24);
    assert!(
        stderr.starts_with("resource limit hit: cpu time exceeded (SIGXCPU)"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_timeout_kills_the_interpreter() {
    let mut tool = fn_tool("burn_cpu", json!([]));
    tool.limits = serde_json::from_value(json!({"timeout": 0.5})).unwrap();
    let out = run(&engine(), &tool, json!({})).await;
    assert_eq!(
        out.outcome,
        Outcome::Failure {
            code: -1,
            stdout: String::new(),
            stderr: "timeout after 0.5s".into()
        }
    );
}

#[tokio::test]
async fn a_huge_result_is_cut_with_the_marker() {
    let mut s = settings(parent_env(&[]));
    s.max_output_bytes = 5_000;
    let tool = fn_tool("big", json!([int_param("n")]));
    let out = run(&Engine::new(s), &tool, json!({"n": 1_000_000})).await;
    let text = out.outcome.to_text();
    assert!(text.len() <= 5_000);
    assert!(text.ends_with("[Response truncated due to size limit]"));
    assert_eq!(out.write_back, None);
}
