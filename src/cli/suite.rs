//! `suite`: the operators by weight with where each stands (the standing's incumbent S_op,
//! measured or stale, under the strict level and under the benchmark's rule), with shapes and
//! speed-of-light times.

use crate::standing::{Entry, Standing};
use crate::suite::roofline::{self, Rule};
use crate::suite::{PhaseFilter, Suite, Workspace};
use serde_json::json;

/// The standing `suite` shows (and `report` draws): the workspace's records over the shipped
/// ones for the profile `hardware`, judged on everything but the GPU (none is at hand).
pub fn standing(ws: &Workspace, s: &Suite, hardware: &str) -> Result<Standing, String> {
    let key = s.hardware(hardware)?.key.clone();
    Ok(crate::standing::Store::load(ws, s).view(&key, None))
}

/// An operator's standing for `suite --json`.
fn entry_json(e: Option<&Entry>) -> serde_json::Value {
    let Some(e) = e else {
        return json!({ "state": "none" });
    };
    let m = &e.record.measurement;
    json!({
        "state": if e.fresh() { "measured" } else { "stale" },
        "stale": e.stale.iter().map(|s| json!({"key": s.key(), "why": s.label()})).collect::<Vec<_>>(),
        "layer": e.layer.name(),
        "kernel": e.record.kernel,
        "origin": e.record.origin,
        "measured": m.date,
        "gpu": e.record.fingerprint.gpu,
        "driver": m.driver,
        "tool_version": m.tool_version,
        "hardware": m.hardware,
        "mode": m.mode,
        "s_op_measured": m.s_op,
        "s_op_benchmark": m.s_op_benchmark,
        "passed": m.passed(),
        "shapes_measured": m.shapes.len(),
    })
}

/// The standing's summary for `suite --json`: where it comes from, S_agg of every phase view,
/// and how many operators are measured, stale or missing in this view.
fn standing_json(suite: &Suite, st: &Standing, phase: PhaseFilter) -> serde_json::Value {
    let t = st.tally(suite, phase);
    json!({
        "hardware": st.hardware,
        "file": st.file.display().to_string(),
        "source": st.describe(),
        "shipped": st.shipped,
        "measured": t.measured,
        "stale": t.stale,
        "missing": t.missing,
        "problems": st.problems,
    })
}

/// The JSON document of `suite --json`.
pub fn suite_json(
    suite: &Suite,
    hardware: &str,
    phase: PhaseFilter,
    shapes: bool,
    standing: &Standing,
) -> Result<serde_json::Value, String> {
    let hw = suite.hardware(hardware)?;
    let weights = suite.weights(phase);
    let mut ops = Vec::new();
    for p in suite.by_weight(phase) {
        let e = standing.entry(&p.name);
        let mut op = json!({
            "name": p.name,
            "id": p.id,
            "weight": weights.get(&p.name).copied().unwrap_or(0.0),
            "raw_importance": p.importance,
            "phase": p.phase_label(),
            "dtype": p.dtype,
            "num_shapes": p.shapes.len(),
            "s_op": e.and_then(|e| e.s_op()),
            "s_op_benchmark": e.and_then(|e| e.s_op_under(Rule::Benchmark, p)),
            "standing": entry_json(e),
        });
        if shapes {
            let mut list = Vec::new();
            for s in &p.shapes {
                let w = p.work(s).map_err(|e| e.to_string())?;
                let sol = roofline::sol(&w, hw)?;
                let params: serde_json::Map<String, serde_json::Value> = s
                    .params
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect();
                let flops: serde_json::Map<String, serde_json::Value> = w
                    .flops
                    .iter()
                    .map(|(d, f)| (d.clone(), json!(*f as u128)))
                    .collect();
                list.push(json!({
                    "id": s.id,
                    "params": params,
                    "w_flops": flops,
                    "q_read_bytes": w.read_bytes as u128,
                    "q_write_bytes": w.write_bytes as u128,
                    "sol_ms": sol.sol_ms(),
                    "bottleneck": sol.bottleneck.name(),
                }));
            }
            op["shapes"] = json!(list);
        }
        ops.push(op);
    }
    let agg = |ph| standing.s_agg_by_rule(suite, ph);
    let (all, prefill, decode) = (
        agg(PhaseFilter::All),
        agg(PhaseFilter::Prefill),
        agg(PhaseFilter::Decode),
    );
    Ok(json!({
        "hardware": hw.key,
        "phase": phase.name(),
        "suite": suite.source.describe(),
        // Strict: a shape counts when it passed the problem's own tolerance.
        "s_agg": {
            "all": all.strict,
            "prefill": prefill.strict,
            "decode": decode.strict,
        },
        // The benchmark's rule: a shape counts only when it also passed the
        // benchmark-compatible level.
        "s_agg_benchmark": {
            "all": all.benchmark,
            "prefill": prefill.benchmark,
            "decode": decode.benchmark,
        },
        "standing": standing_json(suite, standing, phase),
        "operators": ops,
    }))
}

/// An operator's standing in the text table: its measurement's day and GPU, or why it is stale.
fn entry_text(e: Option<&Entry>) -> String {
    match e {
        None => "—".into(),
        Some(e) if !e.fresh() => format!("stale: {}", e.stale_label()),
        Some(e) => format!(
            "{} {} · {}{}",
            e.record.measurement.day(),
            e.record.fingerprint.gpu,
            e.record.origin.label(),
            if e.record.measurement.mode == "full" {
                String::new()
            } else {
                format!(" · {}", e.record.measurement.mode)
            }
        ),
    }
}

pub fn run(
    suite: &Suite,
    hardware: &str,
    phase: PhaseFilter,
    shapes: bool,
    json: bool,
    standing: &Standing,
) -> Result<i32, String> {
    for p in &standing.problems {
        eprintln!("atrex-tui: {p}");
    }
    let doc = suite_json(suite, hardware, phase, shapes, standing)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
        return Ok(0);
    }
    let hw = suite.hardware(hardware)?;
    println!(
        "{} operators, {} shapes · phase {} · hardware {} ({}) · suite: {}",
        doc["operators"].as_array().map(|a| a.len()).unwrap_or(0),
        suite
            .by_weight(phase)
            .iter()
            .map(|p| p.shapes.len())
            .sum::<usize>(),
        phase.name(),
        hw.key,
        hw.name,
        suite.source.describe()
    );
    let t = standing.tally(suite, phase);
    let agg = |ph| standing.s_agg_by_rule(suite, ph);
    println!(
        "S_agg {} · prefill {} · decode {} (strict/benchmark rule) · standing {}: {} · {} measured, {} stale, {} without a record",
        agg(PhaseFilter::All).named("benchmark rule"),
        agg(PhaseFilter::Prefill).pair(),
        agg(PhaseFilter::Decode).pair(),
        standing.hardware,
        standing.describe(),
        t.measured,
        t.stale,
        t.missing
    );
    println!(
        "{:<30} {:<10} {:>8} {:>10} {:<15} {:>6} {:>7} {:>7}  standing",
        "operator", "id", "weight", "raw", "phase", "shapes", "S_op", "bench"
    );
    for op in doc["operators"].as_array().into_iter().flatten() {
        let name = op["name"].as_str().unwrap_or("");
        let e = standing.entry(name);
        let three = |v: &serde_json::Value| {
            v.as_f64()
                .map(|s| format!("{s:.3}"))
                .unwrap_or_else(|| "—".into())
        };
        println!(
            "{:<30} {:<10} {:>7.2}% {:>10.6} {:<15} {:>6} {:>7} {:>7}  {}",
            name,
            op["id"].as_str().unwrap_or(""),
            op["weight"].as_f64().unwrap_or(0.0) * 100.0,
            op["raw_importance"].as_f64().unwrap_or(0.0),
            op["phase"].as_str().unwrap_or(""),
            op["num_shapes"].as_u64().unwrap_or(0),
            three(&op["s_op"]),
            three(&op["s_op_benchmark"]),
            entry_text(e)
        );
        if shapes {
            for s in op["shapes"].as_array().into_iter().flatten() {
                let params: Vec<String> = s["params"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| {
                        let v = v.to_string();
                        let v = if v.len() > 24 {
                            format!("{}…", &v[..23])
                        } else {
                            v
                        };
                        format!("{k}={v}")
                    })
                    .collect();
                let flops: Vec<String> = s["w_flops"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(d, f)| format!("{d}:{f}"))
                    .collect();
                println!(
                    "    #{:<4} W {:<28} Q {:>14} + {:>14} B  SOL {:>11.6} ms  {:<8}  {}",
                    s["id"],
                    if flops.is_empty() {
                        "-".to_string()
                    } else {
                        flops.join(",")
                    },
                    s["q_read_bytes"],
                    s["q_write_bytes"],
                    s["sol_ms"].as_f64().unwrap_or(0.0),
                    s["bottleneck"].as_str().unwrap_or(""),
                    params.join(" ")
                );
            }
        }
    }
    Ok(0)
}
