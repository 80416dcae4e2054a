//! Sentence embeddings for search: which embedder runs ([`Embedder`]: the in-process model
//! or an OpenAI-compatible endpoint), and the caches in front of it.
//!
//! - Tool texts are embedded once per content: [`EmbeddingCache`] keys vectors by
//!   SHA-256 of (embedder id, text), in memory and, when configured, in Redis under
//!   [`redis_key`] so a new replica does not recompute them.
//! - Query texts are cached briefly ([`QueryCache`]: bounded size, TTL), because agents
//!   repeat and refine queries.
//!
//! All calls are blocking (model inference, HTTP, Redis): run them on a blocking task.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcc_catalog::Secret;
use sha2::{Digest, Sha256};

use super::SearchError;
#[cfg(feature = "embed-local")]
use super::local::LocalModel;
use super::remote::RemoteEmbedder;

/// What computes sentence embeddings.
pub enum Embedder {
    #[cfg(feature = "embed-local")]
    Local(Box<LocalModel>),
    Remote(RemoteEmbedder),
    /// A function (tests and benchmarks: an embedder held at a gate, or a stand-in).
    Custom {
        id: String,
        embed: Box<EmbedFn>,
    },
}

/// What [`Embedder::from_fn`] wraps: one unit-length vector per text, in order.
pub type EmbedFn = dyn Fn(&[&str]) -> Result<Vec<Vec<f32>>, SearchError> + Send + Sync;

impl Embedder {
    /// Loads the model in `dir` (built with the `embed-local` feature only).
    pub fn local(dir: &std::path::Path) -> Result<Self, SearchError> {
        #[cfg(feature = "embed-local")]
        {
            LocalModel::load(dir).map(|m| Embedder::Local(Box::new(m)))
        }
        #[cfg(not(feature = "embed-local"))]
        {
            Err(SearchError::Config(format!(
                "search.model_dir is set ({}) but this gateway was built without the \
                 `embed-local` feature; use search.embeddings_url instead",
                dir.display()
            )))
        }
    }

    /// A client of an OpenAI-compatible embeddings endpoint.
    pub fn remote(base: &str, model: &str, api_key: Option<Secret>) -> Result<Self, SearchError> {
        RemoteEmbedder::new(base, model, api_key).map(Embedder::Remote)
    }

    /// An embedder that calls `embed`; `id` names it in cache keys.
    pub fn from_fn(
        id: &str,
        embed: impl Fn(&[&str]) -> Result<Vec<Vec<f32>>, SearchError> + Send + Sync + 'static,
    ) -> Self {
        Embedder::Custom {
            id: id.to_string(),
            embed: Box::new(embed),
        }
    }

    /// Identifies the model (and its weights or endpoint) in cache keys.
    pub fn id(&self) -> &str {
        match self {
            #[cfg(feature = "embed-local")]
            Embedder::Local(m) => m.id(),
            Embedder::Remote(r) => r.id(),
            Embedder::Custom { id, .. } => id,
        }
    }

    /// One unit-length vector per text, in order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, SearchError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        match self {
            #[cfg(feature = "embed-local")]
            Embedder::Local(m) => m.embed(texts),
            Embedder::Remote(r) => r.embed(texts),
            Embedder::Custom { embed, .. } => embed(texts),
        }
    }
}

/// The content hash a text's embedding is cached under (hex SHA-256 of the embedder id,
/// a NUL, and the text).
pub fn content_hash(embedder_id: &str, text: &str) -> String {
    let mut h = Sha256::new();
    h.update(embedder_id.as_bytes());
    h.update([0u8]);
    h.update(text.as_bytes());
    hex::encode(h.finalize())
}

/// The Redis key of an embedding: `mcc:search:emb:{emb}:<content hash>`. The value is the
/// vector as little-endian f32 bytes. This is the only place the format is defined.
pub fn redis_key(hash: &str) -> String {
    // One hash tag for all: in a Redis Cluster a pipeline of writes must stay in a slot.
    format!("mcc:search:emb:{{emb}}:{hash}")
}

fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_bytes(b: &[u8]) -> Option<Vector> {
    if b.is_empty() || !b.len().is_multiple_of(4) {
        return None;
    }
    Some(
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

/// One embedding, shared between the memory cache and the build that asked for it.
pub type Vector = Arc<[f32]>;

/// Tool-text embeddings by content hash: in memory, backed by Redis when configured.
/// Entries for texts no longer in the catalog are dropped at each rebuild. Each vector
/// is allocated once and shared ([`Vector`]): at 10,000 tools, copies per lookup left
/// tens of MB of freed rows between live ones, which the allocator could not return.
pub struct EmbeddingCache {
    memory: Mutex<HashMap<String, Vector>>,
    redis: Option<Arc<dyn RedisConnector>>,
    /// Redis entries expire after this long without a rebuild touching them.
    redis_ttl: Duration,
}

/// How long a Redis connection and each of its calls may take.
pub const REDIS_TIMEOUT: Duration = Duration::from_secs(3);

/// How many keys one Redis round trip reads or writes.
const REDIS_CHUNK: usize = 500;

/// How many texts are embedded between two checks for a newer catalog (about a second
/// and a half of the local model on 2 cores).
pub const COMPUTE_CHUNK: usize = 256;

/// The Redis the embedding cache shares between replicas: blocking connections to it.
/// How it is reached (one server, Sentinel, Cluster, TLS, an ACL user) is the caller's:
/// the gateway passes its one Redis connection definition; a [`redis::Client`] reaches
/// a single server (tests, benchmarks). In a Cluster, the cache's pipelines stay in one
/// slot ([`redis_key`]'s hash tag).
pub trait RedisConnector: Send + Sync {
    /// A connection, made within `timeout`.
    fn blocking_connection(
        &self,
        timeout: Duration,
    ) -> redis::RedisResult<Box<dyn redis::ConnectionLike>>;
}

impl RedisConnector for redis::Client {
    fn blocking_connection(
        &self,
        timeout: Duration,
    ) -> redis::RedisResult<Box<dyn redis::ConnectionLike>> {
        Ok(Box::new(self.get_connection_with_timeout(timeout)?))
    }
}

impl EmbeddingCache {
    /// An in-memory cache; `redis_url` (one `redis://` server) adds a shared second level.
    /// A gateway passes its own connection instead ([`Self::with_redis`]).
    pub fn new(redis_url: Option<&str>) -> Result<Self, SearchError> {
        let redis = redis_url
            .map(|u| {
                redis::Client::open(u)
                    .map(|c| Arc::new(c) as Arc<dyn RedisConnector>)
                    .map_err(|e| SearchError::Config(format!("search.redis_url: {e}")))
            })
            .transpose()?;
        Ok(Self::with_redis(redis))
    }

    /// An in-memory cache with `redis`, when given, as the shared second level.
    pub fn with_redis(redis: Option<Arc<dyn RedisConnector>>) -> Self {
        EmbeddingCache {
            memory: Mutex::new(HashMap::new()),
            redis,
            redis_ttl: Duration::from_secs(30 * 24 * 3600),
        }
    }

    /// Embeddings of `texts` (in order), computing only those in neither cache. Redis
    /// errors are logged and degrade to computing; embedder errors are returned.
    pub fn embed_all(
        &self,
        embedder: &Embedder,
        texts: &[&str],
    ) -> Result<(Vec<Vector>, CacheStats), SearchError> {
        self.embed_all_unless(embedder, texts, &|| false)
    }

    /// [`Self::embed_all`], computing in chunks of [`COMPUTE_CHUNK`] texts and stopping
    /// with [`SearchError::Superseded`] when `superseded()` turns true between chunks
    /// (a newer catalog arrived). What was computed before stopping stays in the memory
    /// cache, so the next run does not compute it again.
    pub fn embed_all_unless(
        &self,
        embedder: &Embedder,
        texts: &[&str],
        superseded: &dyn Fn() -> bool,
    ) -> Result<(Vec<Vector>, CacheStats), SearchError> {
        let hashes: Vec<String> = texts
            .iter()
            .map(|t| content_hash(embedder.id(), t))
            .collect();
        let mut found: Vec<Option<Vector>> = {
            let memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
            hashes.iter().map(|h| memory.get(h).cloned()).collect()
        };
        let mut stats = CacheStats {
            memory_hits: found.iter().filter(|f| f.is_some()).count(),
            ..CacheStats::default()
        };
        stats.redis_hits = self.fill_from_redis(&hashes, &mut found);
        let mut missing: Vec<usize> = (0..texts.len()).filter(|&i| found[i].is_none()).collect();
        // Shortest first, over the whole catalog: each chunk then holds texts of similar
        // length, so its batches pad little (the embedder sorts within a chunk only).
        missing.sort_by_key(|&i| texts[i].len());
        stats.computed = missing.len();
        for chunk in missing.chunks(COMPUTE_CHUNK) {
            if superseded() {
                return Err(SearchError::Superseded);
            }
            let computed = embedder.embed(&chunk.iter().map(|&i| texts[i]).collect::<Vec<_>>())?;
            let fresh: Vec<(String, Vector)> = chunk
                .iter()
                .zip(computed)
                .map(|(&i, v)| (hashes[i].clone(), Vector::from(v)))
                .collect();
            self.store_in_redis(&fresh);
            let mut memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
            for (&i, (hash, v)) in chunk.iter().zip(fresh) {
                found[i] = Some(v.clone());
                memory.insert(hash, v);
            }
        }
        let vectors: Vec<Vector> = found
            .into_iter()
            .map(|v| v.unwrap_or_else(|| Vector::from([])))
            .collect();
        let mut memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        memory.clear();
        memory.extend(hashes.into_iter().zip(vectors.iter().cloned()));
        Ok((vectors, stats))
    }

    fn fill_from_redis(&self, hashes: &[String], found: &mut [Option<Vector>]) -> usize {
        let Some(shared) = &self.redis else { return 0 };
        let want: Vec<usize> = (0..hashes.len()).filter(|&i| found[i].is_none()).collect();
        if want.is_empty() {
            return 0;
        }
        let mut conn = match shared.blocking_connection(REDIS_TIMEOUT) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "search: embeddings cache in Redis unavailable; computing");
                return 0;
            }
        };
        let mut hits = 0;
        for chunk in want.chunks(REDIS_CHUNK) {
            let keys: Vec<String> = chunk.iter().map(|&i| redis_key(&hashes[i])).collect();
            let values: Vec<Option<Vec<u8>>> = match redis::cmd("MGET").arg(&keys).query(&mut *conn)
            {
                Ok(v) => v,
                Err(e) => {
                    tracing::warn!(error = %e, "search: reading embeddings from Redis failed");
                    return hits;
                }
            };
            for (&i, value) in chunk.iter().zip(values) {
                if let Some(v) = value.as_deref().and_then(from_bytes) {
                    found[i] = Some(v);
                    hits += 1;
                }
            }
        }
        hits
    }

    fn store_in_redis(&self, fresh: &[(String, Vector)]) {
        let Some(shared) = &self.redis else { return };
        if fresh.is_empty() {
            return;
        }
        let result = shared
            .blocking_connection(REDIS_TIMEOUT)
            .and_then(|mut conn| {
                for chunk in fresh.chunks(REDIS_CHUNK) {
                    let mut pipe = redis::pipe();
                    for (h, v) in chunk {
                        pipe.cmd("SET")
                            .arg(redis_key(h))
                            .arg(to_bytes(v))
                            .arg("EX")
                            .arg(self.redis_ttl.as_secs())
                            .ignore();
                    }
                    pipe.query::<()>(&mut *conn)?;
                }
                Ok(())
            });
        if let Err(e) = result {
            tracing::warn!(error = %e, "search: writing embeddings to Redis failed");
        }
    }
}

/// Where a rebuild's tool embeddings came from.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    pub memory_hits: usize,
    pub redis_hits: usize,
    pub computed: usize,
}

/// Recent query embeddings: at most `capacity` entries, each valid for `ttl`.
pub struct QueryCache {
    entries: Mutex<HashMap<String, (Instant, Vec<f32>)>>,
    capacity: NonZeroUsize,
    ttl: Duration,
}

impl QueryCache {
    pub fn new(capacity: NonZeroUsize, ttl: Duration) -> Self {
        QueryCache {
            entries: Mutex::new(HashMap::new()),
            capacity,
            ttl,
        }
    }

    /// The cached embedding of `query`, if still fresh.
    pub fn get(&self, query: &str) -> Option<Vec<f32>> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(query)
            .filter(|(at, _)| at.elapsed() < self.ttl)
            .map(|(_, v)| v.clone())
    }

    /// Stores `query`'s embedding; when full, expired entries go first, then the oldest.
    pub fn put(&self, query: &str, v: Vec<f32>) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= self.capacity.get() && !entries.contains_key(query) {
            entries.retain(|_, (at, _)| at.elapsed() < self.ttl);
            if entries.len() >= self.capacity.get() {
                let oldest = entries
                    .iter()
                    .min_by_key(|(_, (at, _))| *at)
                    .map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    entries.remove(&k);
                }
            }
        }
        entries.insert(query.to_string(), (Instant::now(), v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_through_bytes() {
        let v = vec![0.25f32, -1.5, 3.0e-7];
        assert_eq!(from_bytes(&to_bytes(&v)), Some(Vector::from(v)));
        assert_eq!(from_bytes(&[1, 2, 3]), None);
    }

    #[test]
    fn content_hash_depends_on_model_and_text() {
        let a = content_hash("m1", "list pods");
        assert_eq!(a.len(), 64);
        assert_ne!(a, content_hash("m2", "list pods"));
        assert_ne!(a, content_hash("m1", "list pod"));
        assert!(redis_key(&a).starts_with("mcc:search:emb:"));
    }

    #[test]
    fn query_cache_expires_and_evicts_oldest() {
        let cache = QueryCache::new(NonZeroUsize::new(2).unwrap(), Duration::from_secs(60));
        cache.put("a", vec![1.0]);
        cache.put("b", vec![2.0]);
        cache.put("c", vec![3.0]);
        assert_eq!(cache.get("a"), None);
        assert_eq!(cache.get("c"), Some(vec![3.0]));
        let short = QueryCache::new(NonZeroUsize::new(2).unwrap(), Duration::from_millis(1));
        short.put("a", vec![1.0]);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(short.get("a"), None);
    }
}
