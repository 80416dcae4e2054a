//! The `search.*` configuration keys as they appear in the gateway's settings file
//! ([`SearchConfig`]) and their validation into [`SearchSettings`], what the service
//! runs with. Every error names the key that is wrong.
//! (`MCC_SEARCH__<KEY>` environment overrides are applied by the gateway's settings
//! loader, like every other `MCC_*` override.)

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::{Fusion, RedisConnector, SearchError};

/// The default of `search.max_query_bytes`: far above any tool query an agent writes
/// (a few words to a few sentences), far below what makes a search expensive.
pub const DEFAULT_MAX_QUERY_BYTES: usize = 2048;

/// Search configuration (the `search.*` keys; see docs/search.md), built from
/// [`SearchConfig`].
#[derive(Clone)]
pub struct SearchSettings {
    /// `search.model_dir`: a local BERT-family model directory.
    pub model_dir: Option<PathBuf>,
    /// `search.embeddings_url`: an OpenAI-compatible API base (used instead of a model).
    pub embeddings_url: Option<String>,
    /// `search.embeddings_model`: the model name sent to the endpoint.
    pub embeddings_model: String,
    /// `search.embeddings_api_key`: bearer token for the endpoint (never logged).
    pub embeddings_api_key: Option<mcc_catalog::Secret>,
    /// Where tool embeddings are shared between replicas: the Redis of
    /// `search.redis_url`, connected by the caller (the gateway's connection definition;
    /// its default is the session Redis). [`SearchConfig::settings`] leaves it unset.
    pub redis: Option<Arc<dyn RedisConnector>>,
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
            redis: None,
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
            .field("embeddings_api_key", &self.embeddings_api_key)
            .field("redis", &self.redis.as_ref().map(|_| "<set>"))
            .field("max_results", &self.max_results)
            .field("max_query_bytes", &self.max_query_bytes)
            .field("fusion", &self.fusion)
            .finish_non_exhaustive()
    }
}

/// The `search:` section of the settings (all keys optional; see docs/search.md).
#[derive(Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    pub model_dir: Option<PathBuf>,
    pub embeddings_url: Option<String>,
    pub embeddings_model: Option<String>,
    pub embeddings_api_key: Option<mcc_catalog::Secret>,
    pub redis_url: Option<String>,
    pub max_results: Option<usize>,
    pub keyword_weight: Option<f32>,
    pub semantic_weight: Option<f32>,
    pub keyword_saturation: Option<f32>,
    pub query_cache_size: Option<usize>,
    pub query_cache_ttl_secs: Option<u64>,
    pub max_query_bytes: Option<usize>,
}

impl std::fmt::Debug for SearchConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchConfig")
            .field("model_dir", &self.model_dir)
            .field("embeddings_url", &self.embeddings_url)
            .field("embeddings_model", &self.embeddings_model)
            .field("embeddings_api_key", &self.embeddings_api_key)
            .field("redis_url", &self.redis_url.as_ref().map(|_| "<set>"))
            .field("max_results", &self.max_results)
            .field("max_query_bytes", &self.max_query_bytes)
            .finish_non_exhaustive()
    }
}

impl SearchConfig {
    /// Validated settings; defaults fill what is not set.
    pub fn settings(&self) -> Result<SearchSettings, SearchError> {
        let d = SearchSettings::default();
        let bad = |key: &str, why: &str| SearchError::Config(format!("search.{key}: {why}"));
        let weight = |key: &str, v: Option<f32>, default: f32| match v {
            Some(w) if !(w.is_finite() && w >= 0.0) => Err(bad(key, "must be a number ≥ 0")),
            Some(w) => Ok(w),
            None => Ok(default),
        };
        let fusion = Fusion {
            keyword_weight: weight(
                "keyword_weight",
                self.keyword_weight,
                d.fusion.keyword_weight,
            )?,
            semantic_weight: weight(
                "semantic_weight",
                self.semantic_weight,
                d.fusion.semantic_weight,
            )?,
            saturation: weight(
                "keyword_saturation",
                self.keyword_saturation,
                d.fusion.saturation,
            )?,
            ..d.fusion
        };
        if fusion.keyword_weight + fusion.semantic_weight <= 0.0 {
            return Err(bad(
                "keyword_weight",
                "keyword_weight and semantic_weight are both 0",
            ));
        }
        if fusion.saturation <= 0.0 {
            return Err(bad("keyword_saturation", "must be > 0"));
        }
        let max_results = match self.max_results {
            Some(0) => return Err(bad("max_results", "must be at least 1")),
            Some(n) => n,
            None => d.max_results,
        };
        let query_cache_size = match self.query_cache_size {
            Some(n) => {
                NonZeroUsize::new(n).ok_or_else(|| bad("query_cache_size", "must be at least 1"))?
            }
            None => d.query_cache_size,
        };
        let max_query_bytes = match self.max_query_bytes {
            Some(0) => return Err(bad("max_query_bytes", "must be at least 1")),
            Some(n) => n,
            None => d.max_query_bytes,
        };
        Ok(SearchSettings {
            max_query_bytes,
            model_dir: self.model_dir.clone(),
            embeddings_url: self.embeddings_url.clone(),
            embeddings_model: self.embeddings_model.clone().unwrap_or(d.embeddings_model),
            embeddings_api_key: self.embeddings_api_key.clone(),
            redis: None,
            max_results,
            query_cache_size,
            query_cache_ttl: self
                .query_cache_ttl_secs
                .map_or(d.query_cache_ttl, Duration::from_secs),
            fusion,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_keys_and_defaults() {
        let c: SearchConfig = serde_saphyr::from_str(
            "model_dir: /models/minilm\nmax_results: 5\nkeyword_weight: 0.5\nembeddings_url: http://tei:8080/v1\n",
        )
        .unwrap();
        let s = c.settings().unwrap();
        assert_eq!(s.max_results, 5);
        assert_eq!(
            s.model_dir.as_deref(),
            Some(std::path::Path::new("/models/minilm"))
        );
        assert_eq!(s.embeddings_url.as_deref(), Some("http://tei:8080/v1"));
        assert_eq!(s.fusion.keyword_weight, 0.5);
        assert_eq!(s.fusion.semantic_weight, Fusion::default().semantic_weight);
    }

    #[test]
    fn bad_values_name_the_key() {
        let err = serde_saphyr::from_str::<SearchConfig>("modle_dir: x\n").unwrap_err();
        assert!(err.to_string().contains("modle_dir"), "{err}");
        let c = SearchConfig {
            max_results: Some(0),
            ..SearchConfig::default()
        };
        assert!(
            c.settings()
                .unwrap_err()
                .to_string()
                .contains("search.max_results")
        );
        let c = SearchConfig {
            semantic_weight: Some(-1.0),
            ..SearchConfig::default()
        };
        assert!(
            c.settings()
                .unwrap_err()
                .to_string()
                .contains("search.semantic_weight")
        );
    }

    #[test]
    fn debug_never_shows_the_api_key() {
        let c = SearchConfig {
            embeddings_api_key: Some("sk-secret".into()),
            ..SearchConfig::default()
        };
        assert!(!format!("{c:?}").contains("sk-secret"));
    }
}
