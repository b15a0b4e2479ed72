//! `compile`: NVRTC and launch-plan diagnostics, and with `--sass` the kernel's SASS and a
//! summary of it per function.

use super::runtime;
use crate::contract::outcome::*;
use crate::contract::protocol::*;
use crate::contract::runner::JobEvent;
use crate::pool::client::{WorkerClient, WorkerConfig};
use crate::profile::sass as sass_summary;
use crate::suite::Suite;
use serde_json::json;
use std::path::Path;

/// `compile`: NVRTC and launch-plan diagnostics, through the worker (no GPU needed).
pub fn run(
    suite: &Suite,
    op: &str,
    kernel: Option<&Path>,
    defines: &[String],
    arch: &str,
    sass: Option<&Path>,
    as_json: bool,
) -> Result<i32, String> {
    if as_json && sass == Some(Path::new("-")) {
        return Err(
            "--sass - would print the disassembly into the JSON document: name a file \
                    (--sass FILE) with --json"
                .into(),
        );
    }
    let p = suite
        .problem(op)
        .ok_or_else(|| format!("unknown operator `{op}` (see `atrex-tui suite`)"))?;
    let candidate = super::defines::candidate(suite, p, kernel, defines)?;
    let ids: Vec<u32> = p.shapes.iter().take(1).map(|s| s.id).collect();
    let mut job = crate::contract::job::build_job(
        p,
        candidate.clone(),
        None,
        &ids,
        JobKind::Compile,
        Mode::Quick,
        None,
    )?;
    job.arch = Some(arch.to_string());
    job.sass = sass.is_some();
    let rt = runtime()?;
    let o = rt.block_on(async {
        let client = WorkerClient::spawn(WorkerConfig::new(0));
        collect(&client, job, false).await
    });
    let mut ok = matches!(o.verdict, Some(Verdict::Pass));
    // The disassembly, written where asked, and its summary (or why there is none).
    let disassembly = match sass {
        Some(dest) if ok => {
            let r = write_sass(&o, dest);
            ok &= r.is_ok();
            Some(r)
        }
        _ => None,
    };
    if as_json {
        let mut doc = json!({"operator": p.name, "kernel": candidate.name, "verdict": o.verdict.as_ref().map(|v| v.name()), "message": o.message, "compile": o.compiled});
        if let Some(r) = &disassembly {
            doc["sass"] = match r {
                Ok((file, fs)) => json!({"file": file, "functions": fs}),
                Err(e) => json!({"error": e}),
            };
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
    } else {
        for ev in &o.compiled {
            if let Event::Compiled {
                diagnostics,
                ok: cok,
                ms,
                ..
            } = ev
            {
                for d in diagnostics {
                    println!("{}:{}: {}: {}", candidate.name, d.line, d.severity, d.msg);
                }
                println!(
                    "{}: {} in {ms:.0} ms",
                    candidate.name,
                    if *cok { "compiled" } else { "failed" }
                );
            }
        }
        if let Some(m) = &o.message {
            println!(
                "{}: {m}",
                o.verdict.as_ref().map(|v| v.name()).unwrap_or("error")
            );
        }
        match &disassembly {
            Some(Ok((file, fs))) => {
                if let Some(file) = file {
                    println!("sass: {file}");
                }
                for f in fs {
                    println!("sass: {}", sass_summary::describe(f, 12));
                }
            }
            Some(Err(e)) => println!("sass: {e}"),
            None => {}
        }
    }
    Ok(if ok { 0 } else { 1 })
}

/// Writes the job's disassembly to `dest` (`-`: stdout; refused with --json before the job) and
/// summarises it. Ok: the file written (None for stdout) and the summary.
fn write_sass(
    o: &Outcome,
    dest: &Path,
) -> Result<(Option<String>, Vec<sass_summary::FunctionSummary>), String> {
    let (text, error) = o
        .events
        .iter()
        .find_map(|e| match e {
            JobEvent::Worker(Event::Disassembly { sass, error, .. }) => Some((sass, error)),
            _ => None,
        })
        .ok_or("the worker sent no disassembly (an older worker?)")?;
    if let Some(e) = error {
        return Err(e.clone());
    }
    let fs = sass_summary::summarize(text);
    if dest == Path::new("-") {
        print!("{text}");
        return Ok((None, fs));
    }
    std::fs::write(dest, text).map_err(|e| format!("{}: {e}", dest.display()))?;
    Ok((Some(dest.display().to_string()), fs))
}
