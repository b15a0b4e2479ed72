//! Typed errors of the settings: `ConfigError`, shared by the settings file (`config`) and the
//! `[[workers]]` tables it holds (`pool::config`); and `text_at_the_edge!`, which gives a typed
//! error its `String` form, so that `?` carries it into a function that returns a message. Other
//! domains keep their errors beside their code (each module's are named in
//! docs/architecture.md, "Where things live"); a command turns any of them into its message and
//! exit code at the edge (`cli`), the TUI into a line of its log.
//!
//! Invariant: this module uses no other module of the crate (it is of the lowest layer).

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

/// Commands and the TUI report errors as text at their edge: `String: From<E>` for each typed
/// error named, so that `?` carries one into a function that returns its message.
macro_rules! text_at_the_edge {
    ($($t:ty),+ $(,)?) => {
        $(
            impl From<$t> for String {
                fn from(e: $t) -> String {
                    e.to_string()
                }
            }
        )+
    };
}
pub(crate) use text_at_the_edge;

text_at_the_edge!(ConfigError);
