//! Abuse suite, concurrency limits (issue 12, item 4): a real gateway over real HTTP,
//! tools run as real subprocesses. A caller that floods `execute` gets, beyond each limit
//! (per caller, per tool, global), a "busy" answer naming the limit and its setting after
//! the bounded wait, while other calls keep being served; a call that finds a slot within
//! the wait runs.

use crate::mcp_support;

use std::time::{Duration, Instant};

use mcp_support::*;
use serde_json::json;

const TOOLS_SLOW: &str = r#"
tools:
  - name: slow
    groups: [public]
    description: Sleep a while.
    exec: sleep 1.5; echo slept
  - name: other
    groups: [public]
    description: Sleep a while too.
    exec: sleep 1.5; echo other
  - name: echo
    groups: [public]
    description: Echo a message back.
    params:
      - name: message
        type: str
        required: true
    exec: printf '%s' {{ message | quote }}
"#;

async fn start(max_executions: usize, per_caller: usize, per_tool: usize, wait_ms: u64) -> Server {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("tools")).unwrap();
    std::fs::write(dir.path().join("tools/tools.yaml"), TOOLS_SLOW).unwrap();
    let mut s = settings(dir.path(), "dev-admin", None);
    s.concurrency.max_executions = max_executions;
    s.concurrency.max_per_caller = per_caller;
    s.concurrency.max_per_tool = per_tool;
    s.concurrency.wait_ms = wait_ms;
    start_with(s, dir).await
}

/// Starts `keys.len()` calls at once; returns their texts in order.
async fn flood(server: &Server, sid: &str, keys: &[&str]) -> Vec<String> {
    let http = mcp_support::http_client();
    let mut tasks = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let (http, url, sid, key) = (
            http.clone(),
            server.url.clone(),
            sid.to_string(),
            key.to_string(),
        );
        tasks.push(tokio::spawn(async move {
            raw_call(
                &http,
                &url,
                &sid,
                100 + i as u64,
                "execute",
                json!({ "key": key }),
            )
            .await
        }));
        // In order, so which call is refused is deterministic.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

fn count(texts: &[String], needle: &str) -> usize {
    texts.iter().filter(|t| t.contains(needle)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_limit_answers_busy_naming_its_setting() {
    // (global, per caller, per tool, the calls, the setting that must refuse the last)
    let cases: [(usize, usize, usize, &[&str], &str); 3] = [
        (
            8,
            2,
            8,
            &["public.slow", "public.other", "public.slow"],
            "concurrency.max_per_caller = 2",
        ),
        (
            8,
            8,
            2,
            &["public.slow", "public.slow", "public.slow"],
            "concurrency.max_per_tool = 2",
        ),
        (
            2,
            8,
            8,
            &["public.slow", "public.other", "public.slow"],
            "concurrency.max_executions = 2",
        ),
    ];
    for (global, per_caller, per_tool, keys, setting) in cases {
        let server = start(global, per_caller, per_tool, 200).await;
        let http = mcp_support::http_client();
        let sid = raw_initialize(&http, &server.url).await;
        // A probe of another kind is answered while the flood runs.
        let probe = {
            let (http, url, sid) = (http.clone(), server.url.clone(), sid.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let t = Instant::now();
                let who = raw_call(&http, &url, &sid, 9, "whoami", json!({})).await;
                (who, t.elapsed())
            })
        };
        let texts = flood(&server, &sid, keys).await;
        let (who, probe_in) = probe.await.unwrap();
        assert!(who.starts_with("username: alice"), "{who}");
        assert!(probe_in < Duration::from_secs(1), "{probe_in:?}");
        assert_eq!(count(&texts, "busy"), 1, "{setting}: {texts:?}");
        let busy = texts.last().unwrap();
        assert!(busy.contains(setting), "{busy}");
        assert!(busy.contains("concurrency.wait_ms"), "{busy}");
        assert_eq!(
            count(&texts, "slept") + count(&texts, "other"),
            2,
            "{texts:?}"
        );
        // The slots are free again once the calls are done.
        let again = raw_call(
            &http,
            &server.url,
            &sid,
            50,
            "execute",
            json!({"key": "public.slow"}),
        )
        .await;
        assert!(again.contains("slept"), "{again}");
        assert_eq!(server.gateway_shared.engine.limiter().running(), 0);
        server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_that_finds_a_slot_within_the_wait_runs() {
    let server = start(8, 1, 8, 5_000).await;
    let http = mcp_support::http_client();
    let sid = raw_initialize(&http, &server.url).await;
    let started = Instant::now();
    let texts = flood(&server, &sid, &["public.slow", "public.other"]).await;
    assert!(
        texts[0].contains("slept") && texts[1].contains("other"),
        "{texts:?}"
    );
    // One after the other: the second waited for the first's slot.
    assert!(
        started.elapsed() >= Duration::from_millis(2900),
        "{:?}",
        started.elapsed()
    );
    server.stop().await;
}
