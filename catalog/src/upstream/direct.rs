//! A `tools/call` posted straight to an upstream's legacy session, beside rmcp's client.
//!
//! rmcp's client hands every request through its service loop and its transport worker,
//! and every answer back the same way: measured against a bare POST on the same
//! connection, it costs a proxied call about 100 µs of CPU and 150-250 µs of latency
//! (gateway/benches/RESULTS-upstream.md). rmcp still opens and keeps the session (the
//! handshake, discovery, the standing stream, `list_changed`, a re-initialized session);
//! [`Observed`] watches the session id and headers it sends, and a call then POSTs its
//! request itself with them ([`call`]), reading the answer (JSON or an SSE stream) and
//! relaying what the upstream sends about the call meanwhile: its progress, and its
//! questions (`elicitation/create`, answered by a POST of their own). 2026-07-28
//! upstreams (no session: every request carries its own client context and headers, some
//! of them derived from the tool's schema) and stdio upstreams stay on rmcp's path.
//!
//! Cancelling is the caller's: dropping the future ends the POST, and the caller sends
//! `notifications/cancelled` for [`CallId`] through the rmcp session.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientJsonRpcMessage, ElicitRequestParams, EmptyResult,
    ErrorData, NumberOrString, ProgressNotificationParam, RequestId, ServerResult,
};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde::Deserialize;
use serde_json::{Value, json};
use sse_stream::{Sse, SseStream};

use super::MAX_RESPONSE_BYTES;
use super::call_events::{self, EventSenders};

/// What a direct call needs of the session rmcp opened: where, with which client (its
/// connections live on the thread that opened the session), and the headers rmcp sends.
pub struct LegacySession {
    client: reqwest::Client,
    url: reqwest::Url,
    /// `Mcp-Session-Id` and the negotiated `MCP-Protocol-Version`.
    headers: HeaderMap,
}

/// The session id and headers rmcp sent last; empty until the handshake ends, and again
/// once rmcp deletes the session. `None` also for a 2026-07-28 upstream (no session).
#[derive(Clone, Default)]
pub struct SessionSeen(Arc<Mutex<Option<Arc<LegacySession>>>>);

impl SessionSeen {
    /// The session to post a call in, if rmcp holds a legacy one (shared: a call takes
    /// it without copying its URL and headers).
    pub fn legacy(&self) -> Option<Arc<LegacySession>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, session: Option<Arc<LegacySession>>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = session;
    }
}

/// rmcp's HTTP client (reqwest), watched: each POST in a session records its session id
/// and custom headers in [`SessionSeen`]. Everything else is reqwest's, unchanged.
#[derive(Clone)]
pub struct Observed {
    pub client: reqwest::Client,
    pub url: reqwest::Url,
    pub seen: SessionSeen,
}

impl Observed {
    fn note(&self, session_id: &Option<Arc<str>>, custom: &HashMap<HeaderName, HeaderValue>) {
        let Some(id) = session_id else { return };
        let Ok(id) = HeaderValue::from_str(id) else {
            return self.seen.set(None);
        };
        let mut headers: HeaderMap = custom.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        headers.insert(HEADER_SESSION_ID, id);
        self.seen.set(Some(Arc::new(LegacySession {
            client: self.client.clone(),
            url: self.url.clone(),
            headers,
        })));
    }
}

type PostResult = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;
type StreamResult = Result<
    futures::stream::BoxStream<'static, Result<Sse, SseError>>,
    StreamableHttpError<reqwest::Error>,
>;

impl StreamableHttpClient for Observed {
    type Error = reqwest::Error;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        custom: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = PostResult> + Send + '_ {
        self.note(&session_id, &custom);
        self.client
            .post_message(uri, message, session_id, auth, custom)
    }

    fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        custom: HashMap<HeaderName, HeaderValue>,
        max: usize,
    ) -> impl Future<Output = PostResult> + Send + '_ {
        self.note(&session_id, &custom);
        self.client
            .post_message_with_max_sse_event_size(uri, message, session_id, auth, custom, max)
    }

    fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth: Option<String>,
        custom: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> impl Future<Output = PostResult> + Send + '_ {
        self.note(&session_id, &custom);
        self.client
            .post_message_with_response_limits(uri, message, session_id, auth, custom, limits)
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth: Option<String>,
        custom: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<(), StreamableHttpError<reqwest::Error>>> + Send + '_ {
        self.seen.set(None);
        self.client.delete_session(uri, session_id, auth, custom)
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth: Option<String>,
        custom: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = StreamResult> + Send + '_ {
        self.client
            .get_stream(uri, session_id, last_event_id, auth, custom)
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth: Option<String>,
        custom: HashMap<HeaderName, HeaderValue>,
        max: usize,
    ) -> impl Future<Output = StreamResult> + Send + '_ {
        self.client.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth,
            custom,
            max,
        )
    }
}

/// The id of a direct call: a string (`mcc-<n>`), so it never meets the numbers rmcp
/// gives its own requests in the same session. Also the call's progress token.
pub type CallId = RequestId;

/// A new [`CallId`], unique in this process.
pub fn next_id() -> CallId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NumberOrString::String(format!("mcc-{}", NEXT.fetch_add(1, Ordering::Relaxed)).into())
}

/// Why a direct call has no answer: the upstream's JSON-RPC error, or the exchange
/// failed (the session is then suspect).
#[derive(Debug, thiserror::Error)]
pub enum DirectError {
    #[error("{}", .0.message)]
    Mcp(ErrorData),
    #[error("HTTP: {0}")]
    Http(#[from] reqwest::Error),
    #[error("the upstream answered HTTP {0}")]
    Status(reqwest::StatusCode),
    #[error("the upstream no longer knows the session (HTTP 404)")]
    SessionGone,
    #[error("an answer or event larger than {MAX_RESPONSE_BYTES} bytes")]
    TooLarge,
    #[error("its answer cannot be read: {0}")]
    Malformed(String),
    #[error("it closed the response before answering")]
    Ended,
}

/// One JSON-RPC message from the upstream, as far as a call needs it.
#[derive(Deserialize)]
struct Incoming {
    id: Option<RequestId>,
    method: Option<String>,
    #[serde(default)]
    params: Value,
    result: Option<Value>,
    error: Option<ErrorData>,
}

/// Posts `tools/call` with `params` as request `id` in `session` (its progress token
/// too), and waits for its result, handing the upstream's progress and questions about
/// it to `events`. [`DirectError::SessionGone`]: nothing was run; the call may be sent
/// again in a new session.
pub async fn call(
    session: &LegacySession,
    id: &CallId,
    params: &CallToolRequestParams,
    events: EventSenders,
) -> Result<ServerResult, DirectError> {
    let mut params =
        serde_json::to_value(params).map_err(|e| DirectError::Malformed(e.to_string()))?;
    // `_meta` may already hold the caller's session context (as the upstream's entry
    // declares it); the progress token joins it.
    if let Some(params) = params.as_object_mut() {
        let meta = params.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("progressToken".into(), json!(id));
        }
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let response = post(session, &body).await?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND {
        return Err(DirectError::SessionGone);
    }
    let is_sse = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_sse {
        let text = bounded_body(response).await?;
        return match parse(&text) {
            Ok(message) if message.answers(id) => message.into_result(),
            _ if !status.is_success() => Err(DirectError::Status(status)),
            Ok(_) => Err(DirectError::Malformed("no answer to the call".into())),
            Err(e) => Err(e),
        };
    }
    if !status.is_success() {
        return Err(DirectError::Status(status));
    }
    // The size of the event being read: a stream may run long, an event may not.
    let pending = Arc::new(AtomicUsize::new(0));
    let counted = pending.clone();
    let bytes = response.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        if counted.fetch_add(chunk.len(), Ordering::Relaxed) + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(std::io::Error::other(DirectError::TooLarge));
        }
        Ok(chunk)
    });
    let mut stream = SseStream::from_bytes_stream(bytes);
    while let Some(event) = stream.next().await {
        let event = event.map_err(|e| match pending.load(Ordering::Relaxed) {
            n if n > MAX_RESPONSE_BYTES => DirectError::TooLarge,
            _ => DirectError::Malformed(e.to_string()),
        })?;
        pending.store(0, Ordering::Relaxed);
        // A priming event (an id for resuming, no data) carries no message.
        let Some(data) = event.data.filter(|d| !d.trim().is_empty()) else {
            continue;
        };
        let message = parse(&data)?;
        if message.answers(id) {
            return message.into_result();
        }
        on_message(session, id, message, &events).await;
    }
    Err(DirectError::Ended)
}

impl Incoming {
    /// Whether this is the answer to request `id`.
    fn answers(&self, id: &CallId) -> bool {
        self.method.is_none() && self.id.as_ref() == Some(id)
    }

    /// The call's result in an answer.
    fn into_result(self) -> Result<ServerResult, DirectError> {
        if let Some(error) = self.error {
            return Err(DirectError::Mcp(error));
        }
        let result = self.result.unwrap_or(Value::Null);
        if result.as_object().is_some_and(|o| o.is_empty()) {
            return Ok(ServerResult::EmptyResult(EmptyResult {}));
        }
        serde_json::from_value::<CallToolResult>(result)
            .map(ServerResult::CallToolResult)
            .map_err(|e| DirectError::Malformed(format!("not a tools/call result: {e}")))
    }
}

/// What the upstream sends about the call before its answer: progress goes to the
/// caller, a question is relayed and its answer posted back, `ping` and `roots/list`
/// are answered as rmcp answers them, other requests refused (`sampling/createMessage`:
/// the gateway declares no sampling), other notifications dropped.
async fn on_message(
    session: &LegacySession,
    id: &CallId,
    message: Incoming,
    events: &EventSenders,
) {
    let Some(method) = message.method else { return };
    let Some(request) = message.id else {
        if method == "notifications/progress"
            && let Ok(progress) =
                serde_json::from_value::<ProgressNotificationParam>(message.params)
            && progress.progress_token.0 == *id
        {
            events.progress.send_replace(Some(progress));
        }
        return;
    };
    let mut reply = match method.as_str() {
        "elicitation/create" => match serde_json::from_value::<ElicitRequestParams>(message.params)
        {
            Ok(question) => json!({"result": call_events::ask(&events.questions, question).await}),
            Err(e) => json!({"error": ErrorData::invalid_params(e.to_string(), None)}),
        },
        // As rmcp's client answers them: alive, and no roots.
        "ping" => json!({"result": {}}),
        "roots/list" => json!({"result": {"roots": []}}),
        _ => json!({"error": ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND, format!("{method} is not supported"), None)}),
    };
    reply["jsonrpc"] = json!("2.0");
    reply["id"] = json!(request);
    // The upstream waits for this answer, not the other way round: a failed post ends
    // nothing here (the upstream times its question out).
    if let Ok(response) = post(session, &reply).await {
        let _ = response.bytes().await;
    }
}

async fn post(session: &LegacySession, body: &Value) -> Result<reqwest::Response, DirectError> {
    Ok(session
        .client
        .post(session.url.clone())
        .headers(session.headers.clone())
        .header(ACCEPT, "application/json, text/event-stream")
        .header(CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(body).map_err(|e| DirectError::Malformed(e.to_string()))?)
        .send()
        .await?)
}

/// A JSON body, refused past [`MAX_RESPONSE_BYTES`] without reading further.
async fn bounded_body(mut response: reqwest::Response) -> Result<Vec<u8>, DirectError> {
    if response
        .content_length()
        .is_some_and(|n| n > MAX_RESPONSE_BYTES as u64)
    {
        return Err(DirectError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(DirectError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn parse(text: impl AsRef<[u8]>) -> Result<Incoming, DirectError> {
    serde_json::from_slice(text.as_ref())
        .map_err(|e| DirectError::Malformed(format!("not a JSON-RPC message: {e}")))
}
