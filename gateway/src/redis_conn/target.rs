//! Where Redis is, read from one URL: a single server (`redis://`, `rediss://`), a master
//! found through Sentinel (`redis+sentinel://`), or a Redis Cluster (`redis+cluster://`),
//! each with TLS (`rediss…`) and an optional ACL user. One setting, so a Secret holding
//! the URL carries the password for every deployment.
//!
//! ```text
//! redis://[user[:password]@]host[:6379][/db]
//! redis+sentinel://[user[:password]@]s1[:26379],s2[:26379],…/MASTER-NAME[/db]
//! redis+cluster://[user[:password]@]n1[:6379],n2[:6379],…
//! ```

use mcc_catalog::Secret;

use super::{RedisSetupError, redact_url};

/// How the servers of a [`Target`] are organised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    /// One server (or a proxy in front of several).
    Single,
    /// The master that Sentinel names `master`; `hosts` are the sentinels.
    Sentinel { master: String },
    /// A Redis Cluster; `hosts` are seed nodes (the rest are discovered).
    Cluster,
}

/// A parsed Redis URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub topology: Topology,
    /// `rediss`: every connection (data nodes and sentinels) is TLS.
    pub tls: bool,
    /// `host:port` of the server, the sentinels or the seed nodes.
    pub hosts: Vec<String>,
    /// `user:password` as written (still percent-encoded), if any.
    userinfo: Option<Secret>,
    pub db: i64,
}

/// Most hosts one URL may list.
const MAX_HOSTS: usize = 64;

impl Target {
    /// Reads `url` (the value of `setting`); the message never shows a password.
    pub fn parse(setting: &'static str, url: &str) -> Result<Self, RedisSetupError> {
        let bad = |why: &str| RedisSetupError {
            setting,
            reason: format!("{}: {why}", redact_url(url)),
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("must start with redis://, rediss://, redis+sentinel://, rediss+sentinel://, redis+cluster:// or rediss+cluster://"))?;
        let (tls, kind) = match scheme {
            "redis" => (false, ""),
            "rediss" => (true, ""),
            "redis+sentinel" => (false, "sentinel"),
            "rediss+sentinel" => (true, "sentinel"),
            "redis+cluster" => (false, "cluster"),
            "rediss+cluster" => (true, "cluster"),
            _ => {
                return Err(bad(
                    "must start with redis://, rediss://, redis+sentinel://, rediss+sentinel://, redis+cluster:// or rediss+cluster://",
                ));
            }
        };
        if rest.contains('#') || rest.contains('?') {
            return Err(bad(
                "takes no #fragment or ?query (no #insecure: set session.redis_tls_ca_file to trust a private CA)",
            ));
        }
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hostlist) = match authority.rsplit_once('@') {
            Some((u, h)) => ((!u.is_empty()).then(|| Secret::from(u)), h),
            None => (None, authority),
        };
        let default_port = if kind == "sentinel" { 26379 } else { 6379 };
        let hosts: Vec<String> = hostlist
            .split(',')
            .map(|h| {
                host_port(h, default_port).ok_or_else(|| bad(&format!("'{h}' is not host[:port]")))
            })
            .collect::<Result<_, _>>()?;
        if hosts.len() > MAX_HOSTS {
            return Err(bad(&format!(
                "lists {} hosts, more than {MAX_HOSTS}",
                hosts.len()
            )));
        }
        if kind.is_empty() && hosts.len() != 1 {
            return Err(bad(
                "names one host; list several with redis+sentinel:// or redis+cluster://",
            ));
        }
        let db = |text: &str| -> Result<i64, RedisSetupError> {
            match text {
                "" => Ok(0),
                t => t
                    .parse::<i64>()
                    .ok()
                    .filter(|d| *d >= 0)
                    .ok_or_else(|| bad(&format!("'{t}' is not a database number"))),
            }
        };
        let (topology, db) = match kind {
            "sentinel" => {
                let (master, rest) = path.split_once('/').unwrap_or((path, ""));
                if master.is_empty() {
                    return Err(bad(
                        "names no master: redis+sentinel://sentinel1,sentinel2/MASTER-NAME[/db]",
                    ));
                }
                (
                    Topology::Sentinel {
                        master: master.to_string(),
                    },
                    db(rest)?,
                )
            }
            "cluster" => {
                if !matches!(path, "" | "0") {
                    return Err(bad("a Redis Cluster has only database 0"));
                }
                (Topology::Cluster, 0)
            }
            _ => (Topology::Single, db(path)?),
        };
        Ok(Self {
            topology,
            tls,
            hosts,
            userinfo,
            db,
        })
    }

    /// The URL of one data node (`host` = `host:port`) with this target's scheme,
    /// credentials and database.
    pub fn node_url(&self, host: &str) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        let user = self
            .userinfo
            .as_ref()
            .map(|u| format!("{}@", u.expose()))
            .unwrap_or_default();
        format!("{scheme}://{user}{host}/{}", self.db)
    }

    /// The URL of one sentinel: TLS as the data nodes, no credentials (sentinels are
    /// asked only where the master is).
    pub fn sentinel_url(&self, host: &str) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://{host}")
    }
}

/// `host[:port]` (IPv6 in brackets) with the port filled in.
fn host_port(text: &str, default_port: u16) -> Option<String> {
    if text.is_empty() || text.contains(char::is_whitespace) {
        return None;
    }
    let (host, port) = match text.strip_prefix('[') {
        Some(v6) => {
            let (addr, after) = v6.split_once(']')?;
            (format!("[{addr}]"), after.strip_prefix(':'))
        }
        None => match text.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (text.to_string(), None),
        },
    };
    if host.is_empty() || host.contains(['/', '@', ',']) {
        return None;
    }
    let port = match port {
        Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0)?,
        None => default_port,
    };
    Some(format!("{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_deployments() {
        let single = Target::parse("s", "rediss://u:p%40ss@h/2").unwrap();
        assert_eq!(single.topology, Topology::Single);
        assert!(single.tls);
        assert_eq!(single.node_url("h:6379"), "rediss://u:p%40ss@h:6379/2");

        let sentinel =
            Target::parse("s", "redis+sentinel://mcc:pw@s1,s2:26380,[::1]/mymaster/3").unwrap();
        assert_eq!(
            sentinel.topology,
            Topology::Sentinel {
                master: "mymaster".into()
            }
        );
        assert_eq!(sentinel.hosts, ["s1:26379", "s2:26380", "[::1]:26379"]);
        assert_eq!(sentinel.db, 3);
        assert_eq!(sentinel.node_url("m:6379"), "redis://mcc:pw@m:6379/3");
        assert_eq!(sentinel.sentinel_url("s1:26379"), "redis://s1:26379");

        let cluster = Target::parse("s", "rediss+cluster://n1:7000,n2:7001").unwrap();
        assert_eq!(cluster.topology, Topology::Cluster);
        assert_eq!(cluster.hosts, ["n1:7000", "n2:7001"]);
        assert!(format!("{sentinel:?}").contains("<redacted>"));
        assert!(!format!("{sentinel:?}").contains("pw"));
    }

    #[test]
    fn bad_urls_say_why_without_the_password() {
        for (url, why) in [
            ("http://u:secret@h", "must start with"),
            ("redis://u:secret@h1,h2", "names one host"),
            ("redis+sentinel://u:secret@s1,s2", "names no master"),
            ("redis+sentinel://u:secret@s1/m/x", "not a database number"),
            ("redis+cluster://u:secret@n1/1", "only database 0"),
            ("redis://u:secret@h:99999", "is not host[:port]"),
            ("rediss://u:secret@h/#insecure", "no #insecure"),
            ("redis+cluster://u:secret@n1,,n2", "is not host[:port]"),
        ] {
            let err = Target::parse("session.redis_url", url).unwrap_err();
            assert_eq!(err.setting, "session.redis_url");
            assert!(err.reason.contains(why), "{url}: {err}");
            assert!(!err.reason.contains("secret"), "{url}: {err}");
        }
    }
}
