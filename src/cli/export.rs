//! `export`: an operator's incumbent (or a kernel file) written for another tool — an
//! Atrex-Bench candidate or the kernel with a C++ launcher (docs/export.md).

use crate::export::{self, Format, Kernel};
use crate::suite::{Suite, Workspace};
use serde_json::json;
use std::path::Path;

/// What `export` was asked for.
pub struct Args<'a> {
    pub op: &'a str,
    pub format: Format,
    pub out: &'a Path,
    pub hardware: &'a str,
    pub kernel: Option<&'a Path>,
    pub defines: &'a [String],
    /// Replace files that already exist; without it nothing is written when one does.
    pub force: bool,
    pub json: bool,
}

pub fn run(suite: &Suite, ws: &Workspace, a: Args<'_>) -> Result<i32, String> {
    let p = suite
        .problem(a.op)
        .ok_or_else(|| format!("unknown operator `{}` (see `atrex-tui suite`)", a.op))?;
    let hw = suite.hardware(a.hardware)?;
    let kernel = match a.kernel {
        Some(f) => Kernel {
            source: std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?,
            origin: f.display().to_string(),
        },
        None => export::incumbent(ws, suite, p, &hw.key).map_err(|e| e.to_string())?,
    };
    let kernel = if a.defines.is_empty() {
        kernel
    } else {
        let src = crate::contract::protocol::Source {
            name: kernel.origin.clone(),
            code: kernel.source,
            defines: Default::default(),
        };
        let applied = super::defines::apply(src, a.defines)?;
        Kernel {
            source: applied.code,
            origin: applied.name,
        }
    };
    let files = export::generate(p, &kernel, a.format).map_err(|e| format!("{}: {e}", p.name))?;
    if !a.force {
        let existing = export::existing(a.out, &files);
        if !existing.is_empty() {
            let names: Vec<String> = existing.iter().map(|f| f.display().to_string()).collect();
            return Err(format!(
                "{} already exist{}; nothing was written (--force replaces {})",
                names.join(", "),
                if names.len() == 1 { "s" } else { "" },
                if names.len() == 1 { "it" } else { "them" },
            ));
        }
    }
    let written = export::write(a.out, &files).map_err(|e| e.to_string())?;
    let format = match a.format {
        Format::AtrexBench => "atrex-bench",
        Format::Cuda => "cuda",
    };
    if a.json {
        let doc = json!({
            "operator": p.name,
            "format": format,
            "folder": a.out.display().to_string(),
            "kernel": kernel.origin,
            "sha256": crate::fingerprint::of_source(&kernel.source),
            "files": written.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
    } else {
        let what = match a.format {
            Format::AtrexBench => "an Atrex-Bench candidate",
            Format::Cuda => "a kernel with a C++ launcher",
        };
        println!(
            "{}: {} as {what}, written into {}:",
            p.name,
            kernel.origin,
            folder_name(a.out)
        );
        for f in &written {
            println!("  {}", f.display());
        }
    }
    Ok(0)
}

/// The folder as the user will recognise it: `.` is spelled out as the current directory.
fn folder_name(dir: &Path) -> String {
    if dir == Path::new(".") || dir.as_os_str().is_empty() {
        match std::env::current_dir() {
            Ok(d) => format!("{} (the current directory)", d.display()),
            Err(_) => "the current directory".into(),
        }
    } else {
        dir.display().to_string()
    }
}
