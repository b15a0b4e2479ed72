//! The demo sessions recorded on an H200 (`sessions/demo-*.jsonl`), built into the binary so
//! that an installed `atrex-tui` can replay them without the repository.

use super::store::{Loaded, parse_text};
use std::path::Path;

/// (file name, text) of each built-in session.
pub const DEMOS: &[(&str, &str)] = &[
    (
        "demo-hand-edits.jsonl",
        include_str!("../../sessions/demo-hand-edits.jsonl"),
    ),
    (
        "demo-agent-tuner.jsonl",
        include_str!("../../sessions/demo-agent-tuner.jsonl"),
    ),
];

/// The text of a built-in session by file name.
pub fn demo(name: &str) -> Option<&'static str> {
    DEMOS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Loads a session file; a path that does not exist but names a built-in session (by its file
/// name) loads the built-in copy.
#[cfg(test)]
pub fn load_file_or_demo(path: &Path) -> Result<Loaded, super::store::SessionError> {
    if !path.exists()
        && let Some(text) = path.file_name().and_then(|n| n.to_str()).and_then(demo)
    {
        return parse_text(&format!("{} (built in)", path.display()), text);
    }
    super::load(path)
}

/// `load_file_or_demo` as a timeline (`timeline::load`: a large file keeps its shape results in
/// the file); the `Loaded` holds the warnings, without records.
pub fn timeline_of_file_or_demo(
    path: &Path,
) -> Result<(super::Timeline, Loaded), super::store::SessionError> {
    if !path.exists()
        && let Some(text) = path.file_name().and_then(|n| n.to_str()).and_then(demo)
    {
        let mut loaded = parse_text(&format!("{} (built in)", path.display()), text)?;
        let records = std::mem::take(&mut loaded.records);
        return Ok((records.into(), loaded));
    }
    super::timeline::load(path, super::timeline::LAZY_FROM)
}
