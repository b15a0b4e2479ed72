//! `suite`: the operators by weight, with shapes and speed-of-light times.

use crate::suite::roofline;
use crate::suite::{PhaseFilter, Suite};
use serde_json::json;

/// The JSON document of `suite --json`.
pub fn suite_json(
    suite: &Suite,
    hardware: &str,
    phase: PhaseFilter,
    shapes: bool,
) -> Result<serde_json::Value, String> {
    let hw = suite.hardware(hardware)?;
    let weights = suite.weights(phase);
    let mut ops = Vec::new();
    for p in suite.by_weight(phase) {
        let mut op = json!({
            "name": p.name,
            "id": p.id,
            "weight": weights.get(&p.name).copied().unwrap_or(0.0),
            "raw_importance": p.importance,
            "phase": p.phase_label(),
            "dtype": p.dtype,
            "num_shapes": p.shapes.len(),
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
    Ok(json!({
        "hardware": hw.key,
        "phase": phase.name(),
        "suite": suite.source.describe(),
        "operators": ops,
    }))
}

pub fn run(
    suite: &Suite,
    hardware: &str,
    phase: PhaseFilter,
    shapes: bool,
    json: bool,
) -> Result<i32, String> {
    let doc = suite_json(suite, hardware, phase, shapes)?;
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
    println!(
        "{:<30} {:<10} {:>8} {:>10} {:<15} {:>6}",
        "operator", "id", "weight", "raw", "phase", "shapes"
    );
    for op in doc["operators"].as_array().into_iter().flatten() {
        println!(
            "{:<30} {:<10} {:>7.2}% {:>10.6} {:<15} {:>6}",
            op["name"].as_str().unwrap_or(""),
            op["id"].as_str().unwrap_or(""),
            op["weight"].as_f64().unwrap_or(0.0) * 100.0,
            op["raw_importance"].as_f64().unwrap_or(0.0),
            op["phase"].as_str().unwrap_or(""),
            op["num_shapes"]
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
