//! One document from the bench documents of runs of one kernel over disjoint shapes — a full
//! run split across machines or leases (`bench OP --full --shape ...` per part;
//! `bench --merge`).
//!
//! Invariants: every part measured the same source with the same defines (`source_sha256`,
//! `defines`) on the same GPU model, driver, NVRTC, hardware profile and mode, with the same
//! version of atrex-tui, or the merge is refused naming the file and the field; no shape is
//! asked for in two parts; each shape's result is kept as its part wrote it, and its T_SOL must
//! be the suite's (where the hardware profile is known here). S_op and the
//! benchmark-compatible S_op are computed again over the union of the shapes asked for, a shape
//! without a result counting 0 (as `bench` counts it); the verdict is the first part's that did
//! not pass, else pass; `wall_s` is the parts' sum, `date` the last part's (none when a part
//! has none) and `parts` says which file gave which shapes and which it lost, and when it ran.
//! The per-run `incumbent` comparison and the pool's state are dropped (each covered only its
//! part's shapes); everything else is the first part's.

use super::{BenchDoc, MergeError, Part};
use crate::contract::outcome::{s_op_bench_over, s_op_over};
use crate::contract::protocol::{ShapeResult, Verdict};
use crate::suite::Suite;
use crate::suite::roofline::shape_sols;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The fields every part must agree on, by the name a refusal gives them, as JSON (None:
/// absent from the document).
fn same(d: &BenchDoc) -> [(&'static str, Option<Value>); 10] {
    let r = &d.run;
    [
        ("operator", Some(json(&r.operator))),
        ("kernel", Some(json(&r.kernel))),
        ("source_sha256", r.source_sha256.as_ref().map(json)),
        ("defines", d.defines.as_ref().map(json)),
        ("gpu", Some(json(&r.gpu.name))),
        ("driver", Some(json(&r.driver))),
        ("nvrtc", Some(json(&r.nvrtc))),
        ("hardware", Some(json(&r.hardware))),
        ("mode", Some(json(&r.mode))),
        ("tool_version", r.tool_version.as_ref().map(json)),
    ]
}

fn json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("a document's field is plain data")
}

/// The merged document of `docs` (each with the file it came from, for messages). `op`: the
/// operator the caller expects, if any.
pub fn merge(
    suite: &Suite,
    op: Option<&str>,
    docs: &[(PathBuf, BenchDoc)],
) -> Result<BenchDoc, MergeError> {
    if docs.len() < 2 {
        return Err(MergeError::TooFew);
    }
    check_same(docs)?;
    let first = &docs[0].1;
    let name = first.run.operator.as_str();
    if let Some(op) = op
        && suite.problem(op).map(|p| p.name.as_str()) != Some(name)
    {
        return Err(MergeError::OtherOperator {
            of: name.to_string(),
            asked: op.to_string(),
        });
    }
    let p = suite
        .problem(name)
        .ok_or_else(|| MergeError::NotInSuite(name.to_string()))?;

    // Every shape once, each as its part wrote it; the shapes each part was asked for (older
    // documents without `shapes_asked`: the ones they hold).
    let hw = first
        .run
        .hardware
        .as_deref()
        .and_then(|k| suite.hardware(k).ok());
    let sols = hw.map(|h| shape_sols(p, h));
    let mut by_shape: BTreeMap<u32, ShapeResult> = BTreeMap::new();
    let mut asked_by: BTreeMap<u32, usize> = BTreeMap::new();
    let mut parts = Vec::new();
    for (k, (f, d)) in docs.iter().enumerate() {
        let mut ids = Vec::new();
        for r in &d.run.shapes {
            let id = r.shape;
            if p.shape(id).is_none() {
                return Err(no_shape(f, name, id));
            }
            // S rests on T_SOL: the part's must be the suite's, on the same hardware profile.
            if let (Some(sols), Some(_)) = (&sols, r.s) {
                let want = *sols.get(&id).ok_or_else(|| MergeError::NoSol {
                    op: name.to_string(),
                    id,
                })?;
                if (r.sol_ms - want).abs() > 1e-9 * want.abs().max(1e-12) {
                    return Err(MergeError::OtherSol {
                        file: f.clone(),
                        id,
                        theirs: r.sol_ms,
                        suite: want,
                    });
                }
            }
            by_shape.insert(id, r.clone());
            ids.push(id);
        }
        let asked = d.shapes_asked.clone().unwrap_or_else(|| ids.clone());
        if let Some(&id) = ids.iter().find(|id| !asked.contains(id)) {
            return Err(MergeError::NotAsked {
                file: f.clone(),
                id,
            });
        }
        for id in &asked {
            if p.shape(*id).is_none() {
                return Err(no_shape(f, name, *id));
            }
            if let Some(j) = asked_by.insert(*id, k) {
                return Err(MergeError::AskedTwice {
                    id: *id,
                    first: docs[j].0.clone(),
                    second: f.clone(),
                });
            }
        }
        let missing: Vec<u32> = asked
            .iter()
            .copied()
            .filter(|id| !ids.contains(id))
            .collect();
        let wall_s = d.wall_s.ok_or_else(|| MergeError::NoWallS(f.clone()))?;
        parts.push(Part {
            file: f.display().to_string(),
            shapes: ids,
            missing,
            wall_s,
            date: d.run.date.clone(),
        });
    }
    let asked: Vec<u32> = asked_by.keys().copied().collect();
    let shapes: Vec<ShapeResult> = by_shape.into_values().collect();

    let failed = docs.iter().find(|(_, d)| d.verdict != Some(Verdict::Pass));
    let (verdict, message) = match failed {
        Some((_, d)) => (d.verdict.clone(), d.message.clone()),
        None => (Some(Verdict::Pass), None),
    };
    let mut workers: Vec<String> = Vec::new();
    for (_, d) in docs {
        for w in d.workers.iter().flatten() {
            if !workers.contains(w) {
                workers.push(w.clone());
            }
        }
    }
    let mut output: Vec<_> = docs
        .iter()
        .flat_map(|(_, d)| d.output.iter().flatten().cloned())
        .collect();
    output.sort_by_key(|o| o.shape);
    // The joined measurement is dated by its last part (`YYYY-MM-DD hh:mm:ss` sorts as time);
    // with a part that does not say, the joined document does not either.
    let dates: Option<Vec<&str>> = parts.iter().map(|p| p.date.as_deref()).collect();
    let date = dates.and_then(|d| d.into_iter().max().map(str::to_string));

    let mut out = first.clone();
    out.workers = Some(workers);
    out.pool = Some(Value::Null);
    out.verdict = verdict;
    out.message = message;
    out.s_op = s_op_over(&shapes, &asked);
    out.s_op_benchmark = Some(s_op_bench_over(&shapes, &asked));
    out.shapes_asked = Some(asked);
    out.run.shapes = shapes;
    out.output = Some(output);
    out.sol_checked = Some(hw.is_some());
    out.incumbent = Some(None);
    out.wall_s = Some(parts.iter().map(|p| p.wall_s).sum());
    out.parts = Some(parts);
    out.run.date = date;
    Ok(out)
}

/// Every document names its source, and all were measured of one kernel on one GPU model and
/// mode.
fn check_same(docs: &[(PathBuf, BenchDoc)]) -> Result<(), MergeError> {
    let (first_file, first) = &docs[0];
    let first_same = same(first);
    for (f, d) in docs {
        if d.run.source_sha256.is_none() {
            return Err(MergeError::NoSourceSha(f.clone()));
        }
        for ((name, a), (_, b)) in first_same.iter().zip(same(d)) {
            if *a != b {
                return Err(MergeError::Differ {
                    file: f.clone(),
                    field: name,
                    theirs: show(b.as_ref()),
                    first_file: first_file.clone(),
                    first: show(a.as_ref()),
                });
            }
        }
    }
    Ok(())
}

fn no_shape(file: &std::path::Path, op: &str, id: u32) -> MergeError {
    MergeError::NoSuchShape {
        file: file.to_path_buf(),
        op: op.to_string(),
        id,
    }
}

fn show(v: Option<&Value>) -> String {
    match v {
        None => "absent".into(),
        Some(v) => v.to_string(),
    }
}

#[cfg(test)]
mod tests;
