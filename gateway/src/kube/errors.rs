//! What a Kubernetes API failure may tell someone outside the gateway. A `kube::Error`'s
//! text can carry the gateway's ServiceAccount, its RBAC, the API server's address and
//! etcd's complaints: that detail goes to the gateway's log, and callers (an MCP caller
//! whose tool needs a Secret, an unauthenticated `/readyz` reader) get one of a few short
//! reasons, each saying what to do.

/// A short, actionable reason for a failed API call.
pub fn reason(e: &kube::Error) -> &'static str {
    match e {
        kube::Error::Api(status) => by_code(status.code),
        _ => "the Kubernetes API is unreachable from the gateway; retry shortly",
    }
}

/// [`reason`] for a watch.
pub fn watch_reason(e: &kube::runtime::watcher::Error) -> &'static str {
    use kube::runtime::watcher::Error as W;
    match e {
        W::InitialListFailed(e) | W::WatchStartFailed(e) | W::WatchFailed(e) => reason(e),
        W::WatchError(status) => by_code(status.code),
        W::NoResourceVersion => "the Kubernetes API answered the watch without a resource version",
    }
}

fn by_code(code: u16) -> &'static str {
    match code {
        401 => "the Kubernetes API did not accept the gateway's ServiceAccount token",
        403 => "the gateway's ServiceAccount may not read it (check the gateway's RBAC)",
        404 => "not found",
        429 | 500.. => "the Kubernetes API is failing; retry shortly",
        _ => "the Kubernetes API refused the gateway's request",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: message.into(),
            ..Default::default()
        }))
    }

    #[test]
    fn reasons_carry_no_detail_of_the_answer() {
        let leaky = r#"secrets "api" is forbidden: User "system:serviceaccount:mcc:gw" cannot get resource"#;
        let r = reason(&api(403, leaky));
        assert!(
            r.contains("RBAC") && !r.contains("system:serviceaccount"),
            "{r}"
        );
        assert_eq!(reason(&api(404, "x")), "not found");
        assert!(reason(&api(503, "etcdserver: request timed out")).contains("retry"));
        let w = kube::runtime::watcher::Error::WatchFailed(api(401, "Unauthorized"));
        assert!(watch_reason(&w).contains("token"));
    }
}
