//! Test fixtures: a real gateway on a free port (real HTTP, real Redis), tool and users
//! files in a temporary directory, rmcp clients of both protocol generations, and raw
//! JSON-RPC over HTTP for protocol-level checks.
#![allow(dead_code)]

pub mod replica;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use mcc_gateway::config::{self, AuthSettings, SessionBackend, Settings};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, Implementation, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{
    ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData as McpError, ServiceExt,
};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

pub fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// Tool files used across the tests: public, ops and admin tools, with params.
pub const TOOLS: &str = r#"
tools:
  - name: echo
    groups: [public]
    description: Echo a message back.
    params:
      - name: message
        type: str
        required: true
        description: The text to echo.
    exec: printf '%s' {{ message | quote }}
  - name: greet
    groups: [public]
    description: Greet someone a number of times.
    params:
      - name: name
        type: str
        required: true
      - name: times
        type: int
        required: true
    exec: for i in $(seq {{ times }}); do echo "hi {{ name }}"; done
  - name: restart
    groups: [ops]
    description: Restart a service by name.
    params:
      - name: service
        type: str
        required: true
    exec: echo restarting {{ service | quote }}
  - name: shell
    groups: [admin]
    description: Run a shell command and return its output.
    params:
      - name: command
        type: str
        required: true
    exec: "{{ command }}"
  - name: ctx
    groups: [public]
    description: Print the session context a shell tool receives.
    exec: 'echo "$MCC_CTX_USER $MCC_CTX_TARGET $MCC_CTX_BUDGET"'
"#;

/// Users: bob (public, ops) is the first public user, so dev-public acts as bob;
/// alice (admin) is the first admin user, so dev-admin acts as alice.
pub const USERS: &str = r#"
users:
  - username: alice
    email: alice@example.com
    groups: [admin, osint]
  - username: bob
    groups: [public, ops]
  - username: carol
    groups: [public]
    tools: [admin.shell]
"#;

/// A running gateway and what it was built from.
pub struct Server {
    pub url: String,
    pub base: String,
    pub dir: tempfile::TempDir,
    pub shutdown: CancellationToken,
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
    pub gateway_shared: Arc<mcc_gateway::mcp::Shared>,
}

impl Server {
    pub fn tools_file(&self) -> PathBuf {
        self.dir.path().join("tools").join("tools.yaml")
    }

    /// Stops the server (in-flight requests finish) and waits for it.
    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), self.task).await;
    }
}

/// Settings for a test gateway over files in `dir`.
pub fn settings(dir: &Path, auth: &str, redis: Option<&str>) -> Settings {
    let tools_dir = dir.join("tools");
    std::fs::create_dir_all(&tools_dir).unwrap();
    if !tools_dir.join("tools.yaml").exists() {
        std::fs::write(tools_dir.join("tools.yaml"), TOOLS).unwrap();
    }
    let users = dir.join("users.yaml");
    if !users.exists() {
        std::fs::write(&users, USERS).unwrap();
    }
    let mut s = Settings {
        tools: vec![tools_dir.display().to_string()],
        users_file: Some(users),
        auth: AuthSettings {
            backend: auth.to_string(),
            ..AuthSettings::default()
        },
        reload_interval_ms: 100,
        ..Settings::default()
    };
    s.server.port = 0;
    // Audit events of in-process test gateways would all land on the test's stdout.
    s.audit.stdout = false;
    if let Some(url) = redis {
        s.session.backend = SessionBackend::Redis;
        s.session.redis_url = Some(url.to_string());
    }
    s
}

/// Starts a gateway with `settings` on a free loopback port.
pub async fn start_with(settings: Settings, dir: tempfile::TempDir) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    start_on(listener, settings, dir).await
}

/// Starts a gateway with `settings` on `listener`, bound beforehand when the settings
/// must name the gateway's own address.
pub async fn start_on(
    listener: tokio::net::TcpListener,
    settings: Settings,
    dir: tempfile::TempDir,
) -> Server {
    let shutdown = CancellationToken::new();
    let gateway = mcc_gateway::app::build(&settings, shutdown.clone())
        .await
        .unwrap_or_else(|e| panic!("gateway builds: {e}"));
    let shared = gateway.shared.clone();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(gateway.serve(listener, shutdown.clone()));
    Server {
        url: format!("http://{addr}/mcp"),
        base: format!("http://{addr}"),
        dir,
        shutdown,
        task,
        gateway_shared: shared,
    }
}

/// A gateway over the standard files in a new directory, with `files` (paths in that
/// directory, texts) written over them and `configure` applied to its [`settings`].
pub async fn start_configured(
    auth: &str,
    redis: Option<&str>,
    files: &[(&str, String)],
    configure: impl FnOnce(&mut Settings),
) -> Server {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let mut s = settings(dir.path(), auth, redis);
    configure(&mut s);
    start_with(s, dir).await
}

/// A gateway over the standard tool and users files, sessions in the shared Redis.
pub async fn start(auth: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(dir.path(), auth, Some(&redis_url()));
    start_with(s, dir).await
}

/// How the test client answers elicitation requests.
#[derive(Clone)]
pub enum Answer {
    Accept(Value),
    Decline,
    Cancel,
}

/// An MCP client that may declare elicitation and records the questions it got and the
/// log notifications it received (`level: text`).
#[derive(Clone)]
pub struct TestClient {
    pub answer: Option<Answer>,
    pub asked: Arc<Mutex<Vec<String>>>,
    pub logs: Arc<Mutex<Vec<String>>>,
    pub version: Option<ProtocolVersion>,
    /// `notifications/resources/list_changed` received.
    pub list_changes: Arc<std::sync::atomic::AtomicUsize>,
}

impl TestClient {
    pub fn plain() -> Self {
        Self {
            answer: None,
            asked: Default::default(),
            logs: Default::default(),
            version: None,
            list_changes: Default::default(),
        }
    }

    pub fn answering(answer: Answer) -> Self {
        Self {
            answer: Some(answer),
            ..Self::plain()
        }
    }
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        let caps = if self.answer.is_some() {
            ClientCapabilities::builder().enable_elicitation().build()
        } else {
            ClientCapabilities::default()
        };
        let config = ClientConfig::new(caps, Implementation::new("mcc-test-client", "0.0.1"));
        match &self.version {
            Some(v) => config.with_protocol_version(v.clone()),
            None => config,
        }
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = &request {
            self.asked.lock().unwrap().push(message.clone());
        }
        Ok(match self.answer.clone() {
            Some(Answer::Accept(content)) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(content)
            }
            Some(Answer::Decline) | None => ElicitResult::new(ElicitationAction::Decline),
            Some(Answer::Cancel) => ElicitResult::new(ElicitationAction::Cancel),
        })
    }

    async fn on_resource_list_changed(&self, _ctx: rmcp::service::NotificationContext<RoleClient>) {
        self.list_changes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    #[allow(deprecated)] // logging: deprecated by 2026-07-28, still legacy sessions'
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _ctx: rmcp::service::NotificationContext<RoleClient>,
    ) {
        let level = serde_json::to_value(params.level).unwrap_or_default();
        let text = params.data.as_str().unwrap_or_default().to_string();
        self.logs
            .lock()
            .unwrap()
            .push(format!("{}: {text}", level.as_str().unwrap_or("?")));
    }
}

pub type Client = RunningService<RoleClient, TestClient>;

/// A users file in which each `(username, groups, keys)` user holds the minted `keys`.
/// The product's own [`UserEntry`](mcc_gateway::auth::UserEntry) written through serde (as
/// JSON, which is YAML), so a key's hex prefix or hash is always a string: unquoted, an
/// all-digit prefix with one `e` reads as a float.
pub fn users_file(users: &[(&str, &[&str], &[&mcc_gateway::auth::api_key::MintedKey])]) -> String {
    let users: Vec<mcc_gateway::auth::UserEntry> = users
        .iter()
        .map(|(username, groups, keys)| mcc_gateway::auth::UserEntry {
            user: mcc_catalog::User {
                username: username.to_string(),
                groups: groups.iter().map(|g| g.to_string()).collect(),
                ..Default::default()
            },
            api_keys: keys.iter().map(|k| k.entry.clone()).collect(),
            ..Default::default()
        })
        .collect();
    json!({ "users": users }).to_string()
}

/// A reqwest client for a test's own HTTP requests (the process's TLS provider first:
/// see `mcc_gateway::tls`).
pub fn http_client() -> reqwest::Client {
    http_client_builder().build().expect("a reqwest client")
}

/// The audit events of the Redis stream `stream` (in the shared Redis), oldest first,
/// once there are at least `n` (waits up to 10 s); the stream is deleted then.
pub async fn audit_events(stream: &str, n: usize) -> Vec<Value> {
    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    for _ in 0..100 {
        // Each entry: [id, [field, value, ...]].
        let entries: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
            .arg(stream)
            .arg("-")
            .arg("+")
            .query_async(&mut conn)
            .await
            .unwrap();
        if entries.len() >= n {
            let _: () = redis::cmd("DEL")
                .arg(stream)
                .query_async(&mut conn)
                .await
                .unwrap();
            return entries
                .into_iter()
                .map(|(_, fields)| {
                    assert_eq!(fields.len(), 2, "{fields:?}");
                    assert_eq!(fields[0], "event");
                    serde_json::from_str(&fields[1]).unwrap()
                })
                .collect();
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("fewer than {n} events in {stream}");
}

/// The JSON body of an unauthenticated GET of `url` (`/readyz`, discovery documents).
pub async fn get_json(url: &str) -> Value {
    let resp = http_client().get(url).send().await.unwrap();
    resp.json().await.unwrap_or_else(|e| panic!("{url}: {e}"))
}

/// The text body of an unauthenticated GET of `url` (`/metrics`).
pub async fn get_text(url: &str) -> String {
    let resp = http_client().get(url).send().await.unwrap();
    resp.text().await.unwrap()
}

/// [`http_client`]'s builder, for tests that set timeouts or pools.
pub fn http_client_builder() -> reqwest::ClientBuilder {
    mcc_gateway::tls::install_crypto_provider();
    reqwest::Client::builder()
}

/// A legacy client (initialize handshake, `Mcp-Session-Id`).
pub async fn legacy(url: &str, handler: TestClient) -> Client {
    mcc_gateway::tls::install_crypto_provider();
    let transport = StreamableHttpClientTransport::from_uri(url.to_string());
    handler
        .serve(transport)
        .await
        .expect("legacy client connects")
}

/// A 2026-07-28 client (stateless, no session id).
pub async fn stateless(url: &str, handler: TestClient) -> Client {
    mcc_gateway::tls::install_crypto_provider();
    let transport = StreamableHttpClientTransport::from_uri(url.to_string());
    handler
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("2026-07-28 client connects")
}

/// A 2026-07-28 `execute` with `arguments`, sent once (no automatic retry): `answer` to
/// the question asked under `input` (`approval`, `upstream`, …), `state` the ticket echoed.
pub async fn execute_once(
    client: &Client,
    arguments: Value,
    input: &str,
    answer: Option<Value>,
    state: Option<&str>,
) -> rmcp::model::CallToolResponse {
    let mut params = CallToolRequestParams::new("execute").with_arguments(args(arguments));
    params.input_responses = answer.map(|a| {
        let mut responses = rmcp::model::InputResponses::new();
        responses.insert(input.into(), a);
        responses
    });
    params.request_state = state.map(str::to_string);
    client.call_tool_once(params).await.unwrap()
}

/// The question of an `input_required` reply (panics on anything else).
pub fn asked(response: rmcp::model::CallToolResponse) -> rmcp::model::InputRequiredResult {
    match response {
        rmcp::model::CallToolResponse::InputRequired(r) => r,
        other => panic!("expected input_required, got {other:?}"),
    }
}

/// The text of a complete reply (panics on anything else).
pub fn result_text(response: rmcp::model::CallToolResponse) -> String {
    match response {
        rmcp::model::CallToolResponse::Complete(r) => text(&r),
        other => panic!("expected a result, got {other:?}"),
    }
}

pub fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().expect("arguments are an object")
}

/// Calls an MCP tool and returns the whole result.
pub async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args(arguments)))
        .await
        .unwrap_or_else(|e| panic!("{tool} call failed: {e}"))
}

/// The text of a tool result (its text blocks joined).
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("")
}

/// Calls a tool and returns its text.
pub async fn call_text(client: &Client, tool: &str, arguments: Value) -> String {
    text(&call(client, tool, arguments).await)
}

/// A raw JSON-RPC POST to `/mcp`; returns status, session id header and the JSON-RPC
/// messages of the body (plain JSON or SSE `data:` lines).
pub async fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: String,
) -> (u16, Option<String>, Vec<Value>) {
    let mut req = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    if let Some(id) = session {
        req = req
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", "2025-06-18");
    }
    let resp = req.send().await.expect("HTTP request");
    let status = resp.status().as_u16();
    let sid = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = resp.text().await.unwrap_or_default();
    (status, sid, messages(&body))
}

fn messages(body: &str) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return vec![v];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

/// A raw 2026-07-28 `tools/call` of `execute` (sessionless), ready to send: `body` must
/// carry the protocol version in its `_meta`.
pub fn modern_execute(http: &reqwest::Client, url: &str, body: &Value) -> reqwest::RequestBuilder {
    http.post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "execute")
        .body(body.to_string())
}

/// The legacy handshake over raw HTTP; returns the session id.
pub async fn raw_initialize(http: &reqwest::Client, url: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let (status, sid, msgs) = post(http, url, None, init.to_string()).await;
    assert_eq!(status, 200, "{msgs:?}");
    let sid = sid.expect("initialize returns Mcp-Session-Id");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = post(http, url, Some(&sid), note.to_string()).await;
    assert_eq!(status, 202);
    sid
}

/// A `tools/call` over raw HTTP within a legacy session; returns the result text.
pub async fn raw_call(
    http: &reqwest::Client,
    url: &str,
    sid: &str,
    id: u64,
    tool: &str,
    arguments: Value,
) -> String {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}});
    let (status, _, msgs) = post(http, url, Some(sid), body.to_string()).await;
    assert_eq!(status, 200, "{tool}: {msgs:?}");
    let reply = msgs
        .iter()
        .find(|m| m.get("id") == Some(&json!(id)))
        .unwrap_or_else(|| panic!("no reply to {tool}: {msgs:?}"));
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {reply}"))
        .to_string()
}

/// Default test settings reachable from tests that build their own.
pub fn default_settings() -> Settings {
    config::Settings::default()
}

/// A client of either generation that sends `Authorization: Bearer <token>`.
pub async fn with_token(url: &str, token: &str, stateless_client: bool) -> Client {
    with_token_as(url, token, stateless_client, TestClient::plain()).await
}

/// [`with_token`] with a handler of the test's own (to read what it received).
pub async fn with_token_as(
    url: &str,
    token: &str,
    stateless_client: bool,
    handler: TestClient,
) -> Client {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(token);
    mcc_gateway::tls::install_crypto_provider();
    let transport = StreamableHttpClientTransport::from_config(config);
    let lifecycle = if stateless_client {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        }
    } else {
        ClientLifecycleMode::Initialize
    };
    handler
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .expect("authenticated client connects")
}
