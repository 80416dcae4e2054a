//! Test support for code that talks to the Kubernetes API (the operator's controllers, the
//! gateway's Kubernetes mode): [`ApiServer`] plays the API server behind a kube
//! [`Client`] over `tower_test::mock`, asserting each request (method and path; query,
//! content type and body are returned for the test to check) and answering it.
//! Behind the `kube-mock` feature, which only dev-dependencies enable.

use std::time::Duration;

use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use serde_json::Value;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

/// How long an `expect` waits for the request before the test fails.
const WAIT: Duration = Duration::from_secs(5);

/// The mocked API server.
pub struct ApiServer(pub Handle);

/// One request as the server saw it.
#[derive(Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: String,
    /// The JSON body, `Null` when empty.
    pub body: Value,
}

impl ApiServer {
    /// A client talking to a new mocked server.
    pub fn new() -> (Client, Self) {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        (Client::new(service, "default"), Self(handle))
    }

    /// Takes the next request, asserts method and path, and answers `status` with `reply`.
    pub async fn expect(&mut self, method: &str, path: &str, status: u16, reply: Value) -> Seen {
        self.expect_with(method, path, move |_| (status, reply))
            .await
    }

    /// Like [`Self::expect`], answering the body as the API server would store it (echo).
    pub async fn expect_echo(&mut self, method: &str, path: &str) -> Seen {
        self.expect_with(method, path, |seen| (200, seen.body.clone()))
            .await
    }

    /// Takes the next request, asserts method and path, and answers what `reply` computes.
    pub async fn expect_with(
        &mut self,
        method: &str,
        path: &str,
        reply: impl FnOnce(&Seen) -> (u16, Value),
    ) -> Seen {
        self.respond(method, Some(path), |seen| {
            let (status, body) = reply(seen);
            (status, serde_json::to_vec(&body).expect("a JSON reply"))
        })
        .await
    }

    /// Like [`Self::expect_with`] for a request of any path (the test checks `Seen::path`):
    /// a sequence whose names the code under test chooses.
    pub async fn expect_any_path(
        &mut self,
        method: &str,
        reply: impl FnOnce(&Seen) -> (u16, Value),
    ) -> Seen {
        self.respond(method, None, |seen| {
            let (status, body) = reply(seen);
            (status, serde_json::to_vec(&body).expect("a JSON reply"))
        })
        .await
    }

    /// Like [`Self::expect`] with a raw body (a watch answers newline-delimited events).
    pub async fn expect_raw(
        &mut self,
        method: &str,
        path: &str,
        status: u16,
        body: Vec<u8>,
    ) -> Seen {
        self.respond(method, Some(path), move |_| (status, body))
            .await
    }

    /// Asserts that no request arrives within a short while.
    pub async fn expect_nothing(&mut self) {
        let next = tokio::time::timeout(Duration::from_millis(200), self.0.next_request()).await;
        if let Ok(Some((req, _))) = next {
            panic!("unexpected request {} {}", req.method(), req.uri());
        }
    }

    async fn respond(
        &mut self,
        method: &str,
        path: Option<&str>,
        reply: impl FnOnce(&Seen) -> (u16, Vec<u8>),
    ) -> Seen {
        let (request, send) = tokio::time::timeout(WAIT, self.0.next_request())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {method} {path:?}"))
            .unwrap_or_else(|| panic!("the client closed before {method} {path:?}"));
        let content_type = request
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let seen = Seen {
            method: request.method().to_string(),
            path: request.uri().path().to_string(),
            query: request.uri().query().unwrap_or_default().to_string(),
            content_type,
            body: {
                let bytes = request
                    .into_body()
                    .collect_bytes()
                    .await
                    .expect("a request body");
                if bytes.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_slice(&bytes).expect("a JSON request body")
                }
            },
        };
        assert_eq!(
            (seen.method.as_str(), seen.path.as_str()),
            (method, path.unwrap_or(&seen.path)),
            "{seen:#?}"
        );
        let (status, body) = reply(&seen);
        send.send_response(
            Response::builder()
                .status(status)
                .body(Body::from(body))
                .expect("a response"),
        );
        seen
    }
}
