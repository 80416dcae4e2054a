//! Test helper: [`ApiServer`] plays the Kubernetes API server over `tower_test::mock`,
//! asserting each request the gateway makes (method, path, query, body) and answering it.

use std::time::Duration;

use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use serde_json::Value;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

/// The mocked API server.
pub struct ApiServer(Handle);

/// One request as the server saw it.
#[derive(Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub body: Value,
}

impl ApiServer {
    /// A client talking to a new mocked server.
    pub fn new() -> (Client, Self) {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        (Client::new(service, "default"), Self(handle))
    }

    /// Takes the next request, asserts method and path, answers `status` with `reply`.
    pub async fn expect(&mut self, method: &str, path: &str, status: u16, reply: Value) -> Seen {
        let body = serde_json::to_vec(&reply).unwrap();
        self.expect_raw(method, path, status, body).await
    }

    /// Like [`Self::expect`] with a raw body (a watch answers newline-delimited events).
    pub async fn expect_raw(
        &mut self,
        method: &str,
        path: &str,
        status: u16,
        body: Vec<u8>,
    ) -> Seen {
        let (request, send) = tokio::time::timeout(Duration::from_secs(5), self.0.next_request())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {method} {path}"))
            .unwrap_or_else(|| panic!("the client closed before {method} {path}"));
        let seen = Seen {
            method: request.method().to_string(),
            path: request.uri().path().to_string(),
            query: request.uri().query().unwrap_or_default().to_string(),
            body: {
                let bytes = request.into_body().collect_bytes().await.unwrap();
                if bytes.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_slice(&bytes).unwrap()
                }
            },
        };
        assert_eq!(
            (seen.method.as_str(), seen.path.as_str()),
            (method, path),
            "{seen:#?}"
        );
        send.send_response(
            Response::builder()
                .status(status)
                .body(Body::from(body))
                .unwrap(),
        );
        seen
    }

    /// Asserts that no request arrives within a short while.
    pub async fn expect_nothing(&mut self) {
        let next = tokio::time::timeout(Duration::from_millis(200), self.0.next_request()).await;
        if let Ok(Some((req, _))) = next {
            panic!("unexpected request {} {}", req.method(), req.uri());
        }
    }
}
