//! The event's shape, what it leaves out, and the queue that never blocks.

use serde_json::json;

use super::*;
use crate::auth::Credential;

fn tool() -> Tool {
    serde_json::from_value(json!({
        "key": "ops.deploy", "name": "deploy", "kind": "exec", "command": "echo",
        "params": [
            {"name": "msg", "type": "str"},
            {"name": "token", "type": "str", "override": "s3cret-override"}
        ]
    }))
    .unwrap()
}

fn caller() -> Identity {
    Identity::user(mcc_catalog::User {
        username: "alice".into(),
        ..Default::default()
    })
    .with_credential(Credential::ApiKey {
        prefix: "0123456789ab".into(),
    })
}

#[tokio::test]
async fn an_event_names_the_caller_and_never_an_overridden_value() {
    let metrics = Metrics::new();
    let (queue, mut rx) = sink::channel("test", 4);
    let auditor = Auditor::with_sinks(vec![queue], true, &metrics);
    let mut event = AuditEvent::new("execute", &caller());
    event.tool = Some("ops.deploy".into());
    let params = json!({"msg": "hello", "token": "s3cret-override"});
    auditor.note_params(&mut event, &tool(), params.as_object().unwrap());
    event.exit_code = Some(0);
    event.bytes_out = 6;
    event.finish("success", Duration::from_millis(12));
    auditor.record(&event);
    let line = rx.recv().await.unwrap();
    assert!(!line.contains("s3cret-override"), "{line}");
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["user"], "alice");
    assert_eq!(v["credential"], "api_key");
    assert_eq!(v["key_prefix"], "mcc_0123456789ab");
    assert_eq!(v["tool"], "ops.deploy");
    assert_eq!(v["outcome"], "success");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["bytes_out"], 6);
    assert_eq!(v["duration_ms"], 12.0);
    assert_eq!(v["params"], json!({"msg": "hello"}));
    assert_eq!(v["params_hash"].as_str().unwrap().len(), 64);
    assert!(v["time"].as_str().unwrap().ends_with('Z'));
    assert!(v.get("cached").is_none() && v.get("query").is_none());
}

#[tokio::test]
async fn params_only_when_enabled() {
    let metrics = Metrics::new();
    let (queue, mut rx) = sink::channel("test", 4);
    let auditor = Auditor::with_sinks(vec![queue], false, &metrics);
    let mut event = AuditEvent::new("execute", &Identity::anonymous());
    auditor.note_params(
        &mut event,
        &tool(),
        json!({"msg": "hi"}).as_object().unwrap(),
    );
    auditor.record(&event);
    let v: Value = serde_json::from_str(&rx.recv().await.unwrap()).unwrap();
    assert!(v.get("params").is_none(), "{v}");
    assert!(v["params_hash"].is_string());
    assert_eq!(v["credential"], "none");
    assert_eq!(v["user"], "anonymous");
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_without_waiting() {
    let metrics = Metrics::new();
    let (queue, _rx) = sink::channel("test", 2);
    let auditor = Auditor::with_sinks(vec![queue], false, &metrics);
    let event = AuditEvent::new("search", &Identity::anonymous());
    for _ in 0..5 {
        auditor.record(&event);
    }
    let text = metrics.render();
    assert!(
        text.contains(r#"mcc_audit_events_dropped_total{sink="test",reason="queue_full"} 3"#),
        "{text}"
    );
}

#[tokio::test]
async fn a_writer_that_fails_counts_its_events_as_dropped() {
    struct Broken;
    impl std::io::Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let metrics = Metrics::new();
    let queue = sink::writer("stdout", Broken, 8, metrics.clone());
    let auditor = Auditor::with_sinks(vec![queue], false, &metrics);
    auditor.record(&AuditEvent::new("search", &Identity::anonymous()));
    let wanted = r#"mcc_audit_events_dropped_total{sink="stdout",reason="write_error"} 1"#;
    for _ in 0..100 {
        if metrics.render().contains(wanted) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("not counted: {}", metrics.render());
}

#[test]
fn a_callers_tool_key_is_cut() {
    let mut event = AuditEvent::new("execute", &Identity::anonymous());
    event.set_tool(&"é".repeat(1000));
    assert!(event.tool.as_ref().unwrap().len() <= MAX_TOOL_BYTES);
    event.set_tool("public.echo");
    assert_eq!(event.tool.as_deref(), Some("public.echo"));
}

#[test]
fn settings_are_checked_by_name() {
    let bad = AuditSettings {
        redis_url: Some("http://x".into()),
        ..AuditSettings::default()
    };
    assert_eq!(bad.validate().unwrap_err().0, "audit.redis_url");
    let bad = AuditSettings {
        queue_size: 0,
        ..AuditSettings::default()
    };
    assert_eq!(bad.validate().unwrap_err().0, "audit.queue_size");
}

#[tokio::test]
async fn a_flush_writes_what_the_writer_was_still_gathering() {
    let out = crate::test_writer::Captured::default();
    let metrics = Metrics::new();
    let auditor = Auditor::with_sinks(
        vec![sink::writer("stdout", out.clone(), 64, metrics.clone())],
        false,
        &metrics,
    );
    auditor.record(&AuditEvent::new("search", &caller()));
    auditor.flush(Duration::from_secs(5)).await;
    assert_eq!(out.lines().len(), 1, "{:?}", out.lines());
    // The writer now gathers for sink::GATHER: a flush does not wait the window out.
    let started = std::time::Instant::now();
    for _ in 0..20 {
        auditor.record(&AuditEvent::new("execute", &caller()));
    }
    auditor.flush(Duration::from_secs(5)).await;
    assert_eq!(out.lines().len(), 21, "{:?}", out.lines());
    assert!(started.elapsed() < Duration::from_secs(5));
}
