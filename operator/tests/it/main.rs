//! The operator's integration tests as one test binary: each former `tests/<name>.rs` is
//! a module here. Kept apart: `catalog_scale/` (its own harness, a release-mode benchmark
//! run with `--ignored`).

mod cli;
mod convert_roundtrip;
mod examples;
