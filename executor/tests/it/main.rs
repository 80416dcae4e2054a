//! The executor's integration tests as one test binary: each former `tests/<name>.rs` is
//! a module here, `common` is declared once.
//!
//! Kept as binaries of their own, because they change the whole test process:
//! - `reaper`: makes the process a child subreaper (`PR_SET_CHILD_SUBREAPER`), so every
//!   orphan of every test would be its child;
//! - `socket`: `std::env::set_var` of a secret that must not reach a tool.

mod common;

mod boundary;
mod drain;
mod process_runs;
mod session;
