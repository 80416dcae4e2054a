//! The telemetry's settings: the `log` section (the log's format) and the `tracing`
//! section with the standard `OTEL_*` variables: whether spans are exported over OTLP,
//! to where, as which service and how many. Read once at startup through the same
//! environment lookup as the `MCC_*` overrides, and checked there, so a bad value stops
//! the gateway naming the variable. Building the exporter from the result is
//! [`super`]'s job; this module only decides.
//!
//! Export is off unless asked for: by an OTLP endpoint variable
//! (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`) or by
//! `tracing.enabled: true`. `tracing.enabled: false`, `OTEL_SDK_DISABLED=true` and
//! `OTEL_TRACES_EXPORTER=none` turn it off whatever else is set.

use std::time::Duration;

use serde::Deserialize;

/// The `log` section. The level is `MCC_LOG` (an `EnvFilter`, default `info`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LogSettings {
    /// `text` (default) or `json` (one JSON object per line, on stderr).
    pub format: LogFormat,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// The `tracing` section.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TracingSettings {
    /// `null` (default): export when an OTLP endpoint variable is set; `true`: export
    /// (to `http://localhost:4318/v1/traces` unless a variable names an endpoint);
    /// `false`: never.
    pub enabled: Option<bool>,
    /// What the settings and `OTEL_*` add up to, settled by [`TracingSettings::resolve`]
    /// at load time (tests may set it directly).
    #[serde(skip)]
    pub export: TraceExport,
}

/// Whether spans leave the process, and if so how.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceExport {
    /// No exporter is built; `reason` says which setting (or its absence) decided it.
    Off { reason: &'static str },
    /// Spans are batched and sent over OTLP/HTTP with protobuf.
    Otlp(OtlpExport),
}

impl Default for TraceExport {
    fn default() -> Self {
        TraceExport::Off {
            reason: "no OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT) and tracing.enabled is not true",
        }
    }
}

/// Where and how spans are exported.
#[derive(Clone, PartialEq)]
pub struct OtlpExport {
    /// The traces URL the batches are POSTed to (`…/v1/traces`).
    pub endpoint: String,
    /// Extra request headers (`OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`), typically a
    /// vendor's API key: their values are never shown.
    pub headers: Vec<(String, String)>,
    /// How long one export request may take.
    pub timeout: Duration,
    /// Gzip the request bodies (`OTEL_EXPORTER_OTLP_[TRACES_]COMPRESSION=gzip`).
    pub gzip: bool,
    /// `service.name` of the resource.
    pub service_name: String,
    /// Other resource attributes (`OTEL_RESOURCE_ATTRIBUTES`, without `service.name`).
    pub resource: Vec<(String, String)>,
    pub sampler: Sampler,
}

impl std::fmt::Debug for OtlpExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("OtlpExport")
            .field("endpoint", &self.endpoint)
            .field("headers (names only)", &header_names)
            .field("timeout", &self.timeout)
            .field("gzip", &self.gzip)
            .field("service_name", &self.service_name)
            .field("resource", &self.resource)
            .field("sampler", &self.sampler)
            .finish()
    }
}

/// `OTEL_TRACES_SAMPLER` (with `OTEL_TRACES_SAMPLER_ARG` for the ratio ones).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampler {
    AlwaysOn,
    AlwaysOff,
    /// Keep this fraction of traces, by trace id.
    TraceIdRatio(f64),
    /// A caller's sampling decision (the `traceparent` flag) wins; root spans use the inner one.
    ParentBased(RootSampler),
}

/// The sampler of root spans under [`Sampler::ParentBased`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RootSampler {
    AlwaysOn,
    AlwaysOff,
    TraceIdRatio(f64),
}

/// The variables read here, all kept from tool processes like the `MCC_*` ones (they may
/// carry an exporter's credentials): see `mcc_catalog::env::GATEWAY_SETTINGS`.
pub const OTEL_VARIABLES: &[&str] = &[
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
];

/// The service name when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` gives one.
pub const DEFAULT_SERVICE_NAME: &str = "mcc-gateway";

const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

/// A variable that cannot be used, and why.
pub type Invalid = (&'static str, String);

impl TracingSettings {
    /// Settles [`TracingSettings::export`] from `enabled` and the `OTEL_*` variables.
    pub fn resolve(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), Invalid> {
        self.export = resolve(self.enabled, env)?;
        Ok(())
    }
}

fn resolve(
    enabled: Option<bool>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<TraceExport, Invalid> {
    let var = |name: &str| {
        env(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    if let Some(v) = var("OTEL_SDK_DISABLED") {
        match v.to_ascii_lowercase().as_str() {
            "true" => {
                return Ok(TraceExport::Off {
                    reason: "OTEL_SDK_DISABLED=true",
                });
            }
            "false" => {}
            _ => {
                return Err((
                    "OTEL_SDK_DISABLED",
                    format!("'{v}': expected true or false"),
                ));
            }
        }
    }
    if enabled == Some(false) {
        return Ok(TraceExport::Off {
            reason: "tracing.enabled is false",
        });
    }
    match var("OTEL_TRACES_EXPORTER").as_deref() {
        None | Some("otlp") => {}
        Some("none") => {
            return Ok(TraceExport::Off {
                reason: "OTEL_TRACES_EXPORTER=none",
            });
        }
        Some(other) => {
            return Err((
                "OTEL_TRACES_EXPORTER",
                format!("'{other}' is not supported: expected otlp or none"),
            ));
        }
    }
    let signal = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    let base = var("OTEL_EXPORTER_OTLP_ENDPOINT");
    if enabled.is_none() && signal.is_none() && base.is_none() {
        return Ok(TraceExport::default());
    }
    let endpoint = match (signal, base) {
        (Some(url), _) => checked_url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url)?,
        (None, Some(url)) => traces_url(&checked_url("OTEL_EXPORTER_OTLP_ENDPOINT", url)?),
        (None, None) => traces_url(DEFAULT_ENDPOINT),
    };
    protocol(&var)?;
    let mut headers = match var("OTEL_EXPORTER_OTLP_HEADERS") {
        Some(v) => pairs("OTEL_EXPORTER_OTLP_HEADERS", &v)?,
        None => vec![],
    };
    if let Some(v) = var("OTEL_EXPORTER_OTLP_TRACES_HEADERS") {
        for (name, value) in pairs("OTEL_EXPORTER_OTLP_TRACES_HEADERS", &v)? {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
            headers.push((name, value));
        }
    }
    let (resource, from_resource) = match var("OTEL_RESOURCE_ATTRIBUTES") {
        Some(v) => {
            let mut all = pairs("OTEL_RESOURCE_ATTRIBUTES", &v)?;
            let name = all
                .iter()
                .position(|(k, _)| k == "service.name")
                .map(|i| all.remove(i).1);
            (all, name)
        }
        None => (vec![], None),
    };
    Ok(TraceExport::Otlp(OtlpExport {
        endpoint,
        headers,
        timeout: timeout(&var)?,
        gzip: gzip(&var)?,
        service_name: var("OTEL_SERVICE_NAME")
            .or(from_resource)
            .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_string()),
        resource,
        sampler: sampler(&var)?,
    }))
}

fn checked_url(name: &'static str, url: String) -> Result<String, Invalid> {
    let ok = (url.starts_with("http://") || url.starts_with("https://"))
        && url.parse::<http::Uri>().is_ok_and(|u| u.host().is_some());
    if ok {
        Ok(url)
    } else {
        Err((
            name,
            format!("'{url}' is not an http:// or https:// URL of an OTLP/HTTP receiver"),
        ))
    }
}

/// The signal URL of a base endpoint, as the OTLP exporter specification builds it.
fn traces_url(base: &str) -> String {
    format!("{}/v1/traces", base.trim_end_matches('/'))
}

fn protocol(var: &dyn Fn(&str) -> Option<String>) -> Result<(), Invalid> {
    for name in [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        match var(name).as_deref() {
            None => continue,
            Some("http/protobuf") => return Ok(()),
            Some(other) => {
                return Err((
                    name,
                    format!(
                        "'{other}' is not supported: the gateway exports OTLP over HTTP with protobuf \
                         (http/protobuf); point the endpoint at the collector's OTLP/HTTP port (4318)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn timeout(var: &dyn Fn(&str) -> Option<String>) -> Result<Duration, Invalid> {
    for name in [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ] {
        if let Some(v) = var(name) {
            return match v.parse::<u64>() {
                Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
                _ => Err((name, format!("'{v}': expected milliseconds, e.g. 10000"))),
            };
        }
    }
    Ok(Duration::from_secs(10))
}

fn gzip(var: &dyn Fn(&str) -> Option<String>) -> Result<bool, Invalid> {
    for name in [
        "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
        "OTEL_EXPORTER_OTLP_COMPRESSION",
    ] {
        match var(name).as_deref() {
            None => continue,
            Some("gzip") => return Ok(true),
            Some("none") => return Ok(false),
            Some(other) => return Err((name, format!("'{other}': expected gzip or none"))),
        }
    }
    Ok(false)
}

fn sampler(var: &dyn Fn(&str) -> Option<String>) -> Result<Sampler, Invalid> {
    let ratio = || -> Result<f64, Invalid> {
        match var("OTEL_TRACES_SAMPLER_ARG") {
            None => Ok(1.0),
            Some(v) => match v.parse::<f64>() {
                Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
                _ => Err((
                    "OTEL_TRACES_SAMPLER_ARG",
                    format!("'{v}': expected a ratio from 0 to 1"),
                )),
            },
        }
    };
    Ok(match var("OTEL_TRACES_SAMPLER").as_deref() {
        None | Some("parentbased_always_on") => Sampler::ParentBased(RootSampler::AlwaysOn),
        Some("parentbased_always_off") => Sampler::ParentBased(RootSampler::AlwaysOff),
        Some("parentbased_traceidratio") => {
            Sampler::ParentBased(RootSampler::TraceIdRatio(ratio()?))
        }
        Some("always_on") => Sampler::AlwaysOn,
        Some("always_off") => Sampler::AlwaysOff,
        Some("traceidratio") => Sampler::TraceIdRatio(ratio()?),
        Some(other) => {
            return Err((
                "OTEL_TRACES_SAMPLER",
                format!(
                    "'{other}' is not supported: expected always_on, always_off, traceidratio, \
                     parentbased_always_on, parentbased_always_off or parentbased_traceidratio"
                ),
            ));
        }
    })
}

/// `key=value,key2=value2` (W3C baggage style, as `OTEL_EXPORTER_OTLP_HEADERS` and
/// `OTEL_RESOURCE_ATTRIBUTES` are written), values percent-decoded.
fn pairs(name: &'static str, text: &str) -> Result<Vec<(String, String)>, Invalid> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((key, value)) = item.split_once('=') else {
            return Err((name, format!("'{item}' is not key=value")));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err((name, format!("'{item}' has no key")));
        }
        let value = percent_decode(value.trim()).ok_or_else(|| {
            (
                name,
                format!("the value of '{key}' is not valid percent-encoding"),
            )
        })?;
        out.push((key.to_string(), value));
    }
    Ok(out)
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn export(enabled: Option<bool>, pairs: &[(&str, &str)]) -> Result<TraceExport, Invalid> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        resolve(enabled, &move |k| map.get(k).cloned())
    }

    fn otlp(enabled: Option<bool>, pairs: &[(&str, &str)]) -> OtlpExport {
        match export(enabled, pairs).unwrap() {
            TraceExport::Otlp(o) => o,
            off => panic!("expected export, got {off:?}"),
        }
    }

    #[test]
    fn off_without_an_endpoint_or_the_setting() {
        assert_eq!(export(None, &[]).unwrap(), TraceExport::default());
        // Other OTEL_* variables alone turn nothing on.
        let e = export(
            None,
            &[
                ("OTEL_SERVICE_NAME", "gw"),
                ("OTEL_TRACES_SAMPLER", "always_on"),
            ],
        );
        assert!(matches!(e.unwrap(), TraceExport::Off { .. }));
    }

    #[test]
    fn an_endpoint_or_the_setting_turns_it_on() {
        let o = otlp(
            None,
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")],
        );
        assert_eq!(o.endpoint, "http://collector:4318/v1/traces");
        assert_eq!(o.service_name, "mcc-gateway");
        assert_eq!(o.sampler, Sampler::ParentBased(RootSampler::AlwaysOn));
        assert_eq!(o.timeout, Duration::from_secs(10));
        let o = otlp(
            None,
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
                (
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                    "https://traces.example/otlp",
                ),
            ],
        );
        assert_eq!(
            o.endpoint, "https://traces.example/otlp",
            "the signal URL is used as is"
        );
        let o = otlp(Some(true), &[]);
        assert_eq!(o.endpoint, "http://localhost:4318/v1/traces");
    }

    #[test]
    fn the_switches_that_turn_it_off_win() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318");
        let off = |e: Result<TraceExport, Invalid>| match e.unwrap() {
            TraceExport::Off { reason } => reason,
            on => panic!("expected off, got {on:?}"),
        };
        assert_eq!(
            off(export(Some(false), &[endpoint])),
            "tracing.enabled is false"
        );
        assert_eq!(
            off(export(
                Some(true),
                &[endpoint, ("OTEL_SDK_DISABLED", "TRUE")]
            )),
            "OTEL_SDK_DISABLED=true"
        );
        assert_eq!(
            off(export(None, &[endpoint, ("OTEL_TRACES_EXPORTER", "none")])),
            "OTEL_TRACES_EXPORTER=none"
        );
        assert!(matches!(
            export(None, &[endpoint, ("OTEL_SDK_DISABLED", "false")]).unwrap(),
            TraceExport::Otlp(_)
        ));
    }

    #[test]
    fn resource_headers_and_sampler() {
        let o = otlp(
            Some(true),
            &[
                (
                    "OTEL_RESOURCE_ATTRIBUTES",
                    "service.name=from-attrs, deployment.environment=prod,team=a%2Cb",
                ),
                (
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    "x-api-key=secret%3D1,x-other=o",
                ),
                ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "X-API-KEY=traces"),
                ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
                ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
            ],
        );
        assert_eq!(o.service_name, "from-attrs");
        assert_eq!(
            o.resource,
            vec![
                ("deployment.environment".to_string(), "prod".to_string()),
                ("team".to_string(), "a,b".to_string())
            ]
        );
        assert_eq!(
            o.headers,
            vec![
                ("x-other".to_string(), "o".to_string()),
                ("X-API-KEY".to_string(), "traces".to_string())
            ]
        );
        assert_eq!(
            o.sampler,
            Sampler::ParentBased(RootSampler::TraceIdRatio(0.25))
        );
        assert_eq!(o.timeout, Duration::from_millis(2500));
        assert!(o.gzip);
        let shown = format!("{o:?}");
        assert!(
            !shown.contains("\"traces\"") && !shown.contains("secret"),
            "{shown}"
        );
        let o = otlp(
            Some(true),
            &[
                ("OTEL_SERVICE_NAME", "gw-1"),
                ("OTEL_RESOURCE_ATTRIBUTES", "service.name=x"),
            ],
        );
        assert_eq!(o.service_name, "gw-1", "OTEL_SERVICE_NAME wins");
    }

    #[test]
    fn bad_values_name_the_variable() {
        let bad = |pairs: &[(&str, &str)]| export(Some(true), pairs).unwrap_err();
        let (name, message) = bad(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        assert_eq!(name, "OTEL_EXPORTER_OTLP_PROTOCOL");
        assert!(
            message.contains("http/protobuf") && message.contains("4318"),
            "{message}"
        );
        assert_eq!(
            bad(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")]).0,
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        );
        assert_eq!(
            bad(&[("OTEL_TRACES_SAMPLER", "jaeger_remote")]).0,
            "OTEL_TRACES_SAMPLER"
        );
        assert_eq!(
            bad(&[
                ("OTEL_TRACES_SAMPLER", "traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "2")
            ])
            .0,
            "OTEL_TRACES_SAMPLER_ARG"
        );
        assert_eq!(
            bad(&[("OTEL_RESOURCE_ATTRIBUTES", "novalue")]).0,
            "OTEL_RESOURCE_ATTRIBUTES"
        );
        assert_eq!(
            bad(&[("OTEL_TRACES_EXPORTER", "zipkin")]).0,
            "OTEL_TRACES_EXPORTER"
        );
        assert_eq!(bad(&[("OTEL_SDK_DISABLED", "yes")]).0, "OTEL_SDK_DISABLED");
        assert_eq!(
            bad(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "10s")]).0,
            "OTEL_EXPORTER_OTLP_TIMEOUT"
        );
    }
}
