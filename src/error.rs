//! Typed errors of the settings. Other domains keep theirs beside their
//! code (`suite::LoadError`, `engine::plan::PlanError`, `suite::expr::ExprError`,
//! `engine::worker::device::GpuError`); a command turns any of them into its message and exit
//! code at the edge (`cli`).

use std::path::PathBuf;

/// The settings file (config.toml) could not be used. Every message names the file, and the
/// line where there is one.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: {source}", file.display())]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
    /// TOML syntax or an unknown/mistyped key; `table` names the section (e.g. "[agent]: ").
    #[error("{file}{}: {table}{message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Parse {
        file: String,
        line: Option<usize>,
        table: &'static str,
        message: String,
    },
    #[error("{file}: {message}")]
    Invalid { file: String, message: String },
    #[error(
        "{} holds an API key but its mode is {mode:04o}; run `chmod 600 {}` (keys are only read from files private to their owner)",
        file.display(),
        file.display()
    )]
    KeyFileNotPrivate { file: PathBuf, mode: u32 },
}
