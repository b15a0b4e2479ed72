//! atrex-tui: a terminal workbench for GPU kernel engineering.

pub mod agent;
pub mod bench_doc;
pub mod cli;
pub mod config;
pub mod cpu;
pub mod engine;
pub mod error;
pub mod export;
pub mod profile;
pub mod report;
pub mod session;
pub mod standing;
pub mod suite;
pub mod tui;

#[cfg(test)]
mod testing;
