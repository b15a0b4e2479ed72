//! `compile --sass`: the candidate's machine code, disassembled by the toolkit's `cuobjdump`
//! (which calls `nvdisasm` from its own folder or PATH). The worker sends it as one
//! `Disassembly` event; `compile --sass` summarises it (`crate::profile::sass`).

use super::compile::{Compiler, plan_and_defines};
use crate::contract::plan;
use crate::contract::protocol::{Event, Source};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Why there is no SASS: what is missing, or what the tool said.
#[derive(Debug, thiserror::Error)]
pub enum SassError {
    #[error(
        "cuobjdump not found on PATH or in CUDA_HOME/bin, /usr/local/cuda/bin: install the CUDA toolkit's cuobjdump and nvdisasm, or set CUDA_HOME to the toolkit"
    )]
    NoTool,
    /// The cubin's scratch file, or the tool that could not be started.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// `stderr`: what the tool said, trimmed.
    #[error("{} -sass failed ({status}): {stderr}", tool.display())]
    Failed {
        tool: PathBuf,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("launch plan, {0}")]
    Plan(crate::contract::plan::PlanError),
    #[error(transparent)]
    Gpu(#[from] super::GpuError),
    #[error("{0} does not compile")]
    DoesNotCompile(String),
}

/// Disassembles a cubin with `cuobjdump -sass`. The error names what is missing or what the
/// tool said.
pub fn disassemble(cubin: &[u8]) -> Result<String, SassError> {
    let tool = crate::worker::locate::find_tool("cuobjdump").ok_or(SassError::NoTool)?;
    disassemble_with(&tool, cubin)
}

/// Disassembles with a given `cuobjdump`; its folder goes first on PATH so that it finds the
/// `nvdisasm` installed beside it.
pub fn disassemble_with(tool: &Path, cubin: &[u8]) -> Result<String, SassError> {
    let file = std::env::temp_dir().join(format!(
        "atrex-sass-{}-{}.cubin",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::write(&file, cubin).map_err(|source| SassError::Io {
        path: file.clone(),
        source,
    })?;
    let mut path = std::ffi::OsString::new();
    if let Some(d) = tool.parent() {
        path.push(d.as_os_str());
        path.push(":");
    }
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let o = Command::new(tool)
        .arg("-sass")
        .arg(&file)
        .env("PATH", path)
        .output();
    let _ = std::fs::remove_file(&file);
    let o = o.map_err(|source| SassError::Io {
        path: tool.to_path_buf(),
        source,
    })?;
    if !o.status.success() {
        return Err(SassError::Failed {
            tool: tool.to_path_buf(),
            status: o.status,
            stderr: String::from_utf8_lossy(&o.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The SASS of a source: compiled again (a hit in NVRTC's cubin cache when it has one), then
/// disassembled. For the GPU path, which keeps only the loaded module of its compile.
pub(super) fn of_source(compiler: &Compiler, src: &Source) -> Result<String, SassError> {
    let (_, defines) = plan_and_defines(src).map_err(SassError::Plan)?;
    let c = compiler.compile_cubin(&src.code, "candidate.cu", &plan::define_options(&defines))?;
    if !c.ok {
        return Err(SassError::DoesNotCompile(src.name.clone()));
    }
    disassemble(&c.cubin)
}

/// Sends the candidate's SASS, or why there is none (as the protocol says it).
pub(super) fn send(out: &super::Out, id: u64, r: Result<String, SassError>) {
    let (sass, error) = match r {
        Ok(s) => (s, None),
        Err(e) => (String::new(), Some(e.to_string())),
    };
    out.send(&Event::Disassembly {
        id,
        which: "candidate".into(),
        sass,
        error,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool that fails says which and what it said; nothing is left behind.
    #[test]
    fn a_failing_disassembler_is_named_with_its_message() {
        let e = disassemble_with(Path::new("/bin/false"), b"not a cubin")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/bin/false -sass failed"), "{e}");
        let e = disassemble_with(Path::new("/nonexistent/cuobjdump"), b"x")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/nonexistent/cuobjdump: "), "{e}");
    }

    /// The cubin reaches the tool as a file argument after `-sass`, and its output comes back.
    #[test]
    fn the_cubin_is_handed_to_the_tool_as_a_file() {
        let dir = std::env::temp_dir().join(format!("atrex-sass-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tool = dir.join("cuobjdump");
        std::fs::write(&tool, "#!/bin/sh\n[ \"$1\" = -sass ] && cat \"$2\"\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = disassemble_with(&tool, b"        /*0000*/  HGMMA.64x128x16.F32 ;").unwrap();
        assert!(out.contains("HGMMA.64x128x16"), "{out}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
