//! `import-atrex-bench`: compare (and optionally update) problems/ with an Atrex-Bench checkout.

use crate::suite::expr::Value;
use crate::suite::{Problem, Suite};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[derive(Debug, Default, Serialize)]
pub struct ImportReport {
    pub bench_dir: String,
    pub operators_compared: usize,
    pub shapes_compared: usize,
    /// Operators in the benchmark but not in problems/.
    pub missing_in_problems: Vec<String>,
    /// Operators in problems/ but not in the benchmark.
    pub missing_in_bench: Vec<String>,
    pub disagreements: Vec<Disagreement>,
    /// Files rewritten (with --write).
    pub written: Vec<String>,
}

#[derive(Debug, Serialize, Clone)]
pub struct Disagreement {
    pub operator: String,
    pub shape: Option<u32>,
    pub what: String,
    pub ours: String,
    pub theirs: String,
}

/// A benchmark checkout's file that cannot be read as this import needs it; each names the
/// file (and the line, where JSON is malformed).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{}: {source}", path.display(), source.line())]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{}: not an object", .0.display())]
    NotAnObject(PathBuf),
    #[error("{}: shape {shape}: unsupported value for {param}", file.display())]
    Value {
        file: PathBuf,
        shape: String,
        param: String,
    },
    #[error("{}: shape key `{key}` is not an integer", file.display())]
    ShapeKey { file: PathBuf, key: String },
}

crate::error::text_at_the_edge!(ImportError);

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> ImportError {
    let path = path.to_path_buf();
    move |source| ImportError::Io { path, source }
}

fn read_json(path: &Path) -> Result<serde_json::Value, ImportError> {
    let text = std::fs::read_to_string(path).map_err(io_error(path))?;
    serde_json::from_str(&text).map_err(|source| ImportError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// Benchmark data of one operator.
pub struct BenchOp {
    pub importance: Option<f64>,
    /// shape id → merged params (init_kwargs then input_kwargs).
    pub shapes: BTreeMap<u32, BTreeMap<String, Value>>,
    /// shape id → (W per dtype, Q_read, Q_write, SOL_time_ms per hardware).
    pub roofline: BTreeMap<u32, BenchRoof>,
    /// shape id → hardware → production µs.
    pub production: BTreeMap<u32, BTreeMap<String, f64>>,
}

#[derive(Debug, Clone)]
pub struct BenchRoof {
    pub flops: BTreeMap<String, f64>,
    pub read_bytes: f64,
    pub write_bytes: f64,
    pub sol_ms: BTreeMap<String, f64>,
}

fn shape_id(k: &str, file: &Path) -> Result<u32, ImportError> {
    k.parse::<u32>().map_err(|_| ImportError::ShapeKey {
        file: file.to_path_buf(),
        key: k.to_string(),
    })
}

/// Reads one operator's files under DIR/data/<op>/.
pub fn read_bench_op(data: &Path, name: &str) -> Result<BenchOp, ImportError> {
    let dir = data.join(name);
    let mut shapes = BTreeMap::new();
    let sf = dir.join("shapes.json");
    let sj = read_json(&sf)?;
    let obj = sj
        .as_object()
        .ok_or_else(|| ImportError::NotAnObject(sf.clone()))?;
    for (k, v) in obj {
        let mut params = BTreeMap::new();
        for part in ["init_kwargs", "input_kwargs"] {
            if let Some(m) = v.get(part).and_then(|x| x.as_object()) {
                for (pk, pv) in m {
                    let val = Value::from_json(pv).ok_or_else(|| ImportError::Value {
                        file: sf.clone(),
                        shape: k.clone(),
                        param: pk.clone(),
                    })?;
                    params.insert(pk.clone(), val);
                }
            }
        }
        shapes.insert(shape_id(k, &sf)?, params);
    }
    let rf = dir.join("roofline.json");
    let rj = read_json(&rf)?;
    let mut roofline = BTreeMap::new();
    if let Some(m) = rj.get("shapes").and_then(|x| x.as_object()) {
        for (k, v) in m {
            let flops = v
                .get("semantic_W_flops")
                .and_then(|x| x.as_object())
                .map(|o| {
                    o.iter()
                        .filter_map(|(d, n)| Some((d.clone(), n.as_f64()?)))
                        .collect()
                })
                .unwrap_or_default();
            let sol_ms = v
                .get("SOL_time_ms")
                .and_then(|x| x.as_object())
                .map(|o| {
                    o.iter()
                        .filter_map(|(d, n)| Some((d.clone(), n.as_f64()?)))
                        .collect()
                })
                .unwrap_or_default();
            roofline.insert(
                shape_id(k, &rf)?,
                BenchRoof {
                    flops,
                    read_bytes: v
                        .get("semantic_Q_read_bytes")
                        .and_then(|x| x.as_f64())
                        .unwrap_or(f64::NAN),
                    write_bytes: v
                        .get("semantic_Q_write_bytes")
                        .and_then(|x| x.as_f64())
                        .unwrap_or(f64::NAN),
                    sol_ms,
                },
            );
        }
    }
    let mut production = BTreeMap::new();
    let mf = dir.join("metadata.json");
    let mut importance = None;
    if mf.is_file() {
        let mj = read_json(&mf)?;
        importance = mj.get("importance_score").and_then(|x| x.as_f64());
        if let Some(m) = mj.get("shapes").and_then(|x| x.as_object()) {
            for (k, v) in m {
                let mut per = BTreeMap::new();
                if let Some(pp) = v.get("production_performance").and_then(|x| x.as_object()) {
                    for (hw, rec) in pp {
                        if let Some(us) = rec.get("performance_us").and_then(|x| x.as_f64()) {
                            per.insert(hw.clone(), us);
                        }
                    }
                }
                production.insert(shape_id(k, &mf)?, per);
            }
        }
    }
    Ok(BenchOp {
        importance,
        shapes,
        roofline,
        production,
    })
}

/// Lists the operators of a checkout: folders of DIR/data with a shapes.json.
pub fn bench_operators(dir: &Path) -> Result<Vec<String>, ImportError> {
    let data = dir.join("data");
    let rd = std::fs::read_dir(&data).map_err(io_error(&data))?;
    let mut out: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("shapes.json").is_file())
        .filter_map(|e| e.file_name().to_str().map(|s| s.to_string()))
        .collect();
    out.sort();
    Ok(out)
}

fn fmt_params(p: &BTreeMap<String, Value>) -> String {
    p.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn same(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// Compares one operator; returns the disagreements.
pub fn compare_op(p: &Problem, b: &BenchOp) -> Vec<Disagreement> {
    let mut out = Vec::new();
    let d = |shape: Option<u32>, what: &str, ours: String, theirs: String| Disagreement {
        operator: p.name.clone(),
        shape,
        what: what.to_string(),
        ours,
        theirs,
    };
    if let Some(imp) = b.importance
        && !same(imp, p.importance)
    {
        out.push(d(
            None,
            "importance",
            p.importance.to_string(),
            imp.to_string(),
        ));
    }
    let ours: BTreeSet<u32> = p.shapes.iter().map(|s| s.id).collect();
    let theirs: BTreeSet<u32> = b.shapes.keys().copied().collect();
    for id in theirs.difference(&ours) {
        out.push(d(
            Some(*id),
            "shape missing in problems/",
            String::new(),
            fmt_params(&b.shapes[id]),
        ));
    }
    for id in ours.difference(&theirs) {
        out.push(d(
            Some(*id),
            "shape missing in the benchmark",
            String::new(),
            String::new(),
        ));
    }
    for s in &p.shapes {
        let Some(bp) = b.shapes.get(&s.id) else {
            continue;
        };
        // Compare benchmark parameters (recorded ones are ours alone).
        let ours_p: BTreeMap<String, Value> = s
            .params
            .iter()
            .filter(|(k, _)| {
                p.params
                    .get(*k)
                    .map(|d| d.source != "recorded")
                    .unwrap_or(true)
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let keys: BTreeSet<&String> = ours_p.keys().chain(bp.keys()).collect();
        let mismatch = keys.iter().any(|k| match (ours_p.get(*k), bp.get(*k)) {
            (Some(a), Some(b)) => !a.num_eq(b),
            _ => true,
        });
        if mismatch {
            out.push(d(
                Some(s.id),
                "parameters",
                fmt_params(&ours_p),
                fmt_params(bp),
            ));
            continue;
        }
        let Some(br) = b.roofline.get(&s.id) else {
            continue;
        };
        match p.work(s) {
            Err(e) => out.push(d(Some(s.id), "W/Q", e.to_string(), String::new())),
            Ok(w) => {
                let wk: BTreeSet<&String> = w.flops.keys().chain(br.flops.keys()).collect();
                for k in wk {
                    let a = w.flops.get(k).copied();
                    let bb = br.flops.get(k).copied();
                    if !matches!((a, bb), (Some(x), Some(y)) if same(x, y)) {
                        out.push(d(
                            Some(s.id),
                            &format!("W[{k}]"),
                            a.map(|x| format!("{x}")).unwrap_or_else(|| "absent".into()),
                            bb.map(|x| format!("{x}"))
                                .unwrap_or_else(|| "absent".into()),
                        ));
                    }
                }
                if !same(w.read_bytes, br.read_bytes) {
                    out.push(d(
                        Some(s.id),
                        "Q_read",
                        w.read_bytes.to_string(),
                        br.read_bytes.to_string(),
                    ));
                }
                if !same(w.write_bytes, br.write_bytes) {
                    out.push(d(
                        Some(s.id),
                        "Q_write",
                        w.write_bytes.to_string(),
                        br.write_bytes.to_string(),
                    ));
                }
            }
        }
        let prod = b.production.get(&s.id).cloned().unwrap_or_default();
        if prod != s.production_us {
            out.push(d(
                Some(s.id),
                "production timings",
                format!("{:?}", s.production_us),
                format!("{prod:?}"),
            ));
        }
    }
    out
}

/// Runs the comparison; with `write`, updates problems/ under `problems_dir`.
pub fn import(
    suite: &Suite,
    bench_dir: &Path,
    write_to: Option<&Path>,
) -> Result<ImportReport, ImportError> {
    let mut report = ImportReport {
        bench_dir: bench_dir.display().to_string(),
        ..Default::default()
    };
    let theirs = bench_operators(bench_dir)?;
    let ours: Vec<String> = suite.problems.iter().map(|p| p.name.clone()).collect();
    report.missing_in_problems = theirs
        .iter()
        .filter(|n| !ours.contains(n))
        .cloned()
        .collect();
    report.missing_in_bench = ours
        .iter()
        .filter(|n| !theirs.contains(n))
        .cloned()
        .collect();
    // Importance from operator_importance.json, where present.
    let imp_file = bench_dir.join("data").join("operator_importance.json");
    let imp_json = if imp_file.is_file() {
        Some(read_json(&imp_file)?)
    } else {
        None
    };
    for p in &suite.problems {
        if !theirs.contains(&p.name) {
            continue;
        }
        let mut b = read_bench_op(&bench_dir.join("data"), &p.name)?;
        if let Some(score) = imp_json
            .as_ref()
            .and_then(|j| j.get("operators"))
            .and_then(|o| o.get(&p.name))
            .and_then(|o| o.get("importance_score"))
            .and_then(|x| x.as_f64())
        {
            b.importance = Some(score);
        }
        report.operators_compared += 1;
        report.shapes_compared += b.shapes.len();
        let ds = compare_op(p, &b);
        if let (Some(dir), false) = (write_to, ds.is_empty()) {
            let path = dir.join(&p.name).join("problem.toml");
            write_op(&path, p, &b)?;
            report.written.push(path.display().to_string());
        }
        report.disagreements.extend(ds);
    }
    Ok(report)
}

/// Rewrites the importance, the shapes (parameters, notes kept, production timings) of one
/// problem.toml, keeping everything above the first [[shapes]] as it is.
fn write_op(path: &Path, p: &Problem, b: &BenchOp) -> Result<(), ImportError> {
    let text = std::fs::read_to_string(path).map_err(io_error(path))?;
    let head_end = text
        .find("\n[[shapes]]")
        .map(|i| i + 1)
        .unwrap_or(text.len());
    let mut head = text[..head_end].to_string();
    if let Some(imp) = b.importance {
        let mut lines: Vec<String> = head.lines().map(|l| l.to_string()).collect();
        for l in lines.iter_mut() {
            if l.trim_start().starts_with("importance") && l.contains('=') {
                *l = format!("importance = {imp}");
                break;
            }
        }
        head = lines.join("\n") + "\n";
    }
    let order = param_order(&text);
    let declared: Vec<String> = p.params.keys().cloned().collect();
    let declared = declared_order(&text).unwrap_or(declared);
    let mut out = head.trim_end_matches('\n').to_string() + "\n";
    for (id, params) in &b.shapes {
        let old = p.shape(*id);
        let mut merged: BTreeMap<String, Value> = params.clone();
        // Keep our recorded parameters.
        if let Some(o) = old {
            for (k, v) in &o.params {
                if p.params
                    .get(k)
                    .map(|d| d.source == "recorded")
                    .unwrap_or(false)
                {
                    merged.insert(k.clone(), v.clone());
                }
            }
        }
        out.push_str("\n[[shapes]]\n");
        out.push_str(&format!("id = {id}\n"));
        // The file's own order of the parameters: the shape's line, then the declarations.
        let old_line: &[(String, String)] = order.get(id).map(|v| v.as_slice()).unwrap_or(&[]);
        let mut keys: Vec<&String> = Vec::new();
        for k in old_line
            .iter()
            .map(|(k, _)| k)
            .chain(declared.iter())
            .chain(merged.keys())
        {
            if merged.contains_key(k) && !keys.contains(&k) {
                keys.push(k);
            }
        }
        // A value that did not change keeps its own text (1e-06 stays 1e-06).
        let text_of = |k: &String| -> String {
            let v = &merged[k];
            old_line
                .iter()
                .find(|(ok, raw)| ok == k && same_value(raw, v))
                .map(|(_, raw)| raw.clone())
                .unwrap_or_else(|| toml_value(v))
        };
        let ps: Vec<String> = keys
            .iter()
            .map(|k| format!("{k} = {}", text_of(k)))
            .collect();
        out.push_str(&format!("params = {{ {} }}\n", ps.join(", ")));
        if let Some(o) = old
            && !o.note.is_empty()
        {
            out.push_str(&format!("note = {}\n", toml::Value::String(o.note.clone())));
        }
        if let Some(prod) = b.production.get(id)
            && !prod.is_empty()
        {
            let ps: Vec<String> = prod
                .iter()
                .map(|(k, v)| format!("{} = {v}", toml::Value::String(k.clone())))
                .collect();
            out.push_str(&format!("production_us = {{ {} }}\n", ps.join(", ")));
        }
    }
    let tmp: PathBuf = path.with_extension("toml.tmp");
    std::fs::write(&tmp, out).map_err(io_error(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_error(path))
}

/// Whether a value's text in a file denotes `v`.
fn same_value(raw: &str, v: &Value) -> bool {
    let parsed: Result<toml::Table, _> = toml::from_str(&format!("x = {raw}"));
    match (parsed.ok().and_then(|t| t.get("x").cloned()), v) {
        (Some(toml::Value::Integer(a)), Value::Int(b)) => a as i128 == *b,
        (Some(toml::Value::Float(a)), Value::Float(b)) => a == *b,
        (Some(toml::Value::Integer(a)), Value::Float(b)) => a as f64 == *b,
        (Some(toml::Value::Boolean(a)), Value::Bool(b)) => a == *b,
        (Some(toml::Value::String(a)), Value::Str(b)) => a == *b,
        (Some(other), v) => other.to_string() == toml_value(v),
        (None, _) => false,
    }
}

/// The order of the `[params.NAME]` tables of a problem file.
fn declared_order(text: &str) -> Option<Vec<String>> {
    let v: Vec<String> = text
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("[params.")
                .and_then(|r| r.strip_suffix(']'))
                .map(|n| n.trim().to_string())
        })
        .collect();
    (!v.is_empty()).then_some(v)
}

/// Per shape id, the keys of its `params = { … }` line in order, with each value's own text.
fn param_order(text: &str) -> std::collections::HashMap<u32, Vec<(String, String)>> {
    let mut out = std::collections::HashMap::new();
    for block in text.split("[[shapes]]").skip(1) {
        let mut id = None;
        let mut keys = Vec::new();
        for l in block.lines() {
            let t = l.trim();
            if t.starts_with('[') {
                break;
            }
            if let Some(v) = t.strip_prefix("id").map(str::trim_start)
                && let Some(v) = v.strip_prefix('=')
            {
                id = v.trim().parse::<u32>().ok();
            }
            if let Some(r) = t.strip_prefix("params").map(str::trim_start)
                && let Some(r) = r.strip_prefix('=')
                && let Some(inner) = r.trim().strip_prefix('{')
            {
                // Keys at depth 0 of the inline table: the text before each top-level `=`.
                let (mut depth, mut quote, mut start) = (0i32, false, 0usize);
                let mut key: Option<(String, usize)> = None;
                let b = inner.as_bytes();
                for (i, c) in b.iter().enumerate() {
                    match c {
                        b'"' => quote = !quote,
                        b'[' | b'{' if !quote => depth += 1,
                        b']' | b'}' if !quote => depth -= 1,
                        b',' if !quote && depth == 0 => {
                            if let Some((k, at)) = key.take() {
                                keys.push((k, inner[at..i].trim().to_string()));
                            }
                            start = i + 1;
                        }
                        b'=' if !quote && depth == 0 => {
                            key =
                                Some((inner[start..i].trim().trim_matches('"').to_string(), i + 1));
                        }
                        _ => {}
                    }
                    if depth < 0 {
                        if let Some((k, at)) = key.take() {
                            keys.push((k, inner[at..i].trim().to_string()));
                        }
                        break;
                    }
                }
            }
        }
        if let Some(id) = id {
            out.insert(id, keys);
        }
    }
    out
}

fn toml_value(v: &Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Float(x) => {
            let s = format!("{x:?}");
            if s.contains('.') || s.contains('e') {
                s
            } else {
                format!("{s}.0")
            }
        }
        Value::Bool(b) => b.to_string(),
        Value::Str(s) => toml::Value::String(s.clone()).to_string(),
        Value::List(xs) => format!(
            "[{}]",
            xs.iter().map(toml_value).collect::<Vec<_>>().join(", ")
        ),
    }
}
