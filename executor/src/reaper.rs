//! Orphans: tool processes whose parent exited, re-parented to the executor. The executor
//! is its container's PID 1, and [`adopt_orphans`] makes it their subreaper anyway (so the
//! same holds when it is not, as in tests). Two duties:
//!
//! - **reaping**: when an orphan exits only its new parent can collect it; without that
//!   each such exit leaves a zombie, until the container's pid limit stops every tool;
//! - **killing** ([`sweep`]): a process that left its call's process group (`setsid`,
//!   double fork) escapes the group kill at the end of the call and could go on reading
//!   later calls' `/proc/<pid>/environ` (their `MCC_CTX_*` and secrets). The executor
//!   runs each call in a session of its own ([`crate::process::Leader::Session`]), whose
//!   id is the call's main pid and which no process can join from outside. So an orphan
//!   whose session is a running call's belongs to that call and is left to it (the call's
//!   end kills it); any other orphan belongs to no running call, or left its call's
//!   session on purpose, and is killed. A child in the executor's own session is no
//!   tool's (a test embedding the server spawns its own) and is never touched.
//!
//! The executor's own children (the tools it is running) are waited for by tokio, by pid:
//! a sweep never touches those. [`Spawned`] registers them, and a sweep scans, reaps and
//! kills under the same lock, so a child that exits before it is registered cannot be
//! taken from tokio, and no tool starts (and so no session appears) mid-pass.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The main processes of running calls: with sessions, also the running sessions' ids.
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

/// Makes this process the parent that its descendants' orphans are re-parented to
/// (`PR_SET_CHILD_SUBREAPER`): what PID 1 is anyway; needs no capability.
pub fn adopt_orphans() -> std::io::Result<()> {
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER) takes plain integers and touches no memory.
    match unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// What sweeping did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Orphaned zombies collected.
    pub reaped: usize,
    /// SIGKILLs sent (a process that takes long to die is counted once per pass).
    pub killed: usize,
}

/// Sweeps every `every` until the process exits: an orphan that left its call's session
/// while the call runs is killed within `every`.
pub async fn run(every: Duration) {
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        let swept = tokio::task::spawn_blocking(|| sweep(SWEEP_BUDGET))
            .await
            .unwrap_or_default();
        if swept != Swept::default() {
            tracing::debug!(
                reaped = swept.reaped,
                killed = swept.killed,
                "swept orphans"
            );
        }
    }
}

/// How long one [`sweep`] may keep trying (a process in uninterruptible sleep cannot die
/// at once); what is left is the next sweep's.
pub const SWEEP_BUDGET: Duration = Duration::from_secs(1);

/// Kills every orphan that is not in a running call's session and reaps every orphaned
/// zombie, pass after pass until a pass finds nothing to do: a killed process's own
/// children are re-parented to this process only as it dies, so they show up a pass
/// later. Stops after `budget`. Blocking (reads `/proc`, sleeps between passes).
pub fn sweep(budget: Duration) -> Swept {
    let deadline = Instant::now() + budget;
    let mut total = Swept::default();
    let mut pause = Duration::from_millis(1);
    loop {
        let swept = pass(true);
        total.reaped += swept.reaped;
        total.killed += swept.killed;
        if swept == Swept::default() || Instant::now() >= deadline {
            return total;
        }
        // Reaping alone needs no pause: what a reaped process left is already ours.
        if swept.killed > 0 {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }
}

/// Reaps the zombie children of this process that it did not spawn as tools, killing
/// nothing; how many.
pub fn reap_orphans() -> usize {
    pass(false).reaped
}

/// One look at this process's children: reaps orphaned zombies, and with `kill`,
/// SIGKILLs each live orphan outside every running session.
fn pass(kill: bool) -> Swept {
    let running = children();
    // SAFETY: getpid and getsid(0) have no preconditions.
    let (me, my_session) = unsafe { (libc::getpid(), libc::getsid(0)) };
    let mut swept = Swept::default();
    let candidates = own_children(me).unwrap_or_else(every_pid);
    for pid in candidates {
        if running.contains(&pid) {
            continue;
        }
        let Some(stat) = read_stat(pid) else {
            continue;
        };
        // A child in this process's own session is no tool's (tools start sessions of
        // their own and cannot join another): a process embedding the executor (a test)
        // waits for its own children.
        if stat.ppid != me || i64::from(stat.session) == i64::from(my_session) {
            continue;
        }
        if stat.zombie {
            // SAFETY: waitpid on a pid that is our zombie child; WNOHANG never blocks.
            let done = unsafe { libc::waitpid(pid as i32, std::ptr::null_mut(), libc::WNOHANG) };
            swept.reaped += usize::from(done > 0);
        } else if kill && !running.contains(&stat.session) && kill_orphan(pid, &running, me) {
            swept.killed += 1;
        }
    }
    swept
}

/// Every pid in `/proc`: what a pass reads when [`own_children`] cannot say.
fn every_pid() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect()
}

/// This process's children, from each thread's `/proc/self/task/<tid>/children` (a
/// child is listed under the thread that forked it, an orphan under the one it was
/// re-parented to): a few reads, where the whole of `/proc` is one per process of the
/// pid namespace (of the host's, outside a container). `None` when the kernel has no such
/// files, or when the list may be incomplete, and so the caller scans `/proc`:
/// - the kernel lists children one at a time, and a child reaped (by tokio: tools' main
///   processes) just after being listed can make it skip the next one: every listed
///   child must still exist after the read;
/// - a thread that exits hands its children to another, maybe one already read: the
///   threads must be the same after the read as before.
fn own_children(me: i32) -> Option<Vec<u32>> {
    for _ in 0..3 {
        let threads = task_ids(me)?;
        let mut kids = Vec::new();
        let mut complete = true;
        for tid in &threads {
            match std::fs::read_to_string(format!("/proc/{me}/task/{tid}/children")) {
                Ok(text) => kids.extend(
                    text.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                ),
                // The first thread is this process's main one: no file means no support.
                Err(_) if *tid == me as u32 => return None,
                Err(_) => complete = false,
            }
        }
        if complete && kids.iter().all(|&p| exists(p)) && task_ids(me)? == threads {
            return Some(kids);
        }
    }
    None
}

fn exists(pid: u32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    let found = unsafe { libc::kill(pid as i32, 0) } == 0;
    found || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

fn task_ids(me: i32) -> Option<Vec<u32>> {
    let mut ids: Vec<u32> = std::fs::read_dir(format!("/proc/{me}/task"))
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect();
    ids.sort_unstable();
    // The main thread first (its file tells whether the kernel has them at all).
    let main = ids.iter().position(|&t| t == me as u32)?;
    ids.swap(0, main);
    Some(ids)
}

/// SIGKILLs `pid` if it is still a live orphan of `me` outside every `running` session.
/// Through a pidfd opened before that check, so the signal cannot reach another process
/// that took the pid meanwhile (tokio reaps cancelled calls' main processes on its own
/// threads).
fn kill_orphan(pid: u32, running: &BTreeSet<u32>, me: i32) -> bool {
    // SAFETY: pidfd_open takes a pid and flags; it returns a new fd we own or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) };
    if fd < 0 {
        if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            // A kernel before 5.3: signal the pid (the tiny reuse window stays open).
            // SAFETY: kill(2) touches no memory.
            return unsafe { libc::kill(pid as i32, libc::SIGKILL) } == 0;
        }
        return false; // gone already
    }
    // SAFETY: `fd` is a valid descriptor returned above, owned by nothing else.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) };
    let still =
        read_stat(pid).is_some_and(|s| s.ppid == me && !s.zombie && !running.contains(&s.session));
    if !still {
        return false;
    }
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    // SAFETY: pidfd_send_signal with a valid pidfd, no siginfo (NULL) and no flags.
    let sent = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            raw,
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    sent == 0
}

/// What a sweep needs of `/proc/<pid>/stat`.
#[derive(Debug, PartialEq, Eq)]
struct Stat {
    zombie: bool,
    ppid: i32,
    session: u32,
}

fn read_stat(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Fields 3 (state), 4 (ppid) and 6 (session) of a stat line. The command name (field 2)
/// may hold spaces and parentheses: parse after its last `)`.
fn parse_stat(stat: &str) -> Option<Stat> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let _pgrp = fields.next()?;
    let session = fields.next()?.parse().ok()?;
    Some(Stat {
        zombie: matches!(state, "Z" | "X"),
        ppid,
        session,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_read_after_the_command_name() {
        let stat = |zombie, ppid, session| {
            Some(Stat {
                zombie,
                ppid,
                session,
            })
        };
        assert_eq!(parse_stat("42 (sleep) Z 1 42 40 0 -1"), stat(true, 1, 40));
        assert_eq!(parse_stat("42 (a) b) Z) S 7 42 41 0"), stat(false, 7, 41));
        assert_eq!(parse_stat("42 (sleep) S 1 42"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn own_children_lists_a_child_wherever_the_kernel_has_the_files() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        let listed = own_children(me);
        let _ = child.kill();
        let _ = child.wait();
        let has_files = std::path::Path::new(&format!("/proc/{me}/task/{me}/children")).exists();
        match listed {
            Some(kids) => assert!(kids.contains(&child.id()), "{kids:?}"),
            None => assert!(!has_files, "the files exist but the children were not read"),
        }
        assert!(every_pid().contains(&(me as u32)));
    }
}
