//! The session store's contract, run against both backends: the in-memory store and the
//! real Redis at `REDIS_URL` (default `redis://127.0.0.1:6379`), each test under its own
//! key prefix (deleted at the end).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcc_catalog::context::NameError;
use mcc_gateway::session::{Scope, SessionBackend, SessionError, SessionSettings, SessionStore};
use serde_json::{Map, Value, json};

fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn unique_prefix(test: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("mcctest-{}-{nanos}-{test}", std::process::id())
}

/// A store of each backend, with the TTL given; the Redis one under a fresh prefix.
struct Backends {
    stores: Vec<(&'static str, SessionStore)>,
    prefix: String,
}

impl Backends {
    fn new(test: &str, ttl_secs: u64) -> Self {
        let prefix = unique_prefix(test);
        let memory = SessionStore::from_settings(&SessionSettings {
            ttl_secs,
            ..SessionSettings::default()
        })
        .unwrap();
        let redis = SessionStore::from_settings(&SessionSettings {
            backend: SessionBackend::Redis,
            redis_url: Some(redis_url()),
            ttl_secs,
            key_prefix: prefix.clone(),
            ..SessionSettings::default()
        })
        .unwrap();
        Self {
            stores: vec![("memory", memory), ("redis", redis)],
            prefix,
        }
    }

    async fn cleanup(self) {
        let mut conn = raw_redis().await;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}:*", self.prefix))
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
}

async fn raw_redis() -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

fn map(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

#[tokio::test]
async fn values_keep_their_json_types() {
    let backends = Backends::new("types", 600);
    let values = json!({
        "target": "10.0.0.5", "budget": 1000, "ratio": 0.25, "on": false,
        "nothing": null, "hosts": ["a", 1, {"b": [true]}], "deep": {"x": {"y": 1.5e3}},
        "unicode": "é ✓", "quoted": "\"1000\""
    });
    for (backend, store) in &backends.stores {
        let scope = Scope::default_for("alice");
        for (name, value) in values.as_object().unwrap() {
            store.set(&scope, name, value.clone()).await.unwrap();
        }
        for (name, value) in values.as_object().unwrap() {
            let got = store.get(&scope, name).await.unwrap();
            assert_eq!(got.as_ref(), Some(value), "{backend}: {name}");
        }
        assert_eq!(
            store.get(&scope, "never_set").await.unwrap(),
            None,
            "{backend}"
        );
        assert_eq!(
            Value::Object(store.vars(&scope).await.unwrap()),
            values,
            "{backend}"
        );
    }
    backends.cleanup().await;
}

#[tokio::test]
async fn writes_set_and_refresh_the_ttl() {
    let backends = Backends::new("ttl", 600);
    for (backend, store) in &backends.stores {
        let scope = Scope::default_for("alice");
        assert_eq!(store.remaining(&scope).await.unwrap(), None, "{backend}");
        store.set(&scope, "a", json!(1)).await.unwrap();
        let left = store.remaining(&scope).await.unwrap().unwrap();
        assert!(
            left > Duration::from_secs(595) && left <= Duration::from_secs(600),
            "{backend}: {left:?}"
        );
        assert_eq!(store.ttl(), Duration::from_secs(600));
    }
    // Redis: shorten the TTL behind the store's back; the next write restores it.
    let (_, redis_store) = &backends.stores[1];
    let scope = Scope::default_for("alice");
    let mut conn = raw_redis().await;
    let _: () = redis::cmd("EXPIRE")
        .arg(scope.key(&backends.prefix))
        .arg(5)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(redis_store.remaining(&scope).await.unwrap().unwrap() <= Duration::from_secs(5));
    redis_store.set(&scope, "b", json!(2)).await.unwrap();
    assert!(redis_store.remaining(&scope).await.unwrap().unwrap() > Duration::from_secs(595));
    backends.cleanup().await;
}

#[tokio::test]
async fn buckets_expire_after_the_ttl_without_writes() {
    let backends = Backends::new("expiry", 1);
    for (_, store) in &backends.stores {
        store
            .set(&Scope::default_for("alice"), "a", json!(1))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1300)).await;
    for (backend, store) in &backends.stores {
        let scope = Scope::default_for("alice");
        assert_eq!(store.vars(&scope).await.unwrap(), Map::new(), "{backend}");
        assert_eq!(store.remaining(&scope).await.unwrap(), None, "{backend}");
        // A write after expiry starts a new bucket: nothing old comes back.
        store.set(&scope, "b", json!(2)).await.unwrap();
        assert_eq!(
            store.vars(&scope).await.unwrap(),
            map(json!({"b": 2})),
            "{backend}"
        );
    }
    backends.cleanup().await;
}

#[tokio::test]
async fn buckets_are_isolated_by_handle_and_user() {
    let backends = Backends::new("isolation", 600);
    for (backend, store) in &backends.stores {
        let scopes = [
            Scope::new("h1", "alice").unwrap(),
            Scope::new("h1", "bob").unwrap(),
            Scope::new("h2", "alice").unwrap(),
            Scope::default_for("alice"),
            // A username with ':' cannot reach another bucket's key.
            Scope::new("h1", "alice:x").unwrap(),
        ];
        for (i, scope) in scopes.iter().enumerate() {
            store.set(scope, "n", json!(i)).await.unwrap();
        }
        for (i, scope) in scopes.iter().enumerate() {
            assert_eq!(
                store.vars(scope).await.unwrap(),
                map(json!({"n": i})),
                "{backend} {scope:?}"
            );
        }
    }
    backends.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_sets_on_one_bucket_lose_no_update() {
    let backends = Backends::new("concurrent", 600);
    for (backend, store) in &backends.stores {
        let scope = Scope::new("shared", "alice").unwrap();
        let tasks: Vec<_> = (0..50)
            .map(|i| {
                let (store, scope) = (store.clone(), scope.clone());
                tokio::spawn(async move { store.set(&scope, &format!("v{i}"), json!(i)).await })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        let vars = store.vars(&scope).await.unwrap();
        assert_eq!(vars.len(), 50, "{backend}");
        for i in 0..50 {
            assert_eq!(vars[&format!("v{i}")], json!(i), "{backend}");
        }
    }
    backends.cleanup().await;
}

#[tokio::test]
async fn replace_is_a_full_atomic_replace() {
    let backends = Backends::new("replace", 600);
    for (backend, store) in &backends.stores {
        let scope = Scope::default_for("alice");
        store.set(&scope, "a", json!(1)).await.unwrap();
        store.set(&scope, "b", json!("x")).await.unwrap();
        store
            .replace(&scope, map(json!({"b": [2], "c": {"d": 3}})))
            .await
            .unwrap();
        assert_eq!(
            store.vars(&scope).await.unwrap(),
            map(json!({"b": [2], "c": {"d": 3}})),
            "{backend}"
        );
        assert!(
            store.remaining(&scope).await.unwrap().is_some(),
            "{backend}"
        );

        // One bad name rejects the whole write-back; nothing changes.
        let bad = store
            .replace(&scope, map(json!({"ok": 1, "Bad-Key": 2})))
            .await;
        assert_eq!(
            bad,
            Err(SessionError::Name(NameError::NotSlug("Bad-Key".into()))),
            "{backend}"
        );
        let reserved = store
            .replace(&scope, map(json!({"ok": 1, "user": "mallory"})))
            .await;
        assert_eq!(
            reserved,
            Err(SessionError::Name(NameError::Reserved("user".into()))),
            "{backend}"
        );
        assert_eq!(
            store.vars(&scope).await.unwrap(),
            map(json!({"b": [2], "c": {"d": 3}})),
            "{backend}"
        );

        store.replace(&scope, Map::new()).await.unwrap();
        assert_eq!(store.vars(&scope).await.unwrap(), Map::new(), "{backend}");
        assert_eq!(store.remaining(&scope).await.unwrap(), None, "{backend}");
    }
    backends.cleanup().await;
}

#[tokio::test]
async fn set_refuses_reserved_and_non_slug_names() {
    let backends = Backends::new("names", 600);
    for (backend, store) in &backends.stores {
        let scope = Scope::default_for("alice");
        let err = store
            .set(&scope, "user", json!("mallory"))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Cannot set reserved identity key 'user'.",
            "{backend}"
        );
        let err = store.set(&scope, "1abc", json!(1)).await.unwrap_err();
        assert!(
            err.to_string()
                .starts_with("Invalid name '1abc': must match"),
            "{backend}"
        );
        assert_eq!(store.vars(&scope).await.unwrap(), Map::new(), "{backend}");
    }
    backends.cleanup().await;
}

#[tokio::test]
async fn minted_handles_belong_to_their_user() {
    let backends = Backends::new("handles", 600);
    for (backend, store) in &backends.stores {
        let handle = store.mint_handle("alice").await.unwrap();
        assert!(
            handle.starts_with("s_") && handle.len() == 34,
            "{backend}: {handle}"
        );
        assert_ne!(
            store.mint_handle("alice").await.unwrap(),
            handle,
            "{backend}"
        );

        let scope = store.scope_for_handle(&handle, "alice").await.unwrap();
        assert_eq!(scope, Scope::new(&handle, "alice").unwrap());
        store
            .set(&scope, "target", json!("10.0.0.5"))
            .await
            .unwrap();
        let default = Scope::default_for("alice");
        assert_eq!(
            store.get(&default, "target").await.unwrap(),
            None,
            "{backend}"
        );

        assert_eq!(
            store.scope_for_handle(&handle, "bob").await,
            Err(SessionError::NotYourHandle(handle.clone())),
            "{backend}"
        );
        let unknown = store.scope_for_handle("s_0000", "alice").await.unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "Unknown or expired session 's_0000'. Call new_session to start a new one.",
            "{backend}"
        );
        assert!(matches!(
            store.scope_for_handle("a:b", "alice").await,
            Err(SessionError::BadHandle(_))
        ));
    }
    backends.cleanup().await;
}

#[tokio::test]
async fn redis_layout_and_unreadable_values() {
    let backends = Backends::new("layout", 600);
    let (_, store) = &backends.stores[1];
    let scope = Scope::default_for("alice");
    store.set(&scope, "budget", json!(1000)).await.unwrap();
    let key = format!("{}:session:default:alice", backends.prefix);
    assert_eq!(scope.key(&backends.prefix), key);
    let mut conn = raw_redis().await;
    let (kind, text): (String, String) = redis::pipe()
        .cmd("TYPE")
        .arg(&key)
        .cmd("HGET")
        .arg(&key)
        .arg("budget")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!((kind.as_str(), text.as_str()), ("hash", "1000"));

    let handle = store.mint_handle("alice").await.unwrap();
    let owner_key = format!("{}:handle:{handle}", backends.prefix);
    let (owner, ttl): (String, i64) = redis::pipe()
        .cmd("GET")
        .arg(&owner_key)
        .cmd("TTL")
        .arg(&owner_key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(owner, "alice");
    assert!(ttl > 590 && ttl <= 600, "{ttl}");

    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg("broken")
        .arg("{not json")
        .query_async(&mut conn)
        .await
        .unwrap();
    let err = store.get(&scope, "broken").await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("session store holds an unreadable value for 'broken'"),
        "{err}"
    );
    backends.cleanup().await;
}
