//! atrex-tui: a terminal workbench for GPU kernel engineering.
//!
//! Modules in layers, lowest first (docs/architecture.md, "Layers"): a module uses only those
//! of its own layer or below, which `tests/layers.rs` checks.

pub mod agent;
pub mod bench_doc;
pub mod cli;
pub mod config;
pub mod contract;
pub mod cpu;
pub mod error;
pub mod export;
pub mod fingerprint;
pub mod pool;
pub mod profile;
pub mod report;
pub mod session;
pub mod standing;
pub mod suite;
pub mod tui;
pub mod utc;
pub mod worker;

#[cfg(test)]
mod testing;
