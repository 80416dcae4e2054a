//! Sentence embeddings against the real model files (scripts/fetch-model.sh): known
//! cosine values, padding and pooling, the Redis-backed cache, an OpenAI-compatible
//! endpoint over real HTTP, and hybrid search end to end. Each test skips, saying why,
//! when the model directory is absent.

use crate::eval;

use std::path::{Path, PathBuf};

use mcc_search::embed::{EmbeddingCache, redis_key};
use mcc_search::{Embedder, SearchService, SearchSettings};

fn model() -> Option<PathBuf> {
    match eval::model_dir() {
        Ok(d) => Some(d),
        Err(why) => {
            eprintln!("SKIPPED: {why}");
            None
        }
    }
}

fn cos(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn matches_the_reference_cosine() {
    let Some(dir) = model() else { return };
    let e = Embedder::local(&dir).unwrap();
    let v = e
        .embed(&["A man is eating food.", "A man is eating a piece of bread."])
        .unwrap();
    assert_eq!(v[0].len(), 384);
    let norm: f32 = v[0].iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "not normalized: {norm}");
    let c = cos(&v[0], &v[1]);
    assert!((c - 0.7553).abs() < 0.001, "cosine {c}, reference 0.7553");
}

#[test]
fn batching_and_padding_do_not_change_vectors() {
    let Some(dir) = model() else { return };
    let e = Embedder::local(&dir).unwrap();
    let texts = [
        "restart",
        "Trigger a rolling restart of a Kubernetes deployment so all its pods are recreated.",
    ];
    let batch = e.embed(&texts).unwrap();
    for (text, batched) in texts.iter().zip(&batch) {
        let alone = &e.embed(&[text]).unwrap()[0];
        assert!(
            cos(alone, batched) > 0.9999,
            "{text}: padding changed the vector"
        );
    }
}

/// A copy of the model directory whose pooling config asks for the CLS token (as
/// bge-small-en-v1.5's does), weights symlinked.
fn cls_model(dir: &Path, tmp: &Path) -> PathBuf {
    let out = tmp.join("cls-model");
    std::fs::create_dir_all(out.join("1_Pooling")).unwrap();
    for f in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::os::unix::fs::symlink(dir.join(f), out.join(f)).unwrap();
    }
    std::fs::write(
        out.join("1_Pooling/config.json"),
        r#"{"word_embedding_dimension": 384, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#,
    )
    .unwrap();
    out
}

#[test]
fn pooling_follows_the_model_directory() {
    let Some(dir) = model() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mean = Embedder::local(&dir).unwrap();
    let cls = Embedder::local(&cls_model(&dir, tmp.path())).unwrap();
    let text = ["list the pods of a namespace"];
    let (m, c) = (
        &mean.embed(&text).unwrap()[0],
        &cls.embed(&text).unwrap()[0],
    );
    assert!(cos(m, c) < 0.99, "CLS pooling gave the mean-pooled vector");
    assert_ne!(mean.id(), cls.id(), "different models share cache keys");

    std::fs::write(tmp.path().join("cls-model/1_Pooling/config.json"), "{}").unwrap();
    let err = Embedder::local(&tmp.path().join("cls-model"))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("1_Pooling/config.json"), "{err}");
    let err = Embedder::local(Path::new("/nonexistent/model"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("/nonexistent/model") && err.contains("fetch-model.sh"),
        "{err}"
    );
}

fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

#[test]
fn tool_embeddings_are_shared_through_redis() {
    let Some(dir) = model() else { return };
    let e = Embedder::local(&dir).unwrap();
    let nonce = format!("{:?}", std::time::SystemTime::now());
    let texts: Vec<String> = (0..3)
        .map(|i| format!("tool {i} added at {nonce}"))
        .collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();

    let first = EmbeddingCache::new(Some(&redis_url())).unwrap();
    let (v1, stats) = first.embed_all(&e, &texts).unwrap();
    assert_eq!((stats.computed, stats.redis_hits), (3, 0));
    let (_, stats) = first.embed_all(&e, &texts).unwrap();
    assert_eq!((stats.memory_hits, stats.computed), (3, 0));

    // A new replica: empty memory, same Redis.
    let second = EmbeddingCache::new(Some(&redis_url())).unwrap();
    let (v2, stats) = second.embed_all(&e, &texts).unwrap();
    assert_eq!((stats.redis_hits, stats.computed), (3, 0));
    assert_eq!(v1, v2);

    let mut conn = redis::Client::open(redis_url())
        .unwrap()
        .get_connection()
        .unwrap();
    let key = redis_key(&mcc_search::embed::content_hash(e.id(), texts[0]));
    let ttl: i64 = redis::cmd("TTL").arg(&key).query(&mut conn).unwrap();
    assert!(ttl > 0, "{key} has no expiry");
    let _: () = redis::cmd("DEL").arg(&key).query(&mut conn).unwrap();
}

/// The gateway's settings connect the embedding cache through its own Redis definition:
/// with sessions in Redis and no `search.redis_url`, what the cache computes lands in the
/// session Redis, where a new replica (an empty cache on the same settings) finds it.
#[test]
fn search_settings_share_embeddings_through_the_session_redis() {
    let mut settings = mcc_gateway::config::Settings::default();
    settings.session.backend = mcc_gateway::config::SessionBackend::Redis;
    settings.session.redis_url = Some(redis_url());
    let search = settings.search_settings().unwrap();
    assert!(search.redis.is_some(), "no Redis for the embedding cache");
    let e = Embedder::from_fn("settings-redis-test", |texts| {
        Ok(texts.iter().map(|t| vec![t.len() as f32, 1.0]).collect())
    });
    let nonce = format!("{:?}", std::time::SystemTime::now());
    let text = format!("a tool added at {nonce}");

    let first = EmbeddingCache::with_redis(search.redis.clone());
    let (_, stats) = first.embed_all(&e, &[&text]).unwrap();
    assert_eq!((stats.computed, stats.redis_hits), (1, 0));
    let replica = EmbeddingCache::with_redis(settings.search_settings().unwrap().redis);
    let (_, stats) = replica.embed_all(&e, &[&text]).unwrap();
    assert_eq!((stats.redis_hits, stats.computed), (1, 0));

    let mut conn = redis::Client::open(redis_url())
        .unwrap()
        .get_connection()
        .unwrap();
    let key = redis_key(&mcc_search::embed::content_hash(e.id(), &text));
    let _: () = redis::cmd("DEL").arg(&key).query(&mut conn).unwrap();
}

#[test]
fn hybrid_search_end_to_end() {
    let Some(dir) = model() else { return };
    let tools = eval::catalog();
    let service = SearchService::new(SearchSettings {
        model_dir: Some(dir),
        ..SearchSettings::default()
    })
    .unwrap();
    service.rebuild_blocking(&tools).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let admin = eval::admin();
    let text = rt
        .block_on(service.search_text(
            None,
            "bounce all the pods of the api deployment",
            Some(&admin),
            None,
        ))
        .unwrap();
    assert!(text.starts_with('['), "{text}");
    assert!(text.contains("## k8s.restart_deployment"), "{text}");
    // An anonymous caller sees only public tools.
    let anon = rt
        .block_on(service.search_text(None, "run a shell command", None, None))
        .unwrap();
    assert!(!anon.contains("## admin."), "{anon}");
}

#[test]
fn cold_start_serves_keyword_first_then_hybrid() {
    let Some(dir) = model() else { return };
    let tools = eval::catalog();
    let service = SearchService::new(SearchSettings {
        model_dir: Some(dir),
        ..SearchSettings::default()
    })
    .unwrap();
    let builder = {
        let (service, tools) = (service.clone(), tools.clone());
        std::thread::spawn(move || service.rebuild_blocking(&tools))
    };
    // The keyword-only index of the new catalog appears long before embeddings finish.
    let first = loop {
        let current = service.current();
        if !current.is_empty() {
            break current;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    assert_eq!(first.len(), tools.len());
    assert!(
        !first.has_embeddings(),
        "no keyword-only phase on a cold start"
    );
    builder.join().unwrap().unwrap();
    assert!(service.current().has_embeddings());
}
