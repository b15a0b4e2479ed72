//! `bench`: compile, check and time a kernel on the GPU.

use super::bench_against::Incumbent;
use super::runtime;
use crate::bench_doc::{BenchDoc, Run};
use crate::contract::kernels::suite_kernel;
use crate::contract::outcome::*;
use crate::contract::protocol::*;
use crate::pool::config::Choice;
use crate::pool::{PoolOptions, PoolStatus};
use crate::suite::Problem;
use crate::suite::hardware::HardwareProfile;
use crate::suite::{Suite, Workspace};
use std::path::Path;

#[allow(clippy::too_many_arguments)]
pub fn run(
    suite: &Suite,
    ws: &Workspace,
    op: &str,
    kernel: Option<&Path>,
    defines: &[String],
    sweep: &[String],
    shape_ids: &[u32],
    quick: bool,
    hardware: Option<&str>,
    workers: &Choice,
    as_json: bool,
) -> Result<i32, String> {
    let p = suite
        .problem(op)
        .ok_or_else(|| format!("unknown operator `{op}` (see `atrex-tui suite`)"))?;
    // Every combination's kernel is made before a worker starts, so that a mistake in a
    // --define or --sweep costs no GPU time. Without --sweep there is one, the plain run.
    let sweep = super::bench_sweep::Plan::of(suite, p, kernel, defines, sweep)?;
    let reference = suite_kernel(suite, p, "reference.cu")?;
    let ids = resolve_shape_ids(p, shape_ids)?;
    let rt = runtime()?;
    rt.block_on(async {
        let started = match super::pool::start(workers, PoolOptions::default(), as_json).await {
            Ok(s) => s,
            Err(code) => return Ok(code),
        };
        let dev = &started.dev;
        let hw = match hardware {
            Some(h) => Some(suite.hardware(h)?),
            None => crate::suite::hardware::profile_for_device(&suite.hardware, &dev.name),
        };
        let Some(hw) = hw else {
            return Err(format!(
                "no hardware profile matches `{}`; pass --hardware",
                dev.name
            ));
        };
        let mode = if quick { Mode::Quick } else { Mode::Full };
        let names = started.names();
        if !as_json && names.len() > 1 {
            eprintln!(
                "spreading {} shapes over {} workers ({}), the largest T_SOL first",
                ids.len(),
                names.len(),
                names.join(", ")
            );
        }
        let mut runs = Vec::new();
        for (k, candidate) in sweep.candidates.iter().enumerate() {
            if !as_json && sweep.candidates.len() > 1 {
                eprintln!("[{}/{}] {}", k + 1, sweep.candidates.len(), candidate.name);
            }
            let t0 = std::time::Instant::now();
            let date = crate::utc::now();
            let job = crate::contract::job::build_job(
                p,
                candidate.clone(),
                Some(reference.clone()),
                &ids,
                JobKind::All,
                mode,
                Some(hw),
            )?;
            let mut o = collect(&started.pool, job, !as_json).await;
            o.shapes.sort_by_key(|r| r.shape);
            o.output.sort_by_key(|k| k.shape);
            if !as_json && names.len() > 1 {
                print_kernel_output(&o);
            }
            runs.push((o, date, t0.elapsed().as_secs_f64()));
        }
        // The standing's incumbent on this GPU and hardware profile, when its record stands.
        let store = crate::standing::Store::load(ws, suite);
        if !as_json {
            for w in store.problems() {
                eprintln!("atrex-tui: {w}");
            }
        }
        let incumbent = store
            .view(&hw.key, Some(&dev.name))
            .entry(&p.name)
            .and_then(Incumbent::of);
        let report = |candidate| Report {
            p,
            incumbent: incumbent.as_ref(),
            candidate,
            dev,
            workers: &names,
            driver: &started.driver,
            nvrtc: &started.nvrtc,
            hw,
            quick,
            ids: &ids,
        };
        let pool = started.pool.status();
        let docs: Vec<BenchDoc> = runs
            .iter()
            .zip(&sweep.candidates)
            .map(|((o, date, wall_s), c)| doc(&report(c), o, date, *wall_s, &pool))
            .collect();
        let failed = runs.iter().any(|(o, ..)| {
            o.shapes.iter().any(|r| !matches!(r.verdict, Verdict::Pass))
                || o.shapes.len() < ids.len()
                || !matches!(o.verdict, Some(Verdict::Pass))
        });
        if sweep.is_sweep() {
            sweep.print(docs, &ids, as_json);
        } else if as_json {
            println!("{}", docs[0].to_json_pretty());
        } else {
            print_table(&report(&sweep.candidates[0]), &runs[0].0);
        }
        Ok(if failed { 1 } else { 0 })
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
    /// The workers up (host and device, or their labels).
    workers: &'a [String],
    driver: &'a str,
    nvrtc: &'a Option<String>,
    hw: &'a HardwareProfile,
    quick: bool,
    ids: &'a [u32],
    /// The standing's incumbent, to compare with (docs/standing.md).
    incumbent: Option<&'a Incumbent>,
}

/// The outcome as a bench document (docs/bench-json.md). `date`: when the run started (UTC).
fn doc(r: &Report<'_>, o: &Outcome, date: &str, wall_s: f64, pool: &PoolStatus) -> BenchDoc {
    BenchDoc {
        run: Run {
            operator: r.p.name.clone(),
            kernel: r.candidate.name.clone(),
            // The source as compiled, with the defines it ran with: what `bench --merge` matches.
            source_sha256: Some(crate::fingerprint::of_source(&r.candidate.code)),
            // Its code without the comments: what the shipped standing matches a file against.
            code_sha256: Some(crate::fingerprint::of_code(&r.candidate.code)),
            gpu: r.dev.clone(),
            driver: r.driver.to_string(),
            nvrtc: r.nvrtc.clone(),
            hardware: Some(r.hw.key.clone()),
            mode: if r.quick { Mode::Quick } else { Mode::Full },
            // When and by which version: what a standing record built from this document says.
            date: Some(date.to_string()),
            tool_version: Some(env!("CARGO_PKG_VERSION").to_string()),
            shapes: o.shapes.clone(),
        },
        defines: Some(r.candidate.defines.clone()),
        workers: Some(r.workers.to_vec()),
        pool: Some(serde_json::to_value(pool).expect("the pool's state is plain data")),
        verdict: o.verdict.clone(),
        message: o.message.clone(),
        compile: o.compiled.clone(),
        // The shapes the run was asked for: one without a result counts 0 in S_op.
        shapes_asked: Some(r.ids.to_vec()),
        output: Some(o.output.clone()),
        s_op: s_op_over(&o.shapes, r.ids),
        s_op_benchmark: Some(s_op_bench_over(&o.shapes, r.ids)),
        incumbent: Some(r.incumbent.map(|i| i.to_doc(r.ids))),
        wall_s: Some(wall_s),
        sol_checked: None,
        parts: None,
        other: Default::default(),
    }
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
        "{:>5} {:<11} {:>11} {:>11} {:>11} {:>8} {}{:>7} {:>11} {:>5}  worker",
        "shape",
        "verdict",
        "median ms",
        "min ms",
        "T_SOL ms",
        "S",
        if r.incumbent.is_some() {
            " vs inc "
        } else {
            ""
        },
        "IQR%",
        "max |err|",
        "n"
    );
    for s in &o.shapes {
        print_shape_row(s, r.incumbent);
    }
    print_summary(r, o);
}

/// Prints one shape's row of the table (with its S over the incumbent's when there is one),
/// and its message underneath if any.
fn print_shape_row(r: &ShapeResult, inc: Option<&Incumbent>) {
    let t = r.timing.as_ref();
    let err = r.checks.iter().map(|c| c.max_abs).fold(0.0, f64::max);
    println!(
        "{:>5} {:<11} {:>11} {:>11} {:>11.5} {:>8} {}{:>7} {:>11.3e} {:>5}  {}",
        r.shape,
        r.verdict.name(),
        t.map(|t| format!("{:.5}", t.median_ms))
            .unwrap_or_else(|| "-".into()),
        t.map(|t| format!("{:.5}", t.min_ms))
            .unwrap_or_else(|| "-".into()),
        r.sol_ms,
        r.s.map(|s| format!("{s:.3}")).unwrap_or_else(|| "-".into()),
        inc.map(|i| format!(" {:>7}", i.cell(r)))
            .unwrap_or_default(),
        t.map(|t| format!("{:.1}", t.rel_iqr * 100.0))
            .unwrap_or_else(|| "-".into()),
        err,
        t.map(|t| t.n.to_string()).unwrap_or_else(|| "-".into()),
        r.worker.as_deref().unwrap_or("-"),
    );
    if let Some(m) = &r.message {
        println!("      {m}");
    }
}

/// Prints S_op, the benchmark-compatible S_op when it differs, and the job's message.
fn print_summary(r: &Report<'_>, o: &Outcome) {
    let s_op = s_op_over(&o.shapes, r.ids);
    let s_op_bench = s_op_bench_over(&o.shapes, r.ids);
    println!(
        "S_op = {s_op:.4} ({} of {} shapes passed){}",
        o.shapes
            .iter()
            .filter(|r| r.verdict == Verdict::Pass)
            .count(),
        r.ids.len(),
        if r.quick { " · quick" } else { "" }
    );
    if let Some(i) = r.incumbent {
        println!("{}", i.summary(r.ids, s_op));
    }
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
