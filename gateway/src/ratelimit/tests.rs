//! Which limit applies, and the refusal's text.

use std::time::Duration;

use mcc_catalog::rate::RateLimit;
use mcc_catalog::{Tool, User};
use serde_json::json;

use super::*;

fn limit(text: &str) -> RateLimit {
    text.parse().unwrap()
}

fn tool(key: &str, own: Option<&str>) -> Tool {
    let mut t: Tool = serde_json::from_value(json!({
        "key": key, "name": key, "kind": "exec", "command": "echo"
    }))
    .unwrap();
    t.rate_limit = own.map(limit);
    t
}

fn user(groups: &[&str]) -> User {
    User {
        username: "u".into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..User::default()
    }
}

fn settings(yaml: serde_json::Value) -> RateLimits {
    RateLimits::new(
        serde_json::from_value(yaml).unwrap(),
        Counter::local(),
        Metrics::new(),
    )
}

#[test]
fn the_most_specific_limit_applies() {
    let limits = settings(json!({
        "default": "100/1h",
        "per_user": "1000/1h",
        "groups": {
            "ops": "10/1min",
            "interns": {"per_tool": "2/1min", "per_user": "20/1h"},
            "vip": {"per_user": "-1"}
        },
        "tools": {"ops.pinned": "1/1s"}
    }));
    let resolve = |u: &User, t: &Tool| {
        let a = limits.resolve(Some(u), t);
        (
            a.per_tool.map(|l| l.to_string()),
            a.per_user.map(|l| l.to_string()),
        )
    };
    let s = |x: &str| Some(x.to_string());
    // Global.
    assert_eq!(
        resolve(&user(&["public"]), &tool("a", None)),
        (s("100/1h"), s("1000/1h"))
    );
    // Group over global; the strictest of the caller's groups.
    assert_eq!(
        resolve(&user(&["ops"]), &tool("a", None)),
        (s("10/1min"), s("1000/1h"))
    );
    assert_eq!(
        resolve(&user(&["ops", "interns"]), &tool("a", None)),
        (s("2/1min"), s("20/1h"))
    );
    // A group's unlimited per-user limit is its own and wins over the global one.
    assert_eq!(
        resolve(&user(&["vip"]), &tool("a", None)),
        (s("100/1h"), None)
    );
    // The tool over its callers' groups, unlimited included.
    assert_eq!(
        resolve(&user(&["interns"]), &tool("a", Some("50/1min"))),
        (s("50/1min"), s("20/1h"))
    );
    assert_eq!(
        resolve(&user(&["interns"]), &tool("a", Some("unlimited"))),
        (None, s("20/1h"))
    );
    // The settings' tools map over the tool's own field.
    assert_eq!(
        resolve(&user(&["ops"]), &tool("ops.pinned", Some("50/1min"))),
        (s("1/1s"), s("1000/1h"))
    );
    // Anonymous callers get the global limits.
    let a = limits.resolve(None, &tool("a", None));
    assert_eq!(a.per_tool, Some(limit("100/1h")));
}

#[test]
fn disabled_means_no_limit_at_all() {
    let limits = settings(json!({"enabled": false, "default": "1/1h"}));
    assert_eq!(
        limits.resolve(None, &tool("a", Some("1/1s"))),
        Applicable::default()
    );
}

#[tokio::test]
async fn the_local_counter_refuses_the_call_over_the_limit_with_the_delay() {
    let limits = settings(json!({"default": "2/1h"}));
    let (u, t) = (user(&["public"]), tool("public.echo", None));
    limits.check(Some(&u), "bob", &t).await.unwrap();
    limits.check(Some(&u), "bob", &t).await.unwrap();
    let refused = limits.check(Some(&u), "bob", &t).await.unwrap_err();
    let text = refused.to_string();
    assert!(
        text.starts_with("Rate limit exceeded for public.echo — retry in "),
        "{text}"
    );
    assert!(
        text.contains("limit 2/1h per caller for this tool"),
        "{text}"
    );
    assert!(
        (3590..=3600).contains(&refused.retry_after_secs()),
        "{text}"
    );
    assert_eq!(refused.http_status(), 429);
    // Another caller has buckets of their own.
    limits.check(Some(&u), "carol", &t).await.unwrap();
}

#[test]
fn group_limits_are_a_limit_or_a_map_and_errors_name_the_key() {
    let ok: RateLimitSettings = serde_json::from_value(json!({
        "groups": {"a": "5/1s", "b": {"per_user": "7/1min"}},
        "on_redis_error": "closed"
    }))
    .unwrap();
    assert_eq!(ok.groups["a"].per_tool, Some(limit("5/1s")));
    assert_eq!(ok.groups["b"].per_user, Some(limit("7/1min")));
    assert_eq!(ok.on_redis_error, OnStoreError::Closed);
    let bad = serde_path_to_error::deserialize::<_, RateLimitSettings>(
        json!({"groups": {"a": "5 a second"}}),
    )
    .unwrap_err();
    assert!(bad.path().to_string().contains("groups.a"), "{bad}");
    assert!(bad.to_string().contains("10/1min"), "{bad}");
}

#[test]
fn the_refusal_when_the_store_is_down_says_so() {
    let e = RateLimited::Unavailable {
        retry_after: Duration::from_secs(5),
    };
    assert_eq!(e.retry_after_secs(), 5);
    assert_eq!(e.http_status(), 503);
    assert!(e.to_string().contains("not run"), "{e}");
}
