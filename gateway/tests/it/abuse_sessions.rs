//! Abuse suite, sessions (issue 12, items 2, 3 and 6): a real gateway over real HTTP,
//! tools run as real subprocesses, each test on both backends (in-memory and the real
//! Redis at `REDIS_URL`, under its own key prefix).
//!
//! - oversized values and buckets are refused naming the limit and its setting, nothing
//!   stored is lost, and a full bucket (or one stored under larger limits) never stops a
//!   tool from starting; an fn tool's oversized write-back is refused the same way;
//! - `new_session` floods stop at the per-user handle limit;
//! - an fn tool's write-back is a diff: a `set_session` made while it ran survives;
//! - anonymous stateless callers get no shared default bucket.

use crate::mcp_support;

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcc_gateway::config::{SessionBackend, Settings};
use mcp_support::*;
use serde_json::{Value, json};

/// fn tools: `bloat` leaves an oversized context; `slow` waits for the test's go-ahead
/// between receiving its context and returning it changed.
const FN_MODULE: &str = r#"
import os, time

def bloat(context: dict = None) -> str:
    context["cursor"] = 1
    context["huge"] = "x" * 200000
    return "bloated"

def size(context: dict = None) -> int:
    return len(os.environ["MCC_CTX"])

def slow(dir: str, context: dict = None) -> str:
    open(os.path.join(dir, "started"), "w").close()
    for _ in range(300):
        if os.path.exists(os.path.join(dir, "go")):
            break
        time.sleep(0.05)
    context["cursor"] = 7
    del context["gone"]
    return "done"
"#;

fn unique_prefix(test: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("mccabuse-{}-{nanos}-{test}", std::process::id())
}

/// Settings over the standard tools plus the fn tools above, on `backend`.
fn settings_for(dir: &Path, auth: &str, backend: SessionBackend, prefix: &str) -> Settings {
    let cwd = dir.display();
    std::fs::create_dir_all(dir.join("tools")).unwrap();
    std::fs::write(dir.join("abuse.py"), FN_MODULE).unwrap();
    let fns: String = ["bloat", "size", "slow"]
        .iter()
        .map(|f| format!("  - fn: abuse:{f}\n    groups: [public]\n    cwd: {cwd}\n"))
        .collect();
    std::fs::write(
        dir.join("tools").join("tools.yaml"),
        format!("{TOOLS}{fns}"),
    )
    .unwrap();
    let redis = (backend == SessionBackend::Redis).then(redis_url);
    let mut s = settings(dir, auth, redis.as_deref());
    s.session.key_prefix = prefix.to_string();
    s
}

async fn cleanup(prefix: &str) {
    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL")
            .arg(keys)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
}

const BACKENDS: [SessionBackend; 2] = [SessionBackend::Memory, SessionBackend::Redis];

/// A refusal: an error result whose text names `setting`.
async fn refused(client: &Client, tool: &str, args: Value, setting: &str) -> String {
    let r = call(client, tool, args).await;
    let t = text(&r);
    assert_eq!(r.is_error, Some(true), "{tool} was not refused: {t}");
    assert!(t.contains(setting), "{t}");
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_values_and_buckets_are_refused_and_nothing_is_lost() {
    for backend in BACKENDS {
        let prefix = unique_prefix("oversized");
        let dir = tempfile::tempdir().unwrap();
        let mut s = settings_for(dir.path(), "dev-admin", backend, &prefix);
        s.session.max_vars = 8;
        let server = start_with(s, dir).await;
        let client = stateless(&server.url, TestClient::plain()).await;
        let set = |name: &str, value: Value| json!({"name": name, "value": value});

        assert_eq!(
            call_text(&client, "set_session", set("target", json!("10.0.0.5"))).await,
            "Set 'target'."
        );
        // One value over 32 KiB, and one of 12 KB UTF-8 that is 36 KB as the JSON text
        // a tool receives (non-ASCII escaped).
        let t = refused(
            &client,
            "set_session",
            set("big", json!("x".repeat(300_000))),
            "session.max_value_bytes",
        )
        .await;
        assert!(t.contains("32768"), "{t}");
        refused(
            &client,
            "set_session",
            set("accents", json!("é".repeat(6000))),
            "session.max_value_bytes",
        )
        .await;
        // Three values of 30 000 bytes fit in 96 KiB; a fourth does not.
        for name in ["v0", "v1", "v2"] {
            let r = call_text(&client, "set_session", set(name, json!("y".repeat(30_000)))).await;
            assert_eq!(r, format!("Set '{name}'."), "{backend:?}");
        }
        refused(
            &client,
            "set_session",
            set("v3", json!("z".repeat(30_000))),
            "session.max_bucket_bytes",
        )
        .await;
        // Replacing a variable counts its new size, not both.
        assert_eq!(
            call_text(&client, "set_session", set("v2", json!("w".repeat(30_000)))).await,
            "Set 'v2'."
        );
        for i in 0..4 {
            let name = format!("n{i}");
            assert_eq!(
                call_text(&client, "set_session", set(&name, json!(i))).await,
                format!("Set '{name}'.")
            );
        }
        refused(
            &client,
            "set_session",
            set("n9", json!(9)),
            "session.max_vars",
        )
        .await;

        // Nothing stored was lost, and the full bucket does not stop tools from starting.
        assert_eq!(
            call_text(&client, "get_session", json!({"name": "target"})).await,
            "\"10.0.0.5\""
        );
        assert_eq!(
            call_text(&client, "get_session", json!({"name": "v0"})).await,
            format!("\"{}\"", "y".repeat(30_000))
        );
        assert_eq!(
            call_text(&client, "execute", json!({"key": "public.ctx"})).await,
            "alice 10.0.0.5 \n"
        );
        let blob: usize = call_text(&client, "execute", json!({"key": "public.size"}))
            .await
            .parse()
            .expect("the fn tool started and measured MCC_CTX");
        assert!(blob > 90_000 && blob < 128 * 1024, "{blob}");

        // An fn tool leaving an oversized context: its result comes back, its whole
        // write-back is refused, the stored bucket stays as it was.
        assert_eq!(
            call_text(&client, "execute", json!({"key": "public.bloat"})).await,
            "bloated"
        );
        for name in ["huge", "cursor"] {
            assert_eq!(
                call_text(&client, "get_session", json!({"name": name})).await,
                "null",
                "{backend:?} {name}"
            );
        }
        assert_eq!(
            call_text(&client, "get_session", json!({"name": "n3"})).await,
            "3"
        );
        client.cancel().await.unwrap();
        server.stop().await;
        cleanup(&prefix).await;
    }
}

/// A bucket stored under larger limits (or by anything that bypassed them) still lets
/// every tool start: the variables that do not fit one environment string are left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_context_never_stops_a_tool_from_starting() {
    let prefix = unique_prefix("stored");
    let dir = tempfile::tempdir().unwrap();
    let s = settings_for(dir.path(), "dev-admin", SessionBackend::Redis, &prefix);
    let server = start_with(s, dir).await;
    let client = redis::Client::open(redis_url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let huge = Value::from("h".repeat(300_000)).to_string();
    let _: () = redis::cmd("HSET")
        .arg(format!("{prefix}:session:default:alice"))
        .arg("huge")
        .arg(&huge)
        .arg("target")
        .arg("\"10.0.0.5\"")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mcp = stateless(&server.url, TestClient::plain()).await;
    assert_eq!(
        call_text(&mcp, "execute", json!({"key": "public.ctx"})).await,
        "alice 10.0.0.5 \n"
    );
    let blob: usize = call_text(&mcp, "execute", json!({"key": "public.size"}))
        .await
        .parse()
        .expect("the fn tool started");
    assert!(blob < 1000, "{blob}");
    // Left out of the tool's context is not deleted by its write-back.
    let stored: Option<String> = redis::cmd("HGET")
        .arg(format!("{prefix}:session:default:alice"))
        .arg("huge")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(stored.as_deref(), Some(huge.as_str()));
    mcp.cancel().await.unwrap();
    server.stop().await;
    cleanup(&prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_session_floods_stop_at_the_per_user_limit() {
    for backend in BACKENDS {
        let prefix = unique_prefix("handles");
        let dir = tempfile::tempdir().unwrap();
        let mut s = settings_for(dir.path(), "dev-admin", backend, &prefix);
        s.session.max_handles_per_user = 5;
        let server = start_with(s, dir).await;
        let client = stateless(&server.url, TestClient::plain()).await;
        let mut handles = Vec::new();
        for _ in 0..5 {
            let r = call(&client, "new_session", json!({})).await;
            assert_ne!(r.is_error, Some(true), "{}", text(&r));
            handles.push(text(&r));
        }
        let t = refused(
            &client,
            "new_session",
            json!({}),
            "session.max_handles_per_user",
        )
        .await;
        assert!(t.contains('5'), "{t}");
        // The handles already held keep working.
        let h = &handles[4];
        assert_eq!(
            call_text(
                &client,
                "set_session",
                json!({"name": "x", "value": 1, "session": h})
            )
            .await,
            "Set 'x'."
        );
        client.cancel().await.unwrap();

        // Another user is not affected by alice's flood (same store for Redis).
        if backend == SessionBackend::Redis {
            let dir = tempfile::tempdir().unwrap();
            let mut s = settings_for(dir.path(), "dev-public", backend, &prefix);
            s.session.max_handles_per_user = 5;
            let other = start_with(s, dir).await;
            let bob = stateless(&other.url, TestClient::plain()).await;
            let r = call(&bob, "new_session", json!({})).await;
            assert_ne!(r.is_error, Some(true), "{}", text(&r));
            bob.cancel().await.unwrap();
            other.stop().await;
        }
        server.stop().await;
        cleanup(&prefix).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_session_made_while_an_fn_tool_runs_survives_its_write_back() {
    for backend in BACKENDS {
        let prefix = unique_prefix("race");
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("race");
        std::fs::create_dir_all(&work).unwrap();
        let s = settings_for(dir.path(), "dev-admin", backend, &prefix);
        let server = start_with(s, dir).await;
        let client = stateless(&server.url, TestClient::plain()).await;
        for (name, value) in [("a", json!(1)), ("gone", json!("x"))] {
            call_text(
                &client,
                "set_session",
                json!({"name": name, "value": value}),
            )
            .await;
        }
        let runner = stateless(&server.url, TestClient::plain()).await;
        let params = json!({"key": "public.slow", "params": {"dir": work.display().to_string()}});
        let run = tokio::spawn(async move {
            let out = call_text(&runner, "execute", params).await;
            runner.cancel().await.unwrap();
            out
        });
        // The tool has its context; now another call changes the bucket.
        let started = work.join("started");
        for _ in 0..200 {
            if started.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(started.exists(), "the fn tool never started");
        for (name, value) in [("other", json!(2)), ("a", json!(3))] {
            assert_eq!(
                call_text(
                    &client,
                    "set_session",
                    json!({"name": name, "value": value})
                )
                .await,
                format!("Set '{name}'.")
            );
        }
        std::fs::write(work.join("go"), "").unwrap();
        assert_eq!(run.await.unwrap(), "done");

        let get = |name: &'static str| {
            let client = &client;
            async move { call_text(client, "get_session", json!({"name": name})).await }
        };
        // The tool's own changes landed; the concurrent ones survived.
        assert_eq!(get("cursor").await, "7", "{backend:?}");
        assert_eq!(get("gone").await, "null", "{backend:?}");
        assert_eq!(get("other").await, "2", "{backend:?}");
        assert_eq!(get("a").await, "3", "{backend:?}");
        client.cancel().await.unwrap();
        server.stop().await;
        cleanup(&prefix).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_stateless_callers_share_no_bucket() {
    for backend in BACKENDS {
        let prefix = unique_prefix("anon");
        let dir = tempfile::tempdir().unwrap();
        let mut s = settings_for(dir.path(), "jwt", backend, &prefix);
        s.auth.jwt.hs256_secret = Some("abuse-suite-secret-0123456789abcdef".into());
        s.auth.jwt.audience = vec!["mcc-gateway".into()];
        s.auth.jwt.issuer = Some("https://idp.abuse.test/".into());
        s.auth.allow_anonymous = true;
        let server = start_with(s, dir).await;
        let first = stateless(&server.url, TestClient::plain()).await;
        let t = refused(
            &first,
            "set_session",
            json!({"name": "secret", "value": "mine"}),
            "new_session",
        )
        .await;
        assert!(t.contains("`session`"), "{t}");
        let handle = call_text(&first, "new_session", json!({})).await;
        assert!(handle.starts_with("s_"), "{handle}");
        assert_eq!(
            call_text(
                &first,
                "set_session",
                json!({"name": "secret", "value": "mine", "session": handle})
            )
            .await,
            "Set 'secret'."
        );
        // Another anonymous caller without the handle sees nothing.
        let second = stateless(&server.url, TestClient::plain()).await;
        assert_eq!(
            call_text(&second, "get_session", json!({"name": "secret"})).await,
            "null"
        );
        // A legacy anonymous client has its own Mcp-Session-Id bucket.
        let legacy_client = legacy(&server.url, TestClient::plain()).await;
        assert_eq!(
            call_text(
                &legacy_client,
                "set_session",
                json!({"name": "x", "value": 1})
            )
            .await,
            "Set 'x'."
        );
        for c in [first, second, legacy_client] {
            c.cancel().await.unwrap();
        }
        server.stop().await;
        cleanup(&prefix).await;
    }
}
