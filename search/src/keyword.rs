//! The keyword half of search: an in-RAM tantivy index over each tool's text, scored with
//! BM25, with typo tolerance.
//!
//! Each tool is one document with weighted fields (key, name, groups, description,
//! example, parameter names and descriptions). The analyzer splits on everything that is
//! not a letter or digit (so `snake_case`, `dotted.keys` and `dash-names` become words),
//! lowercases, drops a few English stop words and stems English. Before that, both tool
//! text and queries get the parts of their camelCase words appended
//! ([`with_identifier_parts`]: `getWeather` is also `get Weather`).
//!
//! Typo tolerance follows Elasticsearch's `fuzziness: AUTO`: a query word of 1–2
//! characters must match exactly, 3–5 characters may be 1 edit away, longer words 2
//! (transpositions cost one edit). Each query word is expanded, per field, to the indexed
//! terms within that distance; each expansion is a BM25 term query, the exact term at full
//! weight and the others at [`FUZZY_WEIGHT`] — as Elasticsearch scores fuzzy expansions
//! below exact matches. This module knows nothing about embeddings, fusion or RBAC; it
//! ranks the tools a caller-supplied mask admits.

use std::collections::BTreeSet;
use std::sync::Arc;

use mcc_catalog::Tool;
use tantivy::collector::{FilterCollector, TopDocs};
use tantivy::columnar::Column;
use tantivy::query::{BooleanQuery, BoostQuery, FuzzyTermQuery, Occur, Query, TermQuery};
use tantivy::schema::{FAST, Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
    TokenStream,
};
use tantivy::{Index, IndexReader, IndexWriter, Searcher, TantivyDocument, Term};

use super::SearchError;

/// The analyzer's registered name.
const ANALYZER: &str = "mcc_en";
/// The fast field holding each document's position in the catalog.
const ORD_FIELD: &str = "ord";
/// Weight of a fuzzy expansion relative to the exact term.
pub const FUZZY_WEIGHT: f32 = 0.5;
/// Distinct query words that are ranked; later ones are ignored. Each costs a fuzzy
/// expansion per field, so this bounds a query's work whatever its length (with
/// `search.max_query_bytes`); a tool query of real use has a few to a few dozen words.
pub const MAX_QUERY_WORDS: usize = 64;
/// Words that carry no meaning in a tool query ("list all the pods in a namespace").
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "i", "in", "into", "is", "it",
    "me", "my", "of", "on", "or", "some", "that", "the", "their", "this", "to", "was", "what",
    "which", "with", "you", "your", "can", "do", "does", "how", "want", "need", "please",
];

/// Which part of a tool a field indexes, and its weight in the BM25 sum.
#[derive(Debug, Clone, Copy)]
struct WeightedField {
    field: Field,
    weight: f32,
}

/// Per-field weights, chosen on the relevance suite (gateway/benches/RESULTS-search.md): the
/// description carries most of what a natural-language query matches; the name counts
/// half as much per word; the key repeats the name and groups, so it adds little.
pub const FIELD_WEIGHTS: [(&str, f32); 6] = [
    ("name", 1.0),
    ("key", 0.25),
    ("groups", 0.5),
    ("description", 2.0),
    ("params", 1.0),
    ("example", 0.2),
];

/// An immutable keyword index over one catalog snapshot.
pub struct KeywordIndex {
    searcher: Searcher,
    // Kept so the searcher's segments stay open for the index's lifetime.
    _reader: IndexReader,
    analyzer: TextAnalyzer,
    fields: Vec<WeightedField>,
    /// Per segment: document id → position in the catalog.
    ords: Vec<Column<u64>>,
}

/// The analyzer used for both documents and queries.
pub fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(
            STOP_WORDS.iter().map(|w| w.to_string()),
        ))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// `text` followed by the parts of each of its camelCase words (`getWeather` →
/// `get Weather`, `HTTPServer` → `HTTP Server`, `ChaDri` → `Cha Dri`), so a tool named
/// `getCurrentWeather` or a parameter `newIngredients` matches the words a person types.
/// The whole word is kept too (it is what a query naming the tool holds). Unchanged
/// (borrowed) when no word has parts.
pub fn with_identifier_parts(text: &str) -> std::borrow::Cow<'_, str> {
    let mut parts = String::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        let chars: Vec<char> = word.chars().collect();
        let mut start = 0;
        let mut split = false;
        for i in 1..chars.len() {
            let (prev, c) = (chars[i - 1], chars[i]);
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary = c.is_uppercase()
                && (prev.is_lowercase()
                    || prev.is_ascii_digit()
                    || (prev.is_uppercase() && next_lower));
            if boundary {
                parts.extend(&chars[start..i]);
                parts.push(' ');
                start = i;
                split = true;
            }
        }
        if split {
            parts.extend(&chars[start..]);
            parts.push(' ');
        }
    }
    if parts.is_empty() {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(format!("{text}\n{}", parts.trim_end()))
    }
}

/// An identifier as lower-case words, for texts a model reads: `public.getCurrentWeather`
/// → `public get current weather`, `calculate_BMI` → `calculate bmi`.
pub fn identifier_words(name: &str) -> String {
    let parts = with_identifier_parts(name);
    let text = parts.split_once('\n').map_or(&*parts, |(_, split)| split);
    let text = if text.is_empty() { name } else { text };
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The analyzed terms of `text`, in order, duplicates kept.
pub fn analyze(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
    let mut stream = analyzer.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        out.push(stream.token().text.clone());
    }
    out
}

/// Elasticsearch's `fuzziness: AUTO` edit distance for a word of `len` characters.
pub fn auto_fuzziness(len: usize) -> u8 {
    match len {
        0..=2 => 0,
        3..=5 => 1,
        _ => 2,
    }
}

fn tantivy_err(what: &str) -> impl Fn(tantivy::TantivyError) -> SearchError + '_ {
    move |e| SearchError::Keyword(format!("{what}: {e}"))
}

impl KeywordIndex {
    /// Indexes `tools`; document `i` is `tools[i]`.
    pub fn build(tools: &[Tool]) -> Result<Self, SearchError> {
        Self::build_weighted(tools, FIELD_WEIGHTS.map(|(_, w)| w))
    }

    /// [`Self::build`] with other field weights (in [`FIELD_WEIGHTS`] order), for tuning.
    pub fn build_weighted(tools: &[Tool], weights: [f32; 6]) -> Result<Self, SearchError> {
        let text = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqs),
        );
        let mut schema = Schema::builder();
        let fields: Vec<WeightedField> = FIELD_WEIGHTS
            .iter()
            .zip(weights)
            .map(|((name, _), weight)| WeightedField {
                field: schema.add_text_field(name, text.clone()),
                weight,
            })
            .collect();
        let ord = schema.add_u64_field(ORD_FIELD, FAST);
        let index = Index::create_in_ram(schema.build());
        index.tokenizers().register(ANALYZER, analyzer());
        // One thread: one segment, and no thread pool for a build that takes milliseconds.
        let mut writer: IndexWriter = index
            .writer_with_num_threads(1, 64 * 1024 * 1024)
            .map_err(tantivy_err("creating the index writer"))?;
        for (i, tool) in tools.iter().enumerate() {
            let mut doc = TantivyDocument::default();
            for (wf, value) in fields.iter().zip(document_texts(tool)) {
                doc.add_text(wf.field, value);
            }
            doc.add_u64(ord, i as u64);
            writer
                .add_document(doc)
                .map_err(tantivy_err("indexing a tool"))?;
        }
        writer
            .commit()
            .map_err(tantivy_err("committing the index"))?;
        let reader = index.reader().map_err(tantivy_err("opening the index"))?;
        let searcher = reader.searcher();
        let ords = searcher
            .segment_readers()
            .iter()
            .map(|s| s.fast_fields().u64(ORD_FIELD))
            .collect::<Result<_, _>>()
            .map_err(tantivy_err("reading the ord column"))?;
        Ok(KeywordIndex {
            searcher,
            _reader: reader,
            analyzer: analyzer(),
            fields,
            ords,
        })
    }

    /// The best `limit` tools for `query` among those `allowed` admits (indexed by
    /// catalog position), as (BM25 score, position), best first. An empty query or one
    /// whose every word is a stop word matches nothing.
    pub fn search(
        &self,
        query: &str,
        limit: usize,
        allowed: Arc<[bool]>,
    ) -> Result<Vec<(f32, usize)>, SearchError> {
        let Some(query) = self.query(query)? else {
            return Ok(Vec::new());
        };
        let collector = FilterCollector::new(
            ORD_FIELD.to_string(),
            move |ord: u64| allowed.get(ord as usize).copied().unwrap_or(false),
            TopDocs::with_limit(limit.max(1)).order_by_score(),
        );
        let top = self
            .searcher
            .search(&query, &collector)
            .map_err(tantivy_err("searching"))?;
        Ok(top
            .into_iter()
            .filter_map(|(score, addr)| {
                let ord = self.ords[addr.segment_ord as usize].first(addr.doc_id)?;
                Some((score, ord as usize))
            })
            .collect())
    }

    /// The query for `text`: for each distinct analyzed word (the first
    /// [`MAX_QUERY_WORDS`]) and each field, the exact term and its fuzzy expansions, all
    /// optional (any match scores).
    fn query(&self, text: &str) -> Result<Option<BooleanQuery>, SearchError> {
        let words = self.query_words(text);
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for word in &words {
            for wf in &self.fields {
                for (term, weight) in self.expansions(wf.field, word)? {
                    let q = TermQuery::new(term, IndexRecordOption::WithFreqs);
                    clauses.push((
                        Occur::Should,
                        Box::new(BoostQuery::new(Box::new(q), wf.weight * weight)),
                    ));
                }
            }
        }
        Ok((!clauses.is_empty()).then(|| BooleanQuery::new(clauses)))
    }

    /// The distinct analyzed words of `text` that are ranked (the first
    /// [`MAX_QUERY_WORDS`]).
    pub fn query_words(&self, text: &str) -> BTreeSet<String> {
        let mut words = BTreeSet::new();
        for word in analyze(&mut self.analyzer.clone(), &with_identifier_parts(text)) {
            if words.len() == MAX_QUERY_WORDS {
                break;
            }
            words.insert(word);
        }
        words
    }

    /// The indexed terms of any field within AUTO edit distance of `word`, other than
    /// `word` itself (what a typo-tolerant match of it may hit).
    pub fn fuzzy_terms(&self, word: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for wf in &self.fields {
            for (term, weight) in self.expansions(wf.field, word).unwrap_or_default() {
                if weight < 1.0
                    && let Some(t) = term.value().as_str()
                {
                    out.push(t.to_string());
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The indexed terms of `field` within AUTO edit distance of `word`, each with its
    /// weight (1 for the word itself, [`FUZZY_WEIGHT`] for the others).
    fn expansions(&self, field: Field, word: &str) -> Result<Vec<(Term, f32)>, SearchError> {
        let exact = Term::from_field_text(field, word);
        let distance = auto_fuzziness(word.chars().count());
        if distance == 0 {
            return Ok(vec![(exact, 1.0)]);
        }
        let automaton = FuzzyTermQuery::new(exact.clone(), distance, true)
            .automaton()
            .map_err(tantivy_err("building the fuzzy automaton"))?;
        let mut found = Vec::new();
        for segment in self.searcher.segment_readers() {
            let inverted = segment
                .inverted_index(field)
                .map_err(tantivy_err("reading terms"))?;
            let mut stream = inverted
                .terms()
                .search(&automaton)
                .into_stream()
                .map_err(|e| SearchError::Keyword(format!("streaming terms: {e}")))?;
            while stream.advance() {
                if let Ok(t) = std::str::from_utf8(stream.key()) {
                    found.push(t.to_string());
                }
            }
        }
        found.sort();
        found.dedup();
        let mut out = vec![(exact, 1.0)];
        out.extend(
            found
                .into_iter()
                .filter(|t| t != word)
                .map(|t| (Term::from_field_text(field, &t), FUZZY_WEIGHT)),
        );
        Ok(out)
    }
}

/// The text of each weighted field of `tool`, in [`FIELD_WEIGHTS`] order.
pub(crate) fn document_texts(tool: &Tool) -> [String; 6] {
    let params: Vec<String> = tool
        .visible_params()
        .map(|p| format!("{} {}", p.name, p.description))
        .collect();
    [
        tool.name.clone(),
        tool.key.clone(),
        tool.groups.join(" "),
        tool.description.clone(),
        params.join("\n"),
        tool.example.clone(),
    ]
    .map(|text| with_identifier_parts(&text).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analyzer_splits_snake_dots_dashes_and_stems() {
        let mut a = analyzer();
        assert_eq!(
            analyze(&mut a, "list_pods k8s.Deployments re-starting the Services"),
            ["list", "pod", "k8s", "deploy", "re", "start", "servic"]
        );
    }

    #[test]
    fn camel_case_words_add_their_parts() {
        assert_eq!(
            with_identifier_parts("getWeather HTTPServer ChaDri.change_drink k8s plain"),
            "getWeather HTTPServer ChaDri.change_drink k8s plain\nget Weather HTTP Server Cha Dri"
        );
        assert!(matches!(
            with_identifier_parts("list_pods k8s.restart"),
            std::borrow::Cow::Borrowed(_)
        ));
        let mut a = analyzer();
        let words = analyze(&mut a, &with_identifier_parts("newIngredients"));
        assert_eq!(words, ["newingredi", "new", "ingredi"]);
    }

    #[test]
    fn auto_fuzziness_matches_elasticsearch() {
        assert_eq!([1, 2, 3, 5, 6, 12].map(auto_fuzziness), [0, 0, 1, 1, 2, 2]);
    }
}
