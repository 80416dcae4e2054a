//! Where the executor listens: a name in Linux's abstract socket namespace (`@name`, the
//! default) or a filesystem path.
//!
//! The abstract form is what keeps the socket out of the tools' reach. Tools run as the
//! executor's user: a socket *file* on a volume they can write could be unlinked, or its
//! directory renamed, and replaced by a listener of their own that then reads every later
//! call. An abstract name has no file. It belongs to the pod's network namespace (which
//! the gateway container shares), no one else can bind it while the executor holds it,
//! and the executor holds it for its whole life — as its container's PID 1, whose exit
//! takes every tool with it, so no tool is left to take the name over. A path is for
//! setups where no tool can write the socket's directory (or where tools are trusted
//! anyway: a laptop).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// The default: the abstract name the chart uses.
pub const DEFAULT: &str = "@mcc-executor";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// `@name`: Linux's abstract namespace.
    Abstract(String),
    Path(PathBuf),
}

impl Address {
    /// What tokio's `UnixListener::bind` / `UnixStream::connect` take: a path, or the
    /// name behind a NUL byte for the abstract namespace.
    pub fn to_socket_path(&self) -> PathBuf {
        match self {
            Address::Abstract(name) => PathBuf::from(format!("\0{name}")),
            Address::Path(path) => path.clone(),
        }
    }
}

impl FromStr for Address {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.strip_prefix('@') {
            Some("") => Err("an abstract socket name after '@' is required".into()),
            Some(name) if name.len() > 100 => Err(format!("'{s}' is longer than 100 bytes")),
            Some(name) if name.contains('\0') => Err(format!("'{s}' contains a NUL byte")),
            Some(name) => Ok(Address::Abstract(name.to_string())),
            None if s.is_empty() => Err("a socket path or @name is required".into()),
            None => Ok(Address::Path(PathBuf::from(s))),
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Abstract(name) => write!(f, "@{name}"),
            Address::Path(path) => write!(f, "{}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        let a: Address = "@mcc-executor".parse().unwrap();
        assert_eq!(a, Address::Abstract("mcc-executor".into()));
        assert_eq!(a.to_socket_path(), PathBuf::from("\0mcc-executor"));
        assert_eq!(a.to_string(), "@mcc-executor");
        let p: Address = "/run/mcc/executor.sock".parse().unwrap();
        assert_eq!(p.to_socket_path(), PathBuf::from("/run/mcc/executor.sock"));
        assert!("@".parse::<Address>().is_err());
        assert!("".parse::<Address>().is_err());
    }
}
