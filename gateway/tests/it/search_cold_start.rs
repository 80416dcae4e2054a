//! Cold start with an embedder that is held at a gate (no timing: it is released by the
//! test): the gateway serves at once — `/readyz` ready, search keyword-only — a catalog
//! swap (a revoked key, a new tool) applies while the semantic build is still running,
//! and semantic ranking joins when the build is released.

use crate::mcp_support;

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use mcc_catalog::introspect::Introspector;
use mcc_gateway::auth::api_key;
use mcc_gateway::catalog::LiveCatalog;
use mcc_search::{Embedder, SearchService};
use mcp_support::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Holds tool-text embedding runs (signatures start with `## `) until opened.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    changed: Condvar,
}

impl Gate {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.changed.notify_all();
    }

    fn pass(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.changed.wait(open).unwrap();
        }
    }
}

/// Texts about forecasts or sun point one way, everything else the other: "sunny" finds
/// the weather tool by meaning only.
fn toy_embedder(gate: Arc<Gate>) -> Embedder {
    Embedder::from_fn("toy", move |texts| {
        // Tool texts come all at once (a catalog's descriptions and cards), a query alone.
        if texts.len() > 1 {
            gate.pass();
        }
        Ok(texts
            .iter()
            .map(|t| {
                if t.contains("orecast") || t.contains("sunny") {
                    vec![1.0, 0.0]
                } else {
                    vec![0.0, 1.0]
                }
            })
            .collect())
    })
}

const WEATHER: &str = "  - name: weather
    groups: [public]
    description: Forecast for a city.
    exec: echo cloudy
";

async fn readyz(base: &str) -> (u16, Value) {
    let r = mcp_support::http_client()
        .get(format!("{base}/readyz"))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn initialize_status(url: &str, token: &str) -> u16 {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    mcp_support::http_client()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {token}"))
        .body(init.to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Polls `check` (a reload is asynchronous); a long deadline turns a hang into a failure.
async fn eventually<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..600 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never happened: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_keyword_search_at_once_and_swaps_catalogs_while_embeddings_are_held() {
    let revoked = api_key::mint(None).unwrap();
    let kept = api_key::mint(None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.yaml");
    std::fs::write(
        &users,
        users_file(&[
            ("bob", &["public", "ops"], &[&revoked]),
            ("carol", &["public"], &[&kept]),
        ]),
    )
    .unwrap();
    let settings = settings(dir.path(), "api_key", None);

    let gate = Arc::new(Gate::default());
    let catalog = LiveCatalog::load(
        settings.tools.clone(),
        settings.users_file.clone(),
        Introspector::default(),
    )
    .unwrap();
    let catalog = Arc::new(catalog);
    let search = SearchService::with_embedder(
        settings.search_settings().unwrap(),
        Some(toy_embedder(gate.clone())),
    )
    .unwrap();
    // What the gateway's startup does: keyword index now, embeddings in the background.
    search.update(catalog.snapshot()).unwrap();
    let shutdown = CancellationToken::new();
    let gateway =
        mcc_gateway::app::build_with_catalog(&settings, catalog, search, shutdown.clone()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (url, base) = (format!("http://{addr}/mcp"), format!("http://{addr}"));
    let server = tokio::spawn(gateway.serve(listener, shutdown.clone()));

    let (status, body) = readyz(&base).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["search"]["semantic"], false, "{body}");
    assert_eq!(body["search"]["building"], true, "{body}");
    let bob_client = with_token(&url, revoked.raw.expose(), true).await;
    let found = call_text(&bob_client, "search", json!({"query": "restart a service"})).await;
    assert!(found.contains("## ops.restart"), "keyword search: {found}");

    // Revoke bob's key and add a tool while the embedder is still held.
    std::fs::write(
        &users,
        users_file(&[
            ("bob", &["public", "ops"], &[]),
            ("carol", &["public"], &[&kept]),
        ]),
    )
    .unwrap();
    let tools = settings_tools_file(dir.path());
    let text = std::fs::read_to_string(&tools).unwrap();
    std::fs::write(&tools, format!("{text}{WEATHER}")).unwrap();
    eventually("the revoked key is refused", || async {
        initialize_status(&url, revoked.raw.expose()).await == 401
    })
    .await;
    let carol_client = with_token(&url, kept.raw.expose(), true).await;
    eventually("the new tool is found by keyword", || async {
        call_text(&carol_client, "search", json!({"query": "forecast"}))
            .await
            .contains("## public.weather")
    })
    .await;
    let (status, body) = readyz(&base).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["catalog"]["generation"], 2, "{body}");
    assert_eq!(
        body["search"]["semantic"], false,
        "all of this happened while the build was held: {body}"
    );
    let found = call_text(&carol_client, "search", json!({"query": "sunny"})).await;
    assert!(
        !found.contains("## public.weather"),
        "keyword-only: {found}"
    );

    gate.open();
    eventually("semantic ranking joins", || async {
        readyz(&base).await.1["search"]["semantic"] == true
    })
    .await;
    let found = call_text(&carol_client, "search", json!({"query": "sunny"})).await;
    assert!(
        found
            .split("\n\n")
            .next()
            .unwrap()
            .contains("## public.weather"),
        "hybrid: {found}"
    );
    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
}

fn settings_tools_file(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join("tools").join("tools.yaml")
}
