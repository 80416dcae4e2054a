//! An SSE answer to a POST goes out in one write when it is quick: a tower layer on `/mcp`
//! that holds the response head until the stream's first frames are ready.
//!
//! rmcp answers a legacy-session request (`Mcp-Session-Id`) with an SSE stream whose head
//! is ready before the tool runs; the priming event, the answer and the end of the stream
//! follow as separate body frames, which hyper writes as separate TCP segments. A client
//! whose socket has Nagle's algorithm on and delays its ACKs can then wait on each segment
//! (tens of milliseconds), and even a `TCP_NODELAY` client pays a segment per frame. Here
//! the frames that arrive within [`WAIT`] (and [`MAX_BYTES`]) are collected first: a
//! stream that ends in that time is sent as one body with a `Content-Length` (one write:
//! head and body), and a longer one sends what it has collected with the head and streams
//! the rest as before. GET streams (server-to-client notifications) are never held.
//!
//! This layer does not decide what is in the stream (rmcp does) nor count streams
//! ([`super::caller_caps`] does).

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::Response;
use futures::{FutureExt, StreamExt};
use http_body_util::{BodyExt, BodyStream, StreamBody};
use hyper::body::Frame;

/// The longest a response head is held for the stream's first frames: far above the
/// time of a quick call, short enough that a server-to-client question (elicitation)
/// or progress notification of a long call is not noticeably delayed.
pub const WAIT: Duration = Duration::from_millis(100);

/// Collected frames above this size are sent at once (a large answer gains nothing from
/// being held in one piece).
pub const MAX_BYTES: usize = 256 * 1024;

/// The layer (`axum::middleware::from_fn(sse_coalesce::coalesce)`).
pub async fn coalesce(request: Request, next: Next) -> Response {
    let post = request.method() == Method::POST;
    let response = next.run(request).await;
    if !post || !is_event_stream(&response) {
        return response;
    }
    let (mut parts, mut body) = response.into_parts();
    let mut frames: Vec<Frame<Bytes>> = Vec::new();
    let mut size = 0;
    let deadline = tokio::time::Instant::now() + WAIT;
    let ended = loop {
        if size >= MAX_BYTES {
            break false;
        }
        // Frames already there are taken without a timer; only then is it armed.
        let next = match body.frame().now_or_never() {
            Some(next) => next,
            None => match tokio::time::timeout_at(deadline, body.frame()).await {
                Ok(next) => next,
                Err(_) => break false,
            },
        };
        match next {
            None => break true,
            Some(Ok(frame)) => {
                size += frame.data_ref().map_or(0, Bytes::len);
                frames.push(frame);
            }
            Some(Err(e)) => {
                // Send what came before it, then the error (the stream ends with it).
                let stream = futures::stream::iter(frames.into_iter().map(Ok))
                    .chain(futures::stream::once(async move { Err(e) }));
                return Response::from_parts(parts, Body::new(StreamBody::new(stream)));
            }
        }
    };
    if ended && frames.iter().all(Frame::is_data) {
        let mut whole = Vec::with_capacity(size);
        for frame in frames {
            if let Ok(data) = frame.into_data() {
                whole.extend_from_slice(&data);
            }
        }
        parts.headers.remove(header::TRANSFER_ENCODING);
        return Response::from_parts(parts, Body::from(whole));
    }
    let stream = futures::stream::iter(frames.into_iter().map(Ok)).chain(BodyStream::new(body));
    Response::from_parts(parts, Body::new(StreamBody::new(stream)))
}

fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};

    use super::*;
    use hyper::body::Body as _;
    use tower::ServiceExt;

    type Sent = Result<Frame<Bytes>, std::io::Error>;

    /// `/mcp` behind the layer, answering `method` with an SSE response of `body` once.
    async fn call(method: Method, body: Body) -> Response {
        let body = Arc::new(Mutex::new(Some(body)));
        let inner = tower::service_fn(move |_: Request| {
            let body = body.lock().unwrap().take().unwrap_or_default();
            async move {
                Ok::<_, Infallible>(
                    Response::builder()
                        .header(header::CONTENT_TYPE, "text/event-stream")
                        .body(body)
                        .unwrap(),
                )
            }
        });
        let request = Request::builder()
            .method(method)
            .uri("/mcp")
            .body(Body::empty())
            .unwrap();
        tower::Layer::layer(&axum::middleware::from_fn(coalesce), inner)
            .oneshot(request)
            .await
            .unwrap()
    }

    /// A body whose frames are sent through the returned channel.
    fn channel_body() -> (tokio::sync::mpsc::Sender<Sent>, Body) {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Sent>(8);
        let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
        (tx, Body::new(StreamBody::new(stream)))
    }

    fn data(s: &'static str) -> Sent {
        Ok(Frame::data(Bytes::from_static(s.as_bytes())))
    }

    #[tokio::test]
    async fn a_quick_stream_becomes_one_body_with_a_length() {
        let (tx, body) = channel_body();
        tx.send(data("id: 0\ndata:\n\n")).await.unwrap();
        tx.send(data("data: {\"id\":1}\n\n")).await.unwrap();
        drop(tx);
        let body = call(Method::POST, body).await.into_body();
        let expected = "id: 0\ndata:\n\ndata: {\"id\":1}\n\n";
        assert_eq!(
            body.size_hint().exact(),
            Some(expected.len() as u64),
            "a whole body of known length: hyper writes it with the head"
        );
        assert_eq!(body.collect().await.unwrap().to_bytes(), expected);
    }

    #[tokio::test]
    async fn a_stream_still_open_sends_its_first_frames_then_the_rest() {
        let (tx, body) = channel_body();
        tx.send(data("data:\n\n")).await.unwrap();
        // Still open after the wait: the head goes with the priming frame.
        let mut body = call(Method::POST, body).await.into_body();
        assert_eq!(body.size_hint().exact(), None);
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first, "data:\n\n");
        tx.send(data("data: late\n\n")).await.unwrap();
        drop(tx);
        assert_eq!(body.collect().await.unwrap().to_bytes(), "data: late\n\n");
    }

    #[tokio::test]
    async fn get_streams_are_not_held() {
        let (tx, body) = channel_body();
        tx.send(data("data:\n\n")).await.unwrap();
        drop(tx);
        let body = call(Method::GET, body).await.into_body();
        assert_eq!(body.size_hint().exact(), None, "passed through as a stream");
    }
}
