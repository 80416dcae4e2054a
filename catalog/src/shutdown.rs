//! The stop signal every MCC binary obeys: SIGTERM (how Kubernetes stops a Pod) or
//! SIGINT. One definition, so the gateway, the executor and the operator stop alike.

use std::future::Future;

/// Resolves on SIGTERM or SIGINT. The SIGTERM handler is installed by this call, not when
/// the future is first polled: a SIGTERM that arrives in between must stop the process
/// cleanly (drain), not kill it. If SIGTERM cannot be caught, the process says so and
/// stops on SIGINT only.
pub fn signal() -> impl Future<Output = ()> {
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    async move {
        let mut term = match term {
            Ok(term) => term,
            Err(e) => {
                tracing::warn!(error = %e, "cannot catch SIGTERM; stopping on SIGINT only");
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    /// The handler is installed by `signal()` itself: a SIGTERM sent before the first
    /// poll is not lost (and does not kill the test process).
    #[tokio::test]
    async fn sigterm_before_the_first_poll_resolves_the_future() {
        let stop = super::signal();
        // SAFETY: raise(3) with a valid signal number; the handler tokio installed above
        // only records it.
        assert_eq!(unsafe { libc::raise(libc::SIGTERM) }, 0);
        tokio::time::timeout(Duration::from_secs(10), stop)
            .await
            .expect("SIGTERM resolves the stop future");
    }
}
