//! The gateway's integration tests as one test binary: each former `tests/<name>.rs` is a
//! module here, the shared support (`mcp_support`, `abuse_support`, `auth_support`,
//! `redis_support`, `rest_support`, `upstream_support`, `common`, and the relevance suite's
//! `eval`) is declared once, and the gateway is linked once instead of once per file.
//! All these tests run as threads of one process, in parallel: each owns its ports (bound
//! to port 0), temporary directories, Redis key prefixes and child processes.
//!
//! Run one file's tests with a filter: `cargo test -p mcc-gateway --test it rest_api::`.
//!
//! Kept as binaries of their own (`tests/<name>.rs`), because they touch state of the
//! whole process that other tests would see or disturb:
//! - `abuse_logs`: installs the global tracing subscriber (`telemetry::init_writing_to`)
//!   and reads what every span of the process writes;
//! - `otel_traces`: needs the `otel` feature (`required-features`) and its OTLP pipeline;
//! - `model_threads`: sets and removes `RAYON_NUM_THREADS`, read by the model's threads;
//! - `process_env`: `std::env::set_var` of secrets that must not reach a tool, which is
//!   the point of its tests (the executor runtime's, and `exec_env`'s and `exec_cache`'s
//!   one test each); other threads reading the environment meanwhile would race with it;
//! - `abuse_templates`: asserts on this process's peak resident memory (`VmHWM`), which
//!   every other test in the same process would raise;
//! - `relevance`: its own harness directory (`tests/relevance/`), a long evaluation.

#[path = "../relevance/eval.rs"]
#[allow(dead_code)]
mod eval;

mod abuse_support;
mod auth_support;
mod common;
mod mcp_support;
mod redis_support;
mod rest_support;
mod upstream_support;

mod abuse_concurrency;
mod abuse_connections;
mod abuse_identity;
mod abuse_injection;
mod abuse_jsonrpc;
mod abuse_metrics;
mod abuse_search;
mod abuse_session_ids;
mod abuse_sessions;
mod approval;
mod approval_shown;
mod audit_trail;
mod auth_api_key;
mod auth_jwks;
mod auth_jwt;
mod auth_middleware;
mod cancellation;
mod catalog_exclusions;
mod check_cli;
mod dev_auth_loopback;
mod embeddings;
mod exec_cache;
mod exec_env;
mod exec_fn;
mod exec_process;
mod graceful_drain;
mod http_connections;
mod http_protocol;
mod mcp_auth;
mod mcp_execute;
mod mcp_progress;
mod mcp_resources;
mod mcp_tools;
mod oauth_discovery;
mod pod_podman;
mod rate_limits;
mod redis_failover;
mod redis_ha;
mod redis_tls;
mod remote_embeddings;
mod replicas;
mod replicas_elicitation;
mod replicas_resume;
mod rest_access;
mod rest_api;
mod search_cold_start;
mod session_access;
mod session_redis_outage;
mod session_store;
mod tool_annotations;
mod upstream_everything;
mod upstream_published;
mod upstream_published_context;
mod upstream_relay;
mod upstream_relay_held;
mod upstream_stdio;
