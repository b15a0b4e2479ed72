//! One writer per session file. Whoever appends to a session (the TUI, `measure --session`,
//! `agent --session`) first takes an exclusive advisory lock on `FILE.lock` beside it and holds
//! it for its whole life; a second writer is refused, naming the holder.
//!
//! Invariants:
//! - The lock is `File::try_lock` on the lock file: the operating system releases it when the
//!   handle drops or the process dies, so the lock of a dead process never blocks anyone (the
//!   file itself stays, and only a held lock counts).
//! - The holder writes one line into the lock file after taking the lock: its command, pid,
//!   host and the time it took the lock. A refused writer reads that line to name the holder;
//!   the line is never used to decide anything.
//! - Two handles of one process conflict like two processes: a process takes a session's lock
//!   once and passes it to the writer it opens.

use super::error::SessionError;
use super::store::now;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file beside a session file: `sessions/s.jsonl.lock`.
pub fn lock_path(session: &Path) -> PathBuf {
    let name = session
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    session.with_file_name(format!("{name}.lock"))
}

/// The held lock of one session file (released when dropped).
#[derive(Debug)]
pub struct SessionLock {
    _file: File,
    path: PathBuf,
}

impl SessionLock {
    /// Takes the lock of `session` for this process, or refuses naming who holds it. Never
    /// waits: a writer of a session holds it for as long as it runs.
    pub fn take(session: &Path) -> Result<SessionLock, SessionError> {
        let path = lock_path(session);
        let io = |source| SessionError::Io {
            file: path.clone(),
            source,
        };
        if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(d).map_err(|source| SessionError::Io {
                file: d.to_path_buf(),
                source,
            })?;
        }
        let mut f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io)?;
        match f.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = f.read_to_string(&mut text);
                let holder = text.lines().next().map(str::trim).unwrap_or_default();
                return Err(SessionError::Locked {
                    file: session.display().to_string(),
                    holder: if holder.is_empty() {
                        "another process".into()
                    } else {
                        holder.to_string()
                    },
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        f.set_len(0).map_err(io)?;
        f.rewind().map_err(io)?;
        f.write_all(format!("{}\n", holder_line()).as_bytes())
            .map_err(io)?;
        f.flush().map_err(io)?;
        Ok(SessionLock { _file: f, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// `atrex-tui measure (pid N on HOST) since YYYY-MM-DD hh:mm:ss UTC`.
fn holder_line() -> String {
    let mut args = std::env::args();
    let program = args
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
        })
        .unwrap_or_else(|| "atrex-tui".into());
    let command = match args.next() {
        Some(sub) if !sub.starts_with('-') && !sub.contains(['/', '.']) => {
            format!("{program} {sub}")
        }
        _ => program,
    };
    format!(
        "{command} (pid {} on {}) since {} UTC",
        std::process::id(),
        host(),
        crate::utc::at(now() as i64)
    )
}

/// This machine's name, or `an unknown host`.
fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "an unknown host".into())
}
