//! `bench` and `calibrate`: headless measurement through the worker.

use crate::engine::client::{JobEvent, WorkerClient, WorkerConfig, WorkerPool};
use crate::engine::protocol::*;
use crate::roofline::{self, ShapeScore};
use crate::suite::{Problem, Suite};
use serde_json::json;
use std::path::Path;

/// Exit code when no GPU is available.
pub const EXIT_NO_GPU: i32 = 2;

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

/// The outcome of a job as collected by `collect`.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub compiled: Vec<Event>,
    pub shapes: Vec<ShapeResult>,
    pub verdict: Option<Verdict>,
    pub message: Option<String>,
    /// What the kernels printed, per shape (None: outside a shape).
    pub output: Vec<KernelOutput>,
}

/// Text a job's kernels printed (device `printf`), as the worker captured it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct KernelOutput {
    pub shape: Option<u32>,
    pub text: String,
    /// Bytes printed beyond the job's 64 KiB and not kept.
    pub dropped: u64,
}

impl KernelOutput {
    /// Where it came from, for a heading.
    pub fn origin(&self) -> String {
        match self.shape {
            Some(s) => format!("shape {s}"),
            None => "outside a shape".into(),
        }
    }
}

/// Runs a job to completion, printing progress to stderr when asked.
pub async fn collect(client: &WorkerClient, job: Job, progress: bool) -> Outcome {
    let (_, rx) = client.submit(job);
    collect_rx(rx, progress).await
}

/// Collects one job's events from its receiver.
pub async fn collect_rx(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<JobEvent>,
    progress: bool,
) -> Outcome {
    let mut o = Outcome::default();
    while let Some(ev) = rx.recv().await {
        match ev {
            JobEvent::Worker(Event::Compiled {
                which,
                ok,
                cached,
                ms,
                diagnostics,
                log,
                resources,
                id,
            }) => {
                if progress {
                    eprintln!(
                        "compiled {which}: {} in {ms:.0} ms{}",
                        if ok { "ok" } else { "FAILED" },
                        if cached { " (cached)" } else { "" }
                    );
                    for d in &diagnostics {
                        eprintln!("  line {}: {}: {}", d.line, d.severity, d.msg);
                    }
                }
                o.compiled.push(Event::Compiled {
                    which,
                    ok,
                    cached,
                    ms,
                    diagnostics,
                    log,
                    resources,
                    id,
                });
            }
            JobEvent::Worker(Event::Progress {
                stage,
                shape,
                done,
                total,
                ..
            }) => {
                if progress && stage != "done" {
                    eprint!(
                        "\r{stage} shape {} ({}/{total})      ",
                        shape.map(|s| s.to_string()).unwrap_or_default(),
                        done + 1
                    );
                }
            }
            JobEvent::Worker(Event::ShapeDone { result, .. }) => o.shapes.push(result),
            JobEvent::Worker(Event::Output {
                shape,
                text,
                dropped,
                ..
            }) => {
                if progress {
                    eprint!("\r{:60}\r", "");
                    let origin = shape.map(|s| format!("shape {s}")).unwrap_or_default();
                    eprintln!("kernel output {origin}:");
                    for l in text.lines() {
                        eprintln!("  | {l}");
                    }
                }
                o.output.push(KernelOutput {
                    shape,
                    text,
                    dropped,
                });
            }
            JobEvent::Worker(Event::Done {
                verdict, message, ..
            }) => {
                o.verdict = Some(verdict);
                o.message = message;
                break;
            }
            JobEvent::Worker(Event::Fault { message, .. }) => o.message = Some(message),
            JobEvent::Worker(_) => {}
            JobEvent::WorkerLost { verdict, message } => {
                o.verdict = Some(verdict);
                o.message = Some(message);
                break;
            }
        }
    }
    if progress {
        eprint!("\r                                        \r");
    }
    o
}

/// S_op of a set of results: median of S, failed shapes 0.
pub fn s_op_of(results: &[ShapeResult]) -> f64 {
    let scores: Vec<ShapeScore> = results
        .iter()
        .map(|r| match (r.verdict.clone(), r.s) {
            (Verdict::Pass, Some(s)) => ShapeScore::Passed(s),
            _ => ShapeScore::Failed,
        })
        .collect();
    roofline::s_op(&scores)
}

/// S_op under the benchmark's own rule: a shape counts only when it also passed the
/// benchmark-compatible level on every seed (for fp8 outputs NaN never equals NaN there).
pub fn s_op_bench_of(results: &[ShapeResult]) -> f64 {
    let scores: Vec<ShapeScore> = results
        .iter()
        .map(|r| match (r.verdict.clone(), r.s) {
            (Verdict::Pass, Some(s)) if r.bench_ok => ShapeScore::Passed(s),
            _ => ShapeScore::Failed,
        })
        .collect();
    roofline::s_op(&scores)
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

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

/// `compile`: NVRTC and launch-plan diagnostics, through the worker (no GPU needed).
pub fn compile(
    suite: &Suite,
    op: &str,
    kernel: Option<&Path>,
    arch: &str,
    as_json: bool,
) -> Result<i32, String> {
    let p = suite
        .problem(op)
        .ok_or_else(|| format!("unknown operator `{op}` (see `atrex-tui suite`)"))?;
    let candidate = candidate_kernel(suite, p, kernel)?;
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

/// Compiles a candidate on the worker's GPU and returns its kernels' resources (registers,
/// shared memory, spills); Err when it does not compile.
pub async fn compile_resources(
    client: &WorkerClient,
    p: &Problem,
    candidate: &Source,
    shape_id: u32,
) -> Result<Option<std::collections::BTreeMap<String, KernelResources>>, String> {
    let job = crate::engine::build_job(
        p,
        candidate.clone(),
        None,
        &[shape_id],
        JobKind::Compile,
        Mode::Quick,
        None,
    )?;
    let o = collect(client, job, false).await;
    if !matches!(o.verdict, Some(Verdict::Pass)) {
        return Err(format!(
            "{}: does not compile: {}",
            candidate.name,
            o.message.unwrap_or_else(|| "compile error".into())
        ));
    }
    Ok(o.compiled.iter().find_map(|e| match e {
        Event::Compiled {
            which,
            resources,
            ok: true,
            ..
        } if which == "candidate" => Some(resources.clone()),
        _ => None,
    }))
}

/// Where calibration results are cached.
pub fn calibration_file(gpu_name: &str) -> Option<std::path::PathBuf> {
    let safe: String = gpu_name
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { '_' })
        .collect();
    dirs::cache_dir().map(|d| d.join("atrex-tui").join(format!("calibration-{safe}.json")))
}

pub fn calibrate(device: u32, as_json: bool) -> Result<i32, String> {
    let rt = runtime()?;
    rt.block_on(async {
        let client = WorkerClient::spawn(WorkerConfig::new(device));
        let dev = match client.device().await {
            Ok((d, _)) => d,
            Err(e) => {
                eprintln!("atrex-tui: no GPU {device}: {e}; calibration is unavailable");
                return Ok(EXIT_NO_GPU);
            }
        };
        let ev = client.calibrate().await?;
        let Event::Calibration { copy_bytes_per_s, bytes, median_ms, mma_bf16_flops_per_s, .. } = ev else {
            return Err(format!("unexpected reply {ev:?}"));
        };
        let suite = crate::suite::Suite::load(crate::suite::SuiteSource::Embedded).ok();
        let hardware_key = suite
            .as_ref()
            .and_then(|s| crate::engine::profile_for_device(&s.hardware, &dev.name).map(|h| h.key.clone()));
        let datasheet = suite
            .as_ref()
            .and_then(|s| crate::engine::profile_for_device(&s.hardware, &dev.name).map(|h| h.hbm_bytes_per_s));
        let datasheet_bf16 = suite.as_ref().and_then(|s| {
            crate::engine::profile_for_device(&s.hardware, &dev.name)
                .and_then(|h| h.peak_flops.get("bf16").copied())
        });
        let doc = json!({
            "gpu": dev.name,
            "hardware_key": hardware_key,
            "datasheet_bytes_per_s": datasheet,
            "mma_bf16_flops_per_s": mma_bf16_flops_per_s,
            "datasheet_bf16_flops_per_s": datasheet_bf16,
            "copy_bytes_per_s": copy_bytes_per_s,
            "bytes_moved": bytes,
            "median_ms": median_ms,
            "measured_at": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        });
        if let Some(f) = calibration_file(&dev.name) {
            if let Some(d) = f.parent() {
                let _ = std::fs::create_dir_all(d);
            }
            let _ = std::fs::write(&f, serde_json::to_string_pretty(&doc).unwrap_or_default());
        }
        if as_json {
            println!("{}", serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?);
        } else {
            println!(
                "{}: copy bandwidth {:.2} TB/s (read + write, {} MiB moved, median {:.3} ms){}",
                dev.name,
                copy_bytes_per_s / 1e12,
                bytes >> 20,
                median_ms,
                datasheet.map(|d| format!("; datasheet {:.2} TB/s ({:.0}%)", d / 1e12, 100.0 * copy_bytes_per_s / d)).unwrap_or_default()
            );
            match mma_bf16_flops_per_s {
                Some(r) => println!(
                    "tensor cores: mma.sync m16n8k16 bf16 → fp32 {:.0} TFLOP/s{} (the datasheet figure needs wgmma on Hopper; T_SOL keeps the datasheet peak)",
                    r / 1e12,
                    datasheet_bf16
                        .map(|d| format!("; datasheet dense bf16 {:.0} TFLOP/s ({:.0}%)", d / 1e12, 100.0 * r / d))
                        .unwrap_or_default()
                ),
                None => println!("tensor cores: not measured (needs sm_80 or newer)"),
            }
            if let Some(k) = &hardware_key {
                println!("roofline views can use the measured bandwidth: --hardware {k}@calibrated");
            }
        }
        Ok(0)
    })
}

/// `profile`: the candidate under Nsight Compute for one shape.
pub fn profile(
    suite: &Suite,
    op: &str,
    kernel: Option<&Path>,
    shape: Option<u32>,
    clock_control: &str,
    device: u32,
    as_json: bool,
) -> Result<i32, String> {
    let p = suite
        .problem(op)
        .ok_or_else(|| format!("unknown operator `{op}` (see `atrex-tui suite`)"))?;
    let candidate = candidate_kernel(suite, p, kernel)?;
    let shape_id = match shape {
        Some(s) => {
            if p.shape(s).is_none() {
                return Err(format!("{} has no shape {s}", p.name));
            }
            s
        }
        None => crate::profile::largest_shape(p).ok_or("no shapes")?,
    };
    let mut opts = match crate::profile::NcuOptions::find() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("atrex-tui: {e}");
            return Ok(EXIT_NO_GPU);
        }
    };
    opts.clock_control = clock_control.to_string();
    let rt = runtime()?;
    let (dev_name, resources) = rt
        .block_on(async {
            let client = WorkerClient::spawn(WorkerConfig::new(device));
            let name = match client.device().await {
                Ok((d, _)) => d.name,
                Err(_) => return Err("no GPU".to_string()),
            };
            let res = compile_resources(&client, p, &candidate, shape_id).await?;
            Ok((name, res))
        })
        .or_else(|e| {
            if e == "no GPU" {
                Ok((String::new(), None))
            } else {
                Err(e)
            }
        })?;
    if dev_name.is_empty() {
        eprintln!("atrex-tui: no GPU {device}: profiling is unavailable");
        return Ok(EXIT_NO_GPU);
    }
    if !as_json {
        eprintln!(
            "profiling {} shape {shape_id} under {} ...",
            p.name,
            opts.ncu.display()
        );
    }
    let prof = match crate::profile::profile(
        suite,
        p,
        candidate,
        shape_id,
        device,
        &opts,
        Some(&dev_name),
        resources.as_ref(),
    ) {
        Ok(pr) => pr,
        Err(e) => {
            eprintln!("atrex-tui: {e}");
            return Ok(1);
        }
    };
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&prof).map_err(|e| e.to_string())?
        );
        return Ok(0);
    }
    let pct = |v: Option<f64>| {
        v.map(|x| format!("{x:5.1}%"))
            .unwrap_or_else(|| "    -".into())
    };
    let bar = |v: Option<f64>| {
        let n = (v.unwrap_or(0.0) / 5.0).round().clamp(0.0, 20.0) as usize;
        format!("{}{}", "█".repeat(n), "·".repeat(20 - n))
    };
    println!(
        "{} · {} · shape {} · {dev_name} · {:.1} s",
        prof.operator, prof.kernel_file, prof.shape, prof.wall_s
    );
    for k in &prof.kernels {
        println!(
            "kernel {}: {:.2} µs, grid {} × block {}, {} registers/thread, {:.2} waves/SM",
            k.name,
            k.duration_ns.unwrap_or(0.0) / 1e3,
            k.grid_size.unwrap_or(0.0),
            k.block_size.unwrap_or(0.0),
            k.registers_per_thread.unwrap_or(0.0),
            k.waves_per_sm.unwrap_or(0.0)
        );
        println!(
            "  DRAM       {} {}  ({:.1} MB read, {:.1} MB written)",
            bar(k.dram_throughput_pct),
            pct(k.dram_throughput_pct),
            k.dram_read_bytes.unwrap_or(0.0) / 1e6,
            k.dram_write_bytes.unwrap_or(0.0) / 1e6
        );
        println!(
            "  SM         {} {}",
            bar(k.sm_throughput_pct),
            pct(k.sm_throughput_pct)
        );
        println!(
            "  occupancy  {} {} (theoretical {})",
            bar(k.achieved_occupancy_pct),
            pct(k.achieved_occupancy_pct),
            pct(k.theoretical_occupancy_pct)
        );
        println!(
            "  L1 hit {}  L2 hit {}  tensor pipe {}",
            pct(k.l1_hit_pct),
            pct(k.l2_hit_pct),
            pct(k.tensor_pipe_pct)
        );
        let stalls: Vec<String> = k
            .stalls
            .iter()
            .take(4)
            .map(|(r, v)| format!("{r} {v:.2}"))
            .collect();
        println!("  stalls (cycles/instruction): {}", stalls.join(", "));
    }
    if let Some(r) = prof.redundant_traffic_ratio {
        println!("DRAM bytes / Q = {r:.3}");
    }
    for f in &prof.findings {
        println!("{}", f.line());
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::fixtures::shape_result;

    #[test]
    fn the_benchmark_s_op_counts_only_shapes_passing_the_benchmark_rule() {
        let mut rs: Vec<ShapeResult> = (0..3)
            .map(|i| shape_result(i, Some(0.2 + 0.1 * i as f64), Verdict::Pass, 0.01))
            .collect();
        assert!((s_op_of(&rs) - 0.3).abs() < 1e-12);
        assert!((s_op_bench_of(&rs) - 0.3).abs() < 1e-12);
        // shape 2 passes strict (NaN shared with the reference) but not the benchmark's rule
        rs[2].bench_ok = false;
        assert!((s_op_of(&rs) - 0.3).abs() < 1e-12);
        assert!(
            (s_op_bench_of(&rs) - 0.2).abs() < 1e-12,
            "{}",
            s_op_bench_of(&rs)
        );
        // a failed shape counts 0 in both
        rs[0].verdict = Verdict::Incorrect;
        assert!((s_op_of(&rs) - 0.3).abs() < 1e-12);
        assert!(s_op_bench_of(&rs).abs() < 1e-12);
    }
}
