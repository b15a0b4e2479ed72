//! The report (docs/report.md): one self-contained HTML file of where the suite stands — the
//! S_agg table, each operator's S over its shapes, the roofline of every measured shape and
//! each incumbent's history from the sessions that touched it, and beside each operator the
//! best peer's S_op (a library's kernel on the same GPU, `peers`).
//!
//! Layout: `data` (the figures, assembled before anything is drawn), `history` (the sessions,
//! read into per-operator histories), `peers` (the peers file), `charts` (plotters, SVG),
//! `table` (the S_agg table), `html` (the page).
//!
//! Invariants: the figures are those `suite --json` prints for the same workspace and profile
//! (the same standing, judged the same way, without a GPU); the page references nothing outside
//! itself; every string read from a file is escaped; what is missing or could not be read is
//! shown as such — a file that cannot be read is a warning naming its path, never the end of
//! the report.

pub mod charts;
pub mod data;
pub mod history;
pub mod html;
pub mod peers;
pub mod table;

#[cfg(test)]
mod tests;

pub use data::ReportData;

use crate::standing::Standing;
use crate::suite::Suite;
use crate::suite::hardware::HardwareProfile;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why the report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{}: cannot write the report: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The figures of a report on `standing` (judged for `hw`), with the histories of the sessions
/// in `session_dirs` (and the standing's origin sessions) of the workspace `ws` and the peers of
/// the profile (the workspace's peers file, else the built-in one).
pub fn assemble(
    ws: &Path,
    suite: &Suite,
    hw: &HardwareProfile,
    standing: &Standing,
    session_dirs: &[PathBuf],
) -> ReportData {
    let (files, mut warnings) = history::session_files(ws, session_dirs, standing);
    let mut sessions = history::read(ws, suite, &files, standing);
    warnings.append(&mut sessions.warnings);
    let (peers, mut peer_warnings) = peers::load(ws, suite, &hw.key);
    warnings.append(&mut peer_warnings);
    sessions.warnings = warnings;
    sessions.dirs = session_dirs.to_vec();
    data::assemble(
        suite,
        hw,
        standing,
        &sessions,
        peers.as_ref(),
        &crate::utc::now(),
    )
}

/// Writes `html` to `path` through a temporary file beside it (a crash mid-write leaves any
/// earlier report whole).
pub fn write(path: &Path, html: &str) -> Result<(), ReportError> {
    let err = |source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report.html".into());
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(html.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(err)
}
