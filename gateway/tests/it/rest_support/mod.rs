//! Helpers of the REST tests: plain HTTP requests to a test gateway, answers as JSON.
#![allow(dead_code)]

use reqwest::StatusCode;
use serde_json::Value;

use crate::mcp_support::http_client;

pub fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("mcc-test-rest-{name}-{}-{nanos}", std::process::id())
}

pub async fn get(base: &str, path: &str) -> (StatusCode, Value) {
    let resp = http_client()
        .get(format!("{base}{path}"))
        .send()
        .await
        .expect("GET");
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

pub async fn post_body(base: &str, path: &str, body: &str) -> reqwest::Response {
    http_client()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("POST")
}

pub async fn post_json(base: &str, path: &str, body: Value) -> (StatusCode, Value) {
    let resp = post_body(base, path, &body.to_string()).await;
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

pub fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}
