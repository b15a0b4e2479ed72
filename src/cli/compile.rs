//! `compile`: NVRTC and launch-plan diagnostics.

use super::runtime;
use crate::engine::client::{WorkerClient, WorkerConfig};
use crate::engine::outcome::*;
use crate::engine::protocol::*;
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
    as_json: bool,
) -> Result<i32, String> {
    let p = suite
        .problem(op)
        .ok_or_else(|| format!("unknown operator `{op}` (see `atrex-tui suite`)"))?;
    let candidate = super::defines::candidate(suite, p, kernel, defines)?;
    let ids: Vec<u32> = p.shapes.iter().take(1).map(|s| s.id).collect();
    let mut job = crate::engine::build_job(
        p,
        candidate.clone(),
        None,
        &ids,
        JobKind::Compile,
        Mode::Quick,
        None,
    )?;
    job.arch = Some(arch.to_string());
    let rt = runtime()?;
    let o = rt.block_on(async {
        let client = WorkerClient::spawn(WorkerConfig::new(0));
        collect(&client, job, false).await
    });
    let ok = matches!(o.verdict, Some(Verdict::Pass));
    if as_json {
        let doc = json!({"operator": p.name, "kernel": candidate.name, "verdict": o.verdict.as_ref().map(|v| v.name()), "message": o.message, "compile": o.compiled});
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
    }
    Ok(if ok { 0 } else { 1 })
}
