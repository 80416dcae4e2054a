//! Reaping orphans when the executor is its container's PID 1. A tool's process that left
//! its process group (`setsid`) escapes the group kill and, once its parent is gone, is
//! re-parented to PID 1; when it exits, only PID 1 can collect it. Without a reaper each
//! such exit leaves a zombie, until the container's pid limit stops every tool.
//!
//! The executor's own children (the tools it is running) are waited for by tokio, by pid:
//! the reaper never touches those. [`Spawned`] registers them, and the reaper scans and
//! reaps under the same lock, so a child that exits before it is registered cannot be
//! taken from tokio.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

static CHILDREN: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

fn children() -> MutexGuard<'static, BTreeSet<u32>> {
    CHILDREN.lock().unwrap_or_else(|e| e.into_inner())
}

/// A tool process this executor spawned and tokio waits for; deregistered on drop.
pub struct Spawned(Option<u32>);

impl Spawned {
    /// Runs `spawn` (which returns the child's pid) with the registry locked.
    pub fn register<T>(
        spawn: impl FnOnce() -> std::io::Result<(T, Option<u32>)>,
    ) -> std::io::Result<(T, Self)> {
        let mut set = children();
        let (child, pid) = spawn()?;
        if let Some(pid) = pid {
            set.insert(pid);
        }
        Ok((child, Self(pid)))
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            children().remove(&pid);
        }
    }
}

/// Reaps orphaned zombies every `every` until the process exits. Only call as PID 1.
pub async fn run(every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let reaped = tokio::task::spawn_blocking(reap_orphans).await.unwrap_or(0);
        if reaped > 0 {
            tracing::debug!(reaped, "reaped orphaned tool processes");
        }
    }
}

/// Reaps the zombie children of this process that it did not spawn as tools; how many.
pub fn reap_orphans() -> usize {
    let set = children();
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut reaped = 0;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if set.contains(&pid) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if zombie_child_of(&stat, me) {
            // SAFETY: waitpid on a pid that is our zombie child; WNOHANG never blocks.
            let done = unsafe { libc::waitpid(pid as i32, std::ptr::null_mut(), libc::WNOHANG) };
            reaped += usize::from(done > 0);
        }
    }
    reaped
}

/// Whether a `/proc/<pid>/stat` line is a zombie whose parent is `parent`. The command
/// name (field 2) may hold spaces and parentheses: parse after its last `)`.
fn zombie_child_of(stat: &str, parent: i32) -> bool {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let mut fields = rest.split_whitespace();
    let state = fields.next();
    let ppid = fields.next().and_then(|p| p.parse::<i32>().ok());
    state == Some("Z") && ppid == Some(parent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_read_after_the_command_name() {
        assert!(zombie_child_of("42 (sleep) Z 1 42 42 0 -1", 1));
        assert!(zombie_child_of("42 (a) b) Z) Z 1 42", 1));
        assert!(!zombie_child_of("42 (sleep) S 1 42", 1));
        assert!(!zombie_child_of("42 (sleep) Z 7 42", 1));
        assert!(!zombie_child_of("garbage", 1));
    }
}
