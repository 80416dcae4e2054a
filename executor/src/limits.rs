//! What a tool's `limits` mean for its process: the rlimits set in the child before
//! `exec` and the wall-clock timeout. (How a limit hit is reported is the gateway's
//! business.)
//!
//! `cpu_sec` sets the soft limit to N and the hard limit to N+1 seconds, so the kernel
//! sends SIGXCPU (reported as "cpu time exceeded") rather than the bare SIGKILL that
//! soft = hard produces. Whenever an rlimit is set, core dumps are disabled too: a tool
//! killed by SIGXCPU/SIGXFSZ must not leave a core file in its working directory.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use mcc_catalog::Limits;

const MIB: u64 = 1024 * 1024;

/// A limit that cannot be applied, named by its field.
#[derive(Debug, thiserror::Error)]
pub enum LimitError {
    #[error("limits.timeout must be a non-negative number of seconds, got {0}")]
    Timeout(f64),
    #[error("limits.{field} = {value} exceeds the gateway's own hard limit ({hard})")]
    AboveHard {
        field: &'static str,
        value: u64,
        hard: u64,
    },
}

/// rlimit values in the units setrlimit takes; `Copy` so the pre_exec hook owns them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rlimits {
    address_space: Option<u64>,
    cpu_seconds: Option<u64>,
    file_size: Option<u64>,
    open_files: Option<u64>,
}

impl Rlimits {
    /// Converts a tool's limits, refusing values above the gateway's own hard limits (a
    /// tool may be held tighter than the gateway, never looser).
    pub fn from_limits(limits: &Limits) -> Result<Self, LimitError> {
        let rl = Self {
            address_space: limits.mem_mb.map(|v| v.saturating_mul(MIB)),
            cpu_seconds: limits.cpu_sec,
            file_size: limits.fsize_mb.map(|v| v.saturating_mul(MIB)),
            open_files: limits.nofile,
        };
        check_hard("mem_mb", limits.mem_mb, rl.address_space, libc::RLIMIT_AS)?;
        check_hard("cpu_sec", limits.cpu_sec, rl.cpu_hard(), libc::RLIMIT_CPU)?;
        check_hard(
            "fsize_mb",
            limits.fsize_mb,
            rl.file_size,
            libc::RLIMIT_FSIZE,
        )?;
        check_hard("nofile", limits.nofile, rl.open_files, libc::RLIMIT_NOFILE)?;
        Ok(rl)
    }

    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    fn cpu_hard(&self) -> Option<u64> {
        self.cpu_seconds.map(|s| s.saturating_add(1))
    }

    /// Sets the limits on the calling process. Runs in the forked child before `exec`:
    /// it must stay async-signal-safe (no allocation, no locks).
    pub fn apply(&self) -> std::io::Result<()> {
        set(libc::RLIMIT_CORE, 0, 0)?;
        if let Some(v) = self.address_space {
            set(libc::RLIMIT_AS, v, v)?;
        }
        if let (Some(soft), Some(hard)) = (self.cpu_seconds, self.cpu_hard()) {
            set(libc::RLIMIT_CPU, soft, hard)?;
        }
        if let Some(v) = self.file_size {
            set(libc::RLIMIT_FSIZE, v, v)?;
        }
        if let Some(v) = self.open_files {
            set(libc::RLIMIT_NOFILE, v, v)?;
        }
        Ok(())
    }
}

#[cfg(target_os = "linux")]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(target_os = "linux"))]
type Resource = libc::c_int;

// rlim_t is u64 on Linux but not on every Unix.
#[allow(clippy::unnecessary_cast)]
fn set(resource: Resource, soft: u64, hard: u64) -> std::io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: soft as libc::rlim_t,
        rlim_max: hard as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the struct we pass by pointer and touches nothing else.
    if unsafe { libc::setrlimit(resource, &lim) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[allow(clippy::unnecessary_cast)]
fn hard_limit(resource: Resource) -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    let ok = unsafe { libc::getrlimit(resource, &mut lim) } == 0;
    (ok && lim.rlim_max != libc::RLIM_INFINITY).then_some(lim.rlim_max as u64)
}

fn check_hard(
    field: &'static str,
    declared: Option<u64>,
    wanted: Option<u64>,
    resource: Resource,
) -> Result<(), LimitError> {
    // The kernel is asked only for a limit the tool declares (most declare none).
    let (Some(value), Some(wanted)) = (declared, wanted) else {
        return Ok(());
    };
    match hard_limit(resource) {
        Some(hard) if wanted > hard => Err(LimitError::AboveHard { field, value, hard }),
        _ => Ok(()),
    }
}

/// The wall-clock timeout, if any.
pub fn timeout(limits: &Limits) -> Result<Option<Duration>, LimitError> {
    match limits.timeout {
        None => Ok(None),
        Some(t) => Duration::try_from_secs_f64(t)
            .map(Some)
            .map_err(|_| LimitError::Timeout(t)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_timeout_is_named() {
        let limits = Limits {
            timeout: Some(-1.0),
            ..Limits::default()
        };
        assert_eq!(
            timeout(&limits).unwrap_err().to_string(),
            "limits.timeout must be a non-negative number of seconds, got -1"
        );
    }

    #[test]
    fn a_limit_above_the_hard_limit_is_refused() {
        assert!(
            hard_limit(libc::RLIMIT_NOFILE).is_some(),
            "nofile has a hard limit"
        );
        let limits = Limits {
            nofile: Some(u64::MAX / 2),
            ..Limits::default()
        };
        let err = Rlimits::from_limits(&limits).unwrap_err().to_string();
        assert!(err.starts_with("limits.nofile = "), "{err}");
    }
}
