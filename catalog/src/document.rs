//! The catalog document: what the operator publishes and gateways in Kubernetes mode
//! load. One JSON object with every ready tool and every user, sorted so the same catalog
//! always encodes to the same bytes (and so the same hash).
//!
//! It holds no secret values: environment from Secrets and ConfigMaps stays a reference
//! ([`EnvValueRef`], [`EnvFromRef`]) that the gateway resolves at execution time in the
//! tool's namespace, and API keys appear only as prefix, SHA-256 and expiry.
//!
//! Wire form (a ConfigMap): the JSON under [`DATA_KEY`] in `data`, or gzip-compressed under
//! [`GZIP_KEY`] in `binaryData` when it is larger than [`COMPRESS_ABOVE`]; the content hash
//! in the [`HASH_ANNOTATION`] annotation; [`decode`] reads either form. A document whose
//! compressed form would not fit under Kubernetes' 1 MiB object limit is split across
//! several ConfigMaps ([`crate::shards`]).

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::rbac::User;
use crate::tool::Tool;
use crate::users::OidcSubject;

/// The format version gateways check before loading.
pub const FORMAT_VERSION: u32 = 1;
/// The `data` key of the uncompressed document.
pub const DATA_KEY: &str = "catalog.json";
/// The `binaryData` key of the gzip-compressed document.
pub const GZIP_KEY: &str = "catalog.json.gz";
/// Annotation holding the hex SHA-256 of the uncompressed JSON.
pub const HASH_ANNOTATION: &str = "mcc.dev/catalog-hash";
/// Annotation holding [`FORMAT_VERSION`].
pub const FORMAT_ANNOTATION: &str = "mcc.dev/catalog-format";
/// Documents larger than this (bytes of JSON) are stored gzip-compressed.
pub const COMPRESS_ABOVE: usize = 256 * 1024;
/// The largest payload accepted: Kubernetes objects are limited to 1 MiB (1,048,576
/// bytes) and binaryData travels base64-encoded; this leaves room for metadata.
pub const MAX_PAYLOAD: usize = 1_000_000;

/// The most text a catalog document may decompress to: far above what the largest
/// publishable catalog holds (its shards carry ~32 MB of gzip), and what bounds the
/// memory a corrupt or hostile payload (a gzip bomb) makes a gateway allocate.
pub const MAX_DOCUMENT_BYTES: u64 = 512 << 20;

/// Decompresses gzip `input` into text, refusing to produce more than `limit` bytes.
pub fn gunzip_bounded(input: impl Read, limit: u64) -> std::io::Result<String> {
    let mut out = String::new();
    flate2::read::GzDecoder::new(input)
        .take(limit + 1)
        .read_to_string(&mut out)?;
    if out.len() as u64 > limit {
        return Err(std::io::Error::other(format!(
            "it decompresses to more than {limit} bytes (the most a catalog document may hold)"
        )));
    }
    Ok(out)
}

/// Everything a gateway needs to serve the catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogDocument {
    /// [`FORMAT_VERSION`] of the writer.
    pub format: u32,
    /// Ready tools, sorted by key.
    pub tools: Vec<CatalogTool>,
    /// Users (grants unioned by username), sorted by username.
    pub users: Vec<CatalogUser>,
    /// Upstream MCP servers (`MCPServer` resources) whose tools are in `tools`, sorted by
    /// server: where their `execute`s go ([`crate::upstream::PublishedUpstream`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upstreams: Vec<crate::upstream::PublishedUpstream>,
}

impl Default for CatalogDocument {
    fn default() -> Self {
        Self {
            format: FORMAT_VERSION,
            tools: Vec::new(),
            users: Vec::new(),
            upstreams: Vec::new(),
        }
    }
}

/// One tool and what the catalog model alone cannot say: where it was declared, the
/// references its environment comes from, where it runs, and whether its fn signature
/// still has to be introspected by the gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogTool {
    pub tool: Tool,
    /// Namespace of the Tool resource: references resolve there.
    pub namespace: String,
    /// Name of the Tool resource.
    pub resource: String,
    /// `envFrom` sources, applied in order after the passthrough and before `env`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_from: Vec<EnvFromRef>,
    /// `env` entries with `valueFrom`, applied in declared order together with the plain
    /// values of `tool.env` (a later entry of one name wins, as in a Pod).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_value_from: Vec<EnvValueRef>,
    #[serde(default, skip_serializing_if = "Runtime::is_local")]
    pub runtime: Runtime,
    /// An fn tool whose params or return type were not declared: the gateway fills them
    /// in by introspection when it loads the document.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub introspect: bool,
    /// The Tool gave no `name`: introspection replaces the provisional name (the fn path's
    /// last segment) with the callable's `__name__` and recomputes the key, as MCC does
    /// ([`crate::introspect::Pending::name_from_callable`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub name_from_callable: bool,
    /// The stored session variables it receives and may write back (the operator decides
    /// from the Tool's namespace and `sessionKeys`); absent: all of them, MCC's rule.
    #[serde(default, skip_serializing_if = "crate::context::SessionAccess::is_all")]
    pub session: crate::context::SessionAccess,
}

/// A whole Secret or ConfigMap as environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvFromRef {
    pub source: RefKind,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// A missing object is skipped instead of failing the call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// One variable taken from a key of a Secret or ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvValueRef {
    /// The variable's name.
    pub env: String,
    pub source: RefKind,
    /// The Secret or ConfigMap.
    pub name: String,
    pub key: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// What kind of object a reference names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RefKind {
    Secret,
    ConfigMap,
}

/// Where a tool runs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Runtime {
    /// A subprocess of the gateway.
    #[default]
    Local,
    /// An ephemeral Pod per execution, in the tool's namespace.
    Pod(PodSpec),
}

impl Runtime {
    pub fn is_local(&self) -> bool {
        matches!(self, Runtime::Local)
    }
}

/// The Pod a `pod` runtime tool runs in.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    /// `None`: the gateway's default runtime image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// A Kubernetes `ResourceRequirements` object, as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automount_service_account_token: Option<bool>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub node_selector: std::collections::BTreeMap<String, String>,
    /// Kubernetes `Toleration` objects, as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<serde_json::Value>,
}

/// A user and the credentials that act as them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogUser {
    pub user: User,
    /// ServiceAccounts (`namespace`, `name`) whose tokens act as this user.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_accounts: Vec<ServiceAccountRef>,
    /// OIDC identities (issuer and subject) that act as this user. Written as
    /// `{issuer, subject}`; a bare string (an older operator's form, or a UserGrant's old
    /// plain subject) still reads, with no issuer ([`OidcSubject`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oidc_subjects: Vec<OidcSubject>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_keys: Vec<crate::apikey::ApiKeyRecord>,
}

/// A ServiceAccount by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ServiceAccountRef {
    pub namespace: String,
    pub name: String,
}

impl CatalogDocument {
    /// Sorts tools by key and users by username, and each user's lists, so equal catalogs
    /// encode to equal bytes.
    pub fn normalize(&mut self) {
        self.tools.sort_by(|a, b| a.tool.key.cmp(&b.tool.key));
        self.users
            .sort_by(|a, b| a.user.username.cmp(&b.user.username));
        self.upstreams.sort_by(|a, b| a.server.cmp(&b.server));
        for u in &mut self.users {
            u.service_accounts.sort();
            u.service_accounts.dedup();
            u.oidc_subjects.sort();
            u.oidc_subjects.dedup();
            u.api_keys.sort_by(|a, b| a.prefix.cmp(&b.prefix));
        }
    }
}

impl CatalogDocument {
    /// Whether [`Self::normalize`] would change nothing (the operator's assembly is
    /// normalized already, so [`encode`] need not copy it).
    pub fn is_normalized(&self) -> bool {
        fn strictly_sorted<T: Ord>(v: &[T]) -> bool {
            v.windows(2).all(|w| w[0] < w[1])
        }
        self.tools
            .windows(2)
            .all(|w| w[0].tool.key <= w[1].tool.key)
            && self
                .users
                .windows(2)
                .all(|w| w[0].user.username <= w[1].user.username)
            && self
                .upstreams
                .windows(2)
                .all(|w| w[0].server <= w[1].server)
            && self.users.iter().all(|u| {
                strictly_sorted(&u.service_accounts)
                    && strictly_sorted(&u.oidc_subjects)
                    && u.api_keys.windows(2).all(|w| w[0].prefix <= w[1].prefix)
            })
    }
}

/// Why a document cannot be encoded or decoded.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error(
        "the catalog is too large to publish even split into {shards} ConfigMaps: {size} bytes after compression (limit {limit}); remove tools or shorten their descriptions"
    )]
    TooLarge {
        size: usize,
        limit: usize,
        shards: usize,
    },
    #[error("catalog document is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("catalog document cannot be (de)compressed: {0}")]
    Gzip(#[from] std::io::Error),
    #[error("catalog document format {found} is not supported (this build reads {FORMAT_VERSION})")]
    Format { found: u32 },
    #[error("the ConfigMap holds neither '{DATA_KEY}' nor '{GZIP_KEY}'")]
    Missing,
}

/// A document ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    /// Hex SHA-256 of the uncompressed JSON.
    pub hash: String,
    pub payload: Payload,
}

/// The stored bytes: plain JSON text for `data`, or gzip for `binaryData`.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    Json(String),
    Gzip(Vec<u8>),
}

impl Payload {
    /// The key the payload is stored under.
    pub fn key(&self) -> &'static str {
        match self {
            Payload::Json(_) => DATA_KEY,
            Payload::Gzip(_) => GZIP_KEY,
        }
    }

    /// Bytes the payload takes in the object (binaryData is base64 on the wire).
    pub fn stored_size(&self) -> usize {
        match self {
            Payload::Json(s) => s.len(),
            Payload::Gzip(b) => b.len().div_ceil(3) * 4,
        }
    }
}

/// Serializes (normalized), hashes, and compresses when large. Whether the result fits
/// one ConfigMap is [`crate::shards::layout`]'s to decide.
pub fn encode(doc: &CatalogDocument) -> Result<Encoded, DocumentError> {
    let json = if doc.is_normalized() {
        serde_json::to_string(doc)?
    } else {
        let mut doc = doc.clone();
        doc.normalize();
        serde_json::to_string(&doc)?
    };
    let hash = hex::encode(Sha256::digest(json.as_bytes()));
    let payload = if json.len() > COMPRESS_ABOVE {
        Payload::Gzip(gzip(json.as_bytes())?)
    } else {
        Payload::Json(json)
    };
    Ok(Encoded { hash, payload })
}

/// `bytes` gzip-compressed at the fastest level: on catalog JSON it is several times
/// faster than the default level (compression was most of the operator's publish time at
/// 20,000 tools) for some 25% more bytes (gateway/benches/RESULTS-scale.md).
pub(crate) fn gzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes)?;
    gz.finish()
}

/// Reads a document from the ConfigMap's `data[DATA_KEY]` or `binaryData[GZIP_KEY]`.
pub fn decode(json: Option<&str>, gzip: Option<&[u8]>) -> Result<CatalogDocument, DocumentError> {
    let text = payload_text(json, gzip)?;
    Ok(serde_json::from_str(&text)?)
}

/// An entry [`decode_entries`] left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedEntry {
    /// Which entry, as far as it says: `tools[3]` with its key and `Tool <ns>/<name>`,
    /// or `users[1]` with its username.
    pub entry: String,
    /// `tools` or `users`.
    pub list: &'static str,
    /// The API-key records the entry held (a user entry's `apiKeys`).
    pub api_keys: usize,
    pub reason: String,
}

/// [`decode`], entry by entry: a tool or user entry that does not deserialize (one a
/// newer operator wrote during a rolling upgrade, say) is left out and returned, and the
/// rest of the document is read. Only a payload that is not a document of this format
/// is an error. A user left out loses access, never gains it.
pub fn decode_entries(
    json: Option<&str>,
    gzip: Option<&[u8]>,
) -> Result<(CatalogDocument, Vec<SkippedEntry>), DocumentError> {
    #[derive(Deserialize)]
    struct Entries {
        format: u32,
        tools: Vec<serde_json::Value>,
        users: Vec<serde_json::Value>,
        // An upstream entry that cannot be read fails the document: its tools' calls
        // would have nowhere to go.
        #[serde(default)]
        upstreams: Vec<crate::upstream::PublishedUpstream>,
    }
    let text = payload_text(json, gzip)?;
    // The common case, every entry readable: one pass straight into the document.
    if let Ok(doc) = serde_json::from_str::<CatalogDocument>(&text) {
        return Ok((doc, Vec::new()));
    }
    let raw: Entries = serde_json::from_str(&text)?;
    let mut skipped = Vec::new();
    let mut doc = CatalogDocument {
        format: raw.format,
        upstreams: raw.upstreams,
        ..CatalogDocument::default()
    };
    for (i, value) in raw.tools.into_iter().enumerate() {
        let entry = describe_tool(i, &value);
        match serde_json::from_value(value) {
            Ok(tool) => doc.tools.push(tool),
            Err(e) => skipped.push(SkippedEntry {
                entry,
                list: "tools",
                api_keys: 0,
                reason: e.to_string(),
            }),
        }
    }
    for (i, value) in raw.users.into_iter().enumerate() {
        let str_at = |pointer: &str| value.pointer(pointer).and_then(|v| v.as_str());
        let entry = match str_at("/user/username") {
            Some(name) => format!("users[{i}] '{name}'"),
            None => format!("users[{i}]"),
        };
        let api_keys = value
            .get("apiKeys")
            .and_then(|k| k.as_array())
            .map_or(0, Vec::len);
        match serde_json::from_value(value) {
            Ok(user) => doc.users.push(user),
            Err(e) => skipped.push(SkippedEntry {
                entry,
                list: "users",
                api_keys,
                reason: e.to_string(),
            }),
        }
    }
    Ok((doc, skipped))
}

fn describe_tool(i: usize, value: &serde_json::Value) -> String {
    let str_at = |pointer: &str| value.pointer(pointer).and_then(|v| v.as_str());
    let mut entry = format!("tools[{i}]");
    if let Some(key) = str_at("/tool/key") {
        entry.push_str(&format!(" '{key}'"));
    }
    if let (Some(ns), Some(name)) = (str_at("/namespace"), str_at("/resource")) {
        entry.push_str(&format!(" (Tool {ns}/{name})"));
    }
    entry
}

/// The document's JSON text, once its format is known to be [`FORMAT_VERSION`].
fn payload_text(json: Option<&str>, gzip: Option<&[u8]>) -> Result<String, DocumentError> {
    let text = match (json, gzip) {
        (Some(text), _) => text.to_string(),
        (None, Some(bytes)) => gunzip_bounded(bytes, MAX_DOCUMENT_BYTES)?,
        (None, None) => return Err(DocumentError::Missing),
    };
    let format = serde_json::from_str::<FormatOnly>(&text)?.format;
    if format != FORMAT_VERSION {
        return Err(DocumentError::Format { found: format });
    }
    Ok(text)
}

#[derive(Deserialize)]
struct FormatOnly {
    format: u32,
}

#[cfg(test)]
#[path = "document_tests.rs"]
mod tests;
