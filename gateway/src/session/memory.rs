//! The in-memory session backend: the embedded default for a single gateway process.
//! Buckets and minted handles expire like Redis keys would (checked on access, swept now
//! and then), and every operation runs under one lock, so it is atomic.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::Scope;

/// Writes between two sweeps of expired entries.
const SWEEP_EVERY: u64 = 1024;

#[derive(Clone, Debug)]
pub struct MemoryStore {
    state: Arc<Mutex<State>>,
    ttl: Duration,
}

#[derive(Debug, Default)]
struct State {
    buckets: HashMap<Scope, Expiring<Map<String, Value>>>,
    /// Minted handle → owner's username.
    handles: HashMap<String, Expiring<String>>,
    writes: u64,
}

#[derive(Debug)]
struct Expiring<T> {
    value: T,
    expires: Instant,
}

impl<T> Expiring<T> {
    fn live(&self) -> bool {
        Instant::now() < self.expires
    }
}

impl MemoryStore {
    pub fn new(ttl: Duration) -> Self {
        Self {
            state: Arc::default(),
            ttl,
        }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a bucket half-written (each
        // operation is one map update), so a poisoned lock is safe to keep using.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn live_bucket<'s>(state: &'s State, scope: &Scope) -> Option<&'s Map<String, Value>> {
        state
            .buckets
            .get(scope)
            .filter(|b| b.live())
            .map(|b| &b.value)
    }

    pub fn get(&self, scope: &Scope, name: &str) -> Option<Value> {
        Self::live_bucket(&self.lock(), scope).and_then(|vars| vars.get(name).cloned())
    }

    pub fn vars(&self, scope: &Scope) -> Map<String, Value> {
        Self::live_bucket(&self.lock(), scope)
            .cloned()
            .unwrap_or_default()
    }

    pub fn set(&self, scope: &Scope, name: &str, value: Value) {
        let mut state = self.lock();
        let expires = Instant::now() + self.ttl;
        let bucket = state
            .buckets
            .entry(scope.clone())
            .or_insert_with(|| Expiring {
                value: Map::new(),
                expires,
            });
        if !bucket.live() {
            // An expired bucket is gone, as in Redis: start from nothing.
            bucket.value.clear();
        }
        bucket.value.insert(name.to_string(), value);
        bucket.expires = expires;
        Self::count_write(&mut state);
    }

    pub fn replace(&self, scope: &Scope, vars: Map<String, Value>) {
        let mut state = self.lock();
        if vars.is_empty() {
            // Like Redis: an empty hash is no key at all.
            state.buckets.remove(scope);
        } else {
            self.write(&mut state, scope, vars);
        }
    }

    fn write(&self, state: &mut State, scope: &Scope, vars: Map<String, Value>) {
        let expires = Instant::now() + self.ttl;
        state.buckets.insert(
            scope.clone(),
            Expiring {
                value: vars,
                expires,
            },
        );
        Self::count_write(state);
    }

    /// Count a write; now and then drop what has expired so memory stays bounded.
    fn count_write(state: &mut State) {
        state.writes += 1;
        if state.writes.is_multiple_of(SWEEP_EVERY) {
            state.buckets.retain(|_, b| b.live());
            state.handles.retain(|_, h| h.live());
        }
    }

    pub fn remaining(&self, scope: &Scope) -> Option<Duration> {
        let state = self.lock();
        let bucket = state.buckets.get(scope).filter(|b| b.live())?;
        Some(bucket.expires.saturating_duration_since(Instant::now()))
    }

    /// Record `username` as the owner of `handle`; false if the handle is taken.
    pub fn claim_handle(&self, handle: &str, username: &str) -> bool {
        let mut state = self.lock();
        if state.handles.get(handle).is_some_and(|h| h.live()) {
            return false;
        }
        let owner = Expiring {
            value: username.to_string(),
            expires: Instant::now() + self.ttl,
        };
        state.handles.insert(handle.to_string(), owner);
        true
    }

    pub fn handle_owner(&self, handle: &str) -> Option<String> {
        let state = self.lock();
        state
            .handles
            .get(handle)
            .filter(|h| h.live())
            .map(|h| h.value.clone())
    }
}
