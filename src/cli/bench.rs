//! `bench`: compile, check and time a kernel on the GPU.

use super::{EXIT_NO_GPU, runtime};
use crate::engine::client::{WorkerClient, WorkerConfig, WorkerPool};
use crate::engine::outcome::*;
use crate::engine::protocol::*;
use crate::engine::spread;
use crate::suite::Problem;
use crate::suite::Suite;
use crate::suite::hardware::HardwareProfile;
use crate::suite::kernels::suite_kernel;
use serde_json::json;
use std::path::Path;

#[allow(clippy::too_many_arguments)]
pub fn run(
    suite: &Suite,
    op: &str,
    kernel: Option<&Path>,
    defines: &[String],
    shape_ids: &[u32],
    quick: bool,
    hardware: Option<&str>,
    device: Option<u32>,
    as_json: bool,
) -> Result<i32, String> {
    let p = suite
        .problem(op)
        .ok_or_else(|| format!("unknown operator `{op}` (see `atrex-tui suite`)"))?;
    let candidate = super::defines::candidate(suite, p, kernel, defines)?;
    let reference = suite_kernel(suite, p, "reference.cu")?;
    let ids = resolve_shape_ids(p, shape_ids)?;
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
            let spread = Spread {
                p,
                candidate: &candidate,
                reference: &reference,
                mode,
                hw,
            };
            run_spread(&spread, &devices, &ids, as_json).await?
        };
        let wall_s = t0.elapsed().as_secs_f64();
        let report = Report {
            p,
            candidate: &candidate,
            dev: &dev,
            devices: &devices,
            driver: &driver,
            nvrtc: &nvrtc,
            hw,
            quick,
            ids: &ids,
        };
        let failed = o.shapes.iter().any(|r| !matches!(r.verdict, Verdict::Pass))
            || o.shapes.len() < ids.len();
        let code = if failed || !matches!(o.verdict, Some(Verdict::Pass)) {
            1
        } else {
            0
        };
        if as_json {
            print_json(&report, &o, wall_s)?;
        } else {
            print_table(&report, &o);
        }
        Ok(code)
    })
}

/// Checks the requested shapes exist; no shapes asked for means every shape of the operator.
fn resolve_shape_ids(p: &Problem, shape_ids: &[u32]) -> Result<Vec<u32>, String> {
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
    Ok(if shape_ids.is_empty() {
        p.shapes.iter().map(|s| s.id).collect()
    } else {
        shape_ids.to_vec()
    })
}

/// What every per-shape job of a multi-GPU run is built from.
struct Spread<'a> {
    p: &'a Problem,
    candidate: &'a Source,
    reference: &'a Source,
    mode: Mode,
    hw: &'a HardwareProfile,
}

/// Runs one job per shape over a pool of every GPU, the largest T_SOL first, and merges the
/// parts into one outcome.
async fn run_spread(
    s: &Spread<'_>,
    devices: &[u32],
    ids: &[u32],
    as_json: bool,
) -> Result<Outcome, String> {
    let pool = WorkerPool::spawn(devices.iter().map(|d| WorkerConfig::new(*d)).collect());
    if !as_json {
        eprintln!(
            "spreading {} shapes over {} GPUs, the largest first",
            ids.len(),
            pool.len()
        );
    }
    let mut tasks = Vec::new();
    for id in ids {
        let job = crate::engine::build_job(
            s.p,
            s.candidate.clone(),
            Some(s.reference.clone()),
            &[*id],
            JobKind::All,
            s.mode,
            Some(s.hw),
        )?;
        tasks.push(spread::Task {
            tag: *id,
            job,
            cost: spread::shape_cost(s.p, *id, s.hw),
        });
    }
    let done = spread::run(&pool, devices, tasks, |_, _, _| {}).await;
    let o = merge_parts(done.into_iter().map(|f| f.outcome).collect());
    if !as_json {
        print_kernel_output(&o);
    }
    Ok(o)
}

/// Merges per-shape outcomes: the first compile log, the first failure's verdict, sorted shapes.
pub(crate) fn merge_parts(parts: Vec<Outcome>) -> Outcome {
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
    o
}

/// Prints what the kernels printed, per shape, to stderr.
pub(crate) fn print_kernel_output(o: &Outcome) {
    for k in &o.output {
        eprintln!("kernel output {}:", k.origin());
        for l in k.text.lines() {
            eprintln!("  | {l}");
        }
    }
}

/// The context a bench report is printed with.
struct Report<'a> {
    p: &'a Problem,
    candidate: &'a Source,
    dev: &'a DeviceInfo,
    devices: &'a [u32],
    driver: &'a str,
    nvrtc: &'a Option<String>,
    hw: &'a HardwareProfile,
    quick: bool,
    ids: &'a [u32],
}

/// Prints the outcome as one pretty JSON document on stdout.
fn print_json(r: &Report<'_>, o: &Outcome, wall_s: f64) -> Result<(), String> {
    let s_op = s_op_of(&o.shapes);
    let s_op_bench = s_op_bench_of(&o.shapes);
    let doc = json!({
        "operator": r.p.name,
        "kernel": r.candidate.name,
        "gpu": r.dev,
        "devices": r.devices,
        "driver": r.driver,
        "nvrtc": r.nvrtc,
        "hardware": r.hw.key,
        "mode": if r.quick { "quick" } else { "full" },
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
    Ok(())
}

/// Prints the outcome as a header line, a per-shape table and the S_op summary.
fn print_table(r: &Report<'_>, o: &Outcome) {
    println!(
        "{} · {} · {} ({} SMs) · driver {} · NVRTC {} · T_SOL on {}",
        r.p.name,
        r.candidate.name,
        r.dev.name,
        r.dev.sm_count,
        r.driver,
        r.nvrtc.clone().unwrap_or_default(),
        r.hw.key
    );
    println!(
        "{:>5} {:<11} {:>11} {:>11} {:>11} {:>8} {:>7} {:>11} {:>5}",
        "shape", "verdict", "median ms", "min ms", "T_SOL ms", "S", "IQR%", "max |err|", "n"
    );
    for s in &o.shapes {
        print_shape_row(s);
    }
    print_summary(r, o);
}

/// Prints one shape's row of the table, and its message underneath if any.
fn print_shape_row(r: &ShapeResult) {
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

/// Prints S_op, the benchmark-compatible S_op when it differs, and the job's message.
fn print_summary(r: &Report<'_>, o: &Outcome) {
    let s_op = s_op_of(&o.shapes);
    let s_op_bench = s_op_bench_of(&o.shapes);
    println!(
        "S_op = {s_op:.4} ({} of {} shapes passed){}",
        o.shapes
            .iter()
            .filter(|r| r.verdict == Verdict::Pass)
            .count(),
        r.ids.len(),
        if r.quick { " · quick" } else { "" }
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
