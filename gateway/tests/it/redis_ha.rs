//! The three Redis deployments behind one setting (`session.redis_url`), against real
//! `redis-server` processes started here on loopback ports, all with an ACL user and the
//! `default` user off: a master with two replicas and three sentinels
//! (`redis+sentinel://`), and a Redis Cluster of three masters and three replicas
//! (`redis+cluster://`). Every Redis user of the gateway is exercised on each: session
//! variables and handles, rate-limit windows (a multi-key script), the result cache,
//! pub/sub (the relay; sharded in the Cluster) and the blocking connection of the search
//! embedding cache (MGET and a pipeline). Then the master is killed with SIGKILL and the
//! same handles work again without a restart: the client follows Sentinel to the new
//! master, the Cluster connection to the promoted replica, and a new subscription
//! receives messages. Skipped (loudly) only when `redis-server` is not installed.

use crate::redis_support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use mcc_gateway::exec::ResultCache;
use mcc_gateway::ratelimit::{Counter, Scope as LimitScope};
use mcc_gateway::redis_conn::{Redis, Topology};
use mcc_gateway::session::{Scope, SessionBackend, SessionError, SessionSettings, SessionStore};
use redis_support::{ClusterSet, SentinelSet, redis_server_or_skip};
use serde_json::json;

fn store(url: &str) -> (SessionStore, Redis) {
    store_waiting(url, 0)
}

/// A store whose writes wait for `replicas` replicas (`session.redis_wait_replicas`).
fn store_waiting(url: &str, replicas: u32) -> (SessionStore, Redis) {
    let store = SessionStore::from_settings(&SessionSettings {
        backend: SessionBackend::Redis,
        redis_url: Some(url.to_string()),
        key_prefix: "ha".into(),
        timeout_ms: 1000,
        redis_wait_replicas: replicas,
        redis_wait_timeout_ms: 300,
        ..SessionSettings::default()
    })
    .expect("settings are valid");
    let (redis, _, _) = store.redis_client().unwrap();
    (store, redis)
}

/// Every Redis user of the gateway does its work on this deployment; `round` keeps the
/// keys of two rounds apart.
async fn every_user_works(store: &SessionStore, redis: &Redis, round: &str) {
    // Sessions: buckets of many users (many slots in a Cluster), handles.
    for i in 0..20 {
        let scope = Scope::default_for(&format!("user-{round}-{i}"));
        store.set(&scope, "n", json!(i)).await.unwrap();
        assert_eq!(store.get(&scope, "n").await.unwrap(), Some(json!(i)));
    }
    let owner = format!("owner-{round}");
    let handle = store.mint_handle(&owner).await.unwrap();
    let scope = store.scope_for_handle(&handle, &owner).await.unwrap();
    store.set(&scope, "city", json!("Lyon")).await.unwrap();
    assert!(matches!(
        store.scope_for_handle(&handle, "someone-else").await,
        Err(SessionError::NotYourHandle(_))
    ));

    // Rate limits: one script over a caller's tool and user windows (one hash tag).
    let counter = Counter::redis(redis.conn(), "ha");
    let caller = format!("caller-{round}");
    let buckets = vec![
        (
            mcc_gateway::ratelimit::store::tool_bucket(&caller, "t"),
            LimitScope::Tool,
            "2/1min".parse().unwrap(),
        ),
        (
            mcc_gateway::ratelimit::store::user_bucket(&caller),
            LimitScope::User,
            "10/1min".parse().unwrap(),
        ),
    ];
    assert_eq!(counter.admit(&buckets).await.unwrap(), None);
    assert_eq!(counter.admit(&buckets).await.unwrap(), None);
    let (full, _) = counter
        .admit(&buckets)
        .await
        .unwrap()
        .expect("third call refused");
    assert_eq!(full, 0);

    // The result cache.
    let cache = ResultCache::redis_with(redis.conn(), "ha");
    let key = format!("ha:cache-test:{round}");
    cache
        .put(&key, &json!({"r": round}), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(cache.get(&key).await.unwrap(), Some(json!({"r": round})));

    // Pub/sub, as the relay uses it.
    let channel = "ha:mcp-replies";
    let mut messages = redis.subscribe(channel).await.unwrap();
    redis.publish(channel, round).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("the message arrives")
        .unwrap();
    assert_eq!(got, round.as_bytes());

    // The blocking connection of the search embedding cache: a pipeline and MGET.
    let redis = redis.clone();
    let round = round.to_string();
    tokio::task::spawn_blocking(move || {
        let mut conn = redis.blocking_connection(Duration::from_secs(3)).unwrap();
        let keys: Vec<String> = (0..5)
            .map(|i| mcc_search::embed::redis_key(&format!("{round}-{i}")))
            .collect();
        let mut pipe = redis::pipe();
        for k in &keys {
            pipe.cmd("SET").arg(k).arg(k).arg("EX").arg(60).ignore();
        }
        pipe.query::<()>(&mut conn).unwrap();
        let values: Vec<String> = redis::cmd("MGET").arg(&keys).query(&mut conn).unwrap();
        assert_eq!(values, keys);
    })
    .await
    .unwrap();
}

/// Retries a session write until it is acknowledged; how long that took.
async fn write_until_ok(store: &SessionStore, limit: Duration) -> Duration {
    let scope = Scope::default_for("after-failover");
    let start = Instant::now();
    loop {
        match store.set(&scope, "ok", json!(true)).await {
            Ok(()) => return start.elapsed(),
            Err(SessionError::Unavailable(_)) if start.elapsed() < limit => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("not back within {limit:?}: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_deployment_follows_the_master() {
    if !redis_server_or_skip("sentinel_deployment_follows_the_master") {
        return;
    }
    let mut set = SentinelSet::start();
    let (store, redis) = store(&set.url());
    assert!(matches!(redis.topology(), Topology::Sentinel { .. }));
    every_user_works(&store, &redis, "before").await;
    let old_master = set.master_port();

    // WAIT: acknowledged once both replicas hold the write; asking for more replicas
    // than exist fails the write as unavailable, saying why.
    let scope = Scope::default_for("waiting");
    let (both, _) = store_waiting(&set.url(), 2);
    both.set(&scope, "k", json!(1)).await.unwrap();
    let (too_many, _) = store_waiting(&set.url(), 5);
    let err = too_many.set(&scope, "k", json!(2)).await.unwrap_err();
    assert!(err.to_string().contains("reached 2 of 5 replicas"), "{err}");

    set.master.as_mut().unwrap().kill();
    let took = write_until_ok(&store, Duration::from_secs(30)).await;
    eprintln!("sentinel: session writes acknowledged again {took:?} after SIGKILL of the master");
    assert_ne!(
        set.master_port(),
        old_master,
        "the sentinels promoted a replica"
    );
    every_user_works(&store, &redis, "after").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_deployment_keeps_slots_and_survives_a_master() {
    if !redis_server_or_skip("cluster_deployment_keeps_slots_and_survives_a_master") {
        return;
    }
    let mut set = ClusterSet::start();
    let (store, redis) = store(&set.url());
    assert_eq!(redis.topology(), &Topology::Cluster);
    every_user_works(&store, &redis, "before").await;

    // Kill the master that holds the after-failover bucket.
    let victim = set.master_of(&Scope::default_for("after-failover").key("ha"));
    set.nodes[victim].kill();
    let took = write_until_ok(&store, Duration::from_secs(30)).await;
    eprintln!("cluster: session writes acknowledged again {took:?} after SIGKILL of a master");
    every_user_works(&store, &redis, "after").await;
}
