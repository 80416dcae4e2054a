//! Kubernetes mode's upstreams: the operator discovers each `MCPServer` and publishes its
//! tools with the catalog document, beside a table of where their calls go
//! ([`PublishedUpstream`]: URL, header Secret references, availability). A gateway
//! replica never discovers; it installs the table with each document
//! ([`Upstreams::set_published`]) and calls the URL recorded there. Header values and
//! the `ca` certificates are read from their Secrets / ConfigMap (in the MCPServer's
//! namespace, through the same cached resolver as Tools' `valueFrom`) when a connection
//! is opened, and live only in that connection's HTTP client.

use std::sync::{Arc, Mutex};

use mcc_catalog::document::{EnvValueRef, RefKind};
use mcc_catalog::snapshot::ToolRefs;
use mcc_catalog::upstream::{self, PublishedUpstream, UpstreamSpec};
use tokio::sync::{Notify, Semaphore, watch};

use super::connect::ConnectError;
use super::{Server, State, Upstreams};
use crate::exec::environment::EnvResolver;

/// Where a published upstream's header values come from.
pub struct Headers {
    resolver: Option<Arc<dyn EnvResolver>>,
    refs: ToolRefs,
    /// The audience of the projected ServiceAccount token sent as `Authorization`.
    token_audience: Option<String>,
}

impl Headers {
    /// `spec` with its header values, CA and token read now (the token file is the
    /// kubelet's, rotated in place: a new connection takes the current one).
    pub(super) async fn spec_with_values(
        &self,
        spec: &UpstreamSpec,
    ) -> Result<UpstreamSpec, ConnectError> {
        let mut spec = spec.clone();
        if !self.refs.env_value_from.is_empty() {
            let Some(resolver) = &self.resolver else {
                return Err(ConnectError::Headers(
                    "no Kubernetes client to read header Secrets".into(),
                ));
            };
            let values = resolver
                .resolve(&self.refs)
                .await
                .map_err(ConnectError::Headers)?;
            let (ca, headers): (Vec<_>, Vec<_>) = values
                .value_from
                .into_iter()
                .partition(|(name, _)| name == CA_ENTRY);
            spec.headers = headers.into_iter().collect();
            spec.ca_pem = ca.into_iter().next().map(|(_, pem)| pem);
        }
        if let Some(audience) = &self.token_audience {
            let token = upstream::read_token(&upstream::token_dir(), audience)
                .map_err(ConnectError::Headers)?;
            spec.headers
                .insert("Authorization".into(), format!("Bearer {token}"));
        }
        Ok(spec)
    }
}

/// The resolver entry that carries the CA (a space: never an HTTP header name).
const CA_ENTRY: &str = " spec.ca";

/// The spec a published upstream is called with (no discovery settings: the operator's;
/// its session context as published).
fn spec_of(up: &PublishedUpstream) -> UpstreamSpec {
    UpstreamSpec {
        name: up.server.clone(),
        url: up.url.clone(),
        command: None,
        groups: Vec::new(),
        prefix: String::new(),
        include: Vec::new(),
        exclude: Vec::new(),
        headers: Default::default(),
        ca_file: None,
        ca_pem: None,
        timeout: up.timeout,
        max_concurrency: up.max_concurrency.clamp(1, 1024),
        refresh: upstream::DEFAULT_REFRESH,
        cache_ttl: None,
        rate_limit: None,
        // What the operator admitted: every replica sends the same.
        session_context: up.session_context.clone(),
        source: format!("MCPServer {}", up.server),
    }
}

fn refs_of(up: &PublishedUpstream) -> ToolRefs {
    ToolRefs {
        namespace: up.namespace.clone(),
        resource: up.server.clone(),
        env_from: Vec::new(),
        env_value_from: up
            .headers
            .iter()
            .map(|h| EnvValueRef {
                env: h.name.clone(),
                source: RefKind::Secret,
                name: h.secret.clone(),
                key: h.key.clone(),
                optional: false,
            })
            .chain(up.ca.iter().map(|ca| EnvValueRef {
                env: CA_ENTRY.into(),
                source: if ca.secret {
                    RefKind::Secret
                } else {
                    RefKind::ConfigMap
                },
                name: ca.name.clone(),
                key: ca.key.clone(),
                optional: false,
            }))
            .collect(),
        pod: None,
        session: Default::default(),
    }
}

impl Upstreams {
    /// Kubernetes mode: header Secrets of published upstreams are read through
    /// `resolver` (set once, before the first document).
    pub fn set_header_resolver(&self, resolver: Arc<dyn EnvResolver>) {
        let _ = self.inner.header_resolver.set(resolver);
    }

    /// Installs the upstream table of a catalog document: a server whose entry is
    /// unchanged keeps its connection (its availability follows the document), a new or
    /// changed one connects on its first call, a removed one is dropped. No discovery
    /// task runs: the operator discovers.
    pub fn set_published(&self, table: Vec<PublishedUpstream>) {
        let resolver = self.inner.header_resolver.get().cloned();
        let mut servers = self.inner.servers.write().expect("upstreams lock");
        let mut next = std::collections::BTreeMap::new();
        for up in table {
            let spec = spec_of(&up);
            let refs = refs_of(&up);
            let keep = servers.remove(&up.server).filter(|old| {
                old.spec == spec
                    && old
                        .published
                        .as_ref()
                        .is_some_and(|h| h.refs == refs && h.token_audience == up.token_audience)
            });
            let server = match keep {
                Some(old) => old,
                None => Arc::new(Server {
                    permits: Semaphore::new(spec.max_concurrency),
                    state: Mutex::new(State::default()),
                    sessions: Default::default(),
                    wake: Arc::new(Notify::new()),
                    attempted: watch::channel(true).0,
                    stop: self.inner.stop.child_token(),
                    spec,
                    published: Some(Headers {
                        resolver: resolver.clone(),
                        refs,
                        token_audience: up.token_audience.clone(),
                    }),
                    // MCPServers are HTTP only: no stdio server is ever started here.
                    launcher: Arc::default(),
                    restarts: Default::default(),
                }),
            };
            let turned = {
                let mut st = server.state.lock().expect("upstream state");
                let turned = st.available != up.available;
                st.available = up.available;
                st.last_error = up.reason.clone();
                turned
            };
            if turned {
                // The operator saw the upstream go or come back: a session opened before
                // is likely dead (a restarted server knows no old session, and a call on
                // it would wait out its timeout); the next call connects afresh.
                server.sessions.close_now();
            }
            next.insert(up.server, server);
        }
        for removed in servers.values() {
            removed.stop.cancel();
            // No discovery task closes it: close its connection here.
            removed.sessions.close_now();
        }
        *servers = next;
    }
}
