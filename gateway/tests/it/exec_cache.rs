//! The result cache (in memory and in a real Redis) and transforms. (A transform's
//! environment: `tests/process_env.rs`.)

use crate::common;

use common::*;
use mcc_gateway::exec::{Engine, Outcome, ResultCache};
use serde_json::json;

fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A tool key no other test run shares (the Redis server outlives test runs).
fn unique_key(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("test.{name}_{}_{nanos}", std::process::id())
}

/// An exec tool that appends a line to `counter` on every run and prints the count.
fn counting_tool(counter: &std::path::Path, key: &str) -> mcc_catalog::Tool {
    let mut t = exec_tool(&format!(
        "echo run >> {0}; wc -l < {0} | tr -d ' '",
        counter.display()
    ));
    t.key = key.to_string();
    t.cache_ttl = Some(60);
    t
}

async fn cache_is_per_caller_and_context(engine: Engine, key: &str) {
    let dir = tempfile::tempdir().unwrap();
    let tool = counting_tool(&dir.path().join("runs"), key);
    let first = call_as(&engine, &tool, json!({}), alice(), "alice")
        .await
        .unwrap();
    assert_eq!(
        (first.outcome.to_text().as_str(), first.cached),
        ("1\n", false)
    );
    let again = call_as(&engine, &tool, json!({}), alice(), "alice")
        .await
        .unwrap();
    assert_eq!(
        (again.outcome.to_text().as_str(), again.cached),
        ("1\n", true)
    );
    // Another user never sees alice's result.
    let bob_ctx = obj(json!({"user": "bob", "groups": [], "tools": []}));
    let bob = call_as(&engine, &tool, json!({}), bob_ctx, "bob")
        .await
        .unwrap();
    assert_eq!((bob.outcome.to_text().as_str(), bob.cached), ("2\n", false));
    // Nor does alice with different session variables.
    let mut other = alice();
    other.insert("target".into(), json!("10.0.0.5"));
    let out = call_as(&engine, &tool, json!({}), other, "alice")
        .await
        .unwrap();
    assert_eq!((out.outcome.to_text().as_str(), out.cached), ("3\n", false));
}

#[tokio::test]
async fn memory_cache_is_per_caller_and_context() {
    cache_is_per_caller_and_context(engine(), &unique_key("mem")).await;
}

#[tokio::test]
async fn redis_cache_is_per_caller_and_context() {
    let cache = ResultCache::redis(&redis_url(), "mcc")
        .await
        .expect("Redis is running");
    let key = unique_key("redis");
    cache_is_per_caller_and_context(engine().with_cache(cache), &key).await;
    // The entries live in Redis with the tool's TTL, under the documented key format.
    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("mcc:exec:{key}:*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys.len(), 3, "{keys:?}");
    let ttl: i64 = redis::cmd("TTL")
        .arg(&keys[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!((1..=60).contains(&ttl), "{ttl}");
    let _: () = redis::cmd("DEL")
        .arg(&keys)
        .query_async(&mut conn)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_second_engine_on_the_same_redis_gets_the_hit() {
    let key = unique_key("shared");
    let dir = tempfile::tempdir().unwrap();
    let tool = counting_tool(&dir.path().join("runs"), &key);
    let a = engine().with_cache(ResultCache::redis(&redis_url(), "mcc").await.unwrap());
    let b = engine().with_cache(ResultCache::redis(&redis_url(), "mcc").await.unwrap());
    assert!(!run(&a, &tool, json!({})).await.cached);
    let hit = run(&b, &tool, json!({})).await;
    assert_eq!((hit.outcome.to_text().as_str(), hit.cached), ("1\n", true));
    // Another deployment on the same Redis (its own session.key_prefix) runs the tool.
    let other = engine().with_cache(
        ResultCache::redis(&redis_url(), &format!("other-{key}"))
            .await
            .unwrap(),
    );
    let miss = run(&other, &tool, json!({})).await;
    assert_eq!(
        (miss.outcome.to_text().as_str(), miss.cached),
        ("2\n", false)
    );
    // The same key with a changed definition never serves the old result.
    let mut changed = tool.clone();
    changed.env.insert("CHANGED".into(), "1".into());
    let miss = run(&b, &changed, json!({})).await;
    assert_eq!(
        (miss.outcome.to_text().as_str(), miss.cached),
        ("3\n", false)
    );
}

#[tokio::test]
async fn failures_are_not_cached() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("runs");
    let mut tool = exec_tool(&format!("echo run >> {}; exit 4", counter.display()));
    tool.cache_ttl = Some(60);
    let engine = engine();
    for _ in 0..2 {
        let out = run(&engine, &tool, json!({})).await;
        assert!(!out.cached);
        assert!(!out.outcome.is_success());
    }
    assert_eq!(
        std::fs::read_to_string(&counter).unwrap().lines().count(),
        2
    );
}

#[tokio::test]
async fn a_cache_hit_writes_no_context_back() {
    let mut tool = fn_tool(
        "remember",
        json!([str_param("name"), str_param("value"), {"name": "context", "type": "dict"}]),
    );
    tool.cache_ttl = Some(60);
    let engine = engine();
    let params = json!({"name": "cursor", "value": "c1"});
    let first = call(&engine, &tool, params.clone(), alice()).await.unwrap();
    assert!(first.write_back.is_some());
    let hit = call(&engine, &tool, params, alice()).await.unwrap();
    assert!(hit.cached);
    assert_eq!(hit.outcome, Outcome::Success(json!("stored cursor")));
    assert_eq!(hit.write_back, None);
}

#[tokio::test]
async fn transform_replaces_a_successful_result() {
    let mut tool = exec_tool("echo hello {{ who }}");
    tool.params = serde_json::from_value(json!([{"name": "who", "type": "str"}])).unwrap();
    tool.transform = Some("tr a-z A-Z | sed s/WORLD/{{ who | quote }}/".into());
    let out = run(&engine(), &tool, json!({"who": "world"})).await;
    assert_eq!(out.outcome, Outcome::Success(json!("HELLO world\n")));
    // Not applied to failures.
    tool.kind = mcc_catalog::ToolKind::Exec {
        command: "echo no; exit 1".into(),
    };
    let out = run(&engine(), &tool, json!({"who": "x"})).await;
    assert_eq!(
        out.outcome,
        Outcome::Failure {
            code: 1,
            stdout: "no\n".into(),
            stderr: String::new()
        }
    );
}

#[tokio::test]
async fn an_fn_result_reaches_the_transform_as_json() {
    let mut tool = fn_tool("greet", json!([str_param("name")]));
    tool.transform = Some("cat".into());
    let out = run(&engine(), &tool, json!({"name": "a"})).await;
    assert_eq!(out.outcome, Outcome::Success(json!("\"hello a\"")));
}
