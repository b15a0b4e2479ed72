//! `bench`: compile, check and time a kernel on the GPU.

use super::{EXIT_NO_GPU, runtime};
use crate::engine::client::{WorkerClient, WorkerConfig, WorkerPool};
use crate::engine::outcome::*;
use crate::engine::protocol::*;
use crate::suite::Suite;
use crate::suite::kernels::{candidate_kernel, suite_kernel};
use serde_json::json;
use std::path::Path;

#[allow(clippy::too_many_arguments)]
pub fn run(
    suite: &Suite,
    op: &str,
    kernel: Option<&Path>,
    shape_ids: &[u32],
    quick: bool,
    hardware: Option<&str>,
    device: Option<u32>,
    as_json: bool,
) -> Result<i32, String> {
    let p = suite
        .problem(op)
        .ok_or_else(|| format!("unknown operator `{op}` (see `atrex-tui suite`)"))?;
    let candidate = candidate_kernel(suite, p, kernel)?;
    let reference = suite_kernel(suite, p, "reference.cu")?;
    for id in shape_ids {
        if p.shape(*id).is_none() {
            return Err(format!(
                "{} has no shape {id} (shapes: {})",
                p.name,
                p.shapes
                    .iter()
                    .map(|s| s.id.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    let ids: Vec<u32> = if shape_ids.is_empty() {
        p.shapes.iter().map(|s| s.id).collect()
    } else {
        shape_ids.to_vec()
    };
    let rt = runtime()?;
    rt.block_on(async {
        let client = WorkerClient::spawn(WorkerConfig::new(device.unwrap_or(0)));
        let (dev, probe) = match client.device().await {
            Ok(x) => x,
            Err(e) => {
                eprintln!(
                    "atrex-tui: no GPU {}: {e}; measurement is unavailable",
                    device.unwrap_or(0)
                );
                return Ok(EXIT_NO_GPU);
            }
        };
        let (driver, nvrtc, probe_devices) =
            (probe.driver_version, probe.nvrtc_version, probe.devices);
        let hw = match hardware {
            Some(h) => Some(suite.hardware(h)?),
            None => crate::engine::profile_for_device(&suite.hardware, &dev.name),
        };
        let Some(hw) = hw else {
            return Err(format!(
                "no hardware profile matches `{}`; pass --hardware",
                dev.name
            ));
        };
        let mode = if quick { Mode::Quick } else { Mode::Full };
        let devices: Vec<u32> = match device {
            Some(d) => vec![d],
            None => probe_devices.iter().map(|d| d.index).collect(),
        };
        let t0 = std::time::Instant::now();
        let o = if devices.len() <= 1 {
            let job = crate::engine::build_job(
                p,
                candidate.clone(),
                Some(reference),
                &ids,
                JobKind::All,
                mode,
                Some(hw),
            )?;
            collect(&client, job, !as_json).await
        } else {
            // One job per shape, spread over every GPU.
            drop(client);
            let pool = WorkerPool::spawn(devices.iter().map(|d| WorkerConfig::new(*d)).collect());
            if !as_json {
                eprintln!("spreading {} shapes over {} GPUs", ids.len(), pool.len());
            }
            let mut pending = Vec::new();
            for id in &ids {
                let job = crate::engine::build_job(
                    p,
                    candidate.clone(),
                    Some(reference.clone()),
                    &[*id],
                    JobKind::All,
                    mode,
                    Some(hw),
                )?;
                let (_, _, rx) = pool.submit(job).ok_or("no GPU worker")?;
                pending.push(collect_rx(rx, false));
            }
            let parts = futures::future::join_all(pending).await;
            let mut o = Outcome::default();
            for part in parts {
                if o.compiled.is_empty() {
                    o.compiled = part.compiled;
                }
                o.shapes.extend(part.shapes);
                o.output.extend(part.output);
                if !matches!(part.verdict, Some(Verdict::Pass)) && o.message.is_none() {
                    o.verdict = part.verdict;
                    o.message = part.message;
                } else if o.verdict.is_none() {
                    o.verdict = part.verdict;
                }
            }
            o.shapes.sort_by_key(|r| r.shape);
            o.output.sort_by_key(|k| k.shape);
            if !as_json {
                for k in &o.output {
                    eprintln!("kernel output {}:", k.origin());
                    for l in k.text.lines() {
                        eprintln!("  | {l}");
                    }
                }
            }
            o
        };
        let wall_s = t0.elapsed().as_secs_f64();
        let s_op = s_op_of(&o.shapes);
        let s_op_bench = s_op_bench_of(&o.shapes);
        let failed = o.shapes.iter().any(|r| !matches!(r.verdict, Verdict::Pass))
            || o.shapes.len() < ids.len();
        let code = if failed || !matches!(o.verdict, Some(Verdict::Pass)) {
            1
        } else {
            0
        };
        if as_json {
            let doc = json!({
                "operator": p.name,
                "kernel": candidate.name,
                "gpu": dev,
                "devices": devices,
                "driver": driver,
                "nvrtc": nvrtc,
                "hardware": hw.key,
                "mode": if quick { "quick" } else { "full" },
                "verdict": o.verdict.as_ref().map(|v| v.name()),
                "message": o.message,
                "compile": o.compiled,
                "shapes": o.shapes,
                "output": o.output,
                "s_op": s_op,
                "s_op_benchmark": s_op_bench,
                "wall_s": wall_s,
            });
            println!(
                "{}",
                serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
            );
        } else {
            println!(
                "{} · {} · {} ({} SMs) · driver {} · NVRTC {} · T_SOL on {}",
                p.name,
                candidate.name,
                dev.name,
                dev.sm_count,
                driver,
                nvrtc.unwrap_or_default(),
                hw.key
            );
            println!(
                "{:>5} {:<11} {:>11} {:>11} {:>11} {:>8} {:>7} {:>11} {:>5}",
                "shape",
                "verdict",
                "median ms",
                "min ms",
                "T_SOL ms",
                "S",
                "IQR%",
                "max |err|",
                "n"
            );
            for r in &o.shapes {
                let t = r.timing.as_ref();
                let err = r.checks.iter().map(|c| c.max_abs).fold(0.0, f64::max);
                println!(
                    "{:>5} {:<11} {:>11} {:>11} {:>11.5} {:>8} {:>7} {:>11.3e} {:>5}",
                    r.shape,
                    r.verdict.name(),
                    t.map(|t| format!("{:.5}", t.median_ms))
                        .unwrap_or_else(|| "-".into()),
                    t.map(|t| format!("{:.5}", t.min_ms))
                        .unwrap_or_else(|| "-".into()),
                    r.sol_ms,
                    r.s.map(|s| format!("{s:.3}")).unwrap_or_else(|| "-".into()),
                    t.map(|t| format!("{:.1}", t.rel_iqr * 100.0))
                        .unwrap_or_else(|| "-".into()),
                    err,
                    t.map(|t| t.n.to_string()).unwrap_or_else(|| "-".into()),
                );
                if let Some(m) = &r.message {
                    println!("      {m}");
                }
            }
            println!(
                "S_op = {s_op:.4} ({} of {} shapes passed){}",
                o.shapes
                    .iter()
                    .filter(|r| r.verdict == Verdict::Pass)
                    .count(),
                ids.len(),
                if quick { " · quick" } else { "" }
            );
            let bench_only: Vec<String> = o
                .shapes
                .iter()
                .filter(|r| r.verdict == Verdict::Pass && !r.bench_ok)
                .map(|r| {
                    let nan: u64 = r.checks.iter().map(|c| c.shared_nan).sum();
                    if nan > 0 {
                        format!("{} ({nan} NaN shared with the reference)", r.shape)
                    } else {
                        r.shape.to_string()
                    }
                })
                .collect();
            if !bench_only.is_empty() {
                println!(
                    "benchmark-compatible S_op = {s_op_bench:.4}: shapes passing strict but not the benchmark's rule: {}",
                    bench_only.join(", ")
                );
            }
            if let Some(m) = &o.message {
                println!(
                    "{}: {m}",
                    o.verdict.as_ref().map(|v| v.name()).unwrap_or("error")
                );
            }
        }
        Ok(code)
    })
}
