//! Abuse suite, legacy session ids (issue 32, item 12): a real gateway over real HTTP. An
//! `Mcp-Session-Id` belongs to the user whose `initialize` received it: another
//! authenticated caller presenting it — to call a tool, open the session's stream or end
//! it — gets the same `404 Session not found` as for an id that never existed, and the
//! owner's session goes on. With sessions in Redis, the same holds on every replica.

use crate::mcp_support;

use std::time::{SystemTime, UNIX_EPOCH};

use mcc_gateway::auth::api_key::{self, MintedKey};
use mcp_support::*;
use serde_json::json;

/// A client that authenticates every request with `key`.
fn client_with(key: &MintedKey) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        "authorization",
        format!("Bearer {}", key.raw.expose()).parse().unwrap(),
    );
    http_client_builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

/// A gateway (`api_key` auth) knowing alice and bob, sessions in Redis under `prefix`
/// when given.
async fn gateway(alice: &MintedKey, bob: &MintedKey, redis_prefix: Option<&str>) -> Server {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("users.yaml"),
        users_file(&[
            ("alice", &["public"], &[alice]),
            ("bob", &["public"], &[bob]),
        ]),
    )
    .unwrap();
    let redis = redis_prefix.map(|_| redis_url());
    let mut s = settings(dir.path(), "api_key", redis.as_deref());
    if let Some(prefix) = redis_prefix {
        s.session.key_prefix = prefix.to_string();
    }
    start_with(s, dir).await
}

fn echo(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "execute", "arguments": {"key": "public.echo", "params": {"message": "hi"}}}})
    .to_string()
}

/// What another caller gets for each use of `sid`: POST, GET (the stream), DELETE.
async fn uses_by(http: &reqwest::Client, url: &str, sid: &str) -> Vec<(u16, String)> {
    let (status, _, _) = post(http, url, Some(sid), echo(7)).await;
    let mut out = vec![(status, String::new())];
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let r = http
            .request(method, url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", sid)
            .header("mcp-protocol-version", "2025-06-18")
            .send()
            .await
            .unwrap();
        out.push((r.status().as_u16(), r.text().await.unwrap()));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_callers_session_id_is_an_unknown_session() {
    let (alice_key, bob_key) = (api_key::mint(None).unwrap(), api_key::mint(None).unwrap());
    let (alice, bob) = (client_with(&alice_key), client_with(&bob_key));
    let server = gateway(&alice_key, &bob_key, None).await;
    let sid = raw_initialize(&alice, &server.url).await;

    let stolen = uses_by(&bob, &server.url, &sid).await;
    let unknown = uses_by(&bob, &server.url, "f6a1c2d4-0000-4000-8000-000000000000").await;
    assert!(
        stolen.iter().all(|(status, _)| *status == 404),
        "{stolen:?}"
    );
    // Indistinguishable from an id that does not exist.
    assert_eq!(stolen, unknown);

    // Bob's DELETE ended nothing: alice's session still answers her.
    let text = raw_call(
        &alice,
        &server.url,
        &sid,
        8,
        "execute",
        json!({"key": "public.echo", "params": {"message": "mine"}}),
    )
    .await;
    assert!(text.contains("mine"), "{text}");
    // Her own DELETE ends it, and then the id is unknown to her too.
    let r = alice
        .delete(&server.url)
        .header("mcp-session-id", &sid)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let (status, _, _) = post(&alice, &server.url, Some(&sid), echo(9)).await;
    assert_eq!(status, 404);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_is_checked_on_every_replica() {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let prefix = format!("mccowner-{}-{nanos}", std::process::id());
    let (alice_key, bob_key) = (api_key::mint(None).unwrap(), api_key::mint(None).unwrap());
    let (alice, bob) = (client_with(&alice_key), client_with(&bob_key));
    let a = gateway(&alice_key, &bob_key, Some(&prefix)).await;
    let b = gateway(&alice_key, &bob_key, Some(&prefix)).await;
    let sid = raw_initialize(&alice, &a.url).await;

    let stolen = uses_by(&bob, &b.url, &sid).await;
    assert!(
        stolen.iter().all(|(status, _)| *status == 404),
        "{stolen:?}"
    );
    // The replica that did not open the session serves it to its owner.
    let text = raw_call(
        &alice,
        &b.url,
        &sid,
        8,
        "execute",
        json!({"key": "public.echo", "params": {"message": "on b"}}),
    )
    .await;
    assert!(text.contains("on b"), "{text}");
    a.stop().await;
    b.stop().await;
}

/// A session that moves to a replica (the one that served it stopped) is restored there
/// once, however many of its requests arrive at once: each is answered, none with a
/// restore error (rmcp alone answered 500 to a request that found the session missing
/// just before another request of it restored it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_moving_replicas_serves_its_simultaneous_requests() {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let prefix = format!("mccrestore-{}-{nanos}", std::process::id());
    let (alice_key, bob_key) = (api_key::mint(None).unwrap(), api_key::mint(None).unwrap());
    let alice = client_with(&alice_key);
    let a = gateway(&alice_key, &bob_key, Some(&prefix)).await;
    let b = gateway(&alice_key, &bob_key, Some(&prefix)).await;
    for round in 0..5u64 {
        let sid = raw_initialize(&alice, &a.url).await;
        let calls = (0..12u64).map(|i| post(&alice, &b.url, Some(&sid), echo(round * 100 + i)));
        let statuses: Vec<u16> = futures::future::join_all(calls)
            .await
            .into_iter()
            .map(|(status, _, _)| status)
            .collect();
        assert!(
            statuses.iter().all(|s| *s == 200),
            "round {round}: {statuses:?}"
        );
    }
    a.stop().await;
    b.stop().await;
}
