//! Kubernetes mode's upstreams: a gateway that never discovers sends each call to the
//! URL its catalog document records for the MCPServer, with header values read through
//! its Secret resolver, and follows the document's availability. Against the reference
//! server-everything (npm), as the file-mode tests.

use crate::upstream_support;

use std::sync::{Arc, Mutex};

use mcc_catalog::snapshot::ToolRefs;
use mcc_catalog::upstream::{HeaderRef, PublishedUpstream};
use mcc_gateway::exec::environment::{EnvResolver, ReferencedEnv};
use mcc_gateway::upstream::{UpstreamError, Upstreams};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use upstream_support::Everything;

/// Answers every header reference with a fixed value and remembers what it was asked
/// (the Kubernetes resolver's own tests are in `kube::env`).
#[derive(Default)]
struct Recording(Mutex<Vec<ToolRefs>>);

#[async_trait::async_trait]
impl EnvResolver for Recording {
    async fn resolve(&self, refs: &ToolRefs) -> Result<ReferencedEnv, String> {
        self.0.lock().unwrap().push(refs.clone());
        Ok(ReferencedEnv {
            value_from: refs
                .env_value_from
                .iter()
                .map(|r| (r.env.clone(), "Bearer t0ken".to_string()))
                .collect(),
            ..Default::default()
        })
    }
}

fn entry(url: &str, available: bool) -> PublishedUpstream {
    PublishedUpstream {
        server: "team-a/ev".into(),
        namespace: "team-a".into(),
        url: url.into(),
        headers: vec![HeaderRef {
            name: "Authorization".into(),
            secret: "ev-token".into(),
            key: "token".into(),
        }],
        ca: None,
        token_audience: None,
        session_context: Default::default(),
        timeout: Some(10.0),
        max_concurrency: 4,
        available,
        reason: (!available).then(|| "the connection failed".into()),
    }
}

async fn echo(up: &Upstreams, text: &str) -> Result<String, UpstreamError> {
    let args = json!({"message": text}).as_object().unwrap().clone();
    up.call("team-a/ev", "echo", args, None)
        .await
        .map(|r| r.text())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_go_to_the_published_url_with_headers_from_secrets() {
    let Some(everything) = Everything::start().await else {
        return;
    };
    let stop = CancellationToken::new();
    let up = Upstreams::new(stop.clone(), None);
    let resolver = Arc::new(Recording::default());
    up.set_header_resolver(resolver.clone());
    up.set_published(vec![entry(&everything.url(), true)]);

    let text = echo(&up, "hello upstream").await.expect("the call");
    assert!(text.contains("hello upstream"), "{text}");
    // The gateway discovered nothing: the tools are the document's.
    assert!(up.tools().is_empty());
    let asked = resolver.0.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "read once per connection");
    assert_eq!(asked[0].namespace, "team-a");
    let r = &asked[0].env_value_from[0];
    assert_eq!(
        (r.env.as_str(), r.name.as_str(), r.key.as_str()),
        ("Authorization", "ev-token", "token")
    );

    // The operator marked it unreachable: calls fail at once, with its reason.
    up.set_published(vec![entry(&everything.url(), false)]);
    let e = echo(&up, "x").await.unwrap_err().to_string();
    assert_eq!(
        e,
        "upstream 'team-a/ev' is unavailable (the connection failed)"
    );

    // The URL a document records is the one called: a dead port fails, the right one
    // serves again.
    let dead = format!(
        "http://127.0.0.1:{}/mcp",
        everything.port.wrapping_add(1).max(1024)
    );
    up.set_published(vec![entry(&dead, true)]);
    let e = echo(&up, "x").await.unwrap_err().to_string();
    assert!(e.starts_with("upstream 'team-a/ev' is unavailable"), "{e}");
    assert!(
        !e.contains("127.0.0.1"),
        "no URL in the caller's error: {e}"
    );
    up.set_published(vec![entry(&everything.url(), true)]);
    assert!(echo(&up, "back").await.unwrap().contains("back"));

    // The upstream restarts (it knows no session of before): once the operator has seen
    // it go and come back, the next call connects afresh instead of waiting out its
    // timeout on the dead session.
    let port = everything.port;
    everything.stop().await;
    let everything = Everything::start_on(port).await;
    up.set_published(vec![entry(&everything.url(), false)]);
    up.set_published(vec![entry(&everything.url(), true)]);
    let started = std::time::Instant::now();
    // Bounded: on a dead session the call would wait forever (no timeout given here).
    let again = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        echo(&up, "after a restart"),
    )
    .await
    .map_err(|_| "no answer within 10 s");
    assert!(
        matches!(&again, Ok(Ok(t)) if t.contains("after a restart")),
        "{again:?} after {:?}",
        started.elapsed()
    );

    // Gone from the document: unknown.
    up.set_published(vec![]);
    let e = echo(&up, "x").await.unwrap_err().to_string();
    assert_eq!(e, "upstream 'team-a/ev' is not configured on this gateway");
    stop.cancel();
    everything.stop().await;
}
