//! Shared by the abuse tests that need a process of their own: a real `mcc-gateway serve`
//! over the test tool and users files (started by `mcp_support::replica`), its RSS from
//! `/proc`, raw HTTP helpers.
#![allow(dead_code)]

use std::path::Path;

pub use crate::mcp_support::replica::Replica as Gateway;

impl Gateway {
    /// Resident set size of the process, in KiB (`VmRSS` of `/proc/<pid>/status`).
    pub fn rss_kib(&self) -> u64 {
        rss_kib(self.child.id())
    }
}

pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/<pid>/status")
}

/// Starts the binary over the test files in `dir` with `env` on top: dev-admin,
/// in-memory sessions, keyword-only search unless `env` says otherwise.
pub async fn spawn(dir: &Path, env: &[(&str, String)]) -> Gateway {
    let mut all = vec![
        ("MCC_AUTH", "dev-admin".to_string()),
        // No model: keyword-only unless a test points MCC_MODEL_CACHE at one.
        (
            "MCC_MODEL_CACHE",
            dir.join("no-models").display().to_string(),
        ),
        ("MCC_LOG", "error".to_string()),
    ];
    all.extend(env.iter().cloned());
    crate::mcp_support::replica::spawn_gateway(dir, &all).await
}
