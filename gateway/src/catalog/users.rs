//! The users file of file mode read into the auth [`Directory`]. The file's shape and
//! its rules (unknown keys, empty or repeated usernames refuse the file) are the
//! catalog's one reader, [`mcc_catalog::users::parse`], which `mcc-operator convert`
//! calls too. A bad or shared API-key record, or an OIDC subject bound to two users, is
//! left out (logged, counted) and every other user and key is served, as in Kubernetes
//! mode ([`Directory::lenient`]).

use std::path::Path;

use super::CatalogError;
use crate::auth::Directory;
use crate::auth::directory::LeftOut;

/// Users (and API keys) ready to swap in, and how many key records were left out.
#[derive(Debug, Default)]
pub struct Users {
    pub directory: Directory,
    pub excluded_api_keys: usize,
}

impl Users {
    /// Users from `entries`, leaving out what cannot be used; each left-out record is
    /// logged with `source` (the file or ConfigMap).
    pub fn lenient(source: &str, entries: Vec<crate::auth::UserEntry>) -> Self {
        let (directory, left_out) = Directory::lenient(entries);
        Self {
            directory,
            excluded_api_keys: log_left_out(source, &left_out),
        }
    }
}

/// Logs what [`Directory::lenient`] left out; returns the number of key records.
pub fn log_left_out(source: &str, left_out: &[LeftOut]) -> usize {
    for l in left_out {
        tracing::warn!(%source, reason = %l.error, api_keys = l.api_keys, "left out of the users");
    }
    left_out.iter().map(|l| l.api_keys).sum()
}

/// Reads a users file, checked as the auth directory needs it.
pub fn load_users(path: &Path) -> Result<Users, CatalogError> {
    let err = |message: String| CatalogError::Users {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let entries = mcc_catalog::users::parse(&text).map_err(|e| err(e.to_string()))?;
    Ok(Users::lenient(&path.display().to_string(), entries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn users_file_rules() {
        let dir = tempfile::tempdir().unwrap();
        let ok = write(
            dir.path(),
            "u.yaml",
            "users:\n  - username: alice\n    email: a@x\n    groups: [admin]\n  - username: bob\n    tools: [ops.t]\n    api_keys: []\n",
        );
        let users = load_users(&ok).unwrap().directory;
        assert_eq!(users.users()[0].username, "alice");
        assert_eq!(users.users()[1].tools, vec!["ops.t"]);

        let dup = write(
            dir.path(),
            "d.yaml",
            "users:\n  - username: a\n  - username: a\n",
        );
        let e = load_users(&dup).unwrap_err().to_string();
        assert!(
            e.contains("d.yaml") && e.contains("'a' is listed more than once"),
            "{e}"
        );

        let unknown = write(
            dir.path(),
            "x.yaml",
            "users:\n  - username: a\n    grups: [x]\n",
        );
        let e = load_users(&unknown).unwrap_err().to_string();
        assert!(e.contains("x.yaml") && e.contains("grups"), "{e}");
    }

    #[test]
    fn shared_and_bad_key_records_are_left_out_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let sha = "ab".repeat(32);
        let file = write(
            dir.path(),
            "k.yaml",
            &format!(
                "users:\n\
                 \x20 - username: alice\n    api_keys: [{{prefix: 0123456789ab, sha256: '{sha}'}}]\n\
                 \x20 - username: bob\n    api_keys: [{{prefix: 0123456789ab, sha256: '{sha}'}}, \
                 {{prefix: bbbbbbbbbbbb, sha256: '{sha}'}}]\n\
                 \x20 - username: carol\n    api_keys: [{{prefix: cccccccccccc, sha256: nothex}}]\n"
            ),
        );
        let users = load_users(&file).unwrap();
        assert_eq!(users.excluded_api_keys, 3);
        assert_eq!(users.directory.users().len(), 3);
        assert!(users.directory.key("0123456789ab").is_none());
        assert!(users.directory.key("cccccccccccc").is_none());
        assert_eq!(users.directory.key("bbbbbbbbbbbb").unwrap().username, "bob");
    }
}
