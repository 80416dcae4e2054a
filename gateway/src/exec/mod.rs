//! The execution engine: runs exec, fn and curl tools as local processes, through the
//! deployment's [`Runtime`] (in-process in file mode, the executor container's socket in
//! Kubernetes mode), or each in its own Pod through a [`pod::PodRunner`] for a
//! `runtime: pod` Tool: one engine, the spawn is the only step that differs.
//!
//! [`Engine::execute`] takes a [`Call`]: the tool, its validated params (see
//! [`mcc_catalog::params::validate`]), the assembled context (see
//! [`mcc_catalog::context::assemble`]) and the caller's username. It returns an
//! [`Execution`]: the [`Outcome`] (success value or failure triple), the context an fn
//! tool left behind (for write-back) and whether it came from the cache.
//!
//! What goes in and comes out is [`call`]'s ([`Call`], [`Execution`], [`ExecError`]) and
//! [`outcome`]'s ([`Outcome`]), so what the engine calls (the upstream proxy) reads them
//! without reaching back into the engine.
//!
//! One module per step: [`params`] (guard) → [`cache`] (lookup) → [`environment`] →
//! [`command`] / [`python`] → the runtime ([`mcc_executor`]: process, rlimits) →
//! [`result`] (with [`limits`] texts) → [`transform`] → [`cache`] (store). The call's
//! audit event is the caller's (`audit`): it knows who called and why a call
//! was refused before it got here.
//!
//! An upstream MCP server's tool ([`ToolKind::Mcp`]) runs no process: after the same
//! guard and cache lookup, [`crate::upstream::Upstreams::call`] proxies `tools/call`, and
//! the reply comes back verbatim in [`Execution::upstream`].

pub mod cache;
pub mod call;
pub mod command;
pub mod concurrency;
pub mod environment;
pub mod introspect;
pub mod limiter;
pub mod limits;
pub mod outcome;
pub mod params;
pub mod pod;
pub mod python;
pub mod render;
pub mod result;
pub mod settings;
pub mod transform;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use mcc_catalog::introspect::runner_args;
use mcc_catalog::{Tool, ToolKind};
pub use mcc_executor::process;
use mcc_executor::{Request, RunError};

use crate::upstream::Upstreams;

pub use cache::{CacheError, ResultCache};
pub use call::{Call, ExecError, Execution};
pub use command::Part;
pub use limiter::{Busy, Limiter, LimiterSettings};
pub use limits::LimitError;
pub use outcome::Outcome;
pub use result::TRUNCATION_MARKER;
pub use settings::EngineSettings;

use command::{SHELL, shell_args};
use environment::ProcessEnv;
use limits::Rlimits;
use process::Finished;

/// Runs tools. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Engine {
    settings: Arc<EngineSettings>,
    renderer: render::Renderer,
    cache: ResultCache,
    resolver: Option<Resolver>,
    pods: Option<pod::Runner>,
    limiter: Arc<Limiter>,
    upstreams: Option<Upstreams>,
}

/// The engine's [`environment::EnvResolver`], shown by name in `Debug`.
#[derive(Clone)]
struct Resolver(Arc<dyn environment::EnvResolver>);

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnvResolver")
    }
}

/// What is settled before a process starts: limits, the rendered transform, the
/// environment (what the runtime inherits and sets).
struct Prepared {
    rlimits: Rlimits,
    timeout: Option<Duration>,
    transform_line: Option<String>,
    env: ProcessEnv,
}

/// A finished process, its outcome and the context it left behind.
type ProcessResult = (Finished, Outcome, Option<Map<String, Value>>);

/// What running a tool (not a cache hit) produced.
struct Ran {
    execution: Execution,
}

impl Engine {
    /// An engine with an in-memory result cache.
    pub fn new(settings: EngineSettings) -> Self {
        Self {
            settings: Arc::new(settings),
            renderer: render::Renderer::in_process(),
            cache: ResultCache::memory(),
            resolver: None,
            pods: None,
            limiter: Arc::new(Limiter::unbounded()),
            upstreams: None,
        }
    }

    /// The same engine calling upstream MCP servers' tools through `upstreams`; without
    /// them, such a tool is refused as not configured.
    pub fn with_upstreams(mut self, upstreams: Upstreams) -> Self {
        self.upstreams = Some(upstreams);
        self
    }

    /// The same engine admitting executions through `limiter` (without one: no limit).
    pub fn with_limiter(mut self, limiter: Limiter) -> Self {
        self.limiter = Arc::new(limiter);
        self
    }

    /// The same engine rendering templates with `renderer` (without one: in this process).
    pub fn with_renderer(mut self, renderer: render::Renderer) -> Self {
        self.renderer = renderer;
        self
    }

    /// The concurrency limiter every runtime's executions go through.
    pub fn limiter(&self) -> &Limiter {
        &self.limiter
    }

    /// The same engine resolving Kubernetes references (`envFrom`, `valueFrom`) with
    /// `resolver`; without one, a tool with references is refused with a clear error.
    pub fn with_env_resolver(mut self, resolver: Arc<dyn environment::EnvResolver>) -> Self {
        self.resolver = Some(Resolver(resolver));
        self
    }

    /// The same engine running `runtime: pod` tools through `runner`; without one, such a
    /// tool is refused with a clear error ([`ExecError::PodRuntime`]).
    pub fn with_pod_runner(mut self, runner: Arc<dyn pod::PodRunner>) -> Self {
        self.pods = Some(pod::Runner(runner));
        self
    }

    /// The same engine with another result cache (e.g. [`ResultCache::redis`]).
    pub fn with_cache(mut self, cache: ResultCache) -> Self {
        self.cache = cache;
        self
    }

    pub fn settings(&self) -> &EngineSettings {
        &self.settings
    }

    /// `Err(reason)` when the runtime cannot run tools now (the executor is unreachable).
    pub async fn check_runtime(&self) -> Result<(), String> {
        self.settings.runtime.check().await
    }

    /// Runs one call to completion. Dropping the future kills the tool's process group.
    pub async fn execute(&self, call: Call<'_>) -> Result<Execution, ExecError> {
        self.cached_or_run(&call).await
    }

    async fn cached_or_run(&self, call: &Call<'_>) -> Result<Execution, ExecError> {
        params::check(call.tool, &call.params)?;
        let ttl = call.tool.cache_ttl.filter(|&s| s > 0);
        let key = ttl.map(|_| {
            self.cache
                .key(call.tool, call.caller, &call.params, &call.context)
        });
        if let Some(value) = self.cache_lookup(key.as_deref()).await {
            let upstream = call
                .tool
                .kind
                .is_upstream()
                .then(|| crate::upstream::UpstreamReply::from_cached(&value))
                .flatten();
            return Ok(Execution {
                outcome: upstream
                    .as_ref()
                    .map_or(Outcome::Success(value), |r| r.outcome()),
                upstream,
                write_back: None,
                cached: true,
            });
        }
        let ran = self.run(call).await?;
        if let (Some(key), Some(ttl), Outcome::Success(value)) = (&key, ttl, &ran.execution.outcome)
        {
            let value = match &ran.execution.upstream {
                Some(reply) => &reply.to_cached(),
                None => value,
            };
            self.cache_store(key, value, Duration::from_secs(ttl)).await;
        }
        Ok(ran.execution)
    }

    /// A cache failure never fails a call: it is logged and the tool runs uncached.
    async fn cache_lookup(&self, key: Option<&str>) -> Option<Value> {
        match self.cache.get(key?).await {
            Ok(hit) => hit,
            Err(e) => {
                tracing::warn!(error = %e, "result cache lookup failed; running the tool");
                None
            }
        }
    }

    async fn cache_store(&self, key: &str, value: &Value, ttl: Duration) {
        if let Err(e) = self.cache.put(key, value, ttl).await {
            tracing::warn!(error = %e, "result cache store failed");
        }
    }

    /// Runs the tool (everything that can fail is checked before a process exists),
    /// shapes its result and applies the transform.
    async fn run(&self, call: &Call<'_>) -> Result<Ran, ExecError> {
        let tool = call.tool;
        if let ToolKind::Mcp {
            server, tool: name, ..
        } = &tool.kind
        {
            return self.run_upstream(call, server, name).await;
        }
        let in_pod = pod::spec_of(call).is_some();
        if in_pod && self.pods.is_none() {
            return Err(ExecError::PodRuntime {
                tool: tool.key.clone(),
            });
        }
        // Held until the result (and its transform) is complete.
        let _permit = self
            .limiter
            .acquire_for(call.caller, &tool.key, in_pod)
            .await
            .map_err(|source| ExecError::Busy {
                tool: tool.key.clone(),
                source,
            })?;
        let referenced = self.referenced_env(call).await?;
        let prepared = self.prepare(call, &referenced).await?;
        let (_finished, outcome, write_back) = match &tool.kind {
            ToolKind::Exec { command } | ToolKind::Curl { command, .. } => {
                self.run_shell(call, command, &prepared).await?
            }
            ToolKind::Fn { path, python } => {
                self.run_fn(call, path, python.as_deref(), &prepared)
                    .await?
            }
            ToolKind::Mcp { .. } => unreachable!("upstream tools returned above"),
        };
        let outcome = self.transform(call, outcome, &prepared).await?;
        Ok(Ran {
            execution: Execution {
                outcome,
                upstream: None,
                write_back,
                cached: false,
            },
        })
    }

    /// An upstream MCP server's tool: `tools/call` with the validated params, within the
    /// tool's timeout (else the deployment's default, never above its maximum).
    async fn run_upstream(
        &self,
        call: &Call<'_>,
        server: &str,
        name: &str,
    ) -> Result<Ran, ExecError> {
        let tool = call.tool.key.clone();
        let timeout = self
            .timeout(call.tool)
            .map_err(|source| ExecError::Limits {
                tool: tool.clone(),
                source,
            })?;
        let Some(upstreams) = &self.upstreams else {
            return Err(ExecError::Upstream {
                tool,
                source: crate::upstream::UpstreamError::Unknown {
                    server: server.into(),
                },
            });
        };
        let reply = upstreams
            .call_with_context(
                server,
                name,
                call.params.clone(),
                Some(&call.context),
                timeout,
            )
            .await
            .map_err(|source| ExecError::Upstream { tool, source })?;
        Ok(Ran {
            execution: Execution {
                outcome: reply.outcome(),
                upstream: Some(reply),
                write_back: None,
                cached: false,
            },
        })
    }

    /// Answers the question an upstream asked a held call of `tool` (`at`, from the
    /// caller's ticket) and returns what follows ([`crate::upstream::Upstreams::resume`]);
    /// never starts a call, never reads or fills the result cache (the result depends on
    /// the answer).
    pub async fn resume_upstream(
        &self,
        tool: &mcc_catalog::Tool,
        at: &crate::upstream::held::HeldRef,
        answer: rmcp::model::ElicitResult,
    ) -> Result<crate::upstream::UpstreamReply, ExecError> {
        let key = tool.key.clone();
        let (ToolKind::Mcp { server, .. }, Some(upstreams)) = (&tool.kind, &self.upstreams) else {
            return Err(ExecError::Upstream {
                tool: key.clone(),
                source: crate::upstream::UpstreamError::QuestionClosed { server: key },
            });
        };
        let timeout = self.timeout(tool).map_err(|source| ExecError::Limits {
            tool: key.clone(),
            source,
        })?;
        upstreams
            .resume(server, at, answer, timeout)
            .await
            .map_err(|source| ExecError::Upstream { tool: key, source })
    }

    /// Fetches the values of the tool's Kubernetes references, per call (the resolver
    /// caches briefly), so a rotated Secret takes effect without a catalog change. A pod
    /// tool's references are the Pod spec's: their values never pass through the gateway.
    async fn referenced_env(
        &self,
        call: &Call<'_>,
    ) -> Result<environment::ReferencedEnv, ExecError> {
        let Some(refs) = call
            .refs
            .filter(|r| !r.env_from.is_empty() || !r.env_value_from.is_empty())
        else {
            return Ok(Default::default());
        };
        if refs.pod.is_some() {
            return Ok(Default::default());
        }
        let tool = call.tool.key.clone();
        let Some(resolver) = &self.resolver else {
            return Err(ExecError::EnvRefs {
                tool,
                reason: "this gateway has no Kubernetes API access to resolve envFrom/valueFrom"
                    .into(),
            });
        };
        resolver
            .0
            .resolve(refs)
            .await
            .map_err(|reason| ExecError::EnvRefs { tool, reason })
    }

    async fn prepare(
        &self,
        call: &Call<'_>,
        referenced: &environment::ReferencedEnv,
    ) -> Result<Prepared, ExecError> {
        let tool = call.tool;
        let limit_err = |source| ExecError::Limits {
            tool: tool.key.clone(),
            source,
        };
        let transform_line = match &tool.transform {
            Some(t) => Some(self.render(tool, Part::Transform, t, &call.params).await?),
            None => None,
        };
        Ok(Prepared {
            rlimits: Rlimits::from_limits(&tool.limits).map_err(limit_err)?,
            timeout: self.timeout(tool).map_err(limit_err)?,
            transform_line,
            env: environment::for_tool(tool, &self.settings, referenced, &call.context)?,
        })
    }

    /// exec and curl tools: the rendered command line under `/bin/sh -c`.
    async fn run_shell(
        &self,
        call: &Call<'_>,
        command: &str,
        prepared: &Prepared,
    ) -> Result<ProcessResult, ExecError> {
        let tool = call.tool;
        let line = self
            .render(tool, Part::Command, command, &call.params)
            .await?;
        // Python's json.dumps form, byte for byte what MCC's tools read.
        let stdin = tool
            .stdin
            .then(|| mcc_catalog::pyfmt::json_dumps(&Value::Object(call.params.clone())));
        let request = self.request(SHELL, &shell_args(&line), prepared, stdin);
        let finished = self.spawn(call, &request).await?;
        let max = self.settings.max_output_bytes;
        let outcome = result::shell_outcome(&finished, &tool.limits, prepared.timeout, max);
        Ok((finished, outcome, None))
    }

    /// fn tools: the interpreter runs the catalog's runner, params on stdin.
    async fn run_fn(
        &self,
        call: &Call<'_>,
        path: &str,
        python: Option<&str>,
        prepared: &Prepared,
    ) -> Result<ProcessResult, ExecError> {
        let tool = call.tool;
        let program = python.unwrap_or(mcc_catalog::introspect::DEFAULT_PYTHON);
        let args = runner_args("exec", [path]);
        let stdin = Value::Object(call.params.clone()).to_string();
        let request = self.request(program, &args, prepared, Some(stdin));
        let finished = self.spawn(call, &request).await.map_err(|e| match e {
            ExecError::Runtime {
                tool,
                source: RunError::NotFound { program },
            } => ExecError::NoInterpreter {
                tool,
                python: program,
            },
            e => e,
        })?;
        let max = self.settings.max_output_bytes;
        let (outcome, write_back) =
            python::outcome(&finished, tool, prepared.timeout, max, self.settings.debug)?;
        Ok((finished, outcome, write_back))
    }

    /// A successful result goes through the tool's transform, if it has one.
    async fn transform(
        &self,
        call: &Call<'_>,
        outcome: Outcome,
        prepared: &Prepared,
    ) -> Result<Outcome, ExecError> {
        let tool = call.tool;
        let (Outcome::Success(value), Some(line)) = (&outcome, &prepared.transform_line) else {
            return Ok(outcome);
        };
        let max = self.settings.max_output_bytes;
        let input = transform::input(tool, value);
        let request = self.request(SHELL, &shell_args(line), prepared, Some(input));
        // A pod tool's transform runs in a Pod of its own too, never in the executor.
        let done = self.spawn(call, &request).await?;
        Ok(result::shell_outcome(
            &done,
            &tool.limits,
            prepared.timeout,
            max,
        ))
    }

    /// The tool's timeout, else the deployment's default, never above its maximum.
    fn timeout(&self, tool: &Tool) -> Result<Option<Duration>, LimitError> {
        let declared = limits::timeout(&tool.limits)?;
        let timeout = declared.or(self.settings.default_timeout);
        Ok(match (timeout, self.settings.max_timeout) {
            (Some(t), Some(max)) => Some(t.min(max)),
            (None, max) => max,
            (t, None) => t,
        })
    }

    async fn render(
        &self,
        tool: &Tool,
        part: Part,
        source: &str,
        params: &Map<String, Value>,
    ) -> Result<String, ExecError> {
        command::render(&self.renderer, tool, part, source, params).await
    }

    fn request(
        &self,
        program: &str,
        args: &[&str],
        prepared: &Prepared,
        stdin: Option<String>,
    ) -> Request {
        Request {
            program: program.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: prepared.env.spec.clone(),
            cwd: prepared.env.cwd.clone(),
            stdin: stdin.map(String::into_bytes),
            rlimits: prepared.rlimits,
            timeout: prepared.timeout,
            max_output: self.settings.max_output_bytes,
        }
    }

    /// Runs `request` where the call's tool runs: its own Pod, or the local runtime. One
    /// `run` span per process (the tool's, a transform's).
    #[tracing::instrument(
        name = "run",
        target = "mcc_trace",
        skip_all,
        fields(
            mcc.tool = %call.tool.key,
            mcc.runtime = match pod::spec_of(call) {
                Some(_) => "pod",
                None => self.settings.runtime.kind(),
            },
            mcc.exit_code = tracing::field::Empty,
            mcc.outcome = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        )
    )]
    async fn spawn(&self, call: &Call<'_>, request: &Request) -> Result<Finished, ExecError> {
        let tool = call.tool.key.clone();
        let ran = match (pod::target(call), &self.pods) {
            (Some(target), Some(runner)) => runner.0.run(target, request).await,
            (Some(_), None) => return Err(ExecError::PodRuntime { tool }),
            (None, _) => self.settings.runtime.run(request).await,
        };
        crate::telemetry::spans::record_run(&ran);
        ran.map_err(|source| match source {
            RunError::Cwd { path } => ExecError::Cwd { tool, path },
            RunError::Spawn { program, reason } => ExecError::Spawn {
                tool,
                program,
                reason,
            },
            source => ExecError::Runtime { tool, source },
        })
    }
}
