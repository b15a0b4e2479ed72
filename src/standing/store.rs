//! Where the standing lives and how it is written: `standing/KEY.json` in the workspace (one file
//! per hardware profile) and the incumbents' sources in `kernels/OP/incumbent-HASH.cu`. Every
//! write is atomic (a temporary file beside the target, flushed, then renamed over it): a crash
//! mid-write leaves the previous file whole. A file that cannot be used is moved aside to a
//! backup before a new one takes its place.

use super::error::{KernelReadError, RecordError};
use super::format::{self, BadFile, Record, StandingFile};
use crate::suite::{SuiteSource, Workspace};
use std::io::Write;
use std::path::{Component, Path, PathBuf};

/// The workspace's folder of standing files.
pub fn dir(ws: &Path) -> PathBuf {
    ws.join("standing")
}

/// The file name part of a hardware profile: its base key (`H200@calibrated` → `H200`), with
/// anything but letters, digits, `-` and `_` replaced.
pub fn file_key(hardware: &str) -> String {
    hardware
        .split('@')
        .next()
        .unwrap_or(hardware)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The workspace's standing file of a hardware profile.
pub fn file_for(ws: &Path, hardware: &str) -> PathBuf {
    dir(ws).join(format!("{}.json", file_key(hardware)))
}

/// Where an incumbent's source is kept in the workspace (relative to it): content-addressed, so
/// a new incumbent never overwrites a file an older record names.
pub fn kernel_path(op: &str, source: &str) -> String {
    format!(
        "kernels/{op}/incumbent-{}.cu",
        &crate::fingerprint::of_source(source)[..12]
    )
}

/// Where the knowledge base's templates are named from: a record whose kernel starts so is read
/// from the templates built into the binary (the shipped standing's best kernels).
pub const TEMPLATES: &str = "knowledge/templates/";

/// The source of a template of the built-in knowledge base, by its path
/// (`knowledge/templates/NAME.cu`).
pub fn template_source(rel: &str) -> Result<String, KernelReadError> {
    let inner = rel
        .strip_prefix("knowledge/")
        .ok_or_else(|| KernelReadError::NotUnderKnowledge(rel.to_string()))?;
    crate::suite::EMBEDDED_KNOWLEDGE
        .get_file(inner)
        .and_then(|f| f.contents_utf8())
        .map(str::to_string)
        .ok_or_else(|| KernelReadError::NoTemplate(rel.to_string()))
}

/// Reads a record's kernel: `problems/…` through the suite (the workspace's problems/ or the
/// built-in copy), `knowledge/templates/…` from the built-in knowledge base, anything else
/// relative to the workspace. Paths that leave the workspace are refused.
pub fn read_kernel(ws: &Path, suite: &SuiteSource, rel: &str) -> Result<String, KernelReadError> {
    let p = Path::new(rel);
    if p.is_absolute()
        || p.components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(KernelReadError::NotInWorkspace(rel.to_string()));
    }
    if rel.starts_with(TEMPLATES) {
        return template_source(rel);
    }
    if let Some(inner) = rel.strip_prefix("problems/") {
        let file = suite.display_path(inner);
        return match suite.read_checked(inner) {
            Ok(Some(t)) => Ok(t),
            Ok(None) => Err(KernelReadError::Missing { file }),
            Err(source) => Err(KernelReadError::Unusable { file, source }),
        };
    }
    std::fs::read_to_string(ws.join(rel)).map_err(|source| KernelReadError::Io {
        kernel: rel.to_string(),
        source,
    })
}

/// Writes a file atomically: a temporary file in the same folder, flushed to disk, renamed over
/// the target, the folder flushed. Until the rename the previous file is untouched.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let tmp = parent.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    #[cfg(unix)]
    if let Ok(d) = std::fs::File::open(parent) {
        // The rename is durable once the folder is; a failure here loses nothing written.
        let _ = d.sync_all();
    }
    remove_old_leftovers(parent, &name);
    Ok(())
}

/// Removes temporary files of earlier writes of `name` that a crash left behind (an hour old or
/// more, so a write in progress elsewhere is never disturbed).
fn remove_old_leftovers(parent: &Path, name: &str) {
    let prefix = format!(".{name}.");
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().to_string();
        if !(n.starts_with(&prefix) && n.ends_with(".tmp")) {
            continue;
        }
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age.as_secs() >= 3600);
        if old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Moves a file aside to `NAME.bad-YYYYMMDD-hhmmss` (a number added if that exists); returns the
/// backup's path.
pub fn backup(path: &Path) -> std::io::Result<PathBuf> {
    let stamp: String = crate::utc::now()
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let mut to = path.with_file_name(format!("{name}.bad-{stamp}"));
    let mut n = 1;
    while to.exists() {
        to = path.with_file_name(format!("{name}.bad-{stamp}-{n}"));
        n += 1;
    }
    std::fs::rename(path, &to)?;
    Ok(to)
}

/// Reads the workspace's standing file of a hardware profile, converted to this build's format
/// (`format::upgrade`, which reads the kernels through `source`): Ok(None) when there is none,
/// Err when it cannot be used (reported with its path; the caller ignores it).
pub fn load(
    ws: &Path,
    source: &SuiteSource,
    suite: &str,
    hardware: &str,
) -> Result<Option<StandingFile>, BadFile> {
    let path = &file_for(ws, hardware);
    let text = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(BadFile {
                path: path.to_path_buf(),
                defect: format::Defect::Corrupt(e.to_string()),
            });
        }
    };
    let text = String::from_utf8(text).map_err(|_| BadFile {
        path: path.to_path_buf(),
        defect: format::Defect::Corrupt("not UTF-8 text".into()),
    })?;
    let mut file = format::parse(path, &text, suite, Some(&file_key(hardware)))?;
    format::upgrade(&mut file, |rel| read_kernel(ws, source, rel).ok());
    Ok(Some(file))
}

/// A record to write, with the kernel source it names.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub op: String,
    pub record: Record,
    pub source: String,
}

/// What a write did.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub file: PathBuf,
    /// Where an unusable file that was in the way went.
    pub backup: Option<(PathBuf, String)>,
}

/// Records incumbents in the workspace's standing of a hardware profile: their sources first
/// (each an atomic write of its own), then the standing file (read again just before, so that
/// records written meanwhile by another command are kept), in one atomic write. An unusable file
/// in the way is moved to a backup first.
pub fn record(
    ws: &Workspace,
    suite: &str,
    hardware: &str,
    updates: &[Update],
) -> Result<Written, RecordError> {
    // Writers record one after the other: each reads the file, adds its operators and writes it
    // whole, so two at once would lose one's record. Agents of one process take turns on the
    // mutex; processes (the TUI, `measure`, `bench --all --record`, agents) on the file lock.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let file = file_for(&ws.dir, hardware);
    let _lock = lock(&file)?;
    for u in updates {
        if !u.record.kernel.starts_with("problems/") && !u.record.kernel.starts_with(TEMPLATES) {
            let path = ws.dir.join(&u.record.kernel);
            let same = std::fs::read_to_string(&path).is_ok_and(|t| t == u.source);
            if !same {
                write_atomic(&path, u.source.as_bytes())
                    .map_err(|source| RecordError::Io { path, source })?;
            }
        }
    }
    let key = file_key(hardware);
    let (mut doc, backup) = match load(&ws.dir, &ws.suite_source(), suite, hardware) {
        Ok(Some(d)) => (d, None),
        Ok(None) => (StandingFile::new(suite, &key), None),
        Err(bad) => {
            let to = match backup(&file) {
                Ok(to) => to,
                Err(source) => return Err(RecordError::NoBackup { bad, source }),
            };
            (StandingFile::new(suite, &key), Some((to, bad.to_string())))
        }
    };
    doc.format = format::FORMAT_VERSION;
    for u in updates {
        doc.operators.insert(u.op.clone(), u.record.clone());
    }
    if let Err(source) = write_atomic(&file, doc.to_text().as_bytes()) {
        return Err(RecordError::Io { path: file, source });
    }
    Ok(Written { file, backup })
}

/// How long a writer waits for another process's turn before it gives up (the turn itself is a
/// read and an atomic write of a small file: milliseconds).
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// The lock file beside a standing file: `standing/H200.json.lock`.
pub fn lock_path(file: &Path) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    file.with_file_name(format!("{name}.lock"))
}

/// Takes the standing file's lock (an exclusive advisory lock on its `.lock` file, released
/// when the returned handle drops, also when the process dies): waits up to LOCK_WAIT for a
/// writer in another process, then refuses, naming the lock file.
fn lock(file: &Path) -> Result<std::fs::File, RecordError> {
    let path = lock_path(file);
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|source| RecordError::Io {
            path: d.to_path_buf(),
            source,
        })?;
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| RecordError::Io {
            path: path.clone(),
            source,
        })?;
    let start = std::time::Instant::now();
    loop {
        match f.try_lock() {
            Ok(()) => return Ok(f),
            Err(std::fs::TryLockError::WouldBlock) if start.elapsed() < LOCK_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(RecordError::Busy {
                    lock: path,
                    secs: LOCK_WAIT.as_secs(),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(RecordError::Lock {
                    lock: path,
                    source: e,
                });
            }
        }
    }
}
