//! A tool's own progress, apart from its output: the runtime gives the process the path
//! of an empty file in `MCC_PROGRESS_FILE` ([`ENV`]); the tool appends lines to it,
//!
//! ```text
//! <done>[/<total>] [message]        e.g.  3/10 copying the third file
//! ```
//!
//! and the runtime reads the last complete line twice a second, passing it on as a
//! [`Report`] to whoever asked for them: a caller sets a [`SINK`] around the run (the
//! gateway does for an MCP request with a `progressToken`). Nothing else is given the
//! variable, and the file is not output: stdout, stderr and the result never see it.
//!
//! Safety: the file is alone in a directory made for the call (mode 0700, by an
//! exclusive `mkdir`, under the runtime's temporary directory) and removed with it after
//! the call. It is opened without following symlinks and read only if it is a regular
//! file, at most its last [`TAIL`] bytes per look; a message is cut to [`MAX_MESSAGE`]
//! characters, control characters dropped; numbers must be finite and non-negative.
//! A line that does not parse is ignored. Behind the executor's socket, reports cross as
//! frames before the result ([`crate::wire`]). The pod runtime has no such file.

use std::fs::DirBuilder;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The variable naming the file.
pub const ENV: &str = "MCC_PROGRESS_FILE";
/// Bytes of the end of the file read per look.
pub const TAIL: u64 = 4096;
/// Characters of a message kept.
pub const MAX_MESSAGE: usize = 200;
/// How often the file is looked at.
pub const LOOK_EVERY: Duration = Duration::from_millis(500);

/// The last progress a tool reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub done: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

impl Report {
    /// `done / total`, when the tool gave a positive total.
    pub fn fraction(&self) -> Option<f64> {
        self.total
            .filter(|t| *t > 0.0)
            .map(|t| (self.done / t).clamp(0.0, 1.0))
    }
}

/// Where a run's reports go: the newest one is kept.
pub type Sink = tokio::sync::watch::Sender<Option<Report>>;

tokio::task_local! {
    /// Set around a run whose caller wants its tool's progress.
    pub static SINK: Sink;
}

/// The sink of the current task, if its caller set one.
pub fn current_sink() -> Option<Sink> {
    SINK.try_with(Sink::clone).ok()
}

fn number(text: &str) -> Option<f64> {
    text.parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0)
}

/// One line of the file, or `None` when it is not a report.
pub fn parse_line(line: &str) -> Option<Report> {
    let line = line.trim();
    let (count, message) = match line.split_once(char::is_whitespace) {
        Some((count, rest)) => (count, Some(rest)),
        None => (line, None),
    };
    let (done, total) = match count.split_once('/') {
        Some((done, total)) => (number(done)?, Some(number(total)?)),
        None => (number(count)?, None),
    };
    let message = message
        .map(|m| {
            m.chars()
                .filter(|c| !c.is_control())
                .take(MAX_MESSAGE)
                .collect::<String>()
                .trim()
                .to_string()
        })
        .filter(|m| !m.is_empty());
    Some(Report {
        done,
        total,
        message,
    })
}

/// The newest report in `tail` (the end of the file): its last complete line that parses.
fn latest(tail: &[u8]) -> Option<Report> {
    let text = String::from_utf8_lossy(tail);
    let complete = &text[..text.rfind('\n')?];
    complete.lines().rev().find_map(parse_line)
}

/// A call's progress file, removed (with its directory) when dropped.
pub struct File {
    dir: PathBuf,
    path: PathBuf,
}

impl File {
    /// An empty file in a new private directory under `parent`.
    pub fn create(parent: &Path) -> std::io::Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = parent.join(format!(
            "mcc-progress-{}-{nanos}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        DirBuilder::new().mode(0o700).create(&dir)?;
        let path = dir.join("progress");
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        Ok(Self { dir, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The newest report in the file, if any.
    pub fn read(&self) -> Option<Report> {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&self.path)
            .ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() {
            return None;
        }
        let from = meta.len().saturating_sub(TAIL);
        file.seek(SeekFrom::Start(from)).ok()?;
        let mut tail = Vec::with_capacity(TAIL as usize);
        file.take(TAIL).read_to_end(&mut tail).ok()?;
        latest(&tail)
    }

    /// Passes each new report to `sink`, forever (drop the future to stop).
    pub async fn follow(&self, sink: &Sink) {
        loop {
            tokio::time::sleep(LOOK_EVERY).await;
            self.publish(sink);
        }
    }

    /// Passes the newest report to `sink` if it changed (also after the run: the last
    /// line may have come since the last look).
    pub fn publish(&self, sink: &Sink) {
        if let Some(report) = self.read() {
            sink.send_if_modified(|kept| {
                let changed = kept.as_ref() != Some(&report);
                *kept = Some(report);
                changed
            });
        }
    }
}

impl Drop for File {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_to_reports_and_nonsense_does_not() {
        let r = parse_line("3/10 copying the third file\n").unwrap();
        assert_eq!(r.done, 3.0);
        assert_eq!(r.total, Some(10.0));
        assert_eq!(r.message.as_deref(), Some("copying the third file"));
        assert_eq!(r.fraction(), Some(0.3));
        let r = parse_line("42").unwrap();
        assert_eq!((r.done, r.total, r.message), (42.0, None, None));
        for bad in ["", "abc", "-1/3", "NaN", "inf/2", "3/x", "/3"] {
            assert_eq!(parse_line(bad), None, "{bad}");
        }
        let long = format!("1 {}\u{7}", "é".repeat(500));
        let message = parse_line(&long).unwrap().message.unwrap();
        assert_eq!(message.chars().count(), MAX_MESSAGE);
    }

    #[test]
    fn the_newest_complete_line_counts() {
        assert_eq!(latest(b"1/4 a\n2/4 b\n3/4 partial").unwrap().done, 2.0);
        assert_eq!(latest(b"1/4 a\nnot a report\n").unwrap().done, 1.0);
        assert_eq!(latest(b"no newline yet"), None);
    }

    #[test]
    fn the_file_is_private_read_from_its_end_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let parent = tempfile::tempdir().unwrap();
        let file = File::create(parent.path()).unwrap();
        let dir = file.path().parent().unwrap().to_path_buf();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let mut text = "1/9 early\n".repeat(2000);
        text.push_str("8/9 late\n");
        std::fs::write(file.path(), text).unwrap();
        assert_eq!(file.read().unwrap().message.as_deref(), Some("late"));
        // A symlink in its place is not followed.
        std::fs::remove_file(file.path()).unwrap();
        let target = parent.path().join("secret");
        std::fs::write(&target, "5/5 secret\n").unwrap();
        std::os::unix::fs::symlink(&target, file.path()).unwrap();
        assert_eq!(file.read(), None);
        drop(file);
        assert!(!dir.exists());
    }
}
