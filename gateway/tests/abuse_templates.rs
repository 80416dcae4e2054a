//! Abuse suite, hostile templates (issue 32, item 2): a tool's command template is code
//! its author wrote, and in Kubernetes mode any tenant allowed to create Tools is an
//! author. A template that loops without end, builds a huge string or prints one must
//! neither stall the gateway (its health answers within 50 ms while eight such renders
//! run) nor grow its memory: renders run in worker processes of the gateway's own binary,
//! held to fuel, a text bound and a memory limit, and each hostile call gets an error
//! saying which bound stopped it.

#[path = "it/mcp_support/mod.rs"]
mod mcp_support;

use std::time::{Duration, Instant};

use mcp_support::*;
use serde_json::json;

const TOOLS: &str = r#"
tools:
  - name: spin
    groups: [public]
    description: A loop of a hundred million steps.
    exec: "{% for a in range(10000) %}{% for b in range(10000) %}{% endfor %}{% endfor %}true"
  - name: grow
    groups: [public]
    description: A string of 400 MB, doubled three times from 50 MB.
    exec: >-
      {% set a = 'x' * 50000000 %}{% set b = a ~ a %}{% set c = b ~ b %}{% set d = c ~ c %}
      echo {{ d | length }}
  - name: shout
    groups: [public]
    description: A command line longer than any argument Linux takes.
    exec: "echo {% for a in range(20000) %}xxxxxxxxxx{% endfor %}"
  - name: echo
    groups: [public]
    description: Echo a message back.
    params:
      - name: message
        type: str
        required: true
    exec: printf '%s' {{ message | quote }}
"#;

/// This process's peak resident memory (`VmHWM`), in MiB.
fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        / 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_templates_neither_stall_nor_grow_the_gateway() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("tools")).unwrap();
    std::fs::write(dir.path().join("tools/tools.yaml"), TOOLS).unwrap();
    let mut s = settings(dir.path(), "dev-admin", None);
    s.concurrency.max_per_caller = 16;
    s.concurrency.max_per_tool = 16;
    s.concurrency.max_executions = 16;
    // What `mcc-gateway serve` sets: workers running the gateway's own binary.
    s.execution.render.program = Some(env!("CARGO_BIN_EXE_mcc-gateway").into());
    let server = start_with(s, dir).await;
    let http = mcp_support::http_client();
    let sid = raw_initialize(&http, &server.url).await;
    let rss_before = peak_rss_mib();

    let mut calls = Vec::new();
    for (i, key) in ["public.spin", "public.grow", "public.shout", "public.grow"]
        .iter()
        .cycle()
        .take(8)
        .enumerate()
    {
        let (http, url, sid) = (http.clone(), server.url.clone(), sid.clone());
        calls.push(tokio::spawn(async move {
            let text = raw_call(
                &http,
                &url,
                &sid,
                10 + i as u64,
                "execute",
                json!({"key": key}),
            )
            .await;
            (key.to_string(), text)
        }));
    }
    // Health, measured from outside the renders, while they run.
    let mut slowest = Duration::ZERO;
    while !calls.iter().all(|c| c.is_finished()) {
        let started = Instant::now();
        let r = http
            .get(format!("{}/healthz", server.base))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
        slowest = slowest.max(started.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A render in the gateway's own threads would hold /healthz for seconds (the render
    // deadline is 5 s, a nested loop runs for minutes); 1 s leaves room for a loaded
    // 2-core CI machine, where 50 ms failed once with 51 ms. Speed lives in benchmarks.
    assert!(
        slowest < Duration::from_secs(1),
        "/healthz took {slowest:?} while hostile templates rendered"
    );
    for call in calls {
        let (key, text) = call.await.unwrap();
        let expected = match key.as_str() {
            "public.spin" => "executed more than 2000000 instructions",
            "public.grow" => "needed more than 128 MiB of memory",
            _ => "passed 131071 bytes",
        };
        assert!(text.contains(expected), "{key}: {text}");
    }
    // The strings were built in the workers, not here.
    let grown = peak_rss_mib().saturating_sub(rss_before);
    assert!(grown < 64, "the gateway's peak memory grew by {grown} MiB");

    // Workers that died are replaced: an ordinary call renders and runs.
    let text = raw_call(
        &http,
        &server.url,
        &sid,
        99,
        "execute",
        json!({"key": "public.echo", "params": {"message": "still here"}}),
    )
    .await;
    assert!(text.contains("still here"), "{text}");
    server.stop().await;
}
