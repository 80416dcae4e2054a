//! A `runtime: pod` tool through the engine and the pod runtime, against the mocked API:
//! the tool runs in one Pod, its transform in a second, the result is cached like a
//! local one (a hit creates no Pod), and its references never reach the gateway.

use std::sync::Arc;

use serde_json::json;

use mcc_catalog::document::{EnvValueRef, RefKind};
use mcc_catalog::kube_mock::ApiServer;
use mcc_executor::podio;
use mcc_executor::process::{Captured, Ending, Finished};

use super::PodRuntime;
use super::tests::{Fake, ended, refs, settings};
use crate::catalog::ToolRefs;
use crate::exec::{Call, Engine, EngineSettings, ExecError, Outcome};

fn engine() -> Engine {
    Engine::new(EngineSettings {
        // Never used: a pod tool that ran here would print without any API request.
        runtime: Arc::new(mcc_executor::InProcess::new(vec![])),
        env_floor: vec!["PATH".into()],
        max_output_bytes: 1000,
        debug: false,
        default_timeout: Some(std::time::Duration::from_secs(30)),
        max_timeout: None,
    })
}

fn tool() -> mcc_catalog::Tool {
    serde_json::from_value(json!({
        "key": "ops.hello", "name": "hello", "kind": "exec",
        "command": "echo hi {{ who }}", "cache_ttl": 60,
        "params": [{"name": "who", "type": "str", "required": true}],
        "transform": "tr a-z A-Z"
    }))
    .unwrap()
}

/// With a `valueFrom` reference: resolved by the Pod, never read by the gateway.
fn pod_refs() -> ToolRefs {
    ToolRefs {
        env_value_from: vec![EnvValueRef {
            env: "TOKEN".into(),
            source: RefKind::Secret,
            name: "api".into(),
            key: "token".into(),
            optional: false,
        }],
        ..refs(None)
    }
}

fn result_line(stdout: &str) -> Vec<u8> {
    podio::result_line(&Ok(Finished {
        ending: Ending::Exited(0),
        stdout: Captured {
            bytes: stdout.as_bytes().to_vec(),
            total: stdout.len() as u64,
            tail: vec![],
        },
        stderr: Captured::default(),
    }))
    .into_bytes()
}

#[tokio::test]
async fn a_pod_tool_and_its_transform_run_in_pods_and_cache_like_local() {
    let (client, api) = ApiServer::new();
    let mut fake = Fake(api);
    let engine = engine().with_pod_runner(Arc::new(PodRuntime::new(client, settings())));
    let tool = tool();
    let refs = pod_refs();
    let call = || Call {
        tool: &tool,
        refs: Some(&refs),
        params: json!({"who": "bob"}).as_object().unwrap().clone(),
        context: json!({"user": "alice"}).as_object().unwrap().clone(),
        caller: "alice",
    };
    let server = async {
        // The tool's Pod.
        let (name, _) = fake.create_pod().await;
        let input = fake.create_secret(&name).await;
        assert_eq!(input.args, ["-c", "echo hi bob"]);
        assert_eq!(
            input.env.set.get("MCC_CTX_USER").map(String::as_str),
            Some("alice")
        );
        assert!(
            !input.env.set.contains_key("TOKEN"),
            "a reference, not a value"
        );
        fake.watch(&name, "100", &[ended(0, "Completed")]).await;
        fake.log(&name, &result_line("hi bob\n")).await;
        fake.delete_both(&name).await;
        // The transform's own Pod, the result on its stdin.
        let (transform, _) = fake.create_pod().await;
        assert_ne!(transform, name, "one Pod per process");
        let input = fake.create_secret(&transform).await;
        assert_eq!(input.args, ["-c", "tr a-z A-Z"]);
        assert_eq!(input.stdin.as_deref(), Some(&b"hi bob\n"[..]));
        fake.watch(&transform, "100", &[ended(0, "Completed")])
            .await;
        fake.log(&transform, &result_line("HI BOB\n")).await;
        fake.delete_both(&transform).await;
    };
    let (first, ()) = tokio::join!(engine.execute(call()), server);
    let first = first.unwrap();
    assert_eq!(first.outcome, Outcome::Success(json!("HI BOB\n")));
    assert!(!first.cached);

    let again = engine.execute(call()).await.unwrap();
    assert!(again.cached, "a hit runs nothing");
    assert_eq!(again.outcome, first.outcome);
    fake.0.expect_nothing().await;
}

#[tokio::test]
async fn without_a_pod_runner_a_pod_tool_is_refused_clearly() {
    let tool = tool();
    let refs = pod_refs();
    let e = engine()
        .execute(Call {
            tool: &tool,
            refs: Some(&refs),
            params: json!({"who": "bob"}).as_object().unwrap().clone(),
            context: Default::default(),
            caller: "alice",
        })
        .await
        .unwrap_err();
    assert!(matches!(e, ExecError::PodRuntime { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("not enabled on this gateway")
            && text.contains("MCC_EXECUTION__POD__ENABLED")
            && text.contains("podRuntime.enabled"),
        "{text}"
    );
}

/// A cancelled call (the pipeline drops the engine's future: `crate::calls::execute`)
/// deletes its Pod and Secret at once, grace 0.
#[tokio::test]
async fn dropping_a_pod_call_deletes_its_pod_at_once() {
    let (client, api) = ApiServer::new();
    let mut fake = Fake(api);
    let engine = engine().with_pod_runner(Arc::new(PodRuntime::new(client, settings())));
    let mut tool = tool();
    tool.cache_ttl = None;
    tool.transform = None;
    let refs = pod_refs();
    let call = engine.execute(Call {
        tool: &tool,
        refs: Some(&refs),
        params: json!({"who": "bob"}).as_object().unwrap().clone(),
        context: Default::default(),
        caller: "alice",
    });
    let server = async {
        let name = fake.start().await;
        // The watch, held open: the Pod runs.
        let (_watch, held) = fake.0.0.next_request().await.unwrap();
        (name, held)
    };
    let (name, held) = tokio::select! {
        _ = call => panic!("the call cannot end while its Pod runs"),
        running = server => running,
    };
    let dropped = std::time::Instant::now();
    fake.delete_both(&name).await;
    eprintln!(
        "pod runtime: Pod and Secret deleted {:?} after the drop",
        dropped.elapsed()
    );
    drop(held);
    fake.0.expect_nothing().await;
}
