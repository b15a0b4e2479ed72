//! Where the suite's files come from: the workspace, its problems/ folder, or the copy embedded in
//! the binary; and the knowledge base (knowledge/: notes, cards and kernel templates) embedded
//! beside it, read by the agent's retrieval and by the standing's template kernels.

use include_dir::{Dir, include_dir};
use std::path::{Path, PathBuf};

/// The built-in suite, embedded at build time.
pub static EMBEDDED_PROBLEMS: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/problems");

/// The knowledge base, embedded at build time (`agent::knowledge` reads it as documents,
/// `standing::store::template_source` reads its kernel templates).
pub static EMBEDDED_KNOWLEDGE: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/knowledge");

/// Why a file of the suite that exists cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read it: {0}")]
    Io(#[from] std::io::Error),
    #[error("is a folder, not a file")]
    Folder,
    /// `line` (1-based) and `byte` (0-based) of the first invalid byte.
    #[error(
        "not UTF-8 text{} (first invalid byte at line {line}, byte {byte})",
        if *binary { ": it looks like a binary file" } else { "" }
    )]
    NotUtf8 {
        line: usize,
        byte: usize,
        binary: bool,
    },
}

crate::error::text_at_the_edge!(ReadError);

/// Where the suite's files come from.
#[derive(Debug, Clone)]
pub enum SuiteSource {
    Embedded,
    Dir(PathBuf),
}

impl SuiteSource {
    pub fn describe(&self) -> String {
        match self {
            SuiteSource::Embedded => "built-in suite".into(),
            SuiteSource::Dir(p) => p.display().to_string(),
        }
    }

    /// Reads a file relative to the problems/ root.
    /// A file's text: Ok(None) when it does not exist, Err saying what is wrong with it when it
    /// exists but cannot be used (a folder in its place, not UTF-8 text, unreadable).
    pub fn read_checked(&self, rel: &str) -> Result<Option<String>, ReadError> {
        match self {
            SuiteSource::Embedded => Ok(self.read(rel)),
            SuiteSource::Dir(root) => {
                let p = root.join(rel);
                match std::fs::metadata(&p) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(ReadError::Io(e)),
                    Ok(m) if m.is_dir() => return Err(ReadError::Folder),
                    Ok(_) => {}
                }
                let bytes = std::fs::read(&p)?;
                match String::from_utf8(bytes) {
                    Ok(t) => Ok(Some(t)),
                    Err(e) => {
                        let at = e.utf8_error().valid_up_to();
                        let b = e.as_bytes();
                        Err(ReadError::NotUtf8 {
                            line: b[..at].iter().filter(|c| **c == b'\n').count() + 1,
                            byte: at,
                            binary: b.iter().take(4096).any(|c| *c == 0),
                        })
                    }
                }
            }
        }
    }

    pub fn read(&self, rel: &str) -> Option<String> {
        match self {
            SuiteSource::Embedded => EMBEDDED_PROBLEMS
                .get_file(rel)
                .and_then(|f| f.contents_utf8())
                .map(|s| s.to_string()),
            SuiteSource::Dir(root) => std::fs::read_to_string(root.join(rel)).ok(),
        }
    }

    /// The names of the files directly under a folder (relative to problems/).
    pub fn list(&self, rel_dir: &str) -> Vec<String> {
        let mut out: Vec<String> = match self {
            SuiteSource::Embedded => EMBEDDED_PROBLEMS
                .get_dir(rel_dir)
                .map(|d| {
                    d.files()
                        .filter_map(|f| f.path().file_name()?.to_str().map(|s| s.to_string()))
                        .collect()
                })
                .unwrap_or_default(),
            SuiteSource::Dir(root) => std::fs::read_dir(root.join(rel_dir))
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .filter(|e| e.path().is_file())
                        .filter_map(|e| e.file_name().to_str().map(|s| s.to_string()))
                        .collect()
                })
                .unwrap_or_default(),
        };
        out.sort();
        out
    }

    /// A printable path for a file under problems/.
    pub fn display_path(&self, rel: &str) -> String {
        match self {
            SuiteSource::Embedded => format!("problems/{rel} (built-in)"),
            SuiteSource::Dir(root) => root.join(rel).display().to_string(),
        }
    }
}

/// The workspace: the user's own work (suite edits, accepted kernels, sessions).
#[derive(Debug, Clone)]
pub struct Workspace {
    pub dir: PathBuf,
    /// Why this directory was chosen.
    pub reason: &'static str,
}

impl Workspace {
    /// `--workspace DIR` if given; else the current directory when it has problems/; else the
    /// user's data directory.
    pub fn resolve(explicit: Option<&Path>) -> Workspace {
        if let Some(d) = explicit {
            return Workspace {
                dir: d.to_path_buf(),
                reason: "--workspace",
            };
        }
        if let Ok(cwd) = std::env::current_dir()
            && cwd.join("problems").join("suite.toml").is_file()
        {
            return Workspace {
                dir: cwd,
                reason: "current directory (has problems/)",
            };
        }
        let dir = dirs::data_dir()
            .map(|d| d.join("atrex-tui"))
            .unwrap_or_else(|| PathBuf::from(".atrex-tui"));
        Workspace {
            dir,
            reason: "user data directory",
        }
    }

    /// The suite source: the workspace's problems/ when it has one, else the built-in copy.
    pub fn suite_source(&self) -> SuiteSource {
        let p = self.dir.join("problems");
        if p.join("suite.toml").is_file() {
            SuiteSource::Dir(p)
        } else {
            SuiteSource::Embedded
        }
    }

    pub fn sessions_dir(&self) -> PathBuf {
        self.dir.join("sessions")
    }
}
