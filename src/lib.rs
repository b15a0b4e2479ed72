//! atrex-tui: a terminal workbench for GPU kernel engineering.
//!
//! Modules in layers, lowest first (docs/architecture.md, "Layers"): a module uses only those
//! of its own layer or below, which `tests/layers.rs` checks.
//!
//! A module is public only where the binary (`cli::main`) or an integration test in tests/
//! names it; every other module is `pub(crate)`, so that code nothing calls is reported.
//! `cpu` (CPU implementations of the operators, for the tests' cross-checks) is compiled only
//! for tests: in unit tests, and with the `cpu` feature, which `cargo test` turns on.

pub mod agent;
pub(crate) mod bench_doc;
pub mod cli;
pub(crate) mod config;
pub mod contract;
#[cfg(any(test, feature = "cpu"))]
pub mod cpu;
pub(crate) mod error;
pub(crate) mod export;
pub(crate) mod fingerprint;
pub mod pool;
pub(crate) mod profile;
pub(crate) mod report;
pub mod session;
pub(crate) mod standing;
pub mod suite;
pub(crate) mod tui;
pub(crate) mod utc;
pub mod worker;

#[cfg(test)]
mod testing;
