//! Counting calls in fixed windows: in this process ([`Counter::local`]), or in Redis
//! ([`Counter::redis`]) so that every replica sharing it counts the same calls exactly.
//!
//! Redis: one Lua script per call (one round trip, atomic): it reads every bucket the
//! call counts in, refuses with the longest remaining window if any is full, and else
//! increments them all, starting a bucket's window (`PEXPIRE`) at its first call. Keys:
//! `<session.key_prefix>:ratelimit:{<user>}:tool:<tool key>` and
//! `<session.key_prefix>:ratelimit:{<user>}:all`, the user percent-encoded (`%`, `:`,
//! `{`, `}`) and in a hash tag, so a call's keys share one Redis Cluster slot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::redis_conn::Conn;
use mcc_catalog::rate::RateLimit;

use super::Scope;

/// How long one check may wait for Redis before it counts as a store failure.
pub const REDIS_TIMEOUT: Duration = Duration::from_secs(2);

/// In-process buckets kept at most before expired ones are pruned.
const LOCAL_PRUNE_AT: usize = 10_000;

/// KEYS: the buckets. ARGV: for each bucket its limit then its window in ms.
/// Returns {-1, 0} when admitted, else {index of the full bucket (0-based), ms left}.
const ADMIT_SCRIPT: &str = r#"
local full, wait = -1, 0
for i, key in ipairs(KEYS) do
  local limit, window = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local n = tonumber(redis.call('GET', key) or '0')
  if n >= limit then
    local ttl = redis.call('PTTL', key)
    if ttl < 0 then
      redis.call('PEXPIRE', key, window)
      ttl = window
    end
    if ttl > wait then full, wait = i - 1, ttl end
  end
end
if full >= 0 then return {full, wait} end
for i, key in ipairs(KEYS) do
  if redis.call('INCR', key) == 1 then redis.call('PEXPIRE', key, ARGV[2 * i]) end
end
return {-1, 0}
"#;

/// The store could not answer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("rate-limit store (Redis): {0}")]
    Redis(#[from] redis::RedisError),
    #[error("rate-limit store (Redis): no answer within {REDIS_TIMEOUT:?}")]
    Timeout,
}

/// Where calls are counted. Cheap to clone.
#[derive(Clone)]
pub enum Counter {
    Local(Arc<Mutex<HashMap<String, Window>>>),
    Redis { conn: Conn, prefix: Arc<str> },
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Counter::Local(_) => "Counter::Local",
            Counter::Redis { .. } => "Counter::Redis",
        })
    }
}

/// One in-process bucket's window.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    count: u32,
    ends: Instant,
}

/// The bucket of `user`'s calls of `tool`.
pub fn tool_bucket(user: &str, tool: &str) -> String {
    format!("{{{}}}:tool:{tool}", encode(user))
}

/// The bucket of all of `user`'s calls.
pub fn user_bucket(user: &str) -> String {
    format!("{{{}}}:all", encode(user))
}

fn encode(user: &str) -> String {
    let mut out = String::with_capacity(user.len());
    for c in user.chars() {
        match c {
            '%' | ':' | '{' | '}' => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

impl Counter {
    /// Counts in this process only (each replica its own).
    pub fn local() -> Self {
        Counter::Local(Arc::default())
    }

    /// Counts in Redis over an open connection (the session store's); `key_prefix` is
    /// `session.key_prefix`.
    pub fn redis(conn: Conn, key_prefix: &str) -> Self {
        Counter::Redis {
            conn,
            prefix: key_prefix.into(),
        }
    }

    /// Admits a call counted in each of `buckets` (name, scope, limit; limits are never
    /// unlimited here), or returns the index of a full bucket and how long until its
    /// window ends (the longest, when several are full).
    pub async fn admit(
        &self,
        buckets: &[(String, Scope, RateLimit)],
    ) -> Result<Option<(usize, Duration)>, StoreError> {
        match self {
            Counter::Local(map) => Ok(admit_local(map, buckets, Instant::now())),
            Counter::Redis { conn, prefix } => {
                // EVAL rather than EVALSHA: the script is small and needs no script cache.
                let mut eval = redis::cmd("EVAL");
                eval.arg(ADMIT_SCRIPT).arg(buckets.len());
                for (bucket, _, _) in buckets {
                    eval.arg(format!("{prefix}:ratelimit:{bucket}"));
                }
                for (_, _, limit) in buckets {
                    let (count, window) = parts(limit);
                    eval.arg(count).arg(window.as_millis() as u64);
                }
                let mut conn = conn.clone();
                let (full, wait): (i64, u64) =
                    tokio::time::timeout(REDIS_TIMEOUT, eval.query_async(&mut conn))
                        .await
                        .map_err(|_| StoreError::Timeout)??;
                Ok((full >= 0).then(|| (full as usize, Duration::from_millis(wait.max(1)))))
            }
        }
    }
}

fn parts(limit: &RateLimit) -> (u32, Duration) {
    match limit {
        RateLimit::Every { count, window } => (*count, *window),
        // Never passed in (resolve filters them); admit everything if it were.
        RateLimit::Unlimited => (u32::MAX, Duration::from_secs(1)),
    }
}

fn admit_local(
    map: &Mutex<HashMap<String, Window>>,
    buckets: &[(String, Scope, RateLimit)],
    now: Instant,
) -> Option<(usize, Duration)> {
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    if map.len() > LOCAL_PRUNE_AT {
        map.retain(|_, w| w.ends > now);
    }
    let mut full: Option<(usize, Duration)> = None;
    for (i, (bucket, _, limit)) in buckets.iter().enumerate() {
        let (count, _) = parts(limit);
        if let Some(w) = map.get(bucket).filter(|w| w.ends > now)
            && w.count >= count
        {
            let left = w.ends - now;
            if full.is_none_or(|(_, longest)| left > longest) {
                full = Some((i, left));
            }
        }
    }
    if full.is_some() {
        return full;
    }
    for (bucket, _, limit) in buckets {
        let (_, window) = parts(limit);
        let w = map.entry(bucket.clone()).or_insert(Window {
            count: 0,
            ends: now + window,
        });
        if w.ends <= now {
            *w = Window {
                count: 0,
                ends: now + window,
            };
        }
        w.count += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(count: u32, secs: u64) -> RateLimit {
        RateLimit::every(count, Duration::from_secs(secs)).unwrap()
    }

    #[test]
    fn local_windows_admit_n_then_refuse_until_they_end() {
        let map = Mutex::default();
        let t0 = Instant::now();
        let buckets = [
            ("a".to_string(), Scope::Tool, limit(2, 10)),
            ("all".to_string(), Scope::User, limit(3, 60)),
        ];
        assert_eq!(admit_local(&map, &buckets, t0), None);
        assert_eq!(
            admit_local(&map, &buckets, t0 + Duration::from_secs(1)),
            None
        );
        let (i, left) = admit_local(&map, &buckets, t0 + Duration::from_secs(2)).unwrap();
        assert_eq!((i, left), (0, Duration::from_secs(8)));
        // The window of `a` ended; `all` holds 2 of 3, so one more passes, then `all` is full.
        let t1 = t0 + Duration::from_secs(10);
        assert_eq!(admit_local(&map, &buckets, t1), None);
        let (i, left) = admit_local(&map, &buckets, t1).unwrap();
        assert_eq!((i, left), (1, Duration::from_secs(50)));
        // A refused call counted nowhere: `a` still holds 1.
        let other = [("a".to_string(), Scope::Tool, limit(2, 10))];
        assert_eq!(admit_local(&map, &other, t1), None);
        assert!(admit_local(&map, &other, t1).is_some());
    }

    #[test]
    fn users_cannot_share_a_bucket_by_their_names() {
        assert_ne!(tool_bucket("a:tool:b", "c"), tool_bucket("a", "b:c"));
        assert_eq!(user_bucket("x}{:%"), "{x%7D%7B%3A%25}:all");
        assert_eq!(
            tool_bucket("alice", "ops.restart"),
            "{alice}:tool:ops.restart"
        );
    }
}
