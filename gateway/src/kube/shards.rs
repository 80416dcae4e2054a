//! Reading one version of the catalog from its ConfigMap: the document itself (one
//! object, `data[catalog.json]` or `binaryData[catalog.json.gz]`, what every operator
//! writes for a catalog that fits), or the index of a sharded catalog
//! ([`mcc_catalog::shards`]) and then each shard it names, fetched by name (`get`, so RBAC
//! can grant exactly the shard names; all of them at once) and checked against the
//! index's hashes.
//!
//! All or nothing: a shard that is missing, holds other bytes than the index says (a newer
//! version being written, an edit), or cannot be read fails the whole version, and the
//! caller keeps the last good catalog and retries. Decompression and the document-hash
//! check happen in [`Fetched::text`], off the async runtime.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::Api;
use mcc_catalog::document::{DATA_KEY, GZIP_KEY, HASH_ANNOTATION};
use mcc_catalog::shards::{INDEX_KEY, PART_KEY, ShardError, ShardIndex};

/// A version of the catalog as read from the API: the document's stored form.
#[derive(Debug)]
pub enum Fetched {
    /// One object: its `data[catalog.json]` and `binaryData[catalog.json.gz]`.
    Single {
        json: Option<String>,
        gzip: Option<Vec<u8>>,
    },
    /// An index and its parts, each checked against it.
    Sharded {
        index: ShardIndex,
        parts: Vec<Vec<u8>>,
    },
}

/// Why a version cannot be read (the last good catalog stays; retried).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Shard(#[from] ShardError),
    #[error(
        "catalog index {index}: its hash annotation does not match the shards it names; the last good catalog stays"
    )]
    IndexHash { index: String },
    /// `public` is what `/readyz` shows; `detail` (the API's own text) is logged.
    #[error("reading catalog shard {name}: {public}")]
    Api {
        name: String,
        public: &'static str,
        detail: String,
    },
}

impl FetchError {
    /// Whether reading the same version again may succeed: a shard missing or not
    /// matching (being rewritten), an API failure; not an index that cannot be read.
    pub fn worth_retrying(&self) -> bool {
        matches!(
            self,
            FetchError::Api { .. }
                | FetchError::Shard(ShardError::Missing { .. } | ShardError::Mismatch { .. })
        )
    }

    /// The text for the log (with the API's own detail).
    pub fn detail(&self) -> String {
        match self {
            FetchError::Api { detail, .. } => format!("{self} ({detail})"),
            other => other.to_string(),
        }
    }
}

impl Fetched {
    /// The document's JSON text or gzip bytes, for [`crate::catalog::published::decode`]; a sharded
    /// document is joined, decompressed and checked against its hash. Blocking (gunzip).
    pub fn text(self) -> Result<(Option<String>, Option<Vec<u8>>), ShardError> {
        match self {
            Fetched::Single { json, gzip } => Ok((json, gzip)),
            Fetched::Sharded { index, parts } => Ok((Some(index.join(&parts)?), None)),
        }
    }
}

/// Reads the version `cm` (the catalog ConfigMap as the watch delivered it), fetching
/// its shards through `api` when it is an index. `label` (`namespace/name`) names it in
/// errors.
pub async fn fetch(
    api: &Api<ConfigMap>,
    label: &str,
    cm: ConfigMap,
) -> Result<Fetched, FetchError> {
    let hash = cm.annotations().get(HASH_ANNOTATION).cloned();
    let mut data = cm.data.unwrap_or_default();
    let Some(text) = data.remove(INDEX_KEY) else {
        let gzip = cm
            .binary_data
            .and_then(|mut d| d.remove(GZIP_KEY))
            .map(|b| b.0);
        return Ok(Fetched::Single {
            json: data.remove(DATA_KEY),
            gzip,
        });
    };
    let index = ShardIndex::parse(label, &text)?;
    if hash.as_deref() != Some(index.hash.as_str()) {
        return Err(FetchError::IndexHash {
            index: label.to_string(),
        });
    }
    // Every shard at once; checked in the index's order, so the error reported is the
    // first shard's that fails, as if they had been read one by one.
    let found = futures::future::join_all(index.shards.iter().map(|s| api.get_opt(&s.name))).await;
    let mut parts = Vec::with_capacity(index.shards.len());
    for ((n, shard), found) in index.shards.iter().enumerate().zip(found) {
        let found = found.map_err(|e| FetchError::Api {
            name: shard.name.clone(),
            public: super::errors::reason(&e),
            detail: e.to_string(),
        })?;
        let part = found
            .and_then(|cm| cm.binary_data)
            .and_then(|mut d| d.remove(PART_KEY))
            .map(|b| b.0);
        index.check(n, part.as_deref())?;
        parts.push(part.unwrap_or_default());
    }
    Ok(Fetched::Sharded { index, parts })
}
