//! Shared helpers for integration tests.
#![allow(dead_code, reason = "each test binary uses some of these helpers")]

use std::path::PathBuf;

/// The atrex-tui binary: the one cargo built, or (where tests run from staged executables
/// without the build tree) the one on PATH.
pub fn exe() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_atrex-tui"));
    if built.is_file() {
        return built;
    }
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            let p = d.join("atrex-tui");
            if p.is_file() {
                return p;
            }
        }
    }
    built
}

pub mod baselines;
pub mod daemons;
pub mod slurm;
pub mod sshd;
pub mod standins;
