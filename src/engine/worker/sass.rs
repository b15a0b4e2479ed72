//! `compile --sass`: the candidate's machine code, disassembled by the toolkit's `cuobjdump`
//! (which calls `nvdisasm` from its own folder or PATH). The worker sends it as one
//! `Disassembly` event; the client summarises it (`crate::engine::sass`).

use super::compile::{Compiler, plan_and_defines};
use super::plan;
use crate::engine::protocol::{Event, Source};
use std::path::Path;
use std::process::Command;

/// Disassembles a cubin with `cuobjdump -sass`. The error names what is missing or what the
/// tool said.
pub fn disassemble(cubin: &[u8]) -> Result<String, String> {
    let tool = crate::engine::locate::find_tool("cuobjdump").ok_or_else(|| {
        "cuobjdump not found on PATH or in CUDA_HOME/bin, /usr/local/cuda/bin: install the CUDA \
         toolkit's cuobjdump and nvdisasm, or set CUDA_HOME to the toolkit"
            .to_string()
    })?;
    disassemble_with(&tool, cubin)
}

/// Disassembles with a given `cuobjdump`; its folder goes first on PATH so that it finds the
/// `nvdisasm` installed beside it.
pub fn disassemble_with(tool: &Path, cubin: &[u8]) -> Result<String, String> {
    let dir = std::env::temp_dir().join(format!("atrex-sass-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let file = dir.join(format!(
        "candidate-{}.cubin",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    let r = (|| {
        std::fs::write(&file, cubin).map_err(|e| format!("{}: {e}", file.display()))?;
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
            .output()
            .map_err(|e| format!("{}: {e}", tool.display()))?;
        if !o.status.success() {
            let err = String::from_utf8_lossy(&o.stderr);
            return Err(format!(
                "{} -sass failed ({}): {}",
                tool.display(),
                o.status,
                err.trim()
            ));
        }
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    })();
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_dir(&dir);
    r
}

/// Compiles the candidate again (NVRTC's cache makes that cheap when it has one) and sends its
/// SASS, or why there is none.
pub(super) fn send_sass(out: &super::Out, id: u64, compiler: &Compiler, src: &Source) {
    let r = (|| {
        let (_, defines) = plan_and_defines(src).map_err(|e| format!("launch plan, {e}"))?;
        let c = compiler
            .compile_cubin(&src.code, "candidate.cu", &plan::define_options(&defines))
            .map_err(|e| e.msg)?;
        if !c.ok {
            return Err(format!("{} does not compile", src.name));
        }
        disassemble(&c.cubin)
    })();
    let (sass, error) = match r {
        Ok(s) => (s, None),
        Err(e) => (String::new(), Some(e)),
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
        let e = disassemble_with(Path::new("/bin/false"), b"not a cubin").unwrap_err();
        assert!(e.starts_with("/bin/false -sass failed"), "{e}");
        let e = disassemble_with(Path::new("/nonexistent/cuobjdump"), b"x").unwrap_err();
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
