//! The live search index of a gateway: settings, the embedder chosen at startup, the
//! embedding caches, and the current [`SearchIndex`] behind an atomic pointer.
//!
//! A catalog change calls [`SearchService::update`], which never waits for embeddings:
//! when the index served has no embeddings (a cold start, or the last embedding run
//! failed) a keyword-only index of the new catalog is built at once (about 0.2 s at
//! 10,000 tools) and swapped in; the tool embeddings are computed on the
//! [`background`](super::background) thread and the hybrid index replaces it when
//! complete. When the index served is hybrid, it keeps serving until the new hybrid
//! index is swapped in (a change re-embeds only changed tools). Either way each search
//! checks the hits against the catalog snapshot it is given: a tool no longer in the
//! catalog is never returned, RBAC is that of the current tools, and a hit's text is the
//! current tool's signature. Swaps only go forward: an older catalog's index never
//! replaces a newer one's, and a build a newer catalog overtook stops early.
//!
//! A search pins the index it started with, so it never sees half of a rebuild. Its
//! work (query embedding, tantivy) runs on a blocking task, never on the async workers,
//! and at most one per CPU at a time; a query longer than `search.max_query_bytes` is
//! refused before any of it (a long query costs fuzzy expansions per word and field).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arc_swap::ArcSwap;
use mcc_catalog::snapshot::Catalog;
use mcc_catalog::{Tool, User};
use tokio::sync::{Semaphore, watch};

use super::background::Worker;
use super::{
    Embedder, EmbeddingCache, Hit, Mode, QueryCache, SearchError, SearchIndex, SearchSettings,
    render, render_results,
};

/// What `/readyz` says about search (no tool names: counts and flags).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SearchStatus {
    /// Numbers the index served; 0 = no catalog indexed yet.
    pub generation: u64,
    /// Tools in the index served.
    pub tools: usize,
    /// Whether semantic ranking is on (the index served has tool embeddings).
    pub semantic: bool,
    /// Whether an embedding model or endpoint is configured.
    pub embedder: bool,
    /// Tool embeddings are being computed (or waiting to be).
    pub building: bool,
}

/// The index searches use and the catalog snapshot it was built from (`None`: a bare
/// tool list, in tests and benchmarks).
struct Live {
    index: Arc<SearchIndex>,
    source: Option<Arc<Catalog>>,
}

/// Where a rebuild's tools come from.
enum Source {
    Catalog(Arc<Catalog>),
    Tools(Vec<Tool>),
}

impl Source {
    fn tools(&self) -> &[Tool] {
        match self {
            Source::Catalog(c) => c.tools(),
            Source::Tools(t) => t,
        }
    }

    fn catalog(&self) -> Option<Arc<Catalog>> {
        match self {
            Source::Catalog(c) => Some(c.clone()),
            Source::Tools(_) => None,
        }
    }
}

/// A semantic build for the background thread.
struct Job {
    source: Source,
    generation: u64,
}

struct Inner {
    /// Numbers rebuild requests in the order they were made.
    requested: AtomicU64,
    /// Held while embedding (one build at a time); holds the newest generation built,
    /// so a slow build of an older catalog never starts after a newer one.
    built: Mutex<u64>,
    settings: SearchSettings,
    embedder: Option<Embedder>,
    tool_cache: EmbeddingCache,
    query_cache: QueryCache,
    current: ArcSwap<Live>,
    /// The generation and mode of the index served; every swap goes through it, so swaps
    /// are ordered and waiters (tests, benchmarks) can watch it.
    swapped: watch::Sender<SearchStatus>,
    /// Searches running their blocking part at once (one per CPU); others wait.
    slots: Arc<Semaphore>,
    /// The embedding thread (semantic builds of [`SearchService::update`]).
    worker: Worker<Job>,
}

/// The gateway's search: cheap to clone, shared by every request.
#[derive(Clone)]
pub struct SearchService {
    inner: Arc<Inner>,
}

impl SearchService {
    /// Sets up search from `settings`: loads the local model or prepares the endpoint
    /// client (blocking: call at startup) and logs which mode search runs in. The index
    /// starts empty; call [`Self::update`] with the catalog.
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
        Self::with_embedder(settings, embedder)
    }

    /// [`Self::new`] with an embedder built elsewhere (tests and benchmarks: one held at
    /// a gate, or a stand-in); `settings`' model and endpoint keys are not read.
    pub fn with_embedder(
        settings: SearchSettings,
        embedder: Option<Embedder>,
    ) -> Result<Self, SearchError> {
        match &embedder {
            None => tracing::warn!(
                "search: no embedding model configured (search.model_dir or \
                 search.embeddings_url); search is keyword-only"
            ),
            Some(e) => tracing::info!(embedder = e.id(), "search: hybrid (keyword + semantic)"),
        }
        let tool_cache = EmbeddingCache::with_redis(settings.redis.clone());
        let empty = SearchIndex::build(&[], None, settings.fusion)?;
        let (swapped, _) = watch::channel(SearchStatus {
            embedder: embedder.is_some(),
            ..SearchStatus::default()
        });
        Ok(SearchService {
            inner: Arc::new(Inner {
                requested: AtomicU64::new(0),
                built: Mutex::new(0),
                query_cache: QueryCache::new(settings.query_cache_size, settings.query_cache_ttl),
                settings,
                embedder,
                tool_cache,
                current: ArcSwap::from_pointee(Live {
                    index: Arc::new(empty),
                    source: None,
                }),
                swapped,
                slots: Arc::new(Semaphore::new(
                    std::thread::available_parallelism().map_or(2, |n| n.get()),
                )),
                worker: Worker::default(),
            }),
        })
    }

    /// The index searches currently use.
    pub fn current(&self) -> Arc<SearchIndex> {
        self.inner.current.load().index.clone()
    }

    pub fn settings(&self) -> &SearchSettings {
        &self.inner.settings
    }

    /// What `/readyz` reports.
    pub fn status(&self) -> SearchStatus {
        SearchStatus {
            building: self.inner.worker.pending(),
            ..self.inner.swapped.borrow().clone()
        }
    }

    /// Follows the index swaps (generation, tools, semantic); tests and benchmarks wait
    /// on it (`wait_for(|s| s.semantic)`).
    pub fn watch(&self) -> watch::Receiver<SearchStatus> {
        self.inner.swapped.subscribe()
    }

    /// Indexes `catalog` without waiting for embeddings (see the module doc): a
    /// keyword-only index is swapped in now when the index served has none, and the
    /// semantic build goes to the embedding thread. Blocking for the keyword part only
    /// (tantivy: about 0.2 s at 10,000 tools); call it from a blocking thread.
    pub fn update(&self, catalog: Arc<Catalog>) -> Result<(), SearchError> {
        let generation = self.next_generation();
        let source = Source::Catalog(catalog);
        let cold = !self.inner.current.load().index.has_embeddings();
        if self.inner.embedder.is_none() || cold {
            self.keyword_only(&source, generation)?;
        }
        if self.inner.embedder.is_some() {
            let weak = Arc::downgrade(&self.inner);
            self.inner
                .worker
                .submit(Job { source, generation }, move |job| {
                    let Some(inner) = weak.upgrade() else {
                        return false;
                    };
                    let service = SearchService { inner };
                    if let Err(e) = service.semantic(&job.source, job.generation) {
                        tracing::error!(error = %e, "search index rebuild failed; searching the previous index");
                    }
                    true
                });
        }
        Ok(())
    }

    /// Rebuilds the index for `tools` on a blocking task and swaps it in, waiting for
    /// the embeddings (tests and benchmarks; the gateway uses [`Self::update`]).
    /// Searches in flight finish on the old index. If embedding fails, the new index is
    /// keyword-only (logged) rather than keeping a stale catalog.
    pub async fn rebuild(&self, tools: Vec<Tool>) -> Result<(), SearchError> {
        let this = self.clone();
        let generation = self.next_generation();
        tokio::task::spawn_blocking(move || {
            this.rebuild_generation(Source::Tools(tools), generation)
        })
        .await
        .map_err(|e| SearchError::Task(e.to_string()))?
    }

    /// [`Self::rebuild`] on the calling thread (benchmarks, tests): a keyword-only index
    /// first when the index served has no embeddings, then the hybrid one, both before
    /// returning.
    pub fn rebuild_blocking(&self, tools: &[Tool]) -> Result<(), SearchError> {
        self.rebuild_generation(Source::Tools(tools.to_vec()), self.next_generation())
    }

    fn next_generation(&self) -> u64 {
        self.inner.requested.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn rebuild_generation(&self, source: Source, generation: u64) -> Result<(), SearchError> {
        if self.inner.embedder.is_none() || !self.inner.current.load().index.has_embeddings() {
            self.keyword_only(&source, generation)?;
        }
        if self.inner.embedder.is_some() {
            self.semantic(&source, generation)?;
        }
        Ok(())
    }

    fn keyword_only(&self, source: &Source, generation: u64) -> Result<(), SearchError> {
        let started = Instant::now();
        let index = SearchIndex::build(source.tools(), None, self.inner.settings.fusion)?;
        self.swap(index, source.catalog(), generation, started);
        Ok(())
    }

    /// The hybrid index of `source`, swapped in unless a newer catalog overtook it.
    fn semantic(&self, source: &Source, generation: u64) -> Result<(), SearchError> {
        let started = Instant::now();
        let inner = &self.inner;
        let Some(embedder) = inner.embedder.as_ref() else {
            return Ok(());
        };
        let mut built = inner.built.lock().unwrap_or_else(|p| p.into_inner());
        if *built > generation {
            return Ok(());
        }
        *built = generation;
        let superseded = || inner.requested.load(Ordering::SeqCst) > generation;
        let embeddings = Some((embedder, &inner.tool_cache));
        let tools = source.tools();
        let index = match SearchIndex::build_unless(
            tools,
            embeddings,
            inner.settings.fusion,
            &superseded,
        ) {
            Ok(index) => index,
            Err(SearchError::Superseded) => {
                tracing::info!(
                    generation,
                    "search: a newer catalog arrived; its build takes over"
                );
                return Ok(());
            }
            Err(e @ (SearchError::Embed(_) | SearchError::Model(_))) => {
                tracing::error!(error = %e, "search: tool embeddings failed; this index is keyword-only");
                SearchIndex::build(tools, None, inner.settings.fusion)?
            }
            Err(e) => return Err(e),
        };
        self.swap(index, source.catalog(), generation, started);
        release_free_memory();
        Ok(())
    }

    /// Swaps `index` in unless an index of a newer generation is served.
    fn swap(
        &self,
        index: SearchIndex,
        source: Option<Arc<Catalog>>,
        generation: u64,
        started: Instant,
    ) {
        let (tools, semantic) = (index.len(), index.has_embeddings());
        let live = Live {
            index: Arc::new(index),
            source,
        };
        let stored = self.inner.swapped.send_if_modified(|status| {
            if generation < status.generation {
                return false;
            }
            self.inner.current.store(Arc::new(live));
            status.generation = generation;
            status.tools = tools;
            status.semantic = semantic;
            true
        });
        if stored {
            tracing::info!(
                tools,
                semantic,
                generation,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "search: index swapped in"
            );
        } else {
            tracing::debug!(generation, "search: an older catalog's index is dropped");
        }
    }

    /// The embedding of `query`, from the cache or computed on the calling thread. `None`
    /// when search has no embedder or embedding fails (logged; search degrades to
    /// keyword for this query).
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
    /// With `catalog` (the snapshot the request reads), hits are limited to its tools and
    /// their RBAC (see the module doc). The work runs on a blocking task.
    pub async fn search(
        &self,
        catalog: Option<Arc<Catalog>>,
        query: &str,
        user: Option<&User>,
        min_score: Option<f64>,
    ) -> Result<(Arc<SearchIndex>, Vec<Hit>), SearchError> {
        let ranked = self.ranked(catalog, query, user, min_score).await?;
        Ok((ranked.index, ranked.hits))
    }

    async fn ranked(
        &self,
        catalog: Option<Arc<Catalog>>,
        query: &str,
        user: Option<&User>,
        min_score: Option<f64>,
    ) -> Result<Ranked, SearchError> {
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
        tokio::task::spawn_blocking(move || {
            this.rank(catalog.as_deref(), &query, user.as_ref(), min_score)
        })
        .await
        .map_err(|e| SearchError::Task(e.to_string()))?
    }

    fn rank(
        &self,
        catalog: Option<&Catalog>,
        query: &str,
        user: Option<&User>,
        min_score: Option<f64>,
    ) -> Result<Ranked, SearchError> {
        self.check_query(query)?;
        let live = self.inner.current.load_full();
        let index = live.index.clone();
        let query_vec = if index.has_embeddings() {
            self.embed_query_blocking(query)
        } else {
            None
        };
        // An index of another snapshot than the request's: that snapshot decides which
        // tools exist and who may run them.
        let stale = catalog.filter(|c| !same_snapshot(live.source.as_deref(), c));
        let allowed = match stale {
            Some(c) => index
                .tools()
                .iter()
                .map(|t| c.tool(&t.key).is_some_and(|now| now.allows(user)))
                .collect(),
            None => index.allowed_for(user),
        };
        let hits = index.search(
            query,
            query_vec.as_deref(),
            Mode::Hybrid,
            allowed,
            min_score.map(|m| m as f32),
            self.inner.settings.max_results,
        )?;
        Ok(Ranked {
            index,
            hits,
            stale: stale.is_some(),
        })
    }

    /// The `search` tool's text for `user`: results in MCC's format, or its no-match text.
    /// With `catalog`, see [`Self::search`]; each hit shows that catalog's signature.
    pub async fn search_text(
        &self,
        catalog: Option<Arc<Catalog>>,
        query: &str,
        user: Option<&User>,
        min_score: Option<f64>,
    ) -> Result<String, SearchError> {
        let ranked = self.ranked(catalog.clone(), query, user, min_score).await?;
        let (Some(catalog), true) = (catalog, ranked.stale) else {
            return Ok(render_results(&ranked.index, &ranked.hits));
        };
        // An index of an earlier catalog: the text of the tools as they are now.
        Ok(render(ranked.hits.iter().filter_map(|h| {
            let tool = catalog.tool(&ranked.index.tools()[h.index].key)?;
            Some((h.score, mcc_catalog::signature(tool)))
        })))
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
        self.rebuild_generation(Source::Tools(tools.to_vec()), generation)
    }
}

/// What a search ranked: the index, its hits, and whether the index was built from
/// another snapshot than the request's.
struct Ranked {
    index: Arc<SearchIndex>,
    hits: Vec<Hit>,
    stale: bool,
}

/// Whether the index's source is the snapshot `catalog` (the same allocation).
fn same_snapshot(source: Option<&Catalog>, catalog: &Catalog) -> bool {
    source.is_some_and(|s| std::ptr::eq(s, catalog))
}

/// Hands the memory freed by an embedding run back to the system. The model's forward
/// passes allocate and free tens of MB per batch on several threads; glibc keeps such
/// memory in per-thread arenas, where it would stay resident although nothing uses it
/// (measured in gateway/benches/RESULTS-scale.md).
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}
