//! Typed errors of session files: reading, continuing and writing them (`store`, `timeline`)
//! and their writer's lock (`lock`).
//!
//! Invariant: every message names the file (and the line where there is one) and says whether
//! anything was changed.

use std::path::PathBuf;

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
        super::FORMAT_VERSION
    )]
    Newer {
        file: String,
        line: usize,
        version: u64,
    },
    #[error(
        "{file}: written by a newer atrex-tui (session format {version}; this build writes {}): update atrex-tui to continue it; the file was not changed",
        super::FORMAT_VERSION
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

crate::error::text_at_the_edge!(SessionError);
