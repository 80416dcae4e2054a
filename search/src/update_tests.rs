//! [`SearchService::update`] with an embedder held at a gate: the keyword index and the
//! catalog never wait for tool embeddings, a search never returns a tool the request's
//! snapshot no longer has, and semantic ranking joins when the build completes. No
//! timing: the embedder is held and released explicitly, and waits are on the service's
//! own swap notifications (a long deadline only turns a hang into a failure).

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use super::tests::{catalog, tool};
use super::*;
use mcc_catalog::snapshot::Catalog;

/// Holds tool-text embedding runs until opened (queries pass: they are not signatures).
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    changed: Condvar,
}

impl Gate {
    fn set(&self, open: bool) {
        *self.open.lock().unwrap() = open;
        self.changed.notify_all();
    }

    fn pass(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.changed.wait(open).unwrap();
        }
    }
}

/// Two dimensions: texts about forecasts or sun point one way, everything else the
/// other, so "sunny" finds the weather tool by meaning only (it shares no word with it).
fn toy_vector(text: &str) -> Vec<f32> {
    if text.contains("forecast") || text.contains("sunny") {
        vec![1.0, 0.0]
    } else {
        vec![0.0, 1.0]
    }
}

fn gated_service(gate: &Arc<Gate>) -> SearchService {
    let gate = gate.clone();
    let embedder = Embedder::from_fn("toy", move |texts| {
        // Tool texts come all at once (a catalog's descriptions and cards), a query alone.
        if texts.len() > 1 {
            gate.pass();
        }
        Ok(texts.iter().map(|t| toy_vector(t)).collect())
    });
    SearchService::with_embedder(SearchSettings::default(), Some(embedder)).unwrap()
}

/// `service.update(catalog)` on another thread: a regression that makes it wait for the
/// held embedder fails here instead of hanging the test run.
fn update_returns(service: &SearchService, catalog: &Arc<Catalog>) {
    let (done, returned) = mpsc::channel();
    let (service, catalog) = (service.clone(), catalog.clone());
    std::thread::spawn(move || done.send(service.update(catalog).map_err(|e| e.to_string())));
    returned
        .recv_timeout(Duration::from_secs(60))
        .expect("update returned while tool embeddings were held")
        .unwrap();
}

async fn wait_for(service: &SearchService, what: impl Fn(&SearchStatus) -> bool) {
    let mut swaps = service.watch();
    let waited = tokio::time::timeout(Duration::from_secs(60), swaps.wait_for(|s| what(s))).await;
    assert!(waited.is_ok(), "never reached: {:?}", service.status());
}

async fn text(service: &SearchService, catalog: &Arc<Catalog>, query: &str) -> String {
    service
        .search_text(Some(catalog.clone()), query, None, None)
        .await
        .unwrap()
}

fn first_block(text: &str) -> &str {
    text.split("\n\n").next().unwrap_or_default()
}

#[tokio::test]
async fn keyword_search_serves_at_once_and_semantic_ranking_joins_when_built() {
    let gate = Arc::new(Gate::default());
    let service = gated_service(&gate);
    let snapshot = Arc::new(Catalog::new(catalog(), vec![]));
    update_returns(&service, &snapshot);

    let status = service.status();
    assert!(status.generation > 0 && status.embedder, "{status:?}");
    assert!(!status.semantic, "{status:?}");
    assert!(status.building, "{status:?}");
    let found = text(&service, &snapshot, "weather").await;
    assert!(found.contains("## public.weather_forecast"), "{found}");
    assert_eq!(
        text(&service, &snapshot, "sunny").await,
        NO_MATCH,
        "keyword-only"
    );

    gate.set(true);
    wait_for(&service, |s| s.semantic).await;
    let found = text(&service, &snapshot, "sunny").await;
    assert!(
        first_block(&found).contains("## public.weather_forecast"),
        "semantic ranking joined: {found}"
    );
}

#[tokio::test]
async fn an_index_of_an_earlier_catalog_never_returns_a_tool_gone_from_the_request_snapshot() {
    let gate = Arc::new(Gate::default());
    gate.set(true);
    let service = gated_service(&gate);
    let before = Arc::new(Catalog::new(catalog(), vec![]));
    update_returns(&service, &before);
    wait_for(&service, |s| s.semantic).await;
    let first = service.status().generation;

    // The next build is held: the hybrid index of `before` keeps serving.
    gate.set(false);
    let mut tools: Vec<Tool> = catalog()
        .into_iter()
        .filter(|t| t.name != "weather_forecast")
        .collect();
    tools.push(tool(
        &["public"],
        "sunny_days",
        "Days of sun in a city last year.",
    ));
    let after = Arc::new(Catalog::new(tools, vec![]));
    update_returns(&service, &after);
    assert_eq!(service.status().generation, first, "{:?}", service.status());

    let stale = text(&service, &before, "weather forecast").await;
    assert!(stale.contains("public.weather_forecast"), "{stale}");
    let now = text(&service, &after, "weather forecast").await;
    assert!(!now.contains("weather_forecast"), "a removed tool: {now}");
    let now = text(&service, &after, "sunny").await;
    assert!(!now.contains("weather_forecast"), "a removed tool: {now}");

    gate.set(true);
    wait_for(&service, |s| s.generation > first && s.semantic).await;
    let now = text(&service, &after, "sunny").await;
    assert!(
        first_block(&now).contains("## public.sunny_days"),
        "the new catalog's hybrid index: {now}"
    );
}

#[tokio::test]
async fn a_held_build_of_an_older_catalog_never_replaces_the_newer_keyword_index() {
    let gate = Arc::new(Gate::default());
    let service = gated_service(&gate);
    let older = Arc::new(Catalog::new(catalog(), vec![]));
    update_returns(&service, &older);
    let newer = Arc::new(Catalog::new(catalog()[..2].to_vec(), vec![]));
    update_returns(&service, &newer);
    let keyword = service.status();
    assert_eq!((keyword.tools, keyword.semantic), (2, false), "{keyword:?}");

    gate.set(true);
    wait_for(&service, |s| s.semantic).await;
    let status = service.status();
    assert_eq!(
        (status.generation, status.tools),
        (keyword.generation, 2),
        "{status:?}"
    );
    assert_eq!(service.current().len(), 2);
}
