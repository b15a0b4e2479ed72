//! `bench --merge FILE...`: one document from the `--json` documents of runs of one kernel
//! over disjoint shapes — a full run split across machines or leases (`bench OP --full
//! --shape ...` per part). No GPU.
//!
//! Invariants: every part measured the same source with the same defines (`source_sha256`,
//! `defines`) on the same GPU model, driver, NVRTC, hardware profile and mode, or the merge is
//! refused naming the file and the field; no shape is asked for in two parts; each shape's
//! result is kept as its part wrote it, and its T_SOL must be the suite's (where the hardware
//! profile is known here). S_op and the benchmark-compatible S_op are computed again over the
//! union of the shapes asked for, a shape without a result counting 0 (as `bench` counts it);
//! the verdict is the first part's that did not pass, else pass; `wall_s` is the parts' sum,
//! `date` the last part's (the parts must be of one `tool_version`) and `parts` says which file
//! gave which shapes and which it lost, and when it ran.
//! The per-run `incumbent` comparison is dropped (each covered only its part's shapes).

use crate::contract::outcome::{s_op_bench_over, s_op_over};
use crate::contract::protocol::ShapeResult;
use crate::suite::Suite;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Fields every part must agree on (JSON pointers into a bench document).
const SAME: [(&str, &str); 10] = [
    ("operator", "/operator"),
    ("kernel", "/kernel"),
    ("source_sha256", "/source_sha256"),
    ("defines", "/defines"),
    ("gpu", "/gpu/name"),
    ("driver", "/driver"),
    ("nvrtc", "/nvrtc"),
    ("hardware", "/hardware"),
    ("mode", "/mode"),
    ("tool_version", "/tool_version"),
];

pub fn run(
    suite: &Suite,
    op: Option<&str>,
    files: &[PathBuf],
    as_json: bool,
) -> Result<i32, String> {
    let mut docs = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let doc: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a JSON document ({e})", f.display()))?;
        docs.push((f.clone(), doc));
    }
    let merged = merge(suite, op, &docs)?;
    let name = merged["operator"].as_str().unwrap_or_default();
    let count = |k: &str| merged[k].as_array().map(Vec::len).unwrap_or(0);
    let (asked, got) = (count("shapes_asked"), count("shapes"));
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
    if merged["sol_checked"] != json!(true) {
        eprintln!(
            "atrex-tui: hardware profile {} is not in this suite: the parts' T_SOL could not be checked",
            merged["hardware"]
        );
    }
    // As `bench` exits: every shape asked for has a result, and every result passed.
    let every_shape_passed = merged["shapes"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|s| s["verdict"] == json!("pass"));
    let passed = merged.get("verdict").and_then(Value::as_str) == Some("pass")
        && every_shape_passed
        && got == asked;
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&merged).map_err(|e| e.to_string())?
        );
    } else {
        print_summary(&merged);
    }
    Ok(if passed { 0 } else { 1 })
}

/// The merged document of `docs` (each with the file it came from, for messages).
pub fn merge(suite: &Suite, op: Option<&str>, docs: &[(PathBuf, Value)]) -> Result<Value, String> {
    if docs.len() < 2 {
        return Err("--merge needs at least two bench documents".into());
    }
    let (first_file, first) = &docs[0];
    for (f, d) in docs {
        if d.get("shapes").and_then(Value::as_array).is_none() || d.get("operator").is_none() {
            return Err(format!(
                "{}: not a bench document (`bench OP --json`)",
                f.display()
            ));
        }
        if d.get("source_sha256").and_then(Value::as_str).is_none() {
            return Err(format!(
                "{}: no source_sha256 (written by an earlier atrex-tui): nothing shows that the runs measured the same source",
                f.display()
            ));
        }
        for (name, ptr) in SAME {
            let (a, b) = (first.pointer(ptr), d.pointer(ptr));
            if a != b {
                return Err(format!(
                    "{}: {name} is {}, {} has {}: only runs of one kernel on one GPU model and mode merge",
                    f.display(),
                    show(b),
                    first_file.display(),
                    show(a)
                ));
            }
        }
    }
    let name = first
        .get("operator")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(op) = op
        && suite.problem(op).map(|p| p.name.as_str()) != Some(name)
    {
        return Err(format!("the documents are of `{name}`, not `{op}`"));
    }
    let p = suite
        .problem(name)
        .ok_or_else(|| format!("`{name}` is not in the suite"))?;

    // Every shape once, each as its part wrote it; the shapes each part was asked for (older
    // documents without `shapes_asked`: the ones they hold).
    let hw = first
        .get("hardware")
        .and_then(Value::as_str)
        .and_then(|k| suite.hardware(k).ok());
    let sols = hw.map(|h| crate::standing::stale::shape_sols(p, h));
    let mut by_shape: BTreeMap<u32, Value> = BTreeMap::new();
    let mut results: Vec<ShapeResult> = Vec::new();
    let mut asked_by: BTreeMap<u32, usize> = BTreeMap::new();
    let mut parts = Vec::new();
    for (k, (f, d)) in docs.iter().enumerate() {
        let id_of = |v: &Value, what: &str| -> Result<u32, String> {
            v.as_u64()
                .and_then(|x| u32::try_from(x).ok())
                .ok_or_else(|| format!("{}: {what} {v} is no shape id", f.display()))
        };
        let mut ids = Vec::new();
        for s in d["shapes"].as_array().into_iter().flatten() {
            let id = id_of(
                s.get("shape").ok_or_else(|| {
                    format!("{}: a shape result without its shape id", f.display())
                })?,
                "shape",
            )?;
            if p.shape(id).is_none() {
                return Err(format!("{}: {name} has no shape {id}", f.display()));
            }
            let r: ShapeResult = serde_json::from_value(s.clone())
                .map_err(|e| format!("{}: shape {id}: not a shape result ({e})", f.display()))?;
            // S rests on T_SOL: the part's must be the suite's, on the same hardware profile.
            if let (Some(sols), Some(_)) = (&sols, r.s) {
                let want = *sols
                    .get(&id)
                    .ok_or_else(|| format!("{name} shape {id}: its T_SOL cannot be computed"))?;
                if (r.sol_ms - want).abs() > 1e-9 * want.abs().max(1e-12) {
                    return Err(format!(
                        "{}: shape {id} was scored against T_SOL {} ms, the suite gives {want} ms: the problem or hardware files changed since that run",
                        f.display(),
                        r.sol_ms
                    ));
                }
            }
            by_shape.insert(id, s.clone());
            results.push(r);
            ids.push(id);
        }
        let asked: Vec<u32> = match d.get("shapes_asked").and_then(Value::as_array) {
            Some(xs) => xs
                .iter()
                .map(|x| id_of(x, "shapes_asked"))
                .collect::<Result<_, _>>()?,
            None => ids.clone(),
        };
        if let Some(id) = ids.iter().find(|id| !asked.contains(id)) {
            return Err(format!(
                "{}: shape {id} has a result but is not in shapes_asked",
                f.display()
            ));
        }
        for id in &asked {
            if p.shape(*id).is_none() {
                return Err(format!("{}: {name} has no shape {id}", f.display()));
            }
            if let Some(j) = asked_by.insert(*id, k) {
                return Err(format!(
                    "shape {id} is in both {} and {}: the parts must cover disjoint shapes",
                    docs[j].0.display(),
                    f.display()
                ));
            }
        }
        let missing: Vec<u32> = asked
            .iter()
            .copied()
            .filter(|id| !ids.contains(id))
            .collect();
        let wall = d.get("wall_s").and_then(Value::as_f64).ok_or_else(|| {
            format!(
                "{}: no wall_s (not a document of `bench --json`)",
                f.display()
            )
        })?;
        parts.push(json!({
            "file": f.display().to_string(),
            "shapes": ids,
            "missing": missing,
            "wall_s": wall,
            "date": d.get("date"),
        }));
    }
    let asked: Vec<u32> = asked_by.keys().copied().collect();
    let shapes: Vec<Value> = by_shape.into_values().collect();

    let failed = docs
        .iter()
        .find(|(_, d)| d.get("verdict").and_then(Value::as_str) != Some("pass"));
    let (verdict, message) = match failed {
        Some((_, d)) => (d["verdict"].clone(), d["message"].clone()),
        None => (json!("pass"), Value::Null),
    };
    let mut workers: Vec<Value> = Vec::new();
    for (_, d) in docs {
        for w in d
            .get("workers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !workers.contains(w) {
                workers.push(w.clone());
            }
        }
    }
    let mut output: Vec<Value> = docs
        .iter()
        .flat_map(|(_, d)| {
            d.get("output")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    output.sort_by_key(|o| o.get("shape").and_then(Value::as_u64));
    let wall: f64 = parts.iter().filter_map(|p| p["wall_s"].as_f64()).sum();
    // The joined measurement is dated by its last part (`YYYY-MM-DD hh:mm:ss` sorts as time);
    // with a part that does not say, the joined document does not either.
    let dates: Option<Vec<&str>> = parts.iter().map(|p| p["date"].as_str()).collect();
    let date = dates.and_then(|d| d.into_iter().max().map(str::to_string));

    let mut out = first.clone();
    let o = out.as_object_mut().expect("a bench document is an object");
    o.insert("workers".into(), Value::Array(workers));
    o.insert("pool".into(), Value::Null);
    o.insert("verdict".into(), verdict);
    o.insert("message".into(), message);
    o.insert("shapes_asked".into(), json!(asked));
    o.insert("shapes".into(), Value::Array(shapes));
    o.insert("output".into(), Value::Array(output));
    o.insert("s_op".into(), json!(s_op_over(&results, &asked)));
    o.insert(
        "s_op_benchmark".into(),
        json!(s_op_bench_over(&results, &asked)),
    );
    o.insert("sol_checked".into(), json!(hw.is_some()));
    o.insert("incumbent".into(), Value::Null);
    o.insert("wall_s".into(), json!(wall));
    o.insert("parts".into(), Value::Array(parts));
    match date {
        Some(d) => o.insert("date".into(), json!(d)),
        None => o.remove("date"),
    };
    Ok(out)
}

fn show(v: Option<&Value>) -> String {
    match v {
        None => "absent".into(),
        Some(v) => v.to_string(),
    }
}

fn print_summary(d: &Value) {
    let n = d["shapes"].as_array().map(Vec::len).unwrap_or(0);
    let parts = d["parts"].as_array().map(Vec::len).unwrap_or(0);
    println!(
        "{} · {} · {} · {} mode · {n} shapes from {parts} runs",
        d["operator"].as_str().unwrap_or("?"),
        d["kernel"].as_str().unwrap_or("?"),
        d.pointer("/gpu/name")
            .and_then(Value::as_str)
            .unwrap_or("?"),
        d["mode"].as_str().unwrap_or("?"),
    );
    for s in d["shapes"].as_array().into_iter().flatten() {
        println!(
            "{:>5} {:<8} S {}",
            s["shape"],
            s["verdict"].as_str().unwrap_or("?"),
            s["s"]
                .as_f64()
                .map(|x| format!("{x:.4}"))
                .unwrap_or_else(|| "—".into())
        );
    }
    println!(
        "S_op {:.4} (benchmark-compatible {:.4}) · verdict {}",
        d["s_op"].as_f64().unwrap_or(0.0),
        d["s_op_benchmark"].as_f64().unwrap_or(0.0),
        d["verdict"].as_str().unwrap_or("?")
    );
}

#[cfg(test)]
#[path = "bench_merge_tests.rs"]
mod tests;
