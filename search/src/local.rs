//! Sentence embeddings computed in process: a BERT-family model (all-MiniLM-L6-v2,
//! bge-small-en-v1.5, …) loaded from local files with candle and the tokenizers crate.
//! No model hub is contacted: the directory must hold `config.json`, `tokenizer.json` and
//! `model.safetensors`; `1_Pooling/config.json` (sentence-transformers layout) chooses CLS
//! or mean pooling (mean when absent) and `sentence_bert_config.json` the maximum
//! sequence length (512 or the model's limit when absent). Vectors are L2-normalized, so a
//! dot product is the cosine.
//!
//! Padding: some shipped `tokenizer.json` files pad every text to a fixed length, which
//! makes results wrong (padding tokens pooled) and slow; padding is reset to the batch's
//! longest text and mean pooling averages real tokens only (attention mask).

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use sha2::{Digest, Sha256};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::SearchError;

/// How token vectors become one sentence vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The first token's vector (bge models).
    Cls,
    /// The mean over real (non-padding) tokens (sentence-transformers MiniLM models).
    Mean,
}

/// A loaded model, ready to embed.
pub struct LocalModel {
    model: BertModel,
    tokenizer: Tokenizer,
    pooling: Pooling,
    dims: usize,
    device: Device,
    /// Identifies the weights, for cache keys: directory name plus sizes of the files.
    id: String,
}

/// Texts embedded per forward pass: large enough to amortise the pass, small enough that
/// one long text does not pad many short ones.
const BATCH: usize = 32;

/// Most `texts × tokens²` per forward pass. Attention holds `texts × heads × tokens²`
/// floats, several such tensors at once (candle's BERT keeps the scores, the scaled
/// scores, the masked scores and the probabilities alive together), so 32 texts of 256
/// tokens would take some 100 MB per tensor, memory the allocator then keeps. This bound
/// lets batches of long texts shrink (4 texts of 256 tokens, 16 of 128) while short texts
/// still go 32 at a time. Half of the bound before (32 × 128 × 128): the index build's
/// peak RSS fell from 437 to 288 MB for 1,742 tools, and it took ~20 % longer
/// (gateway/benches/RESULTS-bfcl.md, round 3).
const BATCH_ATTENTION: usize = 16 * 128 * 128;

/// Consecutive ranges of `lengths` (token counts, sorted ascending) to embed together: at
/// most [`BATCH`] texts and [`BATCH_ATTENTION`] `texts × longest²`, at least one text.
fn batches(lengths: &[usize]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < lengths.len() {
        let mut end = start + 1;
        while end < lengths.len()
            && end - start < BATCH
            && (end - start + 1) * lengths[end] * lengths[end] <= BATCH_ATTENTION
        {
            end += 1;
        }
        out.push(start..end);
        start = end;
    }
    out
}

/// The variable candle (and rayon) read for the number of threads of a matrix product.
const THREADS_VAR: &str = "RAYON_NUM_THREADS";

/// Settles, once, how many threads the model's matrix products use: the CPUs this
/// process may run on (its container's CPU quota and affinity, as
/// [`std::thread::available_parallelism`] reads them), unless `RAYON_NUM_THREADS` is
/// already set, which is kept.
///
/// candle asks for its thread count on every matrix product. With the variable unset it
/// counts the host's physical cores by parsing `/proc/cpuinfo` each time: about a third
/// of a short query's embedding (10.5 → 7.3 ms p50 with the variable set;
/// gateway/benches/RESULTS-search.md), and the count ignores a Pod's CPU limit, so a gateway
/// limited to 2 CPUs on a 64-core node would run 64-thread products.
///
/// # Safety
///
/// It sets an environment variable: call it before any other thread of the process
/// exists (first thing in `main`).
pub unsafe fn settle_threads() {
    if std::env::var_os(THREADS_VAR).is_some() {
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    // SAFETY: the caller guarantees no other thread exists yet.
    unsafe { std::env::set_var(THREADS_VAR, cpus.to_string()) };
}

fn model_err(dir: &Path, what: &str) -> impl Fn(String) -> SearchError {
    let prefix = format!("model {}: {what}", dir.display());
    move |e| SearchError::Model(format!("{prefix}: {e}"))
}

fn read(dir: &Path, file: &str) -> Result<String, SearchError> {
    std::fs::read_to_string(dir.join(file))
        .map_err(|e| SearchError::Model(format!("model {}: {file}: {e}", dir.display())))
}

impl LocalModel {
    /// Loads the model in `dir` (see the module doc for the files it needs).
    pub fn load(dir: &Path) -> Result<Self, SearchError> {
        if !dir.is_dir() {
            return Err(SearchError::Model(format!(
                "model directory {} does not exist (fetch one with scripts/fetch-model.sh)",
                dir.display()
            )));
        }
        let config: Config = serde_json::from_str(&read(dir, "config.json")?)
            .map_err(|e| model_err(dir, "config.json")(e.to_string()))?;
        let pooling = read_pooling(dir)?;
        let max_len = read_max_len(dir)?.min(config.max_position_embeddings);
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| model_err(dir, "tokenizer.json")(e.to_string()))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_len,
                ..TruncationParams::default()
            }))
            .map_err(|e| model_err(dir, "tokenizer truncation")(e.to_string()))?;
        let weights = dir.join("model.safetensors");
        if !weights.is_file() {
            return Err(SearchError::Model(format!(
                "model {}: model.safetensors is missing (only safetensors weights are supported)",
                dir.display()
            )));
        }
        let device = Device::Cpu;
        // SAFETY: the file is memory-mapped read-only; it must not change while mapped,
        // which holds for model files in a cache or image directory.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &device) }
            .map_err(|e| model_err(dir, "model.safetensors")(e.to_string()))?;
        let model = BertModel::load(vb, &config)
            .map_err(|e| model_err(dir, "loading BERT weights")(e.to_string()))?;
        Ok(LocalModel {
            model,
            tokenizer,
            pooling,
            dims: config.hidden_size,
            device,
            id: model_id(dir, &weights),
        })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// One normalized vector per text, in order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, SearchError> {
        if texts.len() <= 1 {
            return self.embed_batch(texts);
        }
        // Texts of similar length (in tokens, as the model reads them) batched together
        // pad less; batches of long texts are smaller ([`batches`]).
        let lengths = texts
            .iter()
            .map(|t| self.tokenizer.encode(*t, true).map(|e| e.len()))
            .collect::<Result<Vec<usize>, _>>()
            .map_err(|e| SearchError::Embed(format!("tokenizing: {e}")))?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| lengths[i]);
        let sorted: Vec<usize> = order.iter().map(|&i| lengths[i]).collect();
        let mut out = vec![Vec::new(); texts.len()];
        for range in batches(&sorted) {
            let chunk = &order[range];
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
            for (&i, v) in chunk.iter().zip(self.embed_batch(&batch)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, SearchError> {
        let err = |what: &'static str| move |e: String| SearchError::Embed(format!("{what}: {e}"));
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| err("tokenizing")(e.to_string()))?;
        let rows = |f: &dyn Fn(&tokenizers::Encoding) -> &[u32]| -> Result<Tensor, SearchError> {
            let rows: Vec<Tensor> = encodings
                .iter()
                .map(|e| Tensor::new(f(e), &self.device))
                .collect::<Result<_, _>>()
                .map_err(|e| err("input tensor")(e.to_string()))?;
            Tensor::stack(&rows, 0).map_err(|e| err("input tensor")(e.to_string()))
        };
        let ids = rows(&|e| e.get_ids())?;
        let types = rows(&|e| e.get_type_ids())?;
        let mask = rows(&|e| e.get_attention_mask())?;
        let hidden = self
            .model
            .forward(&ids, &types, Some(&mask))
            .map_err(|e| err("model forward")(e.to_string()))?;
        let pooled =
            pool(&hidden, &mask, self.pooling).map_err(|e| err("pooling")(e.to_string()))?;
        let normalized = normalize(&pooled).map_err(|e| err("normalizing")(e.to_string()))?;
        normalized
            .to_vec2::<f32>()
            .map_err(|e| err("output tensor")(e.to_string()))
    }
}

/// (batch, tokens, dims) → (batch, dims).
fn pool(hidden: &Tensor, mask: &Tensor, pooling: Pooling) -> candle_core::Result<Tensor> {
    match pooling {
        Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1),
        Pooling::Mean => {
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let sum = hidden.broadcast_mul(&mask)?.sum(1)?;
            let count = mask.sum(1)?.clamp(1e-9, f64::MAX)?;
            sum.broadcast_div(&count)
        }
    }
}

fn normalize(v: &Tensor) -> candle_core::Result<Tensor> {
    let norm = v.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
    v.broadcast_div(&norm)
}

/// Pooling from `1_Pooling/config.json`; mean when the file is absent.
fn read_pooling(dir: &Path) -> Result<Pooling, SearchError> {
    let path = dir.join("1_Pooling").join("config.json");
    if !path.is_file() {
        return Ok(Pooling::Mean);
    }
    let v: serde_json::Value = serde_json::from_str(&read(dir, "1_Pooling/config.json")?)
        .map_err(|e| model_err(dir, "1_Pooling/config.json")(e.to_string()))?;
    let flag = |k: &str| v.get(k).and_then(serde_json::Value::as_bool) == Some(true);
    match (
        flag("pooling_mode_cls_token"),
        flag("pooling_mode_mean_tokens"),
    ) {
        (true, false) => Ok(Pooling::Cls),
        (false, true) => Ok(Pooling::Mean),
        _ => Err(SearchError::Model(format!(
            "model {}: 1_Pooling/config.json: exactly one of pooling_mode_cls_token and \
             pooling_mode_mean_tokens must be true (other poolings are not supported)",
            dir.display()
        ))),
    }
}

/// `max_seq_length` from `sentence_bert_config.json`; 512 when absent.
fn read_max_len(dir: &Path) -> Result<usize, SearchError> {
    if !dir.join("sentence_bert_config.json").is_file() {
        return Ok(512);
    }
    let v: serde_json::Value = serde_json::from_str(&read(dir, "sentence_bert_config.json")?)
        .map_err(|e| model_err(dir, "sentence_bert_config.json")(e.to_string()))?;
    Ok(v.get("max_seq_length")
        .and_then(serde_json::Value::as_u64)
        .map_or(512, |n| n as usize))
}

/// Identity of a model for cache keys: SHA-256 over the directory name, the contents of
/// its config, tokenizer and pooling files, and the weights' size (hashing ~100 MB of
/// weights at every start would cost more than it protects: a cache entry for other
/// weights could only affect ranking, never access).
fn model_id(dir: &Path, weights: &Path) -> String {
    let mut h = Sha256::new();
    h.update(
        dir.file_name()
            .map(|n| n.as_encoded_bytes())
            .unwrap_or_default(),
    );
    for file in ["config.json", "tokenizer.json", "1_Pooling/config.json"] {
        h.update([0u8]);
        h.update(std::fs::read(dir.join(file)).unwrap_or_default());
    }
    let size = std::fs::metadata(weights).map(|m| m.len()).unwrap_or(0);
    h.update(size.to_le_bytes());
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("local:{name}:{}", &hex::encode(h.finalize())[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_texts_go_32_at_a_time_and_long_ones_in_smaller_batches() {
        let sizes = |lengths: &[usize]| -> Vec<usize> {
            batches(lengths).into_iter().map(|r| r.len()).collect()
        };
        assert_eq!(sizes(&[]), Vec::<usize>::new());
        assert_eq!(sizes(&[40; 70]), [32, 32, 6]);
        assert_eq!(sizes(&[64; 40]), [32, 8]);
        assert_eq!(sizes(&[128; 30]), [16, 14]);
        assert_eq!(sizes(&[256; 10]), [4, 4, 2]);
        // A batch is bounded by its longest (last, the lengths being sorted) text.
        let mixed: Vec<usize> = [10; 6].into_iter().chain([256; 8]).collect();
        assert_eq!(sizes(&mixed), [6, 4, 4]);
        // One text longer than the bound still gets a batch of its own.
        assert_eq!(sizes(&[4096, 4096]), [1, 1]);
        let covered: usize = batches(&[40; 70]).iter().map(|r| r.len()).sum();
        assert_eq!(covered, 70);
    }
}
