//! fn introspection through the engine's runtime: importing a tool's module runs its code,
//! so in Kubernetes mode it happens in the executor container like any call, with the
//! executor's environment as the floor's source — never beside the gateway's credentials.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mcc_catalog::env::EnvSpec;
use mcc_catalog::introspect::{Introspector, RunInterpreter, RunInterpreterError};
use mcc_executor::{Ending, Request, RunError, Runtime};

/// Largest introspection report read back (the runner prints one JSON list).
const MAX_REPORT: usize = 16 * 1024 * 1024;

/// A [`RunInterpreter`] over a [`Runtime`], for the blocking threads introspection runs on.
#[derive(Debug)]
pub struct RuntimeInterpreter {
    runtime: Arc<dyn Runtime>,
    handle: tokio::runtime::Handle,
}

impl RuntimeInterpreter {
    /// Must be called inside the gateway's tokio runtime.
    pub fn new(runtime: Arc<dyn Runtime>) -> Self {
        Self {
            runtime,
            handle: tokio::runtime::Handle::current(),
        }
    }

    /// The deployment's introspector, running interpreters through `runtime`.
    pub fn introspector(runtime: Arc<dyn Runtime>, floor: &[String]) -> Introspector {
        Introspector {
            floor: floor.to_vec(),
            // Unused with a runner: the runtime's own environment is the floor's source.
            parent_env: Vec::new(),
            runner: Some(Arc::new(Self::new(runtime))),
            ..Introspector::default()
        }
    }
}

impl RuntimeInterpreter {
    /// Runs `request`, waiting up to `patience` for a runtime that cannot be reached yet:
    /// at startup the gateway may introspect before the executor container listens, and a
    /// tool must not be left out for that.
    fn run_when_reachable(
        &self,
        request: &Request,
        patience: Duration,
    ) -> Result<mcc_executor::Finished, RunError> {
        let deadline = std::time::Instant::now() + patience;
        let mut logged = false;
        loop {
            match self.handle.block_on(self.runtime.run(request)) {
                Err(RunError::Unreachable { reason, .. })
                    if std::time::Instant::now() < deadline =>
                {
                    if !logged {
                        tracing::info!(%reason, "introspection waits for the executor");
                        logged = true;
                    }
                    std::thread::sleep(Duration::from_millis(250));
                }
                result => return result,
            }
        }
    }
}

impl RunInterpreter for RuntimeInterpreter {
    fn run(
        &self,
        python: &str,
        args: &[&str],
        cwd: Option<&Path>,
        env: EnvSpec,
        timeout: Duration,
    ) -> Result<Vec<u8>, RunInterpreterError> {
        let request = Request {
            program: python.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env,
            cwd: cwd.map(Path::to_path_buf),
            stdin: None,
            rlimits: Default::default(),
            timeout: Some(timeout),
            max_output: MAX_REPORT,
        };
        let finished = self
            .run_when_reachable(&request, timeout)
            .map_err(|e| match e {
                RunError::NotFound { .. } => RunInterpreterError::NoInterpreter,
                RunError::Cwd { path } => RunInterpreterError::Cwd(path),
                e => RunInterpreterError::Failed(e.to_string()),
            })?;
        let stderr = || {
            String::from_utf8_lossy(&finished.stderr.bytes)
                .trim()
                .to_string()
        };
        match finished.ending {
            Ending::Exited(0) if !finished.stdout.truncated() => Ok(finished.stdout.bytes),
            Ending::Exited(0) => Err(RunInterpreterError::Failed(format!(
                "the report exceeds {MAX_REPORT} bytes"
            ))),
            Ending::TimedOut => Err(RunInterpreterError::Failed(format!(
                "timed out after {}s",
                timeout.as_secs_f64()
            ))),
            _ => Err(RunInterpreterError::Failed(stderr())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcc_catalog::introspect::Pending;
    use mcc_executor::InProcess;

    /// The module imports only where `ONLY_IN_RUNTIME` is set: in the runtime's own
    /// environment, not the gateway's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn introspection_runs_in_the_runtime_with_its_environment() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("needs_runtime.py"),
            "import os\nassert os.environ['ONLY_IN_RUNTIME'] == 'yes'\n\
             def shout(text: str) -> str:\n    \"\"\"Shout.\"\"\"\n    return text.upper()\n",
        )
        .unwrap();
        let tool: mcc_catalog::Tool = serde_json::from_value(serde_json::json!({
            "key": "t.shout", "name": "shout", "kind": "fn", "path": "needs_runtime:shout",
            "cwd": dir.path(), "env_passthrough": ["ONLY_IN_RUNTIME"]
        }))
        .unwrap();
        let path = std::env::var("PATH").unwrap_or_default();
        let runtime = Arc::new(InProcess::new(vec![
            ("PATH".into(), path.clone()),
            ("ONLY_IN_RUNTIME".into(), "yes".into()),
        ]));
        let floor = vec!["PATH".to_string()];
        let pending = [Pending {
            index: 0,
            name_from_callable: false,
        }];

        let through_runtime = RuntimeInterpreter::introspector(runtime, &floor);
        let mut tools = vec![tool.clone()];
        let failures = tokio::task::spawn_blocking(move || {
            let failures = through_runtime.fill_each(&mut tools, &pending);
            (failures, tools)
        })
        .await
        .unwrap();
        assert!(failures.0.is_empty(), "{:?}", failures.0);
        assert_eq!(failures.1[0].description, "Shout.");

        let here = Introspector {
            floor,
            parent_env: vec![("PATH".into(), path)],
            ..Introspector::default()
        };
        let mut tools = vec![tool];
        let failures = tokio::task::spawn_blocking(move || here.fill_each(&mut tools, &pending))
            .await
            .unwrap();
        assert_eq!(
            failures.len(),
            1,
            "without the runtime's variable the import fails"
        );
    }
}

#[cfg(test)]
mod waiting {
    use super::*;
    use mcc_catalog::introspect::Pending;
    use mcc_executor::{Address, ExecutorClient, InProcess, server};

    /// At startup the gateway may introspect before the executor listens: the tool waits
    /// for it instead of being left out.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn introspection_waits_for_an_executor_that_is_starting() {
        let dir = tempfile::tempdir().unwrap();
        let socket = Address::Path(dir.path().join("executor.sock"));
        let tool: mcc_catalog::Tool = serde_json::from_value(serde_json::json!({
            "key": "t.capwords", "name": "capwords", "kind": "fn", "path": "string:capwords"
        }))
        .unwrap();
        let runtime = Arc::new(ExecutorClient::new(socket.clone()));
        let introspector = RuntimeInterpreter::introspector(runtime, &["PATH".to_string()]);
        let late = socket.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(700)).await;
            let listener = server::bind(&late).unwrap();
            let env = vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())];
            server::serve(listener, InProcess::new(env), 4).await;
        });
        let pending = [Pending {
            index: 0,
            name_from_callable: false,
        }];
        let (failures, tools) = tokio::task::spawn_blocking(move || {
            let mut tools = vec![tool];
            (introspector.fill_each(&mut tools, &pending), tools)
        })
        .await
        .unwrap();
        assert!(failures.is_empty(), "{failures:?}");
        assert!(!tools[0].params.is_empty(), "introspected: {:?}", tools[0]);
    }
}
