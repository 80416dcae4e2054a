//! The one limit on concurrent tool executions: globally, per caller and per tool, with a
//! bounded wait. The engine owns it ([`super::Engine::with_limiter`]); every runtime
//! (in-process, the executor, the pod runtime) runs a tool only while holding a
//! [`Permit`] from it. A `runtime: pod` tool has its own per-tool limit
//! ([`Limiter::with_per_pod_tool`], `execution.pod.max_per_tool`) in place of
//! `concurrency.max_per_tool`: each of its executions is a Pod. A call that cannot get one within the wait is refused with a
//! [`Busy`] error naming the limit and the setting that raises it.
//!
//! It does not count cache hits (they run nothing) and knows nothing of timeouts: those
//! are the runtime's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// How many executions may run at once and how long a call waits for a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimiterSettings {
    /// All callers and tools together (`concurrency.max_executions`).
    pub global: usize,
    /// One caller (username; all anonymous callers share one) (`concurrency.max_per_caller`).
    pub per_caller: usize,
    /// One tool key (`concurrency.max_per_tool`).
    pub per_tool: usize,
    /// How long a call waits for a slot before it is refused (`concurrency.wait_ms`).
    pub wait: Duration,
}

impl LimiterSettings {
    /// No limit (tests and benchmarks that measure something else).
    pub fn unbounded() -> Self {
        Self {
            global: Semaphore::MAX_PERMITS,
            per_caller: Semaphore::MAX_PERMITS,
            per_tool: Semaphore::MAX_PERMITS,
            wait: Duration::ZERO,
        }
    }
}

/// Which limit refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Global,
    Caller,
    Tool,
    /// One `runtime: pod` tool.
    PodTool,
}

impl Scope {
    /// The setting that raises this limit.
    pub fn setting(self) -> &'static str {
        match self {
            Scope::Global => "concurrency.max_executions",
            Scope::Caller => "concurrency.max_per_caller",
            Scope::Tool => "concurrency.max_per_tool",
            Scope::PodTool => "execution.pod.max_per_tool",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Scope::Global => "executions are running on this gateway",
            Scope::Caller => "executions of this caller are running",
            Scope::Tool => "executions of this tool are running",
            Scope::PodTool => "Pods of this tool are running",
        }
    }
}

/// A call found no free slot within the wait.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "busy: {limit} {what} (the limit, {setting} = {limit}); waited {waited_ms} ms \
     (concurrency.wait_ms), try again later",
    what = scope.what(),
    setting = scope.setting()
)]
pub struct Busy {
    pub scope: Scope,
    pub limit: usize,
    pub waited_ms: u64,
}

/// Held while a tool runs; dropping it frees the slots.
#[derive(Debug)]
pub struct Permit {
    _caller: OwnedSemaphorePermit,
    _tool: OwnedSemaphorePermit,
    _global: OwnedSemaphorePermit,
}

/// Semaphores by name, created on first use. Entries nobody holds are dropped once the
/// map grows, so distinct callers and tools over a long life cost nothing.
#[derive(Debug, Default)]
struct Pool {
    by_name: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// Beyond this many entries, idle ones are pruned on the next insert.
const PRUNE_ABOVE: usize = 256;

impl Pool {
    fn get(&self, name: &str, permits: usize) -> Arc<Semaphore> {
        let mut map = self.by_name.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = map.get(name) {
            return s.clone();
        }
        if map.len() >= PRUNE_ABOVE {
            // Only the map holds an idle semaphore (a permit holds a clone of its Arc).
            map.retain(|_, s| Arc::strong_count(s) > 1);
        }
        let s = Arc::new(Semaphore::new(permits));
        map.insert(name.to_string(), s.clone());
        s
    }

    fn len(&self) -> usize {
        self.by_name.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// The concurrency limiter. Cheap to share (`Arc` it).
#[derive(Debug)]
pub struct Limiter {
    settings: LimiterSettings,
    global: Arc<Semaphore>,
    callers: Pool,
    tools: Pool,
    /// Executions of one pod tool at once.
    per_pod_tool: usize,
    pod_tools: Pool,
}

impl Limiter {
    pub fn new(settings: LimiterSettings) -> Self {
        Self {
            global: Arc::new(Semaphore::new(settings.global)),
            settings,
            callers: Pool::default(),
            tools: Pool::default(),
            per_pod_tool: Semaphore::MAX_PERMITS,
            pod_tools: Pool::default(),
        }
    }

    /// The same limiter with at most `n` executions of one `runtime: pod` tool at once.
    pub fn with_per_pod_tool(mut self, n: usize) -> Self {
        self.per_pod_tool = n;
        self
    }

    pub fn unbounded() -> Self {
        Self::new(LimiterSettings::unbounded())
    }

    pub fn settings(&self) -> &LimiterSettings {
        &self.settings
    }

    /// A slot for `caller` to run `tool`, waiting at most the configured wait. The caller's
    /// own slot is taken first, so a caller flooding the gateway queues behind itself and
    /// holds no global slot while it waits.
    pub async fn acquire(&self, caller: &str, tool: &str) -> Result<Permit, Busy> {
        self.acquire_for(caller, tool, false).await
    }

    /// [`Self::acquire`], for a `runtime: pod` tool when `pod` (its own per-tool limit).
    pub async fn acquire_for(&self, caller: &str, tool: &str, pod: bool) -> Result<Permit, Busy> {
        let started = Instant::now();
        let deadline = started + self.settings.wait;
        let take = |sem: Arc<Semaphore>, scope: Scope, limit: usize| async move {
            // Try at once first: a zero wait still admits a call when a slot is free.
            if let Ok(p) = sem.clone().try_acquire_owned() {
                return Ok(p);
            }
            match tokio::time::timeout_at(deadline, sem.acquire_owned()).await {
                Ok(Ok(p)) => Ok(p),
                // Timed out (the semaphores are never closed).
                _ => Err(Busy {
                    scope,
                    limit,
                    waited_ms: started.elapsed().as_millis() as u64,
                }),
            }
        };
        let s = &self.settings;
        let caller_permit = take(
            self.callers.get(caller, s.per_caller),
            Scope::Caller,
            s.per_caller,
        )
        .await?;
        let tool_permit = if pod {
            let n = self.per_pod_tool;
            take(self.pod_tools.get(tool, n), Scope::PodTool, n).await?
        } else {
            take(self.tools.get(tool, s.per_tool), Scope::Tool, s.per_tool).await?
        };
        let global_permit = take(self.global.clone(), Scope::Global, s.global).await?;
        Ok(Permit {
            _caller: caller_permit,
            _tool: tool_permit,
            _global: global_permit,
        })
    }

    /// Executions running now (for tests and diagnostics).
    pub fn running(&self) -> usize {
        self.settings.global - self.global.available_permits()
    }

    /// How many per-caller and per-tool entries are kept (for tests).
    pub fn entries(&self) -> (usize, usize) {
        (self.callers.len(), self.tools.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(global: usize, per_caller: usize, per_tool: usize, wait_ms: u64) -> Limiter {
        Limiter::new(LimiterSettings {
            global,
            per_caller,
            per_tool,
            wait: Duration::from_millis(wait_ms),
        })
    }

    #[tokio::test]
    async fn each_limit_refuses_with_its_setting() {
        let l = limiter(3, 2, 2, 20);
        let _a = l.acquire("alice", "t1").await.unwrap();
        let _b = l.acquire("alice", "t2").await.unwrap();
        let busy = l.acquire("alice", "t3").await.unwrap_err();
        assert_eq!(busy.scope, Scope::Caller);
        assert!(
            busy.to_string().contains("concurrency.max_per_caller = 2"),
            "{busy}"
        );
        let _c = l.acquire("bob", "t1").await.unwrap();
        let busy = l.acquire("carol", "t1").await.unwrap_err();
        assert_eq!(busy.scope, Scope::Tool);
        assert!(busy.to_string().contains("concurrency.max_per_tool"));
        let busy = l.acquire("carol", "t9").await.unwrap_err();
        assert_eq!(busy.scope, Scope::Global);
        assert!(busy.to_string().contains("concurrency.max_executions = 3"));
        assert!(busy.waited_ms >= 20, "{busy:?}");
        assert_eq!(l.running(), 3);
    }

    #[tokio::test]
    async fn a_freed_slot_admits_a_waiting_call() {
        let l = Arc::new(limiter(1, 1, 1, 2_000));
        let held = l.acquire("alice", "t").await.unwrap();
        let l2 = l.clone();
        let waiter = tokio::spawn(async move { l2.acquire("alice", "t").await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(30)).await;
        drop(held);
        assert_eq!(waiter.await.unwrap(), Ok(()));
        assert_eq!(l.running(), 0);
    }

    #[tokio::test]
    async fn a_pod_tool_has_its_own_per_tool_limit() {
        let l = limiter(10, 10, 3, 10).with_per_pod_tool(1);
        let _a = l.acquire_for("alice", "p", true).await.unwrap();
        let busy = l.acquire_for("bob", "p", true).await.unwrap_err();
        assert_eq!(busy.scope, Scope::PodTool);
        assert!(
            busy.to_string().contains("execution.pod.max_per_tool = 1"),
            "{busy}"
        );
        // The global and caller limits still count the pod tool's execution.
        assert_eq!(l.running(), 1);
        let _b = l.acquire_for("bob", "local", false).await.unwrap();
    }

    #[tokio::test]
    async fn idle_entries_are_pruned() {
        let l = Limiter::new(LimiterSettings {
            wait: Duration::ZERO,
            ..LimiterSettings::unbounded()
        });
        for i in 0..(PRUNE_ABOVE * 3) {
            drop(l.acquire(&format!("caller-{i}"), "t").await.unwrap());
        }
        let (callers, tools) = l.entries();
        assert!(callers <= PRUNE_ABOVE + 1, "{callers}");
        assert_eq!(tools, 1);
    }
}
