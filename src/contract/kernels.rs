//! Kernels of the suite's operators: the reference and baseline files, and the candidate a
//! command names.

use crate::contract::protocol::Source;
use crate::suite::{Problem, ReadError, Suite};
use std::path::{Path, PathBuf};

/// A kernel that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// `file` as the suite shows its path.
    #[error("{file}: {source}")]
    Unusable { file: String, source: ReadError },
    #[error("{file}: missing ({operator} has no {name} yet)")]
    Missing {
        file: String,
        operator: String,
        name: String,
    },
    #[error("{}: {source}", file.display())]
    Read {
        file: PathBuf,
        source: std::io::Error,
    },
}

crate::error::text_at_the_edge!(KernelError);

/// Reads a kernel of an operator from the suite (`baseline.cu`, `reference.cu`).
pub fn suite_kernel(suite: &Suite, p: &Problem, file: &str) -> Result<Source, KernelError> {
    let rel = format!("{}/{file}", p.name);
    let code = suite
        .source
        .read_checked(&rel)
        .map_err(|source| KernelError::Unusable {
            file: suite.source.display_path(&rel),
            source,
        })?
        .ok_or_else(|| KernelError::Missing {
            file: suite.source.display_path(&rel),
            operator: p.name.clone(),
            name: file.to_string(),
        })?;
    Ok(Source {
        name: format!("{} {}", p.name, file.trim_end_matches(".cu")),
        code,
        defines: Default::default(),
    })
}

/// The kernel a command works on: the file given, else the operator's baseline.cu.
pub fn candidate_kernel(
    suite: &Suite,
    p: &Problem,
    kernel: Option<&Path>,
) -> Result<Source, KernelError> {
    match kernel {
        Some(f) => Ok(Source {
            name: f.display().to_string(),
            code: std::fs::read_to_string(f).map_err(|source| KernelError::Read {
                file: f.to_path_buf(),
                source,
            })?,
            defines: Default::default(),
        }),
        None => suite_kernel(suite, p, "baseline.cu"),
    }
}
