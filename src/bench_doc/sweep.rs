//! A sweep (`bench OP --sweep KEY=V1,V2,…`; docs/bench-json.md, "Sweeps"): one kernel run over
//! the same shapes with every combination of values of its plan's tunable parameters, side by
//! side, and the best combination per shape.
//!
//! Invariants:
//! - The combinations are the product of the axes in the order given, the first axis varying
//!   slowest; each parameter is swept once, with two distinct values or more, and a sweep has
//!   at most `MAX_COMBINATIONS` combinations (each one a full `bench` run).
//! - A shape's best combination is the one with the highest S among those that passed it at
//!   the strict level (ties: the first); a shape that none passed has none.
//! - The best-per-shape S_op is the median over the shapes asked for of those S, a shape that
//!   no combination passed counting 0, as S_op counts it (`contract::outcome::s_op_over`).
//!   It is what a plan choosing its values per shape would score, were the runs repeatable.

use super::BenchDoc;
use crate::contract::outcome::s_op_over;
use crate::contract::protocol::{ShapeResult, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;

/// Combinations beyond this many are refused: each is a run of its own.
pub const MAX_COMBINATIONS: usize = 64;

/// One swept parameter and its values as given (the plan's TOML syntax, as `--define` reads it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Axis {
    pub name: String,
    pub values: Vec<String>,
}

/// One combination: a value per axis, in the axes' order.
pub type Combination = Vec<(String, String)>;

/// A `--sweep` that cannot be run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SweepError {
    #[error("--sweep `{0}`: expected KEY=V1,V2,… with two different values or more")]
    NotAnAxis(String),
    #[error("--sweep `{0}` is given twice: give its values in one --sweep")]
    Twice(String),
    #[error("`{0}` is both swept and set by --define: drop one")]
    AlsoDefined(String),
    #[error(
        "the sweep has {0} combinations, more than {MAX_COMBINATIONS}: sweep fewer parameters or values"
    )]
    TooMany(usize),
}

crate::error::text_at_the_edge!(SweepError);

/// Parses `KEY=V1,V2,…` (spaces around names and values ignored).
pub fn parse_axis(arg: &str) -> Result<Axis, SweepError> {
    let bad = || SweepError::NotAnAxis(crate::contract::plan::clip(arg));
    let (name, values) = arg.split_once('=').ok_or_else(bad)?;
    let name = name.trim();
    let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
    let distinct = values
        .iter()
        .enumerate()
        .all(|(i, v)| !values[..i].contains(v));
    if name.is_empty() || values.len() < 2 || values.iter().any(String::is_empty) || !distinct {
        return Err(bad());
    }
    Ok(Axis {
        name: name.to_string(),
        values,
    })
}

/// Every combination of the axes' values, the first axis varying slowest. `defined`: the names
/// `--define` sets, which may not be swept too.
pub fn combinations(axes: &[Axis], defined: &[String]) -> Result<Vec<Combination>, SweepError> {
    for (i, a) in axes.iter().enumerate() {
        if axes[..i].iter().any(|b| b.name == a.name) {
            return Err(SweepError::Twice(a.name.clone()));
        }
        if defined.contains(&a.name) {
            return Err(SweepError::AlsoDefined(a.name.clone()));
        }
    }
    let n = axes
        .iter()
        .try_fold(1usize, |n, a| n.checked_mul(a.values.len()))
        .unwrap_or(usize::MAX);
    if n > MAX_COMBINATIONS {
        return Err(SweepError::TooMany(n));
    }
    let mut out: Vec<Combination> = vec![Vec::new()];
    for a in axes {
        out = out
            .into_iter()
            .flat_map(|c| {
                a.values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((a.name.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    Ok(out)
}

/// A combination as `--define` arguments.
pub fn define_args(c: &Combination) -> Vec<String> {
    c.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// A combination's label in a table: its values joined by commas (`128,3`).
pub fn label(c: &Combination) -> String {
    c.iter()
        .map(|(_, v)| v.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// A shape's best combination.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BestShape {
    pub shape: u32,
    /// The index of the combination (None: no combination passed the shape).
    pub combination: Option<usize>,
    pub s: Option<f64>,
}

/// The best combination of every shape asked for, and the S_op they would give together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Best {
    pub s_op: f64,
    pub shapes: Vec<BestShape>,
}

/// The best combination per shape of `runs` (each combination's shape results, in the
/// combinations' order) over the shapes `asked`.
pub fn best_per_shape(runs: &[&[ShapeResult]], asked: &[u32]) -> Best {
    let mut chosen: Vec<ShapeResult> = Vec::new();
    let mut shapes = Vec::new();
    for &id in asked {
        let mut best: Option<(usize, &ShapeResult, f64)> = None;
        for (k, results) in runs.iter().enumerate() {
            let passed = results
                .iter()
                .find(|r| r.shape == id && r.verdict == Verdict::Pass);
            if let Some((r, s)) = passed.and_then(|r| r.s.map(|s| (r, s)))
                && best.is_none_or(|(_, _, b)| s > b)
            {
                best = Some((k, r, s));
            }
        }
        if let Some((_, r, _)) = best {
            chosen.push(r.clone());
        }
        shapes.push(BestShape {
            shape: id,
            combination: best.map(|(k, _, _)| k),
            s: best.map(|(_, _, s)| s),
        });
    }
    Best {
        s_op: s_op_over(&chosen, asked),
        shapes,
    }
}

/// The document of `bench OP --sweep … --json`.
#[derive(Debug, Clone, Serialize)]
pub struct SweepDoc {
    pub operator: String,
    /// The kernel as given (the file, or `OP baseline`), before any value was set.
    pub kernel: String,
    pub axes: Vec<Axis>,
    /// Each combination as name -> value, in the order of `runs`.
    pub combinations: Vec<BTreeMap<String, String>>,
    /// Each combination's run, the document `bench OP --define … --json` prints for it.
    pub runs: Vec<BenchDoc>,
    pub best_per_shape: Best,
}

#[cfg(test)]
mod tests;
