//! The `mcc` CLI's integration tests as one test binary: each former `tests/<name>.rs` is
//! a module here, `support` (the built binary, a gateway to talk to) is declared once.
//! They run the real binaries as child processes, so sharing one test process is safe.

mod support;

mod audit;
mod install;
mod keys;
mod tool_gateway;
mod tool_local;
