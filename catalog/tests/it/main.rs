//! The catalog's integration tests as one test binary: each former `tests/<name>.rs` is a
//! module here, run as threads of one process.
//!
//! Kept as binaries of their own, because they change the whole test process:
//! - `loader`: `std::env::set_var` of the variable its load-time substitution reads,
//!   which no other thread may read or change meanwhile;
//! - `examples`: moves the process's working directory to the repository root (the
//!   loader resolves a tool's relative `cwd` against it, as the gateway does).

mod introspection;
mod properties;
mod reference_files;
mod template_escape;
mod upstream_files;
