//! Writing the catalog: the catalog ConfigMap alone while the compressed document fits one
//! object ([`Layout::Single`], the form every gateway reads), else shard ConfigMaps and the
//! catalog ConfigMap as their index ([`mcc_catalog::shards`]).
//!
//! Order of a sharded write: every shard of the new version (server-side apply, in the slot
//! the current index does not use; the shards concurrently), then the index naming them,
//! once every shard is written, then the deletion of the previous version's shards. A gateway that reads the index therefore finds either the
//! complete previous set or the complete new one; a failure half-way leaves the previous
//! index and its shards untouched (the next cycle writes again: the hash still differs).
//! A shard that could not be deleted is retried at the next cycle.
//!
//! A document too large even for every shard ([`CatalogPublisher::publish_or_hold`]) is
//! written with its users (grants, bindings, API keys) and the tools of the last document
//! written, so revocations and key rotations still land while the tools stay as they
//! were; the writer keeps those tools (read back from the catalog in place at start).
//!
//! Shards are owned by the catalog ConfigMap (an owner reference to the uid this writer
//! last saw it with), so deleting the catalog (e.g. `helm uninstall`: the chart creates
//! it) lets the garbage collector delete its shards too.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams};
use kube::{Client, ResourceExt};
use mcc_catalog::document::{
    self, CatalogDocument, CatalogTool, DocumentError, Encoded, FORMAT_ANNOTATION, FORMAT_VERSION,
    GZIP_KEY, HASH_ANNOTATION, Payload,
};
use mcc_catalog::shards::{
    self, INDEX_KEY, Layout, PART_HASH_ANNOTATION, PART_KEY, ShardIndex, Slot,
};

use crate::apikey::MANAGED_LABEL;
use crate::metrics::Metrics;
use crate::status::FIELD_MANAGER;
use crate::{Error, Result};

/// Label on a shard: the catalog ConfigMap whose index names it.
pub const SHARD_OF_LABEL: &str = "mcc.dev/catalog-shard-of";

/// Writes the catalog ConfigMap (and its shards), skipping writes of unchanged content.
pub struct CatalogPublisher {
    pub(super) api: Api<ConfigMap>,
    name: String,
    namespace: String,
    last_hash: Option<String>,
    /// The slot and shard names the index in place uses (none: one ConfigMap).
    current: Option<(Slot, Vec<String>)>,
    /// Shards of earlier versions whose deletion failed, retried each cycle.
    stale: Vec<String>,
    /// Most shards a catalog may take ([`shards::MAX_SHARDS`]; lower in tests).
    pub(super) max_shards: usize,
    /// The catalog ConfigMap's uid as last read or written: the owner of the shards.
    catalog_uid: Option<String>,
    /// The tools of the document in place (`None`: unknown, it could not be read back),
    /// what a document too large is published with.
    pub(super) last_tools: Option<Vec<CatalogTool>>,
}

/// What [`CatalogPublisher::publish_or_hold`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    /// Whether anything was written (the content changed).
    pub written: bool,
    /// The document was too large (why): its users were published with the tools of the
    /// last document written instead of its own.
    pub held: Option<String>,
}

impl CatalogPublisher {
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            namespace: namespace.to_string(),
            last_hash: None,
            current: None,
            stale: Vec::new(),
            max_shards: shards::MAX_SHARDS,
            catalog_uid: None,
            last_tools: None,
        }
    }

    /// Reads the hash (and the shards, if sharded) of the catalog already there, so a
    /// restart rewrites nothing and later writes delete the right shards.
    pub async fn load_last(&mut self) -> Result<()> {
        let existing = self.api.get_opt(&self.name).await.map_err(Error::Kube)?;
        self.catalog_uid = existing.as_ref().and_then(|cm| cm.uid());
        self.last_hash = existing
            .as_ref()
            .and_then(|cm| cm.annotations().get(HASH_ANNOTATION).cloned());
        let index = existing
            .as_ref()
            .and_then(|cm| cm.data.as_ref()?.get(INDEX_KEY).cloned());
        self.current = match index.map(|text| ShardIndex::parse(&self.name, &text)) {
            Some(Ok(index)) => Some((
                index.slot,
                index.shards.into_iter().map(|s| s.name).collect(),
            )),
            Some(Err(e)) => {
                // Rewritten at the first publish (its hash is unknown).
                tracing::warn!(error = %e, "the catalog index in place cannot be read");
                self.last_hash = None;
                None
            }
            None => None,
        };
        self.last_tools = match &existing {
            Some(cm) => self.read_tools(cm).await,
            None => Some(Vec::new()),
        };
        Ok(())
    }

    /// The tools of the document in `cm` (one ConfigMap or an index and its shards);
    /// `None` when they cannot be read (then a document too large fails as a whole).
    async fn read_tools(&self, cm: &ConfigMap) -> Option<Vec<CatalogTool>> {
        let data = cm.data.as_ref();
        let json = data.and_then(|d| d.get(document::DATA_KEY));
        let gzip = cm.binary_data.as_ref().and_then(|b| b.get(GZIP_KEY));
        let read = match (data.and_then(|d| d.get(INDEX_KEY)), json, gzip) {
            (Some(index), _, _) => self.read_shards(index).await,
            // The chart's ConfigMap before the first publish: nothing is served yet.
            (None, None, None) if !cm.annotations().contains_key(HASH_ANNOTATION) => {
                return Some(Vec::new());
            }
            (None, json, gzip) => {
                document::decode(json.map(String::as_str), gzip.map(|b| &b.0[..]))
                    .map_err(|e| e.to_string())
            }
        };
        match read {
            Ok(doc) => Some(doc.tools),
            Err(e) => {
                tracing::warn!(error = %e, "the catalog in place cannot be read back: a catalog too large to publish will not be published at all");
                None
            }
        }
    }

    async fn read_shards(&self, index: &str) -> Result<CatalogDocument, String> {
        let index = ShardIndex::parse(&self.name, index).map_err(|e| e.to_string())?;
        let mut parts = Vec::new();
        for (n, shard) in index.shards.iter().enumerate() {
            let cm = self
                .api
                .get_opt(&shard.name)
                .await
                .map_err(|e| e.to_string())?;
            let part = cm
                .and_then(|cm| cm.binary_data)
                .and_then(|mut b| b.remove(PART_KEY))
                .map(|b| b.0);
            index.check(n, part.as_deref()).map_err(|e| e.to_string())?;
            parts.extend(part);
        }
        let text = index.join(&parts).map_err(|e| e.to_string())?;
        serde_json::from_str(&text).map_err(|e| e.to_string())
    }

    /// Writes `doc` if its content changed. A document too large even for every shard
    /// is written with the tools of the last document instead of its own (its users,
    /// grants and keys are what must not wait: a revoked key stops working); it fails
    /// only when those tools are unknown or that document is too large as well.
    pub async fn publish_or_hold(
        &mut self,
        doc: &CatalogDocument,
        metrics: &Metrics,
    ) -> Result<Published> {
        let too_large = match self.publish(doc, metrics).await {
            Ok(written) => {
                metrics.catalog_tools_held.set(0);
                return Ok(Published {
                    written,
                    held: None,
                });
            }
            Err(Error::Document(e @ DocumentError::TooLarge { .. })) => e,
            Err(e) => return Err(e),
        };
        let Some(tools) = self.last_tools.clone() else {
            return Err(Error::Document(too_large));
        };
        let held = CatalogDocument {
            format: doc.format,
            tools,
            users: doc.users.clone(),
            // Where the held tools' upstream calls go: the current table (a held tool
            // of an upstream removed since fails its calls as an unknown upstream).
            upstreams: doc.upstreams.clone(),
        };
        let why = too_large.to_string();
        tracing::warn!(error = %why, tools = held.tools.len(), users = held.users.len(), "the catalog is too large: publishing its users, grants and keys with the tools of the last catalog written");
        let written = self.publish(&held, metrics).await?;
        metrics.catalog_tools_held.set(1);
        Ok(Published {
            written,
            held: Some(why),
        })
    }

    /// Writes `doc` if its content changed; `Ok(true)` when it wrote.
    pub async fn publish(&mut self, doc: &CatalogDocument, metrics: &Metrics) -> Result<bool> {
        let encoded = document::encode(doc)?;
        if self.last_hash.as_deref() == Some(encoded.hash.as_str()) {
            if self.last_tools.is_none() {
                self.last_tools = Some(doc.tools.clone());
            }
            self.delete_stale().await;
            return Ok(false);
        }
        let slot = self
            .current
            .as_ref()
            .map_or(Slot::A, |(slot, _)| slot.other());
        let hash = encoded.hash.clone();
        let (index, shard_names, bytes) =
            match shards::layout(encoded, &self.name, slot, self.max_shards)? {
                Layout::Single(encoded) => {
                    let bytes = encoded.payload.stored_size();
                    (self.single(&encoded), None, bytes)
                }
                Layout::Sharded { index, parts } => {
                    // All at once: no reader looks at them before the index names them.
                    let shards: Vec<ConfigMap> = index
                        .shards
                        .iter()
                        .zip(parts)
                        .map(|(shard, part)| {
                            self.shard(&shard.name, &index.hash, &shard.sha256, part)
                        })
                        .collect();
                    futures::future::try_join_all(
                        index
                            .shards
                            .iter()
                            .zip(&shards)
                            .map(|(shard, cm)| self.apply(&shard.name, cm)),
                    )
                    .await?;
                    let bytes = index.shards.iter().map(|s| s.bytes).sum();
                    let names: Vec<String> = index.shards.iter().map(|s| s.name.clone()).collect();
                    (self.index(&index)?, Some((index.slot, names)), bytes)
                }
            };
        let written = self.apply(&self.name.clone(), &index).await?;
        let owner_changed = shard_names.is_some() && written.uid() != self.catalog_uid;
        self.catalog_uid = written.uid();
        let shard_count = shard_names.as_ref().map_or(0, |(_, n)| n.len());
        tracing::info!(%hash, tools = doc.tools.len(), users = doc.users.len(), shards = shard_count, bytes, "published the catalog");
        metrics.publishes.inc();
        metrics.catalog_bytes.set(bytes as i64);
        metrics.catalog_tools.set(doc.tools.len() as i64);
        metrics.catalog_shards.set(shard_count as i64);
        self.last_tools = Some(doc.tools.clone());
        if let Some((_, old)) = std::mem::replace(&mut self.current, shard_names) {
            self.stale.extend(old);
        }
        let keep = self
            .current
            .as_ref()
            .map(|(_, n)| n.clone())
            .unwrap_or_default();
        self.stale.retain(|n| !keep.contains(n));
        // Shards owned by a catalog uid that is gone (the ConfigMap was deleted and made
        // anew) would be collected: the next cycle writes them again, owned by this one.
        self.last_hash = (!owner_changed).then_some(hash);
        self.delete_stale().await;
        Ok(true)
    }

    /// Deletes the shards no index names any more; a failure is logged and retried later.
    async fn delete_stale(&mut self) {
        let mut failed = Vec::new();
        for name in std::mem::take(&mut self.stale) {
            match self.api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    tracing::warn!(shard = %name, error = %e, "cannot delete an old catalog shard; retrying at the next publish cycle");
                    failed.push(name);
                }
            }
        }
        self.stale = failed;
    }

    async fn apply(&self, name: &str, cm: &ConfigMap) -> Result<ConfigMap> {
        self.api
            .patch(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(cm),
            )
            .await
            .map_err(Error::Kube)
    }

    fn meta(&self, name: &str, annotations: BTreeMap<String, String>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(self.namespace.clone()),
            labels: Some(BTreeMap::from([(
                MANAGED_LABEL.0.to_string(),
                MANAGED_LABEL.1.to_string(),
            )])),
            annotations: Some(annotations),
            ..Default::default()
        }
    }

    fn catalog_annotations(hash: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (HASH_ANNOTATION.to_string(), hash.to_string()),
            (FORMAT_ANNOTATION.to_string(), FORMAT_VERSION.to_string()),
        ])
    }

    /// The catalog ConfigMap holding the whole document.
    fn single(&self, encoded: &Encoded) -> ConfigMap {
        let (data, binary_data) = match &encoded.payload {
            Payload::Json(text) => (
                Some(BTreeMap::from([(
                    document::DATA_KEY.to_string(),
                    text.clone(),
                )])),
                None,
            ),
            Payload::Gzip(bytes) => (
                None,
                Some(BTreeMap::from([(
                    document::GZIP_KEY.to_string(),
                    ByteString(bytes.clone()),
                )])),
            ),
        };
        ConfigMap {
            metadata: self.meta(&self.name, Self::catalog_annotations(&encoded.hash)),
            data,
            binary_data,
            ..Default::default()
        }
    }

    /// The catalog ConfigMap as the index of `index`'s shards.
    fn index(&self, index: &ShardIndex) -> Result<ConfigMap> {
        let text = serde_json::to_string(index).map_err(document::DocumentError::from)?;
        Ok(ConfigMap {
            metadata: self.meta(&self.name, Self::catalog_annotations(&index.hash)),
            data: Some(BTreeMap::from([(INDEX_KEY.to_string(), text)])),
            ..Default::default()
        })
    }

    /// One shard: its bytes, its own hash and the hash of the version it belongs to.
    fn shard(&self, name: &str, hash: &str, part_hash: &str, part: Vec<u8>) -> ConfigMap {
        let mut meta = self.meta(
            name,
            BTreeMap::from([
                (HASH_ANNOTATION.to_string(), hash.to_string()),
                (PART_HASH_ANNOTATION.to_string(), part_hash.to_string()),
            ]),
        );
        if let Some(labels) = meta.labels.as_mut() {
            labels.insert(SHARD_OF_LABEL.to_string(), self.name.clone());
        }
        meta.owner_references = self.catalog_uid.as_ref().map(|uid| {
            vec![OwnerReference {
                api_version: "v1".to_string(),
                kind: "ConfigMap".to_string(),
                name: self.name.clone(),
                uid: uid.clone(),
                ..Default::default()
            }]
        });
        ConfigMap {
            metadata: meta,
            binary_data: Some(BTreeMap::from([(PART_KEY.to_string(), ByteString(part))])),
            ..Default::default()
        }
    }
}
