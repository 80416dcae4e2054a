//! The audit event of an execution. In a test binary of its own: `tracing` caches a
//! callsite's interest globally, so a test on another thread without a subscriber could
//! race the registration and hide the event from this test's scoped subscriber.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use serde_json::json;

/// Collects what a JSON `tracing` subscriber writes.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn each_execution_emits_one_audit_event_without_values() {
    let sink = Sink::default();
    let writer = sink.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let mut tool = exec_tool("echo {{ msg | quote }} {{ api_key | quote }} \"$API_TOKEN\"");
    tool.key = "ops.echo".into();
    tool.params = serde_json::from_value(json!([
        {"name": "msg", "type": "str"},
        {"name": "api_key", "type": "str", "override": "override-secret-value"}
    ]))
    .unwrap();
    tool.env
        .insert("API_TOKEN".into(), "env-secret-value".into());
    let params = json!({"msg": "visible-value", "api_key": "override-secret-value"});
    let out = run(&engine(), &tool, params).await;
    assert_eq!(
        out.outcome.to_text(),
        "visible-value override-secret-value env-secret-value\n"
    );

    let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &serde_json::Value| e["target"] == "mcc::audit")
        .collect();
    assert_eq!(events.len(), 1, "{text}");
    let fields = &events[0]["fields"];
    assert_eq!(fields["caller"], "alice");
    assert_eq!(fields["tool"], "ops.echo");
    assert_eq!(fields["exit_code"], 0);
    assert_eq!(fields["bytes_out"], out.outcome.to_text().len());
    assert_eq!(fields["status"], "success");
    assert_eq!(fields["cached"], false);
    assert!(fields["duration_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(fields["params_hash"].as_str().unwrap().len(), 64);
    for secret in ["visible-value", "override-secret-value", "env-secret-value"] {
        assert!(!text.contains(secret), "{secret} was logged: {text}");
    }
}
