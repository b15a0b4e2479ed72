//! Kernels of the suite's operators: the reference and baseline files, and the candidate a
//! command names.

use crate::contract::protocol::Source;
use crate::suite::{Problem, Suite};
use std::path::Path;

/// Reads a kernel of an operator from the suite (`baseline.cu`, `reference.cu`).
pub fn suite_kernel(suite: &Suite, p: &Problem, file: &str) -> Result<Source, String> {
    let rel = format!("{}/{file}", p.name);
    let code = suite
        .source
        .read_checked(&rel)
        .map_err(|why| format!("{}: {why}", suite.source.display_path(&rel)))?
        .ok_or_else(|| {
            format!(
                "{}: missing ({} has no {file} yet)",
                suite.source.display_path(&rel),
                p.name
            )
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
) -> Result<Source, String> {
    match kernel {
        Some(f) => Ok(Source {
            name: f.display().to_string(),
            code: std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?,
            defines: Default::default(),
        }),
        None => suite_kernel(suite, p, "baseline.cu"),
    }
}
