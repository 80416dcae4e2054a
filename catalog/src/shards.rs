//! A catalog too large for one ConfigMap, split across several: the rules both sides
//! share (names, limits, the index's shape, and the checks a reader makes). Pure: the
//! operator writes the objects ([`Layout`] → ConfigMaps), the gateway fetches them.
//!
//! The document is encoded as always ([`crate::document::encode`]: normalized JSON, its
//! SHA-256, gzip). When the compressed bytes fit one object they are stored as before
//! (one ConfigMap, [`Layout::Single`]) so small catalogs keep the form every gateway
//! reads. Otherwise the gzip stream is cut into parts of at most [`SHARD_BYTES`], each
//! stored in its own ConfigMap (`<catalog>-shard-<slot>-<n>`, `binaryData[`[`PART_KEY`]`]`),
//! and the catalog ConfigMap itself becomes the *index*: `data[`[`INDEX_KEY`]`]` names the
//! document's hash and every shard with the SHA-256 and length of its bytes.
//!
//! Atomicity: shard names are fixed and enumerable (so RBAC can grant them by name), in
//! two slots, `a` and `b`. A new version is written into the slot the current index does
//! not use, then the index is switched to it, then the old slot's shards are deleted. A
//! reader that follows the index ([`join`]) gets either a complete, verified set or an
//! error, never a mix: every part's hash and the whole document's hash are checked.

use std::io::Read;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::document::{DocumentError, Encoded, MAX_PAYLOAD, Payload};

/// The index's `data` key (JSON [`ShardIndex`]).
pub const INDEX_KEY: &str = "shards.json";
/// A shard's `binaryData` key.
pub const PART_KEY: &str = "part";
/// Annotation on a shard: the hex SHA-256 of its bytes.
pub const PART_HASH_ANNOTATION: &str = "mcc.dev/shard-hash";
/// Largest part, in bytes: stored base64-encoded on the wire, it takes at most
/// [`MAX_PAYLOAD`] (about 1 MB), the same bound a single catalog ConfigMap has.
pub const SHARD_BYTES: usize = MAX_PAYLOAD / 4 * 3;
/// Most shards per slot. The names are fixed so RBAC can list them
/// ([`all_shard_names`]); about 12 MB of compressed catalog (roughly 50,000 tools of
/// the size measured in `gateway/benches/RESULTS-scale.md`, 20,000 of them in 6 shards).
pub const MAX_SHARDS: usize = 16;

/// One of the two sets of shard names; a new version goes into the one not in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Slot {
    A,
    B,
}

impl Slot {
    pub fn other(self) -> Self {
        match self {
            Slot::A => Slot::B,
            Slot::B => Slot::A,
        }
    }

    fn letter(self) -> char {
        match self {
            Slot::A => 'a',
            Slot::B => 'b',
        }
    }
}

/// The name of shard `n` of `slot` of catalog ConfigMap `catalog`.
pub fn shard_name(catalog: &str, slot: Slot, n: usize) -> String {
    format!("{catalog}-shard-{}-{n}", slot.letter())
}

/// Every name a shard of `catalog` can have (what RBAC has to grant by name).
pub fn all_shard_names(catalog: &str) -> Vec<String> {
    [Slot::A, Slot::B]
        .into_iter()
        .flat_map(|slot| (0..MAX_SHARDS).map(move |n| shard_name(catalog, slot, n)))
        .collect()
}

/// What the index ConfigMap says (`data[INDEX_KEY]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardIndex {
    /// Hex SHA-256 of the document's JSON (also the index's `mcc.dev/catalog-hash`).
    pub hash: String,
    /// How the concatenated parts are encoded: always `gzip`.
    pub encoding: String,
    pub slot: Slot,
    /// The parts, in order.
    pub shards: Vec<ShardRef>,
}

/// One part as the index names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardRef {
    /// The shard ConfigMap's name.
    pub name: String,
    /// Hex SHA-256 of its bytes.
    pub sha256: String,
    pub bytes: usize,
}

/// How an encoded document is stored.
#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    /// One ConfigMap, as before sharding.
    Single(Encoded),
    /// Parts (in the index's order) and the index naming them.
    Sharded {
        index: ShardIndex,
        parts: Vec<Vec<u8>>,
    },
}

/// Why a sharded catalog cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error("catalog index {index}: '{INDEX_KEY}' cannot be read: {reason}")]
    Index { index: String, reason: String },
    #[error(
        "catalog shard {name} is missing (named by the index of catalog {hash}); the last good catalog stays until the operator writes a complete set"
    )]
    Missing { name: String, hash: String },
    #[error(
        "catalog shard {name} does not match the index of catalog {hash} (it holds other bytes: a newer catalog is being written, or it was edited); the last good catalog stays"
    )]
    Mismatch { name: String, hash: String },
    #[error(
        "catalog {hash}: the joined shards do not hash to the index's hash; the last good catalog stays"
    )]
    Document { hash: String },
    #[error("catalog {hash}: the joined shards cannot be decompressed: {source}")]
    Gzip {
        hash: String,
        source: std::io::Error,
    },
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The layout of `encoded` for catalog ConfigMap `catalog`: one object when its payload
/// fits ([`MAX_PAYLOAD`]), else shards in `slot`. A catalog larger than `max_shards`
/// parts (at most [`MAX_SHARDS`]) is refused ([`DocumentError::TooLarge`]).
pub fn layout(
    encoded: Encoded,
    catalog: &str,
    slot: Slot,
    max_shards: usize,
) -> Result<Layout, DocumentError> {
    let max_shards = max_shards.min(MAX_SHARDS);
    if encoded.payload.stored_size() <= MAX_PAYLOAD {
        return Ok(Layout::Single(encoded));
    }
    let gzip = match encoded.payload {
        Payload::Gzip(bytes) => bytes,
        // (Not reached: encode compresses anything this large.)
        Payload::Json(text) => gzip(text.as_bytes()),
    };
    let size = gzip.len();
    let limit = SHARD_BYTES * max_shards;
    if size > limit {
        return Err(DocumentError::TooLarge {
            size,
            limit,
            shards: max_shards,
        });
    }
    let parts: Vec<Vec<u8>> = gzip.chunks(SHARD_BYTES).map(<[u8]>::to_vec).collect();
    let shards = parts
        .iter()
        .enumerate()
        .map(|(n, part)| ShardRef {
            name: shard_name(catalog, slot, n),
            sha256: sha256_hex(part),
            bytes: part.len(),
        })
        .collect();
    Ok(Layout::Sharded {
        index: ShardIndex {
            hash: encoded.hash,
            encoding: "gzip".into(),
            slot,
            shards,
        },
        parts,
    })
}

/// `bytes` gzip-compressed (the level [`crate::document::encode`] uses).
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    crate::document::gzip(bytes).expect("writing to memory")
}

impl ShardIndex {
    /// Reads `data[INDEX_KEY]` of index ConfigMap `index` (`namespace/name`, for errors).
    pub fn parse(index: &str, text: &str) -> Result<Self, ShardError> {
        let parsed: Self = serde_json::from_str(text).map_err(|e| ShardError::Index {
            index: index.to_string(),
            reason: e.to_string(),
        })?;
        if parsed.encoding != "gzip" {
            return Err(ShardError::Index {
                index: index.to_string(),
                reason: format!(
                    "encoding '{}' is not supported (this build reads gzip)",
                    parsed.encoding
                ),
            });
        }
        Ok(parsed)
    }

    /// Checks one fetched shard (`None`: not found) against the index.
    pub fn check(&self, n: usize, bytes: Option<&[u8]>) -> Result<(), ShardError> {
        let shard = &self.shards[n];
        let bytes = bytes.ok_or_else(|| ShardError::Missing {
            name: shard.name.clone(),
            hash: self.hash.clone(),
        })?;
        if bytes.len() != shard.bytes || sha256_hex(bytes) != shard.sha256 {
            return Err(ShardError::Mismatch {
                name: shard.name.clone(),
                hash: self.hash.clone(),
            });
        }
        Ok(())
    }

    /// Joins the parts (each already [`Self::check`]ed, in order), decompresses them and
    /// checks the document's hash: the document's JSON text.
    pub fn join(&self, parts: &[Vec<u8>]) -> Result<String, ShardError> {
        let chain = Chain {
            parts,
            part: 0,
            offset: 0,
        };
        let text = crate::document::gunzip_bounded(chain, crate::document::MAX_DOCUMENT_BYTES)
            .map_err(|source| ShardError::Gzip {
                hash: self.hash.clone(),
                source,
            })?;
        if sha256_hex(text.as_bytes()) != self.hash {
            return Err(ShardError::Document {
                hash: self.hash.clone(),
            });
        }
        Ok(text)
    }
}

/// Reads the parts one after the other without copying them into one buffer.
struct Chain<'a> {
    parts: &'a [Vec<u8>],
    part: usize,
    offset: usize,
}

impl Read for Chain<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while let Some(part) = self.parts.get(self.part) {
            let rest = &part[self.offset..];
            if rest.is_empty() {
                (self.part, self.offset) = (self.part + 1, 0);
                continue;
            }
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            self.offset += n;
            return Ok(n);
        }
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::{CatalogDocument, decode, encode};

    /// `tools` exec tools whose descriptions compress poorly (xorshift text).
    fn document(tools: usize, description: usize) -> CatalogDocument {
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        let mut doc = CatalogDocument::default();
        for i in 0..tools {
            let text: String = (0..description)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    char::from(b'!' + (state % 90) as u8)
                })
                .collect();
            doc.tools.push(
                serde_json::from_value(serde_json::json!({
                    "tool": {"key": format!("t{i:05}"), "name": format!("t{i:05}"),
                             "kind": "exec", "command": "echo", "description": text},
                    "namespace": "ns", "resource": format!("t{i}")}))
                .unwrap(),
            );
        }
        doc
    }

    #[test]
    fn a_document_that_fits_stays_one_object() {
        let enc = encode(&document(3, 10)).unwrap();
        assert!(matches!(
            layout(enc, "mcc-catalog", Slot::A, MAX_SHARDS).unwrap(),
            Layout::Single(_)
        ));
    }

    #[test]
    fn a_large_document_is_split_checked_and_joined() {
        let doc = document(2500, 1000);
        let enc = encode(&doc).unwrap();
        let Layout::Sharded { index, parts } =
            layout(enc.clone(), "mcc-catalog", Slot::B, MAX_SHARDS).unwrap()
        else {
            panic!("expected shards")
        };
        assert_eq!(index.hash, enc.hash);
        assert_eq!(index.slot, Slot::B);
        assert!(parts.len() >= 3, "{}", parts.len());
        assert!(parts.iter().all(|p| p.len() <= SHARD_BYTES));
        let names: Vec<&str> = index.shards.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names[..2],
            ["mcc-catalog-shard-b-0", "mcc-catalog-shard-b-1"]
        );
        assert!(
            names
                .iter()
                .all(|n| all_shard_names("mcc-catalog").iter().any(|a| a == n))
        );

        // The index round-trips through its text form.
        let text = serde_json::to_string(&index).unwrap();
        let index = ShardIndex::parse("mcc/mcc-catalog", &text).unwrap();
        for (n, part) in parts.iter().enumerate() {
            index.check(n, Some(part)).unwrap();
        }
        let json = index.join(&parts).unwrap();
        assert_eq!(decode(Some(&json), None).unwrap().tools.len(), 2500);

        // A missing part, a part of another version, parts in the wrong order.
        let e = index.check(1, None).unwrap_err().to_string();
        assert!(e.contains("mcc-catalog-shard-b-1 is missing"), "{e}");
        let mut other = parts[1].clone();
        other[10] ^= 1;
        let e = index.check(1, Some(&other)).unwrap_err().to_string();
        assert!(e.contains("does not match the index"), "{e}");
        let mut swapped = parts.clone();
        swapped.swap(0, 1);
        assert!(index.join(&swapped).is_err());
        let mut wrong = index.clone();
        wrong.hash = "0".repeat(64);
        assert!(matches!(
            wrong.join(&parts),
            Err(ShardError::Document { .. })
        ));
        let e = ShardIndex::parse("mcc/mcc-catalog", "{")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mcc/mcc-catalog") && e.contains("shards.json"),
            "{e}"
        );
    }

    #[test]
    fn a_document_beyond_every_shard_is_refused() {
        let enc = encode(&document(2500, 1000)).unwrap();
        let e = layout(enc, "mcc-catalog", Slot::A, 2).unwrap_err();
        assert!(
            matches!(e, DocumentError::TooLarge { shards: 2, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("split into 2 ConfigMaps"), "{e}");
    }

    #[test]
    fn names_are_fixed_and_enumerable() {
        let all = all_shard_names("c");
        assert_eq!(all.len(), 2 * MAX_SHARDS);
        assert_eq!(all[0], "c-shard-a-0");
        assert_eq!(all[MAX_SHARDS], "c-shard-b-0");
        assert_eq!(Slot::A.other(), Slot::B);
    }
}
