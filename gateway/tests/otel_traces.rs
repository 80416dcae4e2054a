//! OpenTelemetry traces of a real `mcc-gateway serve`, received by an OTLP/HTTP collector
//! in this test (protobuf, decoded with opentelemetry-proto): the spans of an MCP
//! `execute` and `search` and of a REST execute (request → auth, execute → run), their
//! links, order, attributes and resource, a caller's `traceparent` continued, the queue
//! flushed at shutdown, the trace ids in JSON log lines; nothing sent when tracing is
//! off; a bad OTEL_* value refused by name.

#[path = "it/mcp_support/mod.rs"]
mod mcp_support;

use std::collections::HashMap;
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use mcp_support::*;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Value, json};

/// What the collector received: every export request, decoded.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

impl Received {
    fn requests(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    fn spans(&self) -> Vec<Span> {
        let all = self.0.lock().unwrap();
        all.iter()
            .flat_map(|r| &r.resource_spans)
            .flat_map(|rs| &rs.scope_spans)
            .flat_map(|ss| ss.spans.clone())
            .collect()
    }

    fn resource(&self) -> HashMap<String, String> {
        let all = self.0.lock().unwrap();
        all.iter()
            .flat_map(|r| &r.resource_spans)
            .filter_map(|rs| rs.resource.as_ref())
            .flat_map(|r| attributes(&r.attributes))
            .collect()
    }
}

/// An OTLP/HTTP receiver on a free loopback port: `POST /v1/traces`, protobuf.
async fn collector() -> (String, Received) {
    let received = Received::default();
    let sink = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: Bytes| {
            let sink = sink.clone();
            async move {
                assert_eq!(headers["content-type"], "application/x-protobuf");
                let request =
                    ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf body");
                sink.0.lock().unwrap().push(request);
                (
                    [("content-type", "application/x-protobuf")],
                    ExportTraceServiceResponse::default().encode_to_vec(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

fn text(value: &Option<AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn attributes(kv: &[KeyValue]) -> HashMap<String, String> {
    kv.iter().map(|a| (a.key.clone(), text(&a.value))).collect()
}

fn attr(span: &Span, key: &str) -> Option<String> {
    attributes(&span.attributes).remove(key)
}

/// A running `mcc-gateway serve` with its JSON log lines collected.
struct Gateway {
    child: Child,
    port: u16,
    log: std::sync::mpsc::Receiver<String>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Gateway {
    async fn start(dir: &std::path::Path, env: &[(&str, &str)]) -> Gateway {
        settings(dir, "dev-admin", None); // writes the tool and users files
        let port = replica::free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcc-gateway"));
        cmd.arg("serve")
            .env_remove("REDIS_URL")
            .env("MCC_TOOL_FILES", dir.join("tools"))
            .env("MCC_USERS_FILE", dir.join("users.yaml"))
            .env("MCC_SERVER__PORT", port.to_string())
            .env("MCC_LOG__FORMAT", "json")
            .env("MCC_LOG", "info")
            .env("MCC_AUDIT__STDOUT", "false")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("OTEL_")) {
            cmd.env_remove(name);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("the gateway binary starts");
        let stderr = child.stderr.take().unwrap();
        let (tx, log) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let _ = tx.send(line);
            }
        });
        let gateway = Gateway {
            child,
            port,
            log,
            reader: Some(reader),
        };
        let http = mcp_support::http_client();
        for _ in 0..300 {
            if let Ok(r) = http.get(gateway.url("/readyz")).send().await
                && r.status().is_success()
            {
                return gateway;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("gateway never became ready");
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Stops it with SIGTERM (it sends the spans still queued) and returns its log.
    fn stop(mut self) -> Vec<Value> {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        // The reader ends at the pipe's end: every line is in the channel then.
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        self.log
            .try_iter()
            .map(|line| serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .collect()
    }
}

/// A legacy MCP client whose every request carries `traceparent` (the caller's span).
async fn traced_client(url: &str, traceparent: &str) -> Client {
    mcc_gateway::tls::install_crypto_provider();
    let mut headers = HashMap::new();
    headers.insert(
        http::HeaderName::from_static("traceparent"),
        http::HeaderValue::from_str(traceparent).unwrap(),
    );
    let config =
        StreamableHttpClientTransportConfig::with_uri(url.to_string()).custom_headers(headers);
    TestClient::plain()
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(config),
            ClientLifecycleMode::Initialize,
        )
        .await
        .expect("the client connects")
}

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const REST_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

// The collector must answer while the test thread waits for the gateway to exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execute_is_one_trace_of_request_auth_execute_and_run() {
    let (endpoint, received) = collector().await;
    let dir = tempfile::tempdir().unwrap();
    let gateway = Gateway::start(
        dir.path(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_SERVICE_NAME", "mcc-under-test"),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test"),
            ("OTEL_BSP_SCHEDULE_DELAY", "60000"),
        ],
    )
    .await;
    let client = traced_client(
        &gateway.url("/mcp"),
        &format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"),
    )
    .await;
    let out = call_text(
        &client,
        "execute",
        json!({"key": "public.echo", "params": {"message": "param-value-never-in-a-span"}}),
    )
    .await;
    assert_eq!(out, "param-value-never-in-a-span");
    call_text(&client, "search", json!({"query": "echo a message"})).await;
    // The same tool over REST: the same spans under its own request span.
    let rest = mcp_support::http_client()
        .post(gateway.url("/v1/tools/public.echo"))
        .header("traceparent", format!("00-{REST_TRACE}-{CALLER_SPAN}-01"))
        .json(&json!({"message": "over rest"}))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 200);
    // Nothing is due before a minute (OTEL_BSP_SCHEDULE_DELAY): every span arrives with
    // the flush at shutdown, which `stop` waits for.
    assert_eq!(received.requests(), 0, "exported before the schedule");
    let log = gateway.stop();
    let spans = received.spans();

    let hex = hex::encode;
    let named = |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };
    let by_id = |id: &[u8]| spans.iter().find(|s| s.span_id == id);
    let in_trace = |span: &&Span, trace: &str| hex::encode(&span.trace_id) == trace;
    let execute = *named("execute")
        .iter()
        .find(|s| in_trace(s, CALLER_TRACE))
        .expect("an execute span");
    let run: Vec<&Span> = named("run")
        .into_iter()
        .filter(|s| in_trace(s, CALLER_TRACE))
        .collect();
    assert_eq!(run.len(), 1, "one process: {run:?}");
    let run = run[0];
    let request = by_id(&execute.parent_span_id).expect("execute's parent is exported");

    // The caller's trace continues: every span of the call is in it.
    for span in [request, execute, run] {
        assert_eq!(hex(&span.trace_id), CALLER_TRACE, "{}", span.name);
    }
    assert_eq!(
        hex(&request.parent_span_id),
        CALLER_SPAN,
        "request's parent is the caller's span"
    );
    assert_eq!(request.kind, 2, "a server span");
    assert_eq!(request.name, "POST /mcp");
    assert_eq!(
        attr(request, "http.request.method").as_deref(),
        Some("POST")
    );
    assert_eq!(attr(request, "http.route").as_deref(), Some("/mcp"));
    assert_eq!(attr(request, "url.path").as_deref(), Some("/mcp"));
    assert_eq!(
        attr(request, "http.response.status_code").as_deref(),
        Some("200")
    );

    // auth → execute under the same request, in that order; run under execute.
    let auth = named("auth")
        .into_iter()
        .find(|s| s.parent_span_id == request.span_id)
        .expect("the request's auth span");
    assert!(
        auth.end_time_unix_nano <= execute.start_time_unix_nano,
        "auth ends before execute starts"
    );
    assert_eq!(attr(auth, "mcc.user").as_deref(), Some("alice"));
    assert_eq!(attr(auth, "mcc.credential").as_deref(), Some("dev"));
    assert_eq!(attr(auth, "mcc.outcome").as_deref(), Some("success"));
    assert_eq!(run.parent_span_id, execute.span_id);
    assert!(execute.start_time_unix_nano <= run.start_time_unix_nano);
    assert!(run.end_time_unix_nano <= execute.end_time_unix_nano);
    // The request span ends when the response starts (telemetry/http.rs). rmcp's client
    // sends a progressToken with every call, so this answer is a stream whose first event
    // (progress) may start the response before the call ends: only the start is ordered.
    assert!(request.start_time_unix_nano <= execute.start_time_unix_nano);
    assert_eq!(attr(execute, "mcc.tool").as_deref(), Some("public.echo"));
    assert_eq!(attr(execute, "mcc.user").as_deref(), Some("alice"));
    assert_eq!(attr(execute, "mcc.outcome").as_deref(), Some("success"));
    assert_eq!(attr(run, "mcc.tool").as_deref(), Some("public.echo"));
    assert_eq!(attr(run, "mcc.runtime").as_deref(), Some("in-process"));
    assert_eq!(attr(run, "mcc.exit_code").as_deref(), Some("0"));
    assert_eq!(attr(run, "mcc.outcome").as_deref(), Some("success"));

    // search: its own request of the same client, same trace.
    let search = named("search")[0];
    let search_request = by_id(&search.parent_span_id).expect("search's parent is exported");
    assert_eq!(search_request.name, "POST /mcp");
    assert_ne!(search_request.span_id, request.span_id);
    assert_eq!(hex(&search.trace_id), CALLER_TRACE);
    assert_eq!(attr(search, "mcc.user").as_deref(), Some("alice"));
    assert_eq!(attr(search, "mcc.outcome").as_deref(), Some("success"));

    // REST: request → auth, execute → run, as over MCP.
    let rest_execute = *named("execute")
        .iter()
        .find(|s| in_trace(s, REST_TRACE))
        .expect("the REST call's execute span");
    let rest_request = by_id(&rest_execute.parent_span_id).expect("its request span");
    assert_eq!(rest_request.name, "POST /v1/tools/{key}");
    assert_eq!(
        attr(rest_request, "http.route").as_deref(),
        Some("/v1/tools/{key}")
    );
    assert_eq!(
        attr(rest_request, "url.path").as_deref(),
        Some("/v1/tools/public.echo")
    );
    assert_eq!(hex(&rest_request.parent_span_id), CALLER_SPAN);
    assert!(
        named("auth")
            .iter()
            .any(|a| a.parent_span_id == rest_request.span_id),
        "the REST request's auth span"
    );
    assert_eq!(
        attr(rest_execute, "mcc.tool").as_deref(),
        Some("public.echo")
    );
    assert_eq!(
        attr(rest_execute, "mcc.outcome").as_deref(),
        Some("success")
    );
    assert!(
        named("run")
            .iter()
            .any(|r| r.parent_span_id == rest_execute.span_id),
        "the REST call's run span"
    );

    // Nothing of the call's parameters (nor the query) is in any span.
    for span in &spans {
        for (k, v) in attributes(&span.attributes) {
            assert!(
                !v.contains("param-value-never-in-a-span")
                    && !v.contains("over rest")
                    && !v.contains("echo a message"),
                "{}: {k}={v}",
                span.name
            );
        }
    }
    let resource = received.resource();
    assert_eq!(resource["service.name"], "mcc-under-test");
    assert_eq!(resource["deployment.environment"], "test");

    // The log lines of the executes name their trace and span.
    let lines: Vec<&Value> = log
        .iter()
        .filter(|l| l["fields"]["message"] == "execute completed")
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for (line, trace, span) in [
        (lines[0], CALLER_TRACE, execute),
        (lines[1], REST_TRACE, rest_execute),
    ] {
        assert_eq!(line["trace_id"], trace, "{line}");
        assert_eq!(line["span_id"], hex(&span.span_id), "{line}");
    }
    assert!(
        log.iter()
            .any(|l| l["fields"]["message"] == "tracing: exporting spans over OTLP/HTTP"),
        "the startup line says where spans go"
    );
}

// The collector must answer while the test thread waits for the gateway to exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_span_leaves_without_an_endpoint_or_with_the_sdk_disabled() {
    let (endpoint, received) = collector().await;
    let runs: [&[(&str, &str)]; 2] = [
        // No OTEL_* at all: the default.
        &[],
        // An endpoint, but the standard switch says no.
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_SDK_DISABLED", "true"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    ];
    for (env, reason) in runs
        .iter()
        .zip(["no OTLP endpoint is set", "OTEL_SDK_DISABLED=true"])
    {
        let dir = tempfile::tempdir().unwrap();
        let gateway = Gateway::start(dir.path(), env).await;
        let client = traced_client(
            &gateway.url("/mcp"),
            &format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"),
        )
        .await;
        call_text(
            &client,
            "execute",
            json!({"key": "public.echo", "params": {"message": "m"}}),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let log = gateway.stop();
        let said = log
            .iter()
            .filter_map(|l| l["fields"]["message"].as_str())
            .find(|m| m.starts_with("tracing: "))
            .unwrap_or_default();
        assert!(said.contains(reason), "{said}");
        assert!(
            log.iter().all(|l| l.get("trace_id").is_none()),
            "no trace ids in the log when nothing is traced"
        );
    }
    assert_eq!(received.requests(), 0, "nothing was exported");
}

#[test]
fn bad_otel_settings_stop_the_gateway_naming_the_variable() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcc-gateway"))
        .arg("serve")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("OTEL_EXPORTER_OTLP_PROTOCOL") && err.contains("http/protobuf"),
        "{err}"
    );
}
