//! `bench` against the standing: the operator's incumbent (the workspace's record, else the
//! shipped one) beside a run, shape by shape — so a kernel under work is read as faster or
//! slower than what stands, on the same shapes, without a second command.
//!
//! Only a record that stands is compared (a stale one — another GPU, a changed source or suite —
//! says nothing about this run). The incumbent's S_op is taken over the shapes of the run, a
//! shape it failed or lacks counting 0, like the run's own.

use crate::bench_doc::IncumbentOn;
use crate::contract::protocol::{ShapeResult, Verdict};
use crate::standing::Entry;
use crate::suite::roofline::{self, ShapeScore};
use std::collections::BTreeMap;

/// The standing's incumbent of one operator, as measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Incumbent {
    /// Its kernel file (`knowledge/templates/X.cu`, `problems/OP/baseline.cu`, …).
    pub kernel: String,
    /// `workspace` or `shipped`.
    pub layer: &'static str,
    /// `full` or `quick`.
    pub mode: String,
    /// The day it was measured.
    pub day: String,
    /// S per shape id: None where it failed or was not timed.
    s: BTreeMap<u32, Option<f64>>,
}

impl Incumbent {
    /// The incumbent of a standing entry; None when the record does not stand.
    pub fn of(e: &Entry) -> Option<Incumbent> {
        if !e.fresh() {
            return None;
        }
        let m = &e.record.measurement;
        Some(Incumbent {
            kernel: e.record.kernel.clone(),
            layer: e.layer.name(),
            mode: m.mode.clone(),
            day: m.day().to_string(),
            s: m.shapes
                .iter()
                .map(|sh| (sh.shape, if sh.verdict == "pass" { sh.s } else { None }))
                .collect(),
        })
    }

    /// The incumbent's S_op over these shapes (one it failed or lacks counts 0).
    pub fn s_op_on(&self, ids: &[u32]) -> f64 {
        let scores: Vec<ShapeScore> = ids
            .iter()
            .map(|id| match self.s.get(id).copied().flatten() {
                Some(s) => ShapeScore::Passed(s),
                None => ShapeScore::Failed,
            })
            .collect();
        roofline::s_op(&scores)
    }

    /// This run's S on a shape over the incumbent's; None when either is missing.
    pub fn ratio(&self, r: &ShapeResult) -> Option<f64> {
        let mine = match (&r.verdict, r.s) {
            (Verdict::Pass, Some(s)) => s,
            _ => return None,
        };
        let theirs = self.s.get(&r.shape).copied().flatten()?;
        (theirs > 0.0).then(|| mine / theirs)
    }

    /// The table cell of a shape's ratio: `1.34x`, or `-`.
    pub fn cell(&self, r: &ShapeResult) -> String {
        self.ratio(r)
            .map(|x| format!("{x:.2}x"))
            .unwrap_or_else(|| "-".into())
    }

    /// The summary line under the table.
    pub fn summary(&self, ids: &[u32], s_op: f64) -> String {
        let theirs = self.s_op_on(ids);
        let change = if theirs > 0.0 {
            format!(" ({:.2}x)", s_op / theirs)
        } else {
            String::new()
        };
        format!(
            "against the incumbent ({}: {}, {}, {}): S_op {theirs:.4} → {s_op:.4} on these {} shapes{change}",
            self.layer,
            self.kernel,
            self.mode,
            self.day,
            ids.len()
        )
    }

    /// The `incumbent` member of `bench --json`.
    pub fn to_doc(&self, ids: &[u32]) -> IncumbentOn {
        IncumbentOn {
            kernel: self.kernel.clone(),
            layer: self.layer.to_string(),
            mode: self.mode.clone(),
            date: self.day.clone(),
            s_op: self.s_op_on(ids),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::standing::Layer;
    use crate::testing::suite;

    fn shipped(op: &str) -> Entry {
        let f = crate::standing::shipped::load(&suite().name)
            .unwrap()
            .unwrap();
        Entry {
            record: f.operators[op].clone(),
            layer: Layer::Shipped,
            stale: Vec::new(),
            source: None,
        }
    }

    fn run(shape: u32, verdict: Verdict, s: Option<f64>) -> ShapeResult {
        ShapeResult {
            shape,
            verdict,
            checks: vec![],
            bench_ok: true,
            strict_ok: true,
            seeds_checked: 1,
            timing: None,
            sol_ms: 0.01,
            s,
            message: None,
            device: None,
            worker: None,
        }
    }

    #[test]
    fn a_run_is_read_against_the_incumbent_shape_by_shape() {
        let inc = Incumbent::of(&shipped("fused_moe")).unwrap();
        assert_eq!(inc.kernel, "knowledge/templates/fused_moe_wgmma.cu");
        assert_eq!((inc.layer, inc.mode.as_str()), ("shipped", "full"));
        // Its own S_op over all of its shapes is the standing's.
        let all: Vec<u32> = (0..23).collect();
        assert!((inc.s_op_on(&all) - 0.41132).abs() < 1e-4);
        // Shape 14 as the standing has it.
        let theirs = inc.s[&14].unwrap();
        let r = run(14, Verdict::Pass, Some(theirs * 1.5));
        assert!((inc.ratio(&r).unwrap() - 1.5).abs() < 1e-9);
        assert_eq!(inc.cell(&r), "1.50x");
        // A failed shape of the run, or one the incumbent lacks, has no ratio.
        assert_eq!(inc.cell(&run(14, Verdict::Incorrect, Some(0.5))), "-");
        assert_eq!(inc.cell(&run(999, Verdict::Pass, Some(0.5))), "-");
        // On a subset, the incumbent's median is over the same shapes; a shape it lacks counts 0.
        assert!((inc.s_op_on(&[14]) - theirs).abs() < 1e-12);
        assert!((inc.s_op_on(&[14, 999]) - theirs / 2.0).abs() < 1e-12);
        let line = inc.summary(&[14], theirs * 2.0);
        assert!(
            line.starts_with(
                "against the incumbent (shipped: knowledge/templates/fused_moe_wgmma.cu, full, 2026-12-03): S_op 0.41"
            ),
            "{line}"
        );
        assert!(line.ends_with("on these 1 shapes (2.00x)"), "{line}");
        let j = serde_json::to_value(inc.to_doc(&[14])).unwrap();
        assert_eq!(j["kernel"], "knowledge/templates/fused_moe_wgmma.cu");
        assert_eq!(
            (&j["layer"], &j["date"]),
            (&"shipped".into(), &"2026-12-03".into())
        );
        assert!((j["s_op"].as_f64().unwrap() - theirs).abs() < 1e-12);
    }

    #[test]
    fn a_stale_record_is_not_compared() {
        let mut e = shipped("rms_norm");
        e.stale = vec![crate::standing::Stale::GpuDiffers {
            measured: "NVIDIA H200".into(),
            now: "NVIDIA H100 80GB HBM3".into(),
        }];
        assert_eq!(Incumbent::of(&e), None);
    }
}
