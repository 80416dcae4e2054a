//! Hybrid tool search: what the `search` MCP tool answers with. Its own crate so the
//! compiler keeps the boundary: it reads the catalog (`mcc_catalog`, including the
//! [`Catalog`](mcc_catalog::snapshot::Catalog) snapshot a request holds) and nothing of
//! the gateway, which reaches it through [`SearchService`] and its settings.
//!
//! - [`keyword`]: a tantivy BM25 index with typo tolerance;
//! - [`embed`] ([`local`], [`remote`]): sentence embeddings and their caches;
//! - [`fusion`]: both rankings into one score per tool;
//! - [`service`]: the live index, rebuilt off the request path and swapped atomically;
//! - [`background`]: the thread that computes tool embeddings (nothing waits for it);
//! - [`config`]: the `search.*` settings keys and their validation into [`SearchSettings`];
//! - [`tls`]: the process's rustls provider, which the remote embedder's client needs;
//! - this file: one immutable [`SearchIndex`] over a catalog snapshot, the RBAC filter,
//!   `min_score`, and the MCC output format ([`render_results`]).
//!
//! Order of a search: rank (keyword and semantic, among the tools the caller may
//! execute only), fuse, drop scores under `min_score`, keep the best `limit`. Tools the
//! caller may not execute are never ranked, returned or counted.

pub mod background;
pub mod config;
pub mod coverage;
pub mod embed;
pub mod fusion;
pub mod keyword;
#[cfg(feature = "embed-local")]
pub mod local;
pub mod remote;
pub mod service;
pub mod tls;

use std::collections::HashMap;
use std::sync::Arc;

use mcc_catalog::{Tool, User};

pub use config::{DEFAULT_MAX_QUERY_BYTES, SearchConfig, SearchSettings};
pub use coverage::Coverage;
pub use embed::{Embedder, EmbeddingCache, QueryCache, RedisConnector, Vector};
pub use fusion::Fusion;
pub use keyword::KeywordIndex;
pub use service::{SearchService, SearchStatus};

/// What went wrong in search. Each variant says which part failed.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("search configuration: {0}")]
    Config(String),
    #[error("keyword index: {0}")]
    Keyword(String),
    #[error("embedding model: {0}")]
    Model(String),
    #[error("computing embeddings: {0}")]
    Embed(String),
    #[error("search task failed: {0}")]
    Task(String),
    /// A newer catalog arrived while this one's embeddings were computed (not an error
    /// anyone sees: the newer build takes over).
    #[error("superseded by a newer catalog")]
    Superseded,
    #[error(
        "the query is {bytes} bytes; the limit is {limit} bytes (setting search.max_query_bytes)"
    )]
    QueryTooLong { bytes: usize, limit: usize },
}

/// The text shown when nothing matched (MCC's exact wording).
pub const NO_MATCH: &str =
    "No tools matched your query. Try expanding your query or reducing min_score";

/// How many candidates each ranking contributes before fusion. A tool outside both top
/// lists cannot reach the fused top `limit` for any sane `limit` below this.
const CANDIDATES: usize = 100;

/// Which rankings a search uses (hybrid unless the index or query has no embedding;
/// the others exist for evaluation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Keyword,
    Semantic,
    Hybrid,
}

/// One result: the fused score and the tool's position in the indexed catalog.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub score: f32,
    pub index: usize,
}

/// Tool embeddings: each tool's passage vectors ([`embedding_texts`]), or, when only their mean
/// counts, one row per tool holding that mean (its dot product with a query is the mean
/// cosine, so search scans one row per tool).
struct Vectors {
    dims: usize,
    data: Vec<f32>,
    /// Row `starts[i]..starts[i + 1]` are tool `i`'s.
    starts: Vec<usize>,
    /// Weight of the best passage's cosine; the mean of all takes the rest.
    max_weight: f32,
}

impl Vectors {
    /// Tool `i`'s rows are the `counts[i]` consecutive `rows` (its passages),
    /// collapsed to their mean when `max_weight` is 0.
    fn new(rows: &[Vector], counts: &[usize], max_weight: f32) -> Result<Self, SearchError> {
        let dims = rows.first().map_or(0, |r| r.len());
        if rows.iter().any(|r| r.len() != dims) {
            return Err(SearchError::Embed(
                "the embedder returned vectors of different lengths".into(),
            ));
        }
        let mut starts = Vec::with_capacity(counts.len() + 1);
        starts.push(0);
        if max_weight <= 0.0 {
            let mut data = vec![0.0f32; counts.len() * dims];
            let mut rows = rows.iter();
            for (out, &n) in data.chunks_exact_mut(dims.max(1)).zip(counts) {
                let n_f = n.max(1) as f32;
                for row in rows.by_ref().take(n) {
                    for (o, x) in out.iter_mut().zip(row.iter()) {
                        *o += x / n_f;
                    }
                }
                starts.push(starts.len());
            }
            return Ok(Vectors {
                dims,
                data,
                starts,
                max_weight: 0.0,
            });
        }
        let mut data = Vec::with_capacity(rows.len() * dims);
        for row in rows {
            data.extend_from_slice(row);
        }
        for &n in counts {
            starts.push(starts.last().copied().unwrap_or(0) + n);
        }
        Ok(Vectors {
            dims,
            data,
            starts,
            max_weight: max_weight.min(1.0),
        })
    }

    /// The similarity of tool `i` to the query vector `q`: `max_weight` × the best
    /// passage's cosine + (1 − `max_weight`) × their mean.
    fn cosine(&self, i: usize, q: &[f32]) -> f32 {
        let (start, end) = (self.starts[i], self.starts[i + 1]);
        if end <= start {
            return 0.0;
        }
        let mut best = f32::MIN;
        let mut sum = 0.0;
        for row in self.data[start * self.dims..end * self.dims].chunks_exact(self.dims.max(1)) {
            let c = dot(row, q);
            best = best.max(c);
            sum += c;
        }
        let mean = sum / (end - start) as f32;
        self.max_weight * best + (1.0 - self.max_weight) * mean
    }
}

/// Lanes of [`dot`]'s accumulators: two AVX or four SSE registers.
const LANES: usize = 16;

/// The dot product of two rows (of equal length; a tool vector and a query vector,
/// whose cosine it is), summed in [`LANES`] independent
/// accumulators. A plain `zip().map().sum()` adds one product at a time (floating-point
/// addition is not reassociated for us), so ranking 10,000 tools took 4–5 ms, bound by
/// the latency of one addition per element; in lanes the compiler vectorizes it and the
/// scan runs at memory speed (gateway/benches/RESULTS-search.md).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (a_lanes, a_rest) = a.as_chunks::<LANES>();
    let (b_lanes, b_rest) = b.as_chunks::<LANES>();
    for (x, y) in a_lanes.iter().zip(b_lanes) {
        for l in 0..LANES {
            acc[l] += x[l] * y[l];
        }
    }
    let rest: f32 = a_rest.iter().zip(b_rest).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + rest
}

/// Without embeddings, a tool's BM25 score is multiplied by its query coverage
/// ([`Coverage`]) to this power. Chosen on the BFCL benchmark's tuning split
/// (gateway/benches/RESULTS-bfcl.md): recall@1 0.662 → 0.706 at 0.5, 0.721 at 1.
pub const KEYWORD_ONLY_COVERAGE_POWER: f32 = 1.0;

/// An immutable search index over one catalog snapshot.
pub struct SearchIndex {
    tools: Vec<Tool>,
    signatures: Vec<String>,
    keyword: KeywordIndex,
    coverage: Coverage,
    vectors: Option<Vectors>,
    fusion: Fusion,
}

/// A tool's passages (the texts embedded for it), given the tool and its signature block.
pub type PassagesFn<'a> = dyn Fn(&Tool, &str) -> Vec<String> + 'a;

/// Weight of a tool's best passage's cosine in its similarity to a query; the mean of
/// its passages' cosines takes the rest ([`embedding_texts`] are its passages). On the
/// BFCL benchmark's tuning split 0.5 ranks better than the mean alone (hybrid recall@1
/// 0.728 → 0.748), but it lowers the repository's relevance suite (hybrid MRR 0.920 →
/// 0.909; 0.25: 0.910), so the mean stays (gateway/benches/RESULTS-bfcl.md).
pub const PASSAGE_MAX_WEIGHT: f32 = 0.0;

/// The texts a tool is embedded from: its description, and a card of the tool in words:
/// its key (`ops.restartService` → `ops restart service`), its description, and each
/// parameter's name with its description (`ops restart service: Restart a systemd
/// service. service name The unit to restart; force`). The tool's vector is the mean of
/// their two vectors, so its cosine with a query is the mean of the two cosines; a tool
/// without a description has the card's alone.
///
/// Chosen on the BFCL benchmark's tuning split (gateway/benches/RESULTS-bfcl.md, round 3)
/// over MCC's signature block in place of the card (which carries the same words plus
/// markup, types, defaults and the return type: more tokens to embed, and a model reads
/// them as noise), the description with parameters alone, and the card alone.
pub fn embedding_texts(tool: &Tool, _signature: &str) -> Vec<String> {
    let description = tool.description.trim();
    if description.is_empty() {
        vec![tool_card(tool)]
    } else {
        vec![description.to_string(), tool_card(tool)]
    }
}

/// A tool's card ([`embedding_texts`]): `ops restart service: Restart a systemd service.
/// service name The unit to restart; force`.
pub fn tool_card(tool: &Tool) -> String {
    let params: Vec<String> = tool
        .visible_params()
        .map(|p| {
            let name = keyword::identifier_words(&p.name);
            if p.description.is_empty() {
                name
            } else {
                format!("{name} {}", p.description.trim())
            }
        })
        .collect();
    let mut card = format!("{}:", keyword::identifier_words(&tool.key));
    for part in [tool.description.trim(), &params.join("; ")] {
        if !part.is_empty() {
            card.push(' ');
            card.push_str(part);
        }
    }
    card
}

impl SearchIndex {
    /// Indexes `tools` for keyword search and, with an embedder, semantic search (tool
    /// embeddings come from `cache` when their text is unchanged).
    pub fn build(
        tools: &[Tool],
        embeddings: Option<(&Embedder, &EmbeddingCache)>,
        fusion: Fusion,
    ) -> Result<Self, SearchError> {
        Self::build_unless(tools, embeddings, fusion, &|| false)
    }

    /// [`Self::build`] that stops with [`SearchError::Superseded`] once `superseded()`
    /// turns true while embeddings are computed (see [`EmbeddingCache::embed_all_unless`]).
    pub fn build_unless(
        tools: &[Tool],
        embeddings: Option<(&Embedder, &EmbeddingCache)>,
        fusion: Fusion,
        superseded: &dyn Fn() -> bool,
    ) -> Result<Self, SearchError> {
        Self::build_with(
            tools,
            embeddings,
            fusion,
            (&embedding_texts, PASSAGE_MAX_WEIGHT),
            superseded,
        )
    }

    /// [`Self::build_unless`] with other passages (a tool's texts given its signature
    /// block) and weight of the best passage (see [`PASSAGE_MAX_WEIGHT`]), for tuning.
    pub fn build_with(
        tools: &[Tool],
        embeddings: Option<(&Embedder, &EmbeddingCache)>,
        fusion: Fusion,
        passages: (&PassagesFn<'_>, f32),
        superseded: &dyn Fn() -> bool,
    ) -> Result<Self, SearchError> {
        let signatures: Vec<String> = tools.iter().map(mcc_catalog::signature).collect();
        let keyword = KeywordIndex::build(tools)?;
        let coverage = Coverage::build(tools);
        let vectors = match embeddings {
            None => None,
            Some((embedder, cache)) => {
                let per_tool: Vec<Vec<String>> = tools
                    .iter()
                    .zip(&signatures)
                    .map(|(t, s)| (passages.0)(t, s))
                    .collect();
                let texts: Vec<&str> = per_tool.iter().flatten().map(String::as_str).collect();
                let (rows, stats) = cache.embed_all_unless(embedder, &texts, superseded)?;
                tracing::debug!(?stats, tools = tools.len(), "search: tool embeddings ready");
                let counts: Vec<usize> = per_tool.iter().map(Vec::len).collect();
                Some(Vectors::new(&rows, &counts, passages.1)?)
            }
        };
        Ok(SearchIndex {
            tools: tools.to_vec(),
            signatures,
            keyword,
            coverage,
            vectors,
            fusion,
        })
    }

    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Whether tool embeddings are present (hybrid search possible).
    pub fn has_embeddings(&self) -> bool {
        self.vectors.is_some()
    }

    /// The signature block of the tool at `index` (ends with a newline).
    pub fn signature(&self, index: usize) -> &str {
        &self.signatures[index]
    }

    /// Which tools `user` may execute, by position.
    pub fn allowed_for(&self, user: Option<&User>) -> Arc<[bool]> {
        self.tools.iter().map(|t| t.allows(user)).collect()
    }

    /// Ranks the tools `allowed` admits for `query` (with `query_vec`, its embedding,
    /// when semantic ranking is wanted), keeps scores ≥ `min_score`, best `limit` first.
    /// `mode` falls back to keyword when no embedding is available on either side.
    pub fn search(
        &self,
        query: &str,
        query_vec: Option<&[f32]>,
        mode: Mode,
        allowed: Arc<[bool]>,
        min_score: Option<f32>,
        limit: usize,
    ) -> Result<Vec<Hit>, SearchError> {
        let semantic = match (&self.vectors, query_vec, mode) {
            (Some(v), Some(q), Mode::Semantic | Mode::Hybrid) if q.len() == v.dims => Some((v, q)),
            _ => None,
        };
        let mode = if semantic.is_none() {
            Mode::Keyword
        } else {
            mode
        };
        let keyword = if mode == Mode::Semantic {
            Vec::new()
        } else {
            self.keyword
                .search(query, CANDIDATES.max(limit), allowed.clone())?
        };
        let mut hits: Vec<Hit> = match semantic {
            None => self.keyword_only(query, &keyword),
            Some((vectors, q)) => self.fuse(query, &keyword, vectors, q, mode, &allowed, limit),
        };
        if let Some(min) = min_score {
            hits.retain(|h| h.score >= min);
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.index.cmp(&b.index)));
        hits.truncate(limit);
        Ok(hits)
    }

    /// The keyword candidates' scores without embeddings: BM25 × coverage^
    /// [`KEYWORD_ONLY_COVERAGE_POWER`], so a tool that matches most of the query's words
    /// outranks one that matches a few of them often.
    fn keyword_only(&self, query: &str, keyword: &[(f32, usize)]) -> Vec<Hit> {
        let positions: Vec<usize> = keyword.iter().map(|&(_, i)| i).collect();
        let coverage = self.coverage.of(&self.keyword, query, &positions);
        keyword
            .iter()
            .zip(coverage)
            .map(|(&(bm25, index), cov)| Hit {
                score: bm25 * cov.max(0.0).powf(KEYWORD_ONLY_COVERAGE_POWER),
                index,
            })
            .collect()
    }

    /// Fuses the keyword candidates with the best semantic candidates.
    #[allow(clippy::too_many_arguments)]
    fn fuse(
        &self,
        query: &str,
        keyword: &[(f32, usize)],
        vectors: &Vectors,
        q: &[f32],
        mode: Mode,
        allowed: &[bool],
        limit: usize,
    ) -> Vec<Hit> {
        let mut cosines: Vec<(f32, usize)> = (0..self.tools.len())
            .filter(|&i| allowed[i])
            .map(|i| (vectors.cosine(i, q), i))
            .collect();
        let pool = CANDIDATES.max(limit).min(cosines.len());
        if pool < cosines.len() {
            cosines.select_nth_unstable_by(pool, |a, b| b.0.total_cmp(&a.0));
            cosines.truncate(pool);
        }
        if mode == Mode::Semantic {
            return cosines
                .into_iter()
                .map(|(cos, index)| Hit {
                    score: self.fusion.semantic_only(cos),
                    index,
                })
                .collect();
        }
        let mut bm25: HashMap<usize, f32> = keyword.iter().map(|&(s, i)| (i, s)).collect();
        for &(_, i) in &cosines {
            bm25.entry(i).or_insert(0.0);
        }
        let candidates: Vec<(usize, f32)> = bm25.into_iter().collect();
        let matched: Vec<usize> = candidates
            .iter()
            .filter(|c| c.1 > 0.0)
            .map(|c| c.0)
            .collect();
        let mut coverage: HashMap<usize, f32> = matched
            .iter()
            .copied()
            .zip(self.coverage.of(&self.keyword, query, &matched))
            .collect();
        candidates
            .into_iter()
            .map(|(index, kw)| Hit {
                score: self.fusion.score(
                    kw,
                    coverage.remove(&index).unwrap_or(0.0),
                    vectors.cosine(index, q),
                ),
                index,
            })
            .collect()
    }
}

/// Formats a score as Python's `f"{score:.2f}"` would. Rust and Python both round the
/// exact binary value half-to-even, so they agree on ties; the value is widened to f64 so
/// the digits are those of the f32 score itself.
pub fn format_score(score: f32) -> String {
    format!("{:.2}", f64::from(score))
}

/// MCC's search output: each hit as `[<score:.2f>]\n<signature>`, joined by a blank line
/// (`"\n\n"`; signatures end in `\n`), or [`NO_MATCH`] when there are none. The one
/// definition of that text: the service's own text and the calls layer both come here.
pub fn render<S: AsRef<str>>(hits: impl IntoIterator<Item = (f32, S)>) -> String {
    let blocks: Vec<String> = hits
        .into_iter()
        .map(|(score, signature)| format!("[{}]\n{}", format_score(score), signature.as_ref()))
        .collect();
    if blocks.is_empty() {
        return NO_MATCH.to_string();
    }
    blocks.join("\n\n")
}

/// [`render`] of `hits` with the signatures `index` holds.
pub fn render_results(index: &SearchIndex, hits: &[Hit]) -> String {
    render(hits.iter().map(|h| (h.score, index.signature(h.index))))
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod update_tests;
