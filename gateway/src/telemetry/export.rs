//! The OTLP exporter: a tracer provider batching spans to one OTLP/HTTP (protobuf)
//! endpoint, with the resource and sampler [`OtlpExport`] settled.
//!
//! The HTTP client is hyper's with rustls (ring, the system's roots), as for JWKS: the
//! SDK's batch processor runs on a thread of its own and blocks on each export, so every
//! request is spawned onto the gateway's tokio runtime and awaited from there.

use std::collections::HashMap;
use std::time::Duration;

use axum::body::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry::KeyValue;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler as SdkSampler, SdkTracerProvider};

use super::TelemetryError;
use super::settings::{OtlpExport, RootSampler, Sampler};

/// A collector's answer is a small protobuf message; more than this is refused.
const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// The provider exporting to `export.endpoint`, its requests run on `runtime`.
pub(super) fn provider(
    export: &OtlpExport,
    runtime: tokio::runtime::Handle,
) -> Result<SdkTracerProvider, TelemetryError> {
    let failed = |reason: String| TelemetryError::Exporter {
        endpoint: export.endpoint.clone(),
        reason,
    };
    let client = OtlpClient::new(runtime, export.timeout).map_err(failed)?;
    let headers: HashMap<String, String> = export.headers.iter().cloned().collect();
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_endpoint(export.endpoint.clone())
        .with_protocol(Protocol::HttpBinary)
        .with_timeout(export.timeout)
        .with_headers(headers);
    if export.gzip {
        exporter = exporter.with_compression(opentelemetry_otlp::Compression::Gzip);
    }
    let exporter = exporter.build().map_err(|e| failed(e.to_string()))?;
    let mut attributes: Vec<KeyValue> = export
        .resource
        .iter()
        .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
        .collect();
    if !export.resource.iter().any(|(k, _)| k == "service.version") {
        attributes.push(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    }
    let resource = Resource::builder_empty()
        .with_service_name(export.service_name.clone())
        .with_attributes(attributes)
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(sampler(export.sampler))
        .with_resource(resource)
        .build())
}

fn sampler(sampler: Sampler) -> SdkSampler {
    let root = |r: RootSampler| match r {
        RootSampler::AlwaysOn => SdkSampler::AlwaysOn,
        RootSampler::AlwaysOff => SdkSampler::AlwaysOff,
        RootSampler::TraceIdRatio(ratio) => SdkSampler::TraceIdRatioBased(ratio),
    };
    match sampler {
        Sampler::AlwaysOn => SdkSampler::AlwaysOn,
        Sampler::AlwaysOff => SdkSampler::AlwaysOff,
        Sampler::TraceIdRatio(ratio) => SdkSampler::TraceIdRatioBased(ratio),
        Sampler::ParentBased(inner) => SdkSampler::ParentBased(Box::new(root(inner))),
    }
}

/// POSTs export requests from the SDK's batch thread through the gateway's runtime.
#[derive(Clone)]
struct OtlpClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    runtime: tokio::runtime::Handle,
    timeout: Duration,
}

impl std::fmt::Debug for OtlpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpClient")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl OtlpClient {
    fn new(runtime: tokio::runtime::Handle, timeout: Duration) -> Result<Self, String> {
        let connector = crate::tls::https_connector(crate::tls::system_roots())
            .map_err(|e| format!("TLS setup: {e}"))?;
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            runtime,
            timeout,
        })
    }
}

#[async_trait::async_trait]
impl HttpClient for OtlpClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let timeout = self.timeout;
        let task = self.runtime.spawn(async move {
            let sent = tokio::time::timeout(timeout, client.request(request.map(Full::new)));
            let response = match sent.await {
                Ok(response) => response?,
                Err(_) => return Err(HttpError::from(format!("no answer within {timeout:?}"))),
            };
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, MAX_RESPONSE_BYTES)
                .collect()
                .await?
                .to_bytes();
            Ok(Response::from_parts(parts, body))
        });
        task.await?
    }
}
