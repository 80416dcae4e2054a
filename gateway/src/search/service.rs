//! The live search index of a gateway: settings, the embedder chosen at startup, the
//! embedding caches, and the current [`SearchIndex`] behind an atomic pointer.
//!
//! A catalog change calls [`SearchService::rebuild`]: the new index is built on a blocking
//! task (tantivy indexing, tool embeddings) while searches keep using the old one, then
//! swapped in with one atomic store. A search pins the index it started with, so it never
//! sees half of a rebuild.
//!
//! A search's work (query embedding, tantivy) runs on a blocking task, never on the async
//! workers, and at most one per CPU at a time; a query longer than `search.max_query_bytes`
//! is refused before any of it (a long query costs fuzzy expansions per word and field).

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use mcc_catalog::{Tool, User};
use tokio::sync::Semaphore;

use super::{
    Embedder, EmbeddingCache, Fusion, Hit, Mode, QueryCache, SearchError, SearchIndex,
    render_results,
};

/// The default of `search.max_query_bytes`: far above any tool query an agent writes
/// (a few words to a few sentences), far below what makes a search expensive.
pub const DEFAULT_MAX_QUERY_BYTES: usize = 2048;

/// Search configuration (the `search.*` keys; see docs/search.md), built from
/// [`super::SearchConfig`].
#[derive(Clone, PartialEq)]
pub struct SearchSettings {
    /// `search.model_dir`: a local BERT-family model directory.
    pub model_dir: Option<PathBuf>,
    /// `search.embeddings_url`: an OpenAI-compatible API base (used instead of a model).
    pub embeddings_url: Option<String>,
    /// `search.embeddings_model`: the model name sent to the endpoint.
    pub embeddings_model: String,
    /// `search.embeddings_api_key`: bearer token for the endpoint (never logged).
    pub embeddings_api_key: Option<String>,
    /// `search.redis_url`: where tool embeddings are shared between replicas.
    pub redis_url: Option<String>,
    /// `search.max_results`: results returned per query.
    pub max_results: usize,
    /// `search.max_query_bytes`: longer queries are refused before any work is done.
    pub max_query_bytes: usize,
    /// `search.query_cache_size` / `search.query_cache_ttl_secs`.
    pub query_cache_size: NonZeroUsize,
    pub query_cache_ttl: Duration,
    /// `search.keyword_weight`, `search.semantic_weight`, `search.keyword_saturation`.
    pub fusion: Fusion,
}

impl Default for SearchSettings {
    fn default() -> Self {
        SearchSettings {
            model_dir: None,
            embeddings_url: None,
            embeddings_model: "all-MiniLM-L6-v2".into(),
            embeddings_api_key: None,
            redis_url: None,
            max_results: 10,
            max_query_bytes: DEFAULT_MAX_QUERY_BYTES,
            query_cache_size: NonZeroUsize::new(1024).unwrap_or(NonZeroUsize::MIN),
            query_cache_ttl: Duration::from_secs(300),
            fusion: Fusion::default(),
        }
    }
}

impl std::fmt::Debug for SearchSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchSettings")
            .field("model_dir", &self.model_dir)
            .field("embeddings_url", &self.embeddings_url)
            .field("embeddings_model", &self.embeddings_model)
            .field(
                "embeddings_api_key",
                &self.embeddings_api_key.as_ref().map(|_| "<redacted>"),
            )
            .field("redis_url", &self.redis_url.as_ref().map(|_| "<set>"))
            .field("max_results", &self.max_results)
            .field("max_query_bytes", &self.max_query_bytes)
            .field("fusion", &self.fusion)
            .finish_non_exhaustive()
    }
}

struct Inner {
    /// Numbers rebuild requests in the order they were made.
    requested: AtomicU64,
    /// Held while building (one build at a time); holds the newest generation swapped in,
    /// so a slow build of an older catalog never replaces a newer one.
    built: Mutex<u64>,
    settings: SearchSettings,
    embedder: Option<Embedder>,
    tool_cache: EmbeddingCache,
    query_cache: QueryCache,
    current: ArcSwap<SearchIndex>,
    /// Searches running their blocking part at once (one per CPU); others wait.
    slots: Arc<Semaphore>,
}

/// The gateway's search: cheap to clone, shared by every request.
#[derive(Clone)]
pub struct SearchService {
    inner: Arc<Inner>,
}

impl SearchService {
    /// Sets up search from `settings`: loads the local model or prepares the endpoint
    /// client (blocking: call at startup) and logs which mode search runs in. The index
    /// starts empty; call [`Self::rebuild`] with the catalog.
    pub fn new(settings: SearchSettings) -> Result<Self, SearchError> {
        let embedder = match (&settings.embeddings_url, &settings.model_dir) {
            (Some(_), Some(_)) => {
                return Err(SearchError::Config(
                    "set either search.model_dir or search.embeddings_url, not both".into(),
                ));
            }
            (Some(url), None) => Some(Embedder::remote(
                url,
                &settings.embeddings_model,
                settings.embeddings_api_key.clone(),
            )?),
            (None, Some(dir)) => Some(Embedder::local(dir)?),
            (None, None) => None,
        };
        match &embedder {
            None => tracing::warn!(
                "search: no embedding model configured (search.model_dir or \
                 search.embeddings_url); search is keyword-only"
            ),
            Some(e) => tracing::info!(embedder = e.id(), "search: hybrid (keyword + semantic)"),
        }
        let tool_cache = EmbeddingCache::new(settings.redis_url.as_deref())?;
        let empty = SearchIndex::build(&[], None, settings.fusion)?;
        Ok(SearchService {
            inner: Arc::new(Inner {
                requested: AtomicU64::new(0),
                built: Mutex::new(0),
                query_cache: QueryCache::new(settings.query_cache_size, settings.query_cache_ttl),
                settings,
                embedder,
                tool_cache,
                current: ArcSwap::from_pointee(empty),
                slots: Arc::new(Semaphore::new(
                    std::thread::available_parallelism().map_or(2, |n| n.get()),
                )),
            }),
        })
    }

    /// The index searches currently use.
    pub fn current(&self) -> Arc<SearchIndex> {
        self.inner.current.load_full()
    }

    pub fn settings(&self) -> &SearchSettings {
        &self.inner.settings
    }

    /// Rebuilds the index for `tools` on a blocking task and swaps it in. Searches in
    /// flight finish on the old index. If embedding fails, the new index is keyword-only
    /// (logged) rather than keeping a stale catalog.
    pub async fn rebuild(&self, tools: Vec<Tool>) -> Result<(), SearchError> {
        let this = self.clone();
        let generation = self.next_generation();
        tokio::task::spawn_blocking(move || this.rebuild_generation(&tools, generation))
            .await
            .map_err(|e| SearchError::Task(e.to_string()))?
    }

    /// [`Self::rebuild`] on the calling thread (startup, benchmarks, tests).
    ///
    /// When the live index has no embeddings (a cold start, or the last embedding run
    /// failed), a keyword-only index of the new catalog is swapped in first, so the
    /// catalog is searchable in milliseconds while its embeddings are computed; the
    /// hybrid index replaces it when ready. Otherwise the old hybrid index keeps serving
    /// until the new one is complete (a catalog change re-embeds only changed tools).
    ///
    /// Rebuilds run one at a time; if a newer rebuild was requested meanwhile and already
    /// swapped in, an older one's index is dropped.
    pub fn rebuild_blocking(&self, tools: &[Tool]) -> Result<(), SearchError> {
        self.rebuild_generation(tools, self.next_generation())
    }

    fn next_generation(&self) -> u64 {
        self.inner.requested.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn rebuild_generation(&self, tools: &[Tool], generation: u64) -> Result<(), SearchError> {
        let started = Instant::now();
        let inner = &self.inner;
        let mut built = inner.built.lock().unwrap_or_else(|p| p.into_inner());
        if *built > generation {
            return Ok(());
        }
        *built = generation;
        let Some(embedder) = inner.embedder.as_ref() else {
            return self.swap(
                SearchIndex::build(tools, None, inner.settings.fusion)?,
                started,
            );
        };
        if !inner.current.load().has_embeddings() {
            self.swap(
                SearchIndex::build(tools, None, inner.settings.fusion)?,
                started,
            )?;
        }
        let embeddings = Some((embedder, &inner.tool_cache));
        let index = match SearchIndex::build(tools, embeddings, inner.settings.fusion) {
            Ok(index) => index,
            Err(e @ (SearchError::Embed(_) | SearchError::Model(_))) => {
                tracing::error!(error = %e, "search: tool embeddings failed; this index is keyword-only");
                SearchIndex::build(tools, None, inner.settings.fusion)?
            }
            Err(e) => return Err(e),
        };
        self.swap(index, started)
    }

    fn swap(&self, index: SearchIndex, started: Instant) -> Result<(), SearchError> {
        tracing::info!(
            tools = index.len(),
            semantic = index.has_embeddings(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "search: index swapped in"
        );
        self.inner.current.store(Arc::new(index));
        Ok(())
    }

    /// The embedding of `query`, from the cache or computed on a blocking task. `None`
    /// when search has no embedder or embedding fails (logged; search degrades to
    /// keyword for this query).
    pub async fn query_embedding(&self, query: &str) -> Option<Vec<f32>> {
        self.inner.embedder.as_ref()?;
        if let Some(v) = self.inner.query_cache.get(query) {
            return Some(v);
        }
        let this = self.clone();
        let text = query.to_string();
        let computed = tokio::task::spawn_blocking(move || this.embed_query_blocking(&text)).await;
        match computed {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "search: query embedding task failed");
                None
            }
        }
    }

    /// [`Self::query_embedding`] on the calling thread.
    pub fn embed_query_blocking(&self, query: &str) -> Option<Vec<f32>> {
        let embedder = self.inner.embedder.as_ref()?;
        if let Some(v) = self.inner.query_cache.get(query) {
            return Some(v);
        }
        match embedder.embed(&[query]) {
            Ok(mut v) if v.len() == 1 => {
                let v = v.swap_remove(0);
                self.inner.query_cache.put(query, v.clone());
                Some(v)
            }
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "search: query embedding failed; keyword-only for this query");
                None
            }
        }
    }

    /// `Err` naming `search.max_query_bytes` when `query` is longer.
    pub fn check_query(&self, query: &str) -> Result<(), SearchError> {
        let limit = self.inner.settings.max_query_bytes;
        if query.len() > limit {
            return Err(SearchError::QueryTooLong {
                bytes: query.len(),
                limit,
            });
        }
        Ok(())
    }

    /// The hits for `user` (RBAC applied before ranking), with the index they refer to.
    /// The work runs on a blocking task (see the module doc).
    pub async fn search(
        &self,
        query: &str,
        user: Option<&User>,
        min_score: Option<f64>,
    ) -> Result<(Arc<SearchIndex>, Vec<Hit>), SearchError> {
        self.check_query(query)?;
        let _slot = self
            .inner
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| SearchError::Task(e.to_string()))?;
        let this = self.clone();
        let query = query.to_string();
        let user = user.cloned();
        tokio::task::spawn_blocking(move || this.search_blocking(&query, user.as_ref(), min_score))
            .await
            .map_err(|e| SearchError::Task(e.to_string()))?
    }

    /// [`Self::search`] on the calling thread.
    pub fn search_blocking(
        &self,
        query: &str,
        user: Option<&User>,
        min_score: Option<f64>,
    ) -> Result<(Arc<SearchIndex>, Vec<Hit>), SearchError> {
        self.check_query(query)?;
        let index = self.current();
        let query_vec = if index.has_embeddings() {
            self.embed_query_blocking(query)
        } else {
            None
        };
        let hits = index.search(
            query,
            query_vec.as_deref(),
            Mode::Hybrid,
            index.allowed_for(user),
            min_score.map(|m| m as f32),
            self.inner.settings.max_results,
        )?;
        Ok((index, hits))
    }

    /// The `search` tool's text for `user`: results in MCC's format, or its no-match text.
    pub async fn search_text(
        &self,
        query: &str,
        user: Option<&User>,
        min_score: Option<f64>,
    ) -> Result<String, SearchError> {
        let (index, hits) = self.search(query, user, min_score).await?;
        Ok(render_results(&index, &hits))
    }

    #[cfg(test)]
    pub(crate) fn next_generation_for_tests(&self) -> u64 {
        self.next_generation()
    }

    #[cfg(test)]
    pub(crate) fn rebuild_generation_for_tests(
        &self,
        tools: &[Tool],
        generation: u64,
    ) -> Result<(), SearchError> {
        self.rebuild_generation(tools, generation)
    }
}
