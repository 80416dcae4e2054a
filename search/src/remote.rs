//! Sentence embeddings from an OpenAI-compatible endpoint (`POST {base}/embeddings`), e.g.
//! an in-cluster text-embeddings-inference server, instead of the in-process model.
//!
//! The request is `{"model": <model>, "input": [<texts>]}`; the response's
//! `data[i].embedding` (ordered by `data[i].index`) are the vectors. They are
//! L2-normalized here, whatever the server did. Blocking: call from a blocking task.

use std::io::Read;
use std::time::Duration;

use mcc_catalog::Secret;
use serde::Deserialize;
use serde_json::json;

use super::SearchError;

/// Texts per request, to keep request bodies bounded.
const BATCH: usize = 64;
/// The largest embeddings reply read: a batch of 64 vectors of 4096 dimensions is ~6 MB
/// of JSON.
const MAX_RESPONSE_BYTES: u64 = 32 << 20;

/// A client of one embeddings endpoint and model.
pub struct RemoteEmbedder {
    client: reqwest::blocking::Client,
    url: String,
    model: String,
    api_key: Option<Secret>,
    id: String,
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

impl RemoteEmbedder {
    /// `base` is the API base (`http://tei:8080/v1`); `/embeddings` is appended.
    pub fn new(base: &str, model: &str, api_key: Option<Secret>) -> Result<Self, SearchError> {
        let base = base.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(SearchError::Config(format!(
                "search.embeddings_url: expected an http(s) URL, got '{base}'"
            )));
        }
        crate::tls::install_crypto_provider();
        let client = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| SearchError::Config(format!("search.embeddings_url: {e}")))?;
        Ok(RemoteEmbedder {
            client,
            url: format!("{base}/embeddings"),
            model: model.to_string(),
            api_key,
            id: format!("remote:{base}:{model}"),
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// One normalized vector per text, in order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, SearchError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(BATCH) {
            out.extend(self.embed_batch(chunk)?);
        }
        Ok(out)
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, SearchError> {
        let err = |e: String| SearchError::Embed(format!("POST {}: {e}", self.url));
        let mut req = self
            .client
            .post(&self.url)
            .json(&json!({"model": self.model, "input": texts}));
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key.expose());
        }
        let resp = req.send().map_err(|e| err(e.to_string()))?;
        let status = resp.status();
        // Read no more than a reply can hold: the service is not ours to trust with our
        // memory.
        let mut body = Vec::new();
        resp.take(MAX_RESPONSE_BYTES + 1)
            .read_to_end(&mut body)
            .map_err(|e| err(format!("reading the response: {e}")))?;
        if !status.is_success() {
            let body = String::from_utf8_lossy(&body[..body.len().min(4096)]);
            return Err(err(format!("HTTP {status}: {}", truncate(&body, 200))));
        }
        if body.len() as u64 > MAX_RESPONSE_BYTES {
            return Err(err(format!(
                "the response is larger than {MAX_RESPONSE_BYTES} bytes, more than {} \
                 embeddings take",
                texts.len()
            )));
        }
        let mut parsed: Response = serde_json::from_slice(&body)
            .map_err(|e| err(format!("unexpected response body: {e}")))?;
        if parsed.data.len() != texts.len() {
            return Err(err(format!(
                "asked for {} embeddings, got {}",
                texts.len(),
                parsed.data.len()
            )));
        }
        parsed.data.sort_by_key(|d| d.index.unwrap_or(0));
        Ok(parsed
            .data
            .into_iter()
            .map(|d| normalized(d.embedding))
            .collect())
    }
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// `v` scaled to unit length (zero stays zero).
pub fn normalized(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};

    use super::*;

    /// A server answering every request with an endless JSON body.
    fn endless_server() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let mut stream = stream;
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n";
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(b"{\"data\": [{\"embedding\": [");
            let chunk = "0.5,".repeat(16 << 10);
            while stream.write_all(chunk.as_bytes()).is_ok() {}
        });
        format!("http://{addr}/v1")
    }

    #[test]
    fn an_endless_reply_is_cut_at_the_bound() {
        let embedder = RemoteEmbedder::new(&endless_server(), "m", None).unwrap();
        let err = embedder.embed(&["hello"]).unwrap_err().to_string();
        assert!(
            err.contains(&format!("larger than {MAX_RESPONSE_BYTES} bytes")),
            "{err}"
        );
    }
}
