//! `bench OP --sweep KEY=V1,V2,…`: the kernel run with every combination of values of its
//! plan's tunable parameters (`bench_doc::sweep`), one `bench` run per combination on the same
//! shapes, and printed side by side: S per shape and combination, each combination's S_op, and
//! the best combination per shape (docs/bench-json.md, "Sweeps").

use crate::bench_doc::BenchDoc;
use crate::bench_doc::sweep::{self, Axis, Combination, SweepDoc};
use crate::contract::protocol::{Source, Verdict};
use crate::suite::{Problem, Suite};
use std::path::Path;

/// What a `bench` command runs: its kernel with each combination (one, with no values, without
/// --sweep).
#[derive(Debug)]
pub struct Plan {
    /// The kernel as given, before any value was set.
    kernel: String,
    axes: Vec<Axis>,
    combinations: Vec<Combination>,
    /// Each combination's kernel, with the `--define` values and its own set in its plan.
    pub candidates: Vec<Source>,
}

impl Plan {
    /// The kernels to run: the `--define` values on every one, each `--sweep` combination on
    /// its own; every mistake is found here, before a worker starts.
    pub fn of(
        suite: &Suite,
        p: &Problem,
        kernel: Option<&Path>,
        defines: &[String],
        sweep: &[String],
    ) -> Result<Plan, String> {
        let axes = sweep
            .iter()
            .map(|a| sweep::parse_axis(a))
            .collect::<Result<Vec<_>, _>>()?;
        let defined = defines
            .iter()
            .map(|d| super::defines::parse(d).map(|(name, _)| name))
            .collect::<Result<Vec<_>, _>>()?;
        let combinations = sweep::combinations(&axes, &defined)?;
        // The kernel is read once; each combination rewrites its own copy of the plan.
        let source = crate::contract::kernels::candidate_kernel(suite, p, kernel)?;
        let candidates = combinations
            .iter()
            .map(|c| {
                let args: Vec<String> = defines
                    .iter()
                    .cloned()
                    .chain(sweep::define_args(c))
                    .collect();
                super::defines::apply(source.clone(), &args)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Plan {
            kernel: source.name,
            axes,
            combinations,
            candidates,
        })
    }

    /// Whether this is a sweep (else one plain run).
    pub fn is_sweep(&self) -> bool {
        !self.axes.is_empty()
    }

    /// Prints the runs (one document per combination, in order) as a table, or as one JSON
    /// document.
    pub fn print(&self, runs: Vec<BenchDoc>, asked: &[u32], as_json: bool) {
        let results: Vec<&[_]> = runs.iter().map(|d| d.run.shapes.as_slice()).collect();
        let best = sweep::best_per_shape(&results, asked);
        if !as_json {
            print!("{}", self.table(&runs, asked, &best));
            return;
        }
        let doc = SweepDoc {
            operator: runs
                .first()
                .map(|d| d.run.operator.clone())
                .unwrap_or_default(),
            kernel: self.kernel.clone(),
            axes: self.axes.clone(),
            combinations: self
                .combinations
                .iter()
                .map(|c| c.iter().cloned().collect())
                .collect(),
            runs,
            best_per_shape: best,
        };
        println!("{}", crate::bench_doc::to_json_pretty(&doc));
    }

    /// The table: a header, a row per shape (T_SOL, S under each combination, the best),
    /// each combination's S_op, the best-per-shape S_op, and what failed.
    fn table(&self, runs: &[BenchDoc], asked: &[u32], best: &sweep::Best) -> String {
        let mut t = String::new();
        let first = runs.first();
        let names: Vec<&str> = self.axes.iter().map(|a| a.name.as_str()).collect();
        t += &format!(
            "{} · {} · {} · {} · sweep of {} ({} combinations)\n",
            first.map(|d| d.run.operator.as_str()).unwrap_or_default(),
            self.kernel,
            first.map(|d| d.run.gpu.name.as_str()).unwrap_or_default(),
            first.map(|d| d.run.mode_name()).unwrap_or_default(),
            names.join(", "),
            self.combinations.len()
        );
        let labels: Vec<String> = self.combinations.iter().map(sweep::label).collect();
        let w = labels.iter().map(String::len).max().unwrap_or(0).max(7);
        let row = |head: String, cells: Vec<String>, tail: &str| {
            let cells: Vec<String> = cells.iter().map(|c| format!("{c:>w$}")).collect();
            format!("{head} {}  {tail}\n", cells.join(" "))
                .trim_end()
                .to_string()
                + "\n"
        };
        t += &row(
            format!("{:>5} {:>10}", "shape", "T_SOL ms"),
            labels.clone(),
            &format!("best ({})", names.join(",")),
        );
        for (id, b) in asked.iter().zip(&best.shapes) {
            let mut sol = None;
            let cells = runs
                .iter()
                .map(|d| match d.run.shapes.iter().find(|r| r.shape == *id) {
                    Some(r) => {
                        sol = Some(r.sol_ms);
                        match (r.verdict == Verdict::Pass, r.s) {
                            (true, Some(s)) => format!("{s:.3}"),
                            (true, None) => "-".into(),
                            (false, _) => "✗".into(),
                        }
                    }
                    None => "-".into(),
                })
                .collect();
            let sol = sol.map(|s| format!("{s:.5}")).unwrap_or_else(|| "-".into());
            let pick = b.combination.map(|k| labels[k].as_str()).unwrap_or("none");
            t += &row(format!("{id:>5} {sol:>10}"), cells, pick);
        }
        t += &row(
            format!("{:>5} {:>10}", "S_op", ""),
            runs.iter().map(|d| format!("{:.4}", d.s_op)).collect(),
            "",
        );
        t += &format!(
            "best per shape: S_op {:.4} (each shape at its best combination; the best single one {:.4})\n",
            best.s_op,
            runs.iter().map(|d| d.s_op).fold(0.0, f64::max)
        );
        for (d, label) in runs.iter().zip(&labels) {
            for r in d.run.shapes.iter().filter(|r| r.verdict != Verdict::Pass) {
                t += &format!(
                    "✗ {label} shape {}: {}{}\n",
                    r.shape,
                    r.verdict.name(),
                    r.message
                        .as_deref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                );
            }
            if failed_whole(d) {
                t += &format!(
                    "✗ {label}: {}\n",
                    d.message.as_deref().unwrap_or("no result")
                );
            }
        }
        t
    }
}

/// A run that failed as a whole (no shape results: a compile or plan error).
fn failed_whole(d: &BenchDoc) -> bool {
    d.run.shapes.is_empty() && d.verdict != Some(Verdict::Pass)
}

#[cfg(test)]
mod tests;
