//! How `http::serve` holds connections: a keep-alive connection is served by one thread
//! of its pool to its end (a request, what it spawns and the next request stay there),
//! connections open at once spread over the pool, and shutdown lets a request in flight
//! finish while refusing new connections.

use std::collections::HashSet;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use mcc_gateway::http::{ConnectionLimits, serve};
use tokio_util::sync::CancellationToken;

fn router() -> Router {
    Router::new()
        .route(
            "/thread",
            get(|| async { format!("{:?}", std::thread::current().id()) }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                "done"
            }),
        )
}

async fn start() -> (
    String,
    CancellationToken,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let limits = ConnectionLimits {
        header_read_timeout: Duration::from_secs(5),
        body_read_timeout: Duration::from_secs(5),
        loopback_peers_only: false,
    };
    let shutdown = CancellationToken::new();
    let served = tokio::spawn(serve(listener, router(), limits, shutdown.clone()));
    (base, shutdown, served)
}

/// A client holding at most one connection, so its requests share it.
fn one_connection() -> reqwest::Client {
    mcc_gateway::tls::install_crypto_provider();
    reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap()
}

async fn text(client: &reqwest::Client, url: &str) -> String {
    let response = client.get(url).send().await.expect("an answer");
    assert_eq!(response.status(), 200, "{url}");
    response.text().await.unwrap()
}

#[tokio::test]
async fn a_connection_stays_on_one_thread_and_connections_spread_over_the_pool() {
    let (base, _shutdown, _served) = start().await;
    let url = format!("{base}/thread");
    let first = one_connection();
    let mut threads = HashSet::new();
    for _ in 0..5 {
        threads.insert(text(&first, &url).await);
    }
    assert_eq!(threads.len(), 1, "one connection, one thread: {threads:?}");
    let here = format!("{:?}", std::thread::current().id());
    assert!(
        !threads.contains(&here),
        "served on the pool, not on the accepting runtime's thread"
    );

    // `first` keeps its connection open, so the least busy thread is another one.
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        let second = one_connection();
        let other = text(&second, &url).await;
        assert!(
            !threads.contains(&other),
            "a second open connection is served by another thread ({other} and {threads:?})"
        );
    }
}

#[tokio::test]
async fn shutdown_lets_a_request_in_flight_finish_and_refuses_new_connections() {
    let (base, shutdown, served) = start().await;
    let client = one_connection();
    let slow = tokio::spawn({
        let client = client.clone();
        let url = format!("{base}/slow");
        async move { client.get(url).send().await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    shutdown.cancel();

    let response = slow
        .await
        .unwrap()
        .expect("the request in flight is answered");
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "done");
    tokio::time::timeout(Duration::from_secs(5), served)
        .await
        .expect("serve returns once its connections are done")
        .unwrap()
        .unwrap();
    let late = one_connection().get(format!("{base}/thread")).send().await;
    assert!(late.is_err(), "no new connection after shutdown: {late:?}");
}
