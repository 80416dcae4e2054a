//! The OpenAI-compatible embeddings client over real HTTP: a local axum server speaks the
//! `/v1/embeddings` protocol, backed by the real model (so the vectors can be compared
//! with in-process ones), returning items out of order and unnormalized as servers may.
//! Skips, saying why, when the model directory is absent.

use crate::eval;

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use mcc_search::{Embedder, SearchService, SearchSettings};
use serde_json::{Value, json};

#[derive(Clone)]
struct Server {
    model: Arc<Embedder>,
    auth: Arc<Mutex<Vec<String>>>,
}

async fn embeddings(
    State(s): State<Server>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Result<Json<Value>, (StatusCode, String)> {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    s.auth.lock().unwrap().push(auth.to_string());
    if body["model"] == "broken" {
        return Err((StatusCode::INTERNAL_SERVER_ERROR, "model exploded".into()));
    }
    let texts: Vec<String> = serde_json::from_value(body["input"].clone()).unwrap();
    let model = s.model.clone();
    let vectors = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        model.embed(&refs).unwrap()
    })
    .await
    .unwrap();
    // Reversed order with explicit indexes, scaled by 3 (not unit length).
    let data: Vec<Value> = vectors
        .iter()
        .enumerate()
        .rev()
        .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v.iter().map(|x| x * 3.0).collect::<Vec<_>>()}))
        .collect();
    Ok(Json(
        json!({"object": "list", "data": data, "model": body["model"]}),
    ))
}

/// Starts the server on a background runtime; returns its API base.
fn serve(server: Server) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = axum::Router::new()
                .route("/v1/embeddings", post(embeddings))
                .with_state(server);
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{addr}/v1")
}

#[test]
fn remote_endpoint_matches_the_local_model() {
    let dir = match eval::model_dir() {
        Ok(d) => d,
        Err(why) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    let local = Arc::new(Embedder::local(&dir).unwrap());
    let auth = Arc::new(Mutex::new(Vec::new()));
    let base = serve(Server {
        model: local.clone(),
        auth: auth.clone(),
    });

    let remote =
        Embedder::remote(&format!("{base}/"), "all-MiniLM-L6-v2", Some("tok".into())).unwrap();
    let texts = ["list kubernetes pods", "send an email", "convert currency"];
    let (r, l) = (remote.embed(&texts).unwrap(), local.embed(&texts).unwrap());
    for (a, b) in r.iter().zip(&l) {
        let cos: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        assert!(cos > 0.9999, "remote vector differs from local: cos {cos}");
    }
    assert_eq!(auth.lock().unwrap().as_slice(), ["Bearer tok"]);

    let broken = Embedder::remote(&base, "broken", None).unwrap();
    let err = broken.embed(&["x"]).unwrap_err().to_string();
    assert!(
        err.contains("HTTP 500")
            && err.contains("model exploded")
            && err.contains("/v1/embeddings"),
        "{err}"
    );
    let err = Embedder::remote("tei:8080", "m", None)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("search.embeddings_url"), "{err}");

    // Hybrid search through the endpoint.
    let service = SearchService::new(SearchSettings {
        embeddings_url: Some(base),
        ..SearchSettings::default()
    })
    .unwrap();
    service.rebuild_blocking(&eval::catalog()).unwrap();
    assert!(service.current().has_embeddings());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let text = rt
        .block_on(service.search_text(
            None,
            "how many euros is 100 dollars",
            Some(&eval::admin()),
            None,
        ))
        .unwrap();
    assert!(
        text.contains("## finance.business.currency_convert"),
        "{text}"
    );
}
