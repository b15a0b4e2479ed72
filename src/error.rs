//! Typed errors of the settings and of session files. Other domains keep theirs beside their
//! code (`suite::LoadError`, `contract::plan::PlanError`, `suite::expr::ExprError`,
//! `worker::device::GpuError`); a command turns any of them into its message and exit
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

/// A session file could not be read, continued or written. Every message names the file (and
/// the line where there is one) and says whether anything was changed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{}: {source}", file.display())]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    /// A line that is not a valid event (before the last line, which is skipped instead).
    #[error("{file}:{line}: {message}")]
    Line {
        file: String,
        line: usize,
        message: String,
    },
    #[error(
        "{file}:{line}: written by a newer atrex-tui (session format {version}; this build reads up to {}): update atrex-tui to open or continue it; the file was not changed",
        crate::session::FORMAT_VERSION
    )]
    Newer {
        file: String,
        line: usize,
        version: u64,
    },
    #[error(
        "{file}: written by a newer atrex-tui (session format {version}; this build writes {}): update atrex-tui to continue it; the file was not changed",
        crate::session::FORMAT_VERSION
    )]
    NewerToContinue { file: String, version: u64 },
    #[error(
        "{file}: not an atrex-tui session ({why}); nothing was changed. A session file starts with a `run_start` event (docs/session-format.md)"
    )]
    NotASession { file: String, why: String },
    /// Another writer holds the session's lock (`session::lock`).
    #[error(
        "session {file} is being written by {holder}; nothing was changed; open it read-only with `atrex-tui replay {file}`"
    )]
    Locked { file: String, holder: String },
    #[error("{file}: {message}")]
    Other { file: String, message: String },
}

/// Commands and the TUI report errors as text at their edge.
impl From<SessionError> for String {
    fn from(e: SessionError) -> String {
        e.to_string()
    }
}

impl From<ConfigError> for String {
    fn from(e: ConfigError) -> String {
        e.to_string()
    }
}

impl From<crate::suite::LoadError> for String {
    fn from(e: crate::suite::LoadError) -> String {
        e.to_string()
    }
}
