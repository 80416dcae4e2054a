//! The in-memory session backend: the embedded default for a single gateway process.
//! Buckets and minted handles expire like Redis keys would (checked on access, swept now
//! and then), and every operation runs under one lock, so it is atomic: a limit check
//! and the write it guards, or a write-back's sets and deletes, happen as one step.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::limits::{self, Limits};
use super::{Scope, SessionError};

/// Writes between two sweeps of expired entries.
const SWEEP_EVERY: u64 = 1024;

#[derive(Clone, Debug)]
pub struct MemoryStore {
    state: Arc<Mutex<State>>,
    ttl: Duration,
    limits: Limits,
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
    pub fn new(ttl: Duration, limits: Limits) -> Self {
        Self {
            state: Arc::default(),
            ttl,
            limits,
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
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

    /// Stores one variable (`text`: its stored text, already within the value limit)
    /// if the bucket stays within the limits.
    pub fn set(
        &self,
        scope: &Scope,
        name: &str,
        value: Value,
        text: &str,
    ) -> Result<(), SessionError> {
        let set = [(name.to_string(), (value, text.to_string()))];
        self.write(scope, &set, &[], false)
    }

    /// An fn tool's write-back (`replace_all`: a full replace, dropping every variable
    /// not in `set`), checked against the limits as a whole.
    pub fn apply(
        &self,
        scope: &Scope,
        values: &Map<String, Value>,
        texts: &[(String, String)],
        delete: &[String],
        replace_all: bool,
    ) -> Result<(), SessionError> {
        let set: Vec<(String, (Value, String))> = texts
            .iter()
            .map(|(name, text)| (name.clone(), (values[name].clone(), text.clone())))
            .collect();
        self.write(scope, &set, delete, replace_all)
    }

    fn write(
        &self,
        scope: &Scope,
        set: &[(String, (Value, String))],
        delete: &[String],
        replace_all: bool,
    ) -> Result<(), SessionError> {
        let mut state = self.lock();
        // An expired bucket is gone, as in Redis: start from nothing.
        let mut vars = match Self::live_bucket(&state, scope) {
            Some(vars) if !replace_all => vars.clone(),
            _ => Map::new(),
        };
        for name in delete {
            vars.remove(name);
        }
        for (name, (value, _)) in set {
            vars.insert(name.clone(), value.clone());
        }
        let bytes = vars
            .iter()
            .map(|(name, value)| {
                let text = set
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, (_, t))| t.clone())
                    .unwrap_or_else(|| limits::value_text(value));
                limits::entry_bytes(name, &text)
            })
            .sum();
        self.limits.check_bucket(vars.len(), bytes)?;
        if vars.is_empty() {
            // Like Redis: an empty hash is no key at all.
            state.buckets.remove(scope);
        } else {
            let expires = Instant::now() + self.ttl;
            state.buckets.insert(
                scope.clone(),
                Expiring {
                    value: vars,
                    expires,
                },
            );
        }
        Self::count_write(&mut state);
        Ok(())
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

    /// Record `username` as the owner of `handle`; false if the handle is taken; refused
    /// when the user already holds the most live handles allowed.
    pub fn claim_handle(&self, handle: &str, username: &str) -> Result<bool, SessionError> {
        let mut state = self.lock();
        if state.handles.get(handle).is_some_and(|h| h.live()) {
            return Ok(false);
        }
        // A scan: the map holds at most max_handles_per_user live entries per user, and
        // minting is rare next to tool calls.
        let held = state
            .handles
            .values()
            .filter(|h| h.live() && h.value == username)
            .count();
        if held >= self.limits.max_handles_per_user {
            return Err(SessionError::TooManyHandles {
                limit: self.limits.max_handles_per_user,
            });
        }
        let owner = Expiring {
            value: username.to_string(),
            expires: Instant::now() + self.ttl,
        };
        state.handles.insert(handle.to_string(), owner);
        Self::count_write(&mut state);
        Ok(true)
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
