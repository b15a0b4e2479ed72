//! On the GPU: every operator's baseline passes the full (5-seed) strict check on every shape,
//! and its S_op is reported (`cargo test --release --test gpu_suite -- --include-ignored`;
//! `ATREX_OPS=a,b` limits the operators, `ATREX_MODE=quick` checks 1 seed).
//! Writes `$OUT/baselines.md` (a table like docs/baselines.md) and each `bench-OP.json`.

mod common;

use atrex_tui::suite::{Suite, SuiteSource};
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_baseline_passes_every_shape() {
    let suite = Suite::load(SuiteSource::Dir(root().join("problems"))).unwrap();
    let only: Option<Vec<String>> = std::env::var("ATREX_OPS")
        .ok()
        .map(|s| s.split(',').map(|x| x.trim().to_string()).collect());
    let mode = std::env::var("ATREX_MODE").unwrap_or_else(|_| "full".into());
    let out_dir = std::env::var("OUT").ok().map(PathBuf::from);
    let weights = suite.weights(atrex_tui::suite::PhaseFilter::All);
    let mut table =
        String::from("| operator | weight | shapes | passed | S_op |\n|---|---|---|---|---|\n");
    let mut failures = Vec::new();
    for p in suite.by_weight(atrex_tui::suite::PhaseFilter::All) {
        if only.as_ref().is_some_and(|o| !o.contains(&p.name)) {
            continue;
        }
        let out = Command::new(common::exe())
            .args(["bench", &p.name, "--json", &format!("--{mode}")])
            .current_dir(root())
            .output()
            .unwrap();
        let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
            failures.push(format!(
                "{}: no result ({})",
                p.name,
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ));
            continue;
        };
        if let Some(d) = &out_dir {
            let _ = std::fs::write(
                d.join(format!("bench-{}.json", p.name)),
                serde_json::to_string_pretty(&doc).unwrap(),
            );
        }
        let shapes = doc["shapes"].as_array().cloned().unwrap_or_default();
        let passed = shapes.iter().filter(|s| s["verdict"] == "pass").count();
        let line = format!(
            "| {} | {:.2}% | {} | {} | {:.3} |\n",
            p.name,
            weights.get(&p.name).copied().unwrap_or(0.0) * 100.0,
            p.shapes.len(),
            passed,
            doc["s_op"].as_f64().unwrap_or(0.0)
        );
        eprint!("{line}");
        table.push_str(&line);
        if passed != p.shapes.len() {
            let bad: Vec<String> = shapes
                .iter()
                .filter(|s| s["verdict"] != "pass")
                .take(3)
                .map(|s| {
                    format!(
                        "shape {} {}: {}",
                        s["shape"],
                        s["verdict"],
                        s["message"].as_str().unwrap_or("")
                    )
                })
                .collect();
            failures.push(format!(
                "{}: {passed} of {} shapes passed; {} {}",
                p.name,
                p.shapes.len(),
                doc["message"],
                bad.join("; ")
            ));
        }
    }
    if let Some(d) = &out_dir {
        let _ = std::fs::write(d.join("baselines.md"), &table);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
