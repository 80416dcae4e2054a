//! The catalog snapshot: one immutable view of tools (and, informationally, the users
//! they were installed with) that a request holds from start to finish. Here, below the
//! gateway, because search reads it too (`mcc_search` ranks against the snapshot a
//! request holds). Building and swapping snapshots is the gateway's (`catalog::live`);
//! the users authentication resolves against are its `auth::Directory`, swapped on its
//! own.

use std::collections::HashMap;

use crate::context::SessionAccess;
use crate::document::{EnvFromRef, EnvValueRef, PodSpec};
use crate::{Tool, User};

/// One consistent view of tools and users. Never mutated; replaced whole.
#[derive(Debug, Default)]
pub struct Catalog {
    tools: Vec<Tool>,
    by_key: HashMap<String, usize>,
    users: Vec<User>,
    /// Kubernetes mode: what each tool (by key) takes from the Kubernetes API.
    refs: HashMap<String, ToolRefs>,
}

/// What a tool of the operator's catalog needs from the Kubernetes API at execution time
/// (references only: values are resolved per call and never stored in the catalog).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolRefs {
    /// The Tool's namespace: references resolve there.
    pub namespace: String,
    /// The Tool resource's name (for messages).
    pub resource: String,
    pub env_from: Vec<EnvFromRef>,
    pub env_value_from: Vec<EnvValueRef>,
    /// `runtime: pod`: the tool (and its transform) runs in an ephemeral Pod of this
    /// shape, not as a local process; its references then go into the Pod spec.
    pub pod: Option<PodSpec>,
    /// The stored session variables it receives and may write back (the operator's
    /// decision; all of them unless its Tool is another tenant's).
    pub session: SessionAccess,
}

impl ToolRefs {
    /// Nothing to resolve and a local runtime.
    pub fn is_empty(&self) -> bool {
        self.env_from.is_empty()
            && self.env_value_from.is_empty()
            && self.pod.is_none()
            && self.session.is_all()
    }
}

impl Catalog {
    pub fn new(tools: Vec<Tool>, users: Vec<User>) -> Self {
        let by_key = tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.key.clone(), i))
            .collect();
        Self {
            tools,
            by_key,
            users,
            refs: HashMap::new(),
        }
    }

    /// The same snapshot with the Kubernetes references of its tools (by key).
    pub fn with_refs(mut self, refs: HashMap<String, ToolRefs>) -> Self {
        self.refs = refs;
        self
    }

    /// The same snapshot with other users (the directory's, when the tools are swapped
    /// in after the users they were built with changed).
    pub fn with_users(mut self, users: Vec<User>) -> Self {
        self.users = users;
        self
    }

    /// The Kubernetes references of a tool, if it has any.
    pub fn refs(&self, key: &str) -> Option<&ToolRefs> {
        self.refs.get(key)
    }

    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    pub fn tool(&self, key: &str) -> Option<&Tool> {
        self.by_key.get(key).map(|&i| &self.tools[i])
    }

    pub fn users(&self) -> &[User] {
        &self.users
    }
}
