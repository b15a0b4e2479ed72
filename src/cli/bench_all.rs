//! `bench --all`: every operator's incumbent (the standing's kernel, else its baseline.cu)
//! measured on every shape, spread over every worker (local GPUs, or the `--workers` pool) the
//! largest T_SOL first; the S_agg table, and with `--record` the standing updated in one atomic
//! write.

use super::runtime;
use crate::contract::protocol::*;
use crate::pool::config::Choice;
use crate::pool::spread;
use crate::pool::{Pool, PoolOptions};
use crate::standing::{self, Origin, Store};
use crate::suite::hardware::HardwareProfile;
use crate::suite::{PhaseFilter, Problem, Suite, Workspace};
use serde_json::json;
use std::collections::BTreeMap;

/// What `bench --all` was asked for.
pub struct Args<'a> {
    pub quick: bool,
    pub hardware: Option<&'a str>,
    pub workers: &'a Choice,
    pub record: bool,
    pub json: bool,
}

/// An operator's incumbent: its source and where it came from.
struct Incumbent<'a> {
    p: &'a Problem,
    source: String,
    origin: Origin,
    reference: Source,
}

/// One operator's measurement.
struct OpResult {
    shapes: Vec<ShapeResult>,
    verdict: Option<Verdict>,
    message: Option<String>,
    gpu_s: f64,
}

pub fn run(suite: &Suite, ws: &Workspace, a: Args<'_>) -> Result<i32, String> {
    if a.record && a.quick {
        return Err(
            "the standing keeps full measurements (5 seeds): drop --quick to --record".into(),
        );
    }
    let store = Store::load(ws, suite);
    for p in store.problems() {
        eprintln!("atrex-tui: {p}");
    }
    let rt = runtime()?;
    rt.block_on(async {
        let started = match super::pool::start(a.workers, PoolOptions::default(), a.json).await {
            Ok(s) => s,
            Err(code) => return Ok(code),
        };
        let dev = started.dev.clone();
        let hw = match a.hardware {
            Some(h) => suite.hardware(h)?,
            None => {
                crate::suite::hardware::profile_for_device(&suite.hardware, &dev.name).ok_or_else(|| {
                    format!(
                        "no hardware profile matches `{}`; pass --hardware",
                        dev.name
                    )
                })?
            }
        };
        // The standing of a profile keeps measurements made on its GPU model only.
        if a.record {
            let base = hw.key.split('@').next().unwrap_or(&hw.key);
            let of_device = crate::suite::hardware::profile_for_device(&suite.hardware, &dev.name);
            if of_device.map(|d| d.key.as_str()) != Some(base) {
                return Err(format!(
                    "--record: this GPU is `{}`, not the GPU of hardware profile {}: its standing keeps measurements made on that GPU only (drop --hardware, or --record)",
                    dev.name, hw.key
                ));
            }
        }
        let view = store.view(&hw.key, Some(&dev.name));
        let incumbents = incumbents(suite, &view);
        let mode = if a.quick { Mode::Quick } else { Mode::Full };
        let workers = started.names();
        let t0 = std::time::Instant::now();
        let results = measure(&incumbents, hw, mode, &started.pool, workers.len(), a.json).await?;
        let wall_s = t0.elapsed().as_secs_f64();
        let ctx = standing::build::Context::now(
            &dev.name,
            &started.driver,
            started.nvrtc.as_deref(),
            &hw.key,
        );
        let mut recorded = None;
        if a.record {
            let updates: Vec<standing::Update> = incumbents
                .iter()
                .filter_map(|i| {
                    let r = results.get(&i.p.name)?;
                    // A run that lost shapes (a worker, the job) does not replace a record.
                    let got = r.shapes.len();
                    if got < i.p.shapes.len() {
                        eprintln!(
                            "atrex-tui: {} not recorded: {got} of its {} shapes have a result",
                            i.p.name,
                            i.p.shapes.len()
                        );
                        return None;
                    }
                    Some(standing::Update {
                        op: i.p.name.clone(),
                        record: standing::build::record(
                            i.p,
                            &standing::OpPrint::with_reference(i.p, &i.reference.code),
                            &i.source,
                            standing::store::kernel_path(&i.p.name, &i.source),
                            i.origin.clone(),
                            "full",
                            &r.shapes,
                            &ctx,
                        ),
                        source: i.source.clone(),
                    })
                })
                .collect();
            let w = standing::store::record(ws, &suite.name, &hw.key, &updates)?;
            if let Some((to, why)) = &w.backup {
                eprintln!("atrex-tui: {why}; moved to {}", to.display());
            }
            recorded = Some((w.file, updates.len()));
        }
        let report = Report {
            suite,
            dev: &dev,
            workers: &workers,
            driver: &started.driver,
            nvrtc: &started.nvrtc,
            hw,
            quick: a.quick,
            wall_s,
        };
        if a.json {
            print_json(&report, &incumbents, &results, recorded.as_ref())?;
        } else {
            print_table(&report, &incumbents, &results, recorded.as_ref());
        }
        let all_pass = incumbents.len() == suite.problems.len()
            && incumbents.iter().all(|i| {
                results.get(&i.p.name).is_some_and(|r| {
                    r.shapes.len() == i.p.shapes.len()
                        && r.shapes.iter().all(|s| s.verdict == Verdict::Pass)
                })
            });
        Ok(if all_pass { 0 } else { 1 })
    })
}

/// Every operator's incumbent, by weight: the standing's kernel when it can be read, else the
/// suite's baseline.cu. An operator without either (or without a reference) is left out, said
/// on stderr.
fn incumbents<'a>(suite: &'a Suite, view: &standing::Standing) -> Vec<Incumbent<'a>> {
    let mut out = Vec::new();
    for p in suite.by_weight(PhaseFilter::All) {
        let reference = match crate::contract::kernels::suite_kernel(suite, p, "reference.cu") {
            Ok(r) => r,
            Err(e) => {
                eprintln!("atrex-tui: {}: left out: {e}", p.name);
                continue;
            }
        };
        let from_standing = view
            .entry(&p.name)
            .and_then(|e| Some((e.source.clone()?, e.record.origin.clone())));
        let (source, origin) = match from_standing {
            Some(x) => x,
            None => match crate::contract::kernels::suite_kernel(suite, p, "baseline.cu") {
                Ok(b) => (
                    b.code,
                    Origin::File {
                        path: format!("problems/{}/baseline.cu", p.name),
                    },
                ),
                Err(e) => {
                    eprintln!("atrex-tui: {}: left out: {e}", p.name);
                    continue;
                }
            },
        };
        out.push(Incumbent {
            p,
            source,
            origin,
            reference,
        });
    }
    out
}

/// Measures every shape of every incumbent over the pool's workers, the largest T_SOL first;
/// progress on stderr (a line per shape unless `quiet`).
async fn measure(
    incumbents: &[Incumbent<'_>],
    hw: &HardwareProfile,
    mode: Mode,
    pool: &Pool,
    workers: usize,
    quiet: bool,
) -> Result<BTreeMap<String, OpResult>, String> {
    let mut tasks = Vec::new();
    for (k, i) in incumbents.iter().enumerate() {
        for s in &i.p.shapes {
            let job = crate::contract::job::build_job(
                i.p,
                Source {
                    name: format!("{} incumbent", i.p.name),
                    code: i.source.clone(),
                    defines: Default::default(),
                },
                Some(i.reference.clone()),
                &[s.id],
                JobKind::All,
                mode,
                Some(hw),
            )?;
            tasks.push(spread::Task {
                tag: (k, s.id),
                job,
                cost: spread::shape_cost(i.p, s.id, hw),
            });
        }
    }
    eprintln!(
        "measuring {} operators' incumbents: {} shapes over {} worker{}, the largest T_SOL first",
        incumbents.len(),
        tasks.len(),
        workers,
        if workers == 1 { "" } else { "s" }
    );
    let done = spread::run(pool, tasks, |f, n, total| {
        if quiet {
            return;
        }
        let (k, shape) = f.tag;
        let r = f.outcome.shapes.first();
        eprintln!(
            "[{n}/{total}] {} shape {shape} on {}: {}{} ({:.1} s)",
            incumbents[k].p.name,
            f.worker.as_deref().unwrap_or("no worker"),
            r.map(|r| r.verdict.name())
                .or(f.outcome.verdict.as_ref().map(|v| v.name()))
                .unwrap_or("no result"),
            r.and_then(|r| r.s)
                .map(|s| format!(" S {s:.3}"))
                .unwrap_or_default(),
            f.secs
        );
    })
    .await;
    let mut parts: BTreeMap<usize, (Vec<crate::contract::outcome::Outcome>, f64)> = BTreeMap::new();
    for f in done {
        let e = parts.entry(f.tag.0).or_default();
        e.0.push(f.outcome);
        e.1 += f.secs;
    }
    let mut out = BTreeMap::new();
    for (k, (outcomes, gpu_s)) in parts {
        let o = super::bench::merge_parts(outcomes);
        if !quiet {
            super::bench::print_kernel_output(&o);
        }
        out.insert(
            incumbents[k].p.name.clone(),
            OpResult {
                shapes: o.shapes,
                verdict: o.verdict,
                message: o.message,
                gpu_s,
            },
        );
    }
    Ok(out)
}

/// The context the result is printed with.
struct Report<'a> {
    suite: &'a Suite,
    dev: &'a DeviceInfo,
    /// The workers up (host and device, or their labels).
    workers: &'a [String],
    driver: &'a str,
    nvrtc: &'a Option<String>,
    hw: &'a HardwareProfile,
    quick: bool,
    wall_s: f64,
}

/// S_op of an operator over all its shapes (a failed or missing shape counting 0).
fn op_s(p: &Problem, r: Option<&OpResult>) -> (f64, f64) {
    let Some(r) = r else { return (0.0, 0.0) };
    let shapes: Vec<standing::ShapeMeasured> = r
        .shapes
        .iter()
        .map(standing::build::shape_measured)
        .collect();
    (
        standing::build::s_op_over(p, &shapes, false),
        standing::build::s_op_over(p, &shapes, true),
    )
}

/// S_agg of each phase view from the operators' S_op, under the strict level and under the
/// benchmark's rule.
fn s_aggs(
    suite: &Suite,
    strict: &BTreeMap<String, f64>,
    bench: &BTreeMap<String, f64>,
) -> [crate::suite::roofline::ByRule; 3] {
    [PhaseFilter::All, PhaseFilter::Prefill, PhaseFilter::Decode]
        .map(|ph| crate::suite::roofline::s_agg_by_rule(suite, ph, strict, bench))
}

/// Prints the S_agg table as docs/baselines.md has it.
fn print_table(
    r: &Report<'_>,
    incumbents: &[Incumbent<'_>],
    results: &BTreeMap<String, OpResult>,
    recorded: Option<&(std::path::PathBuf, usize)>,
) {
    println!(
        "{} ({} SMs) × {} · driver {} · NVRTC {} · T_SOL on {} · {}",
        r.dev.name,
        r.dev.sm_count,
        r.workers.len(),
        r.driver,
        r.nvrtc.clone().unwrap_or_default(),
        r.hw.key,
        if r.quick {
            "quick (1 seed)"
        } else {
            "full (5 seeds)"
        }
    );
    println!();
    println!(
        "| operator | weight | shapes | passed (strict) | seeds | S_op | S range | GPU time | incumbent |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let weights = r.suite.weights(PhaseFilter::All);
    let (mut s_ops, mut bench_ops) = (BTreeMap::new(), BTreeMap::new());
    for i in incumbents {
        let res = results.get(&i.p.name);
        let (s_op, s_op_bench) = op_s(i.p, res);
        s_ops.insert(i.p.name.clone(), s_op);
        bench_ops.insert(i.p.name.clone(), s_op_bench);
        let shapes = res.map(|x| x.shapes.as_slice()).unwrap_or(&[]);
        let passed = shapes.iter().filter(|s| s.verdict == Verdict::Pass).count();
        let seeds = shapes.iter().map(|s| s.seeds_checked).min().unwrap_or(0);
        let s: Vec<f64> = shapes.iter().filter_map(|s| s.s).collect();
        let range = match (
            s.iter().copied().reduce(f64::min),
            s.iter().copied().reduce(f64::max),
        ) {
            (Some(lo), Some(hi)) => format!("{lo:.4} – {hi:.3}"),
            _ => "-".into(),
        };
        println!(
            "| {} | {:.2}% | {} | {passed} | {seeds} | {s_op:.3} | {range} | {:.0} s | {} |",
            i.p.name,
            weights.get(&i.p.name).copied().unwrap_or(0.0) * 100.0,
            i.p.shapes.len(),
            res.map(|x| x.gpu_s).unwrap_or(0.0),
            i.origin.label()
        );
        if let Some(m) = res.and_then(|x| x.message.as_ref()) {
            println!(
                "|   | {}: {m} | | | | | | | |",
                res.and_then(|x| x.verdict.as_ref())
                    .map(|v| v.name())
                    .unwrap_or("error")
            );
        }
    }
    let aggs = s_aggs(r.suite, &s_ops, &bench_ops);
    println!();
    println!(
        "S_agg (all phases, Σ weight · S_op) = **{:.3}** strict · {:.3} benchmark rule · prefill {} · decode {} (strict/benchmark rule)",
        aggs[0].strict,
        aggs[0].benchmark,
        aggs[1].pair(),
        aggs[2].pair()
    );
    println!(
        "wall {:.0} s on {} worker{}: {}",
        r.wall_s,
        r.workers.len(),
        if r.workers.len() == 1 { "" } else { "s" },
        r.workers.join(", ")
    );
    match recorded {
        Some((f, n)) => println!("standing: {n} operators recorded in {}", f.display()),
        None => println!("(not recorded: --record updates the standing)"),
    }
}

/// Prints the result as one JSON document.
fn print_json(
    r: &Report<'_>,
    incumbents: &[Incumbent<'_>],
    results: &BTreeMap<String, OpResult>,
    recorded: Option<&(std::path::PathBuf, usize)>,
) -> Result<(), String> {
    let weights = r.suite.weights(PhaseFilter::All);
    let (mut s_ops, mut bench_ops) = (BTreeMap::new(), BTreeMap::new());
    let mut ops = Vec::new();
    for i in incumbents {
        let res = results.get(&i.p.name);
        let (s_op, s_op_bench) = op_s(i.p, res);
        s_ops.insert(i.p.name.clone(), s_op);
        bench_ops.insert(i.p.name.clone(), s_op_bench);
        let shapes = res.map(|x| x.shapes.as_slice()).unwrap_or(&[]);
        ops.push(json!({
            "operator": i.p.name,
            "weight": weights.get(&i.p.name).copied().unwrap_or(0.0),
            "origin": i.origin,
            "num_shapes": i.p.shapes.len(),
            "passed": shapes.iter().filter(|s| s.verdict == Verdict::Pass).count(),
            "s_op": s_op,
            "s_op_benchmark": s_op_bench,
            "gpu_s": res.map(|x| x.gpu_s),
            "verdict": res.and_then(|x| x.verdict.as_ref()).map(|v| v.name()),
            "message": res.and_then(|x| x.message.clone()),
            "shapes": shapes,
        }));
    }
    let aggs = s_aggs(r.suite, &s_ops, &bench_ops);
    let doc = json!({
        "gpu": r.dev,
        "workers": r.workers,
        "driver": r.driver,
        "nvrtc": r.nvrtc,
        "hardware": r.hw.key,
        "date": crate::utc::now(),
        "mode": if r.quick { "quick" } else { "full" },
        "s_agg": {
            "all": aggs[0].strict,
            "prefill": aggs[1].strict,
            "decode": aggs[2].strict,
        },
        "s_agg_benchmark": {
            "all": aggs[0].benchmark,
            "prefill": aggs[1].benchmark,
            "decode": aggs[2].benchmark,
        },
        "operators": ops,
        "wall_s": r.wall_s,
        "recorded": recorded.map(|(f, _)| f.display().to_string()),
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
    );
    Ok(())
}
