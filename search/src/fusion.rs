//! How the keyword and semantic rankings become one score per tool.
//!
//! For a query q and a tool t, with `bm25` the keyword score (0 when t did not match),
//! `cov` the share of q's words t contains ([`super::coverage`]) and `cos` the cosine
//! between the query's and the tool's embeddings:
//!
//! ```text
//! keyword  k = cov * bm25 / (bm25 + saturation)                 in [0, 1)
//! semantic s = clamp((cos - cos_floor) / (1 - cos_floor), 0, 1)  in [0, 1]
//! score      = scale * (keyword_weight * k + semantic_weight * s)
//! ```
//!
//! The coverage factor keeps an incidental word of a paraphrase from outranking meaning:
//! without it, hybrid search ranked paraphrase queries far below semantic-only search
//! (gateway/benches/RESULTS-search.md).
//!
//! Both signals are absolute (neither is divided by the query's best score), so a query
//! that matches nothing well gets low scores everywhere and a `min_score` keeps its
//! meaning across queries of similar length; within one query scores are directly
//! comparable. BM25 saturates so that one rare word cannot drown the meaning of the whole
//! query; cosines below `cos_floor` (unrelated sentences) count as nothing. With the
//! default weights a perfect match on both scores 10; useful results typically score 2–8.
//!
//! Without embeddings (keyword-only) the score is the BM25 sum, as in MCC's
//! Elasticsearch `match` query, times the tool's coverage
//! ([`crate::KEYWORD_ONLY_COVERAGE_POWER`]).

/// The fusion parameters (see the module doc for the formula). The defaults were chosen
/// on half of the relevance suite's queries and checked on the other half (`tune_fusion`
/// in gateway/tests/relevance/main.rs; gateway/benches/RESULTS-search.md). On the BFCL
/// benchmark's tuning split a keyword weight of 0.4 ranks better, but it lowers the
/// held-out paraphrases (MRR 0.552 → 0.454), so 0.2 stays
/// (gateway/benches/RESULTS-bfcl.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fusion {
    pub keyword_weight: f32,
    pub semantic_weight: f32,
    /// The BM25 score at which the keyword signal reaches one half.
    pub saturation: f32,
    /// Cosines at or below this count as no similarity.
    pub cos_floor: f32,
    /// Multiplies the weighted sum, to land in MCC's familiar 1–15 range.
    pub scale: f32,
}

impl Default for Fusion {
    fn default() -> Self {
        Fusion {
            keyword_weight: 0.2,
            semantic_weight: 0.8,
            saturation: 4.0,
            cos_floor: 0.0,
            scale: 10.0,
        }
    }
}

impl Fusion {
    /// The keyword signal of a BM25 score.
    pub fn keyword(&self, bm25: f32) -> f32 {
        let bm25 = bm25.max(0.0);
        bm25 / (bm25 + self.saturation.max(f32::EPSILON))
    }

    /// The semantic signal of a cosine.
    pub fn semantic(&self, cos: f32) -> f32 {
        ((cos - self.cos_floor) / (1.0 - self.cos_floor).max(f32::EPSILON)).clamp(0.0, 1.0)
    }

    /// The fused score of one tool; `coverage` in [0, 1] scales its keyword signal.
    pub fn score(&self, bm25: f32, coverage: f32, cos: f32) -> f32 {
        self.scale
            * (self.keyword_weight * coverage.clamp(0.0, 1.0) * self.keyword(bm25)
                + self.semantic_weight * self.semantic(cos))
    }

    /// The score of a semantic-only ranking (for evaluation and when keyword finds
    /// nothing, the same scale as hybrid).
    pub fn semantic_only(&self, cos: f32) -> f32 {
        self.scale * self.semantic(cos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_match_scores_scale_and_nothing_scores_zero() {
        let f = Fusion::default();
        assert_eq!(f.score(0.0, 1.0, 0.0), 0.0);
        assert_eq!(f.score(0.0, 1.0, f.cos_floor), 0.0);
        assert!((f.score(1e9, 1.0, 1.0) - f.scale).abs() < 1e-3);
        assert!(f.score(8.0, 0.5, 0.5) < f.score(8.0, 1.0, 0.5));
    }

    #[test]
    fn signals_are_monotone_and_saturate() {
        let f = Fusion::default();
        assert!(f.keyword(2.0) < f.keyword(4.0));
        assert!((f.keyword(f.saturation) - 0.5).abs() < 1e-6);
        assert!(f.semantic(0.3) < f.semantic(0.6));
        assert_eq!(f.semantic(-0.5), 0.0);
        assert_eq!(f.keyword(-1.0), 0.0);
    }
}
