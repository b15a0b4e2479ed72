//! atrex-tui: a terminal workbench for GPU kernel engineering.

pub mod agent;
pub mod bench;
pub mod cli;
pub mod cpu;
pub mod doctor;
pub mod engine;
pub mod expr;
pub mod hardware;
pub mod import;
pub mod measure;
pub mod profile;
pub mod roofline;
pub mod session;
pub mod suite;
pub mod tui;
