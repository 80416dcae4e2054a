//! Abuse suite, parsers: arbitrary bodies at `/mcp` of a real gateway over real HTTP —
//! random bytes, random JSON, and JSON-RPC-shaped messages with random methods, ids and
//! params, in both protocol generations. None may crash the gateway or get a 5xx: each
//! gets an answer (a JSON-RPC error, a 4xx, or a result), and the gateway keeps serving.
//! (Arbitrary tool files at the loader: catalog/tests/it/properties.rs.)

use crate::mcp_support;

use std::sync::OnceLock;

use mcp_support::*;
use proptest::prelude::*;
use serde_json::{Value, json};

struct Fixture {
    runtime: tokio::runtime::Runtime,
    server: Server,
    http: reqwest::Client,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            start_with(settings(dir.path(), "dev-admin", None), dir).await
        });
        Fixture {
            runtime,
            server,
            http: mcp_support::http_client(),
        }
    })
}

/// Posts `body` to /mcp (with a protocol version header when given); the status.
fn post(body: Vec<u8>, version: Option<&str>) -> u16 {
    let f = fixture();
    f.runtime.block_on(async {
        let mut request = f
            .http
            .post(&f.server.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        if let Some(v) = version {
            request = request.header("mcp-protocol-version", v);
        }
        let response = request.send().await.expect("the gateway answers");
        let status = response.status().as_u16();
        let _ = response.bytes().await;
        status
    })
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,40}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            prop::collection::btree_map(".{0,12}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("initialize".to_string()),
        Just("tools/call".to_string()),
        Just("tools/list".to_string()),
        Just("prompts/get".to_string()),
        Just("notifications/initialized".to_string()),
        Just("resources/read".to_string()),
        "[a-z/]{0,20}",
    ]
}

fn message() -> impl Strategy<Value = Value> {
    (method(), json_value(), json_value(), any::<bool>()).prop_map(
        |(method, id, params, with_id)| {
            let mut m = json!({"jsonrpc": "2.0", "method": method, "params": params});
            if with_id {
                m["id"] = id;
            }
            m
        },
    )
}

fn version() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        Just(None),
        Just(Some("2025-11-25")),
        Just(Some("2026-07-28")),
        Just(Some("x"))
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_get_a_server_error(body in prop::collection::vec(any::<u8>(), 0..2048), v in version()) {
        let status = post(body, v);
        prop_assert!(status < 500, "status {status}");
    }

    #[test]
    fn random_json_never_gets_a_server_error(body in json_value(), v in version()) {
        let status = post(serde_json::to_vec(&body).unwrap(), v);
        prop_assert!(status < 500, "status {status}");
    }

    #[test]
    fn random_json_rpc_never_gets_a_server_error(m in message(), batch in any::<bool>(), v in version()) {
        let body = if batch { json!([m.clone(), m]) } else { m };
        let status = post(serde_json::to_vec(&body).unwrap(), v);
        prop_assert!(status < 500, "status {status}");
    }
}

#[test]
fn the_gateway_still_serves_after_the_storm() {
    let f = fixture();
    for _ in 0..32 {
        post(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"execute\",\"arguments\":{\"key\":\"public.echo\",\"params\":{\"message\":1e999}}}}".to_vec(), Some("2026-07-28"));
    }
    let healthy = f.runtime.block_on(async {
        f.http
            .get(format!("{}/healthz", f.server.base))
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    assert_eq!(healthy.unwrap(), 200);
}
