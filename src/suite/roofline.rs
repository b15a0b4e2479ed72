//! Speed-of-light times, bottlenecks and scores.

use crate::suite::hardware::HardwareProfile;
use crate::suite::{PhaseFilter, Problem, Suite, WorkQ};
use serde::Serialize;
use std::collections::BTreeMap;

/// What bounds a shape's speed of light.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bottleneck {
    Compute,
    Memory,
    Balanced,
}

impl Bottleneck {
    pub fn name(self) -> &'static str {
        match self {
            Bottleneck::Compute => "compute",
            Bottleneck::Memory => "memory",
            Bottleneck::Balanced => "balanced",
        }
    }
}

/// The speed of light of one shape on one hardware profile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sol {
    /// Σ_d W[d] / P[d], seconds.
    pub compute_s: f64,
    /// (Q_read + Q_write) / B, seconds.
    pub memory_s: f64,
    /// max of the two, seconds.
    pub sol_s: f64,
    pub bottleneck: Bottleneck,
}

impl Sol {
    pub fn sol_ms(&self) -> f64 {
        self.sol_s * 1e3
    }
}

/// A shape's work that a hardware profile cannot time.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("hardware {hardware} has no peak for dtype `{dtype}`")]
pub struct NoPeak {
    pub hardware: String,
    pub dtype: String,
}

crate::error::text_at_the_edge!(NoPeak);

/// SOL = max(Σ_d W[d]/P[d], (Q_read + Q_write)/B). Balanced when the two times are within ±5%
/// of each other (the shape sits within 5% of the ridge point).
pub fn sol(w: &WorkQ, hw: &HardwareProfile) -> Result<Sol, NoPeak> {
    let mut compute_s = 0.0;
    for (d, flops) in &w.flops {
        let peak = hw.peak_flops.get(d).ok_or_else(|| NoPeak {
            hardware: hw.key.clone(),
            dtype: d.clone(),
        })?;
        compute_s += flops / peak;
    }
    let memory_s = w.bytes() / hw.hbm_bytes_per_s;
    let sol_s = compute_s.max(memory_s);
    let bottleneck =
        if memory_s > 0.0 && compute_s > 0.0 && (compute_s / memory_s - 1.0).abs() <= 0.05 {
            Bottleneck::Balanced
        } else if compute_s > memory_s {
            Bottleneck::Compute
        } else {
            Bottleneck::Memory
        };
    Ok(Sol {
        compute_s,
        memory_s,
        sol_s,
        bottleneck,
    })
}

/// An operator's T_SOL (ms) per shape on a profile (a shape whose work cannot be computed is
/// left out).
pub fn shape_sols(p: &Problem, hw: &HardwareProfile) -> BTreeMap<u32, f64> {
    p.shapes
        .iter()
        .filter_map(|s| {
            let w = p.work(s).ok()?;
            let sol = sol(&w, hw).ok()?;
            Some((s.id, sol.sol_ms()))
        })
        .collect()
}

/// S = T_SOL / T_measured. Never capped: S > 1 is an inconsistency the caller reports.
pub fn speed_of_light_fraction(sol_s: f64, measured_s: f64) -> f64 {
    if measured_s > 0.0 {
        sol_s / measured_s
    } else {
        0.0
    }
}

/// Median of the values (mean of the middle two for an even count); 0 for none.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// The result of one shape for scoring: its S when it passed correctness, else failed (counts 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ShapeScore {
    Passed(f64),
    Failed,
}

/// S_op = median of S over the operator's shapes, a failed shape counting 0.
/// Shapes never measured are not in `scores`; the caller decides whether to require all.
pub fn s_op(scores: &[ShapeScore]) -> f64 {
    let v: Vec<f64> = scores
        .iter()
        .map(|s| match s {
            ShapeScore::Passed(x) => *x,
            ShapeScore::Failed => 0.0,
        })
        .collect();
    median(&v)
}

/// S_agg = Σ w_i · S_op_i over the operators of the phase view (weights renormalized over that
/// phase). Operators without an S_op contribute 0.
pub fn s_agg(suite: &Suite, phase: PhaseFilter, s_ops: &BTreeMap<String, f64>) -> f64 {
    suite
        .weights(phase)
        .iter()
        .map(|(name, w)| w * s_ops.get(name).copied().unwrap_or(0.0))
        .sum()
}

/// Which correctness level a shape must pass for its S to count. Every figure of S_op and
/// S_agg exists under both: the strict level (the problem's `[tolerance]`, exact codes for
/// integer and fp8 outputs: the suite's own rule) and the benchmark's rule (the
/// benchmark-compatible level, where, e.g., NaN never equals NaN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    Strict,
    Benchmark,
}

/// A figure (S_op, S_agg) under both rules.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct ByRule {
    pub strict: f64,
    /// Counting only the shapes that also passed the benchmark-compatible level.
    pub benchmark: f64,
}

impl ByRule {
    /// Both, each named: "0.313 strict · 0.304 benchmark rule" (`rule`: how the second is
    /// named, e.g. "bench rule" where room is short).
    pub fn named(&self, rule: &str) -> String {
        format!("{:.3} strict · {:.3} {rule}", self.strict, self.benchmark)
    }

    /// Both, strict first: "0.346/0.337" (beside a figure `named` introduced).
    pub fn pair(&self) -> String {
        format!("{:.3}/{:.3}", self.strict, self.benchmark)
    }
}

/// S_agg of a phase view under both rules, from each operator's S_op under each.
pub fn s_agg_by_rule(
    suite: &Suite,
    phase: PhaseFilter,
    strict: &BTreeMap<String, f64>,
    benchmark: &BTreeMap<String, f64>,
) -> ByRule {
    ByRule {
        strict: s_agg(suite, phase, strict),
        benchmark: s_agg(suite, phase, benchmark),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hw() -> HardwareProfile {
        HardwareProfile {
            name: "t".into(),
            key: "T".into(),
            arch: String::new(),
            sm_count: 1,
            l2_bytes: 1,
            hbm_bytes: 1,
            hbm_bytes_per_s: 1e12,
            peak_flops: [("bf16".to_string(), 100e12), ("fp32".to_string(), 10e12)].into(),
            sources: Default::default(),
            file: String::new(),
        }
    }

    fn wq(flops: &[(&str, f64)], r: f64, w: f64) -> WorkQ {
        WorkQ {
            flops: flops.iter().map(|(d, f)| (d.to_string(), *f)).collect(),
            read_bytes: r,
            write_bytes: w,
        }
    }

    #[test]
    fn sol_takes_the_larger_time_and_sums_dtype_paths() {
        let s = sol(
            &wq(&[("bf16", 100e12), ("fp32", 10e12)], 0.5e12, 0.5e12),
            &hw(),
        )
        .unwrap();
        assert_eq!(s.compute_s, 2.0);
        assert_eq!(s.memory_s, 1.0);
        assert_eq!(s.sol_s, 2.0);
        assert_eq!(s.bottleneck, Bottleneck::Compute);
        let s = sol(&wq(&[("bf16", 1e12)], 3e12, 1e12), &hw()).unwrap();
        assert_eq!(s.bottleneck, Bottleneck::Memory);
        assert_eq!(s.sol_s, 4.0);
    }

    #[test]
    fn balanced_within_five_percent_of_the_ridge() {
        let s = sol(&wq(&[("bf16", 104e12)], 1e12, 0.0), &hw()).unwrap();
        assert_eq!(s.bottleneck, Bottleneck::Balanced);
        let s = sol(&wq(&[("bf16", 96e12)], 1e12, 0.0), &hw()).unwrap();
        assert_eq!(s.bottleneck, Bottleneck::Balanced);
        let s = sol(&wq(&[("bf16", 106e12)], 1e12, 0.0), &hw()).unwrap();
        assert_eq!(s.bottleneck, Bottleneck::Compute);
        let s = sol(&wq(&[("bf16", 94e12)], 1e12, 0.0), &hw()).unwrap();
        assert_eq!(s.bottleneck, Bottleneck::Memory);
    }

    #[test]
    fn unknown_dtype_is_an_error() {
        assert!(
            sol(&wq(&[("fp8_e4m3", 1.0)], 1.0, 1.0), &hw())
                .unwrap_err()
                .to_string()
                .contains("fp8_e4m3")
        );
    }

    #[test]
    fn s_op_is_the_median_with_failures_as_zero() {
        assert_eq!(
            s_op(&[
                ShapeScore::Passed(0.5),
                ShapeScore::Passed(0.7),
                ShapeScore::Failed
            ]),
            0.5
        );
        assert_eq!(s_op(&[ShapeScore::Passed(0.4), ShapeScore::Failed]), 0.2);
        assert_eq!(s_op(&[ShapeScore::Passed(1.3)]), 1.3, "never capped");
        assert_eq!(s_op(&[]), 0.0);
    }
}
