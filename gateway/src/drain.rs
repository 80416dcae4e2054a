//! How a stopping gateway lets go of its clients (SIGTERM in a rolling update, after the
//! chart's `preStop` delay has taken the Pod out of the Service): it stops accepting, and
//! for [`WINDOW`] still answers what arrives on the connections it has, each answer
//! carrying `Connection: close` so the client opens its next connection elsewhere
//! instead of meeting one closed under its request; it waits for every running call
//! (a request other than `GET`, until its response body has ended: a legacy MCP call's
//! SSE stream ends with its result). Only then are the MCP sessions ended (which closes
//! their `GET /mcp` streams) and the last connections closed. The kubelet's SIGKILL at
//! the end of the grace period bounds it all.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use hyper::body::{Body as HttpBody, Frame, SizeHint};

/// How long open connections are still answered after the stop.
pub const WINDOW: Duration = Duration::from_secs(2);

/// The requests in progress and whether the gateway is stopping. Cheap to clone.
#[derive(Clone, Default)]
pub struct Drain(Arc<Inner>);

#[derive(Default)]
struct Inner {
    draining: AtomicBool,
    in_flight: AtomicUsize,
}

impl Drain {
    /// From now on every answer closes its connection.
    pub fn start(&self) {
        self.0.draining.store(true, Ordering::SeqCst);
    }

    pub fn in_flight(&self) -> usize {
        self.0.in_flight.load(Ordering::SeqCst)
    }

    /// Resolves once [`WINDOW`] has passed and no counted request is in progress.
    pub async fn settled(&self) {
        tokio::time::sleep(WINDOW).await;
        while self.in_flight() > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Middleware: counts each request but `GET`s (an SSE stream would hold the drain open)
/// until its response body has ended or been dropped, and marks answers given while
/// draining `Connection: close`.
pub async fn track(State(drain): State<Drain>, request: Request, next: Next) -> Response {
    let counted = request.method() != Method::GET;
    let guard = counted.then(|| {
        drain.0.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(drain.0.clone())
    });
    let mut response = next.run(request).await;
    if drain.0.draining.load(Ordering::SeqCst) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    match guard {
        Some(guard) => response.map(|body| {
            Body::new(Counted {
                body,
                _guard: guard,
            })
        }),
        None => response,
    }
}

/// One request in progress while it lives.
struct InFlight(Arc<Inner>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that keeps its request counted until it ends or is dropped; frames,
/// size and end pass through unchanged (a `Content-Length` stays one).
struct Counted {
    body: Body,
    _guard: InFlight,
}

impl HttpBody for Counted {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
