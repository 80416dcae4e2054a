use super::*;
use serde_json::json;

#[test]
fn shell_output_that_is_json_becomes_json() {
    let exec: Tool =
        serde_json::from_value(json!({"key": "t", "name": "t", "kind": "exec", "command": "echo"}))
            .unwrap();
    let mut func = exec.clone();
    func.kind = mcc_catalog::ToolKind::Fn {
        path: "m:f".into(),
        python: None,
    };
    let out = |t: &Tool, v: Value| parse_shell_json(t, Outcome::Success(v));
    assert_eq!(out(&exec, json!("5\n")), Outcome::Success(json!(5)));
    assert_eq!(
        out(&exec, json!("{\"a\": 1}")),
        Outcome::Success(json!({"a": 1}))
    );
    assert_eq!(
        out(&exec, json!("hello\n")),
        Outcome::Success(json!("hello\n"))
    );
    assert_eq!(
        out(&func, json!("{\"a\": 1}")),
        Outcome::Success(json!("{\"a\": 1}"))
    );
    func.transform = Some("cat".into());
    assert_eq!(out(&func, json!("[1]")), Outcome::Success(json!([1])));
}

#[test]
fn shapes_text_and_cuts_at_the_limit() {
    let r = shape(Outcome::Success(json!({"a": 1})), false, 100);
    assert_eq!(r.text.as_deref(), Some("{\"a\":1}"));
    assert!(!r.truncated);
    assert_eq!(shape(Outcome::Success(Value::Null), false, 100).text, None);
    let fail = Outcome::Failure {
        code: 3,
        stdout: "out\n".into(),
        stderr: "err\n".into(),
    };
    let r = shape(fail, false, 100);
    assert_eq!(r.text.as_deref(), Some("[3,\"out\\n\",\"err\\n\"]"));
    assert_eq!(r.exit_code(), 3);
    let r = shape(Outcome::Success(json!("x".repeat(1000))), true, 100);
    let t = r.text.unwrap();
    assert!(r.truncated && t.len() <= 100, "{t}");
    assert!(t.ends_with(crate::exec::result::TRUNCATION_NOTICE));
}

#[test]
fn results_are_checked_against_a_declared_output_schema_only() {
    let mut tool: Tool =
        serde_json::from_value(json!({"key": "t", "name": "t", "kind": "exec", "command": "echo"}))
            .unwrap();
    let fail = Outcome::Failure {
        code: 1,
        stdout: String::new(),
        stderr: String::new(),
    };
    assert_eq!(
        check_output(&tool, &Outcome::Success(json!("text"))),
        Ok(())
    );
    tool.output_schema = Some(json!({
        "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]
    }));
    assert_eq!(
        check_output(&tool, &Outcome::Success(json!({"n": 1}))),
        Ok(())
    );
    assert_eq!(check_output(&tool, &fail), Ok(()));
    let e = check_output(&tool, &Outcome::Success(json!({"n": "1"}))).unwrap_err();
    assert_eq!(e.path, "/n");
    assert_eq!(Executed::<()>::BadOutput(e).label(), "error");
}

#[test]
fn labels_name_the_step_that_ended_the_call() {
    let ran = |o| Executed::<()>::Ran(shape(o, false, 100));
    assert_eq!(ran(Outcome::Success(json!(1))).label(), "success");
    let fail = Outcome::Failure {
        code: 1,
        stdout: String::new(),
        stderr: String::new(),
    };
    assert_eq!(ran(fail).label(), "failure");
    assert_eq!(Executed::<()>::Unauthorized.label(), "unauthorized");
    assert_eq!(Executed::Pending(()).label(), "input_required");
    assert_eq!(Executed::<()>::Aborted.label(), "cancelled");
}

#[test]
fn every_label_is_an_outcome_metrics_and_the_audit_reader_know() {
    let fail = Outcome::Failure {
        code: 1,
        stdout: String::new(),
        stderr: String::new(),
    };
    let all = [
        Executed::<()>::Unknown,
        Executed::Unauthorized,
        Executed::Cancelled,
        Executed::Aborted,
        Executed::Pending(()),
        Executed::Ran(shape(Outcome::Success(json!(1)), false, 100)),
        Executed::Ran(shape(fail, false, 100)),
    ];
    for executed in &all {
        assert!(
            crate::metrics::OUTCOMES.contains(&executed.label()),
            "{}",
            executed.label()
        );
    }
}
