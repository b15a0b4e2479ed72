//! `bench --merge FILE...`: one document from the `--json` documents of runs of one kernel
//! over disjoint shapes (`bench_doc::merge` joins them; docs/bench-json.md). No GPU.
//!
//! Invariants: each file is read whole before anything is joined, and a refusal names the file;
//! the exit status is `bench`'s: 0 only when every shape asked for has a result and every
//! result passed.

use crate::bench_doc::{BenchDoc, merge::merge};
use crate::contract::protocol::Verdict;
use crate::suite::Suite;
use std::path::PathBuf;

pub fn run(
    suite: &Suite,
    op: Option<&str>,
    files: &[PathBuf],
    as_json: bool,
) -> Result<i32, String> {
    let mut docs = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let doc = BenchDoc::from_json(&text).map_err(|e| format!("{}: {e}", f.display()))?;
        docs.push((f.clone(), doc));
    }
    let merged = merge(suite, op, &docs)?;
    let name = merged.run.operator.as_str();
    let asked = merged.shapes_asked.as_ref().map(Vec::len).unwrap_or(0);
    let got = merged.run.shapes.len();
    let all = suite.problem(name).map(|p| p.shapes.len()).unwrap_or(0);
    if asked < all {
        eprintln!(
            "atrex-tui: the parts cover {asked} of {name}'s {all} shapes: S_op is over those"
        );
    }
    if got < asked {
        eprintln!(
            "atrex-tui: {} of the shapes the parts were asked for have no result: each counts 0",
            asked - got
        );
    }
    if merged.sol_checked != Some(true) {
        eprintln!(
            "atrex-tui: hardware profile {} is not in this suite: the parts' T_SOL could not be checked",
            serde_json::to_string(&merged.run.hardware).unwrap_or_default()
        );
    }
    // As `bench` exits: every shape asked for has a result, and every result passed.
    let every_shape_passed = merged.run.shapes.iter().all(|s| s.verdict == Verdict::Pass);
    let passed = merged.verdict == Some(Verdict::Pass) && every_shape_passed && got == asked;
    if as_json {
        println!("{}", merged.to_json_pretty());
    } else {
        print_summary(&merged);
    }
    Ok(if passed { 0 } else { 1 })
}

fn print_summary(d: &BenchDoc) {
    let parts = d.parts.as_ref().map(Vec::len).unwrap_or(0);
    println!(
        "{} · {} · {} · {} mode · {} shapes from {parts} runs",
        d.run.operator,
        d.run.kernel,
        d.run.gpu.name,
        d.run.mode_name(),
        d.run.shapes.len(),
    );
    // The shape id unpadded, as this summary has always printed it.
    for s in &d.run.shapes {
        println!(
            "{} {:<8} S {}",
            s.shape,
            s.verdict.name(),
            s.s.map(|x| format!("{x:.4}")).unwrap_or_else(|| "—".into())
        );
    }
    // A figure the document writes null (not finite) prints as 0.
    let figure = |x: Option<f64>| x.filter(|x| x.is_finite()).unwrap_or(0.0);
    println!(
        "S_op {:.4} (benchmark-compatible {:.4}) · verdict {}",
        figure(Some(d.s_op)),
        figure(d.s_op_benchmark),
        d.verdict.as_ref().map(Verdict::name).unwrap_or("?")
    );
}
