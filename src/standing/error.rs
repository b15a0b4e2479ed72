//! Why a record could not be written to the standing, or a record's kernel not read.
//!
//! Invariant: every message names the file (or the revision) and, for a write, says that
//! nothing was recorded.

use super::format::BadFile;
use crate::suite::ReadError;
use std::path::PathBuf;

/// A record that was not written to the workspace's standing.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A kernel's source, the standing file or its lock's folder.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{bad}; it cannot be moved aside ({source}), so nothing was recorded")]
    NoBackup {
        bad: BadFile,
        source: std::io::Error,
    },
    #[error(
        "{}: another process has held the standing's lock for {secs} s; nothing was recorded",
        lock.display()
    )]
    Busy { lock: PathBuf, secs: u64 },
    #[error("{}: cannot lock ({source})", lock.display())]
    Lock {
        lock: PathBuf,
        source: std::io::Error,
    },
    #[error("{operator} v{rev} is not in the session")]
    NoRevision { operator: String, rev: u32 },
    #[error("{operator} v{rev} has no finished measurement")]
    NotMeasured { operator: String, rev: u32 },
}

/// A record's kernel (`kernel` of the record, relative to the workspace) that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum KernelReadError {
    #[error("`{0}` is not a path inside the workspace")]
    NotInWorkspace(String),
    #[error("`{0}` is not under knowledge/")]
    NotUnderKnowledge(String),
    #[error("{0}: no such template in the built-in knowledge base")]
    NoTemplate(String),
    /// `file`: the suite's path of it.
    #[error("{file}: missing")]
    Missing { file: String },
    #[error("{file}: {source}")]
    Unusable { file: String, source: ReadError },
    #[error("{kernel}: {source}")]
    Io {
        kernel: String,
        source: std::io::Error,
    },
}

crate::error::text_at_the_edge!(RecordError, KernelReadError);
