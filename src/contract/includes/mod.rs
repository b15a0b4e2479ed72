//! The include rule: a kernel may include the CUDA toolkit's headers and nothing else.
//!
//! NVRTC opens whatever path an `#include` names and echoes the file in its log on an error, and
//! compile logs go to the session and to language models: without this rule a candidate could
//! read any host file. Before NVRTC sees a source, every include of it is checked here:
//! the name must be written out (`<name>` or `"name"`, no macro), relative, without `..`, and
//! name a file inside the toolkit's include folder (symbolic links resolved) or one of NVRTC's
//! built-in headers. `__has_include` (and `__has_include_next`, `__has_embed`) follows the same
//! rule; `#include_next`, `#import`, `#embed` and trigraphs are refused. NVRTC also runs with
//! `--no-source-include`, so a quoted include is never looked up beside the worker. A refusal is
//! a compile error on the candidate's line that names the rule and shows nothing of the file.
//!
//! The includes are found by a lexer of preprocessing tokens ([`lexer`]), not by matching lines:
//! splices, comments, raw strings, digit separators and digraphs are read as a compiler reads
//! them, under every reading where compilers differ, and the union is judged. The scan may find
//! more than a compiler acts on (an include inside `#if 0`), never less.

mod lexer;

use std::path::{Path, PathBuf};

/// Headers NVRTC provides itself (found without an include folder).
const BUILTIN: &[&str] = &[
    "cuda_fp16.h",
    "cuda_fp16.hpp",
    "cuda_bf16.h",
    "cuda_bf16.hpp",
    "cuda_fp8.h",
    "cuda_fp8.hpp",
    "cuda_fp6.h",
    "cuda_fp6.hpp",
    "cuda_fp4.h",
    "cuda_fp4.hpp",
];

/// A refused include: the line (1-based, in the source as given) and why. Its message names
/// the rule and shows nothing of the file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "include refused: {cause}; kernels may include only the CUDA toolkit's headers \
     (e.g. <cuda_bf16.h>), written out as <name> or \"name\""
)]
pub struct Refusal {
    pub line: usize,
    pub cause: Cause,
}

/// Why a construct that names a file is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Cause {
    #[error("an empty include name")]
    EmptyName,
    #[error("`{0}` is not a relative name")]
    NotRelative(String),
    #[error("`{0}` leaves the include folder")]
    LeavesFolder(String),
    #[error("`{0}` is not a header of the CUDA toolkit")]
    NotToolkit(String),
    #[error("the include name is not written out (a macro or malformed name)")]
    NameNotWrittenOut,
    /// `__has_include` and kin, as written.
    #[error("the {0} name is not written out")]
    ProbeNotWrittenOut(String),
    #[error("`{0}` is followed by more on its line (a comment may have joined two lines)")]
    Trailing(String),
    #[error("#{0} is not allowed")]
    Forbidden(String),
    /// What a dialect's lexer cannot read (a trigraph, a lone carriage return, …).
    #[error("{0}")]
    Unreadable(String),
}

/// The folders includes may come from.
#[derive(Debug, Clone, Default)]
pub struct Allowed {
    dirs: Vec<PathBuf>,
}

impl Allowed {
    pub fn new(dirs: impl IntoIterator<Item = PathBuf>) -> Allowed {
        Allowed {
            dirs: dirs
                .into_iter()
                .filter_map(|d| std::fs::canonicalize(d).ok())
                .collect(),
        }
    }

    fn permits(&self, name: &str) -> Result<(), Cause> {
        if name.is_empty() {
            return Err(Cause::EmptyName);
        }
        if name.starts_with('/') || name.starts_with('~') || name.contains('\\') {
            return Err(Cause::NotRelative(name.to_string()));
        }
        if Path::new(name)
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return Err(Cause::LeavesFolder(name.to_string()));
        }
        for d in &self.dirs {
            if let Ok(p) = std::fs::canonicalize(d.join(name))
                && p.starts_with(d)
                && p.is_file()
            {
                return Ok(());
            }
        }
        if BUILTIN.contains(&name) {
            return Ok(());
        }
        Err(Cause::NotToolkit(name.to_string()))
    }
}

/// Every file-naming construct of a source under every dialect (sorted, without repeats), and
/// the refusals of the dialects that cannot read it.
fn findings(src: &str) -> (Vec<lexer::Found>, Vec<Refusal>) {
    let mut found = Vec::new();
    let mut refused = Vec::new();
    for d in lexer::DIALECTS {
        match lexer::scan(src, d) {
            Ok(f) => found.extend(f),
            Err(f) => refused.push(Refusal {
                line: f.line,
                cause: Cause::Unreadable(f.why),
            }),
        }
    }
    found.sort();
    found.dedup();
    (found, refused)
}

/// Whether a construct may stand, and why not.
fn judge(what: &lexer::What, allowed: &Allowed) -> Result<(), Cause> {
    use lexer::What;
    match what {
        What::Include(Some(name)) | What::Probe(_, Some(name)) => allowed.permits(name),
        What::Include(None) => Err(Cause::NameNotWrittenOut),
        What::Probe(id, None) => Err(Cause::ProbeNotWrittenOut(id.clone())),
        What::Trailing(name) => Err(Cause::Trailing(name.clone())),
        What::Forbidden(d) => Err(Cause::Forbidden(d.clone())),
    }
}

/// Checks every include of a source. Ok when all are permitted; else the refusal of the
/// earliest line.
pub fn check(src: &str, allowed: &Allowed) -> Result<(), Refusal> {
    let (found, mut refused) = findings(src);
    for f in found {
        if let Err(cause) = judge(&f.what, allowed) {
            refused.push(Refusal {
                line: f.line,
                cause,
            });
        }
    }
    match refused.into_iter().min_by_key(|r| r.line) {
        Some(r) => Err(r),
        None => Ok(()),
    }
}

#[cfg(test)]
mod gcc_diff;
#[cfg(test)]
mod tests;
