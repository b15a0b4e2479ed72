//! Timing statistics: median (the headline), min, mean, p20, p80, relative IQR.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TimingStats {
    pub median_ms: f64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub p20_ms: f64,
    pub p80_ms: f64,
    /// (p75 − p25) / median.
    pub rel_iqr: f64,
    pub n: usize,
    /// Fewer samples than a full measurement (quick mode).
    pub quick: bool,
    /// SM clock while timing (MHz), where known.
    pub sm_clock_mhz: Option<u32>,
    /// Samples far from the median (below half of it or above twice it): kept in the figures
    /// (the median is robust to them), but reported.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub outliers: usize,
    /// The slowest sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ms: Option<f64>,
    /// Timed samples whose outputs were checked against the reference (every sample in full
    /// mode, a secret random subset in quick mode).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub checked: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Whether a sample is far from the median: below half of it or above twice it.
pub fn is_outlier(sample: f64, median: f64) -> bool {
    median > 0.0 && (sample < 0.5 * median || sample > 2.0 * median)
}

/// Linear-interpolated percentile (0..=100) of sorted data.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    if sorted.len() == 1 {
        return sorted[0];
    }
    let rank = (p / 100.0).clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let frac = rank - lo as f64;
    sorted[lo] * (1.0 - frac) + sorted[hi] * frac
}

/// Relative noise of the median: relative IQR scaled by 1/sqrt(n) (a robust standard error).
pub fn median_noise(samples: &[f64]) -> f64 {
    if samples.len() < 3 {
        return f64::INFINITY;
    }
    let mut s = samples.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let med = percentile(&s, 50.0);
    if med <= 0.0 {
        return f64::INFINITY;
    }
    let iqr = percentile(&s, 75.0) - percentile(&s, 25.0);
    // For a normal distribution σ ≈ IQR / 1.349 and SE(median) ≈ 1.2533 σ / √n.
    1.2533 * (iqr / 1.349) / (s.len() as f64).sqrt() / med
}

pub fn summarize(
    samples_ms: &[f64],
    quick: bool,
    sm_clock_mhz: Option<u32>,
) -> Option<TimingStats> {
    if samples_ms.is_empty() {
        return None;
    }
    let mut s = samples_ms.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let median = percentile(&s, 50.0);
    Some(TimingStats {
        median_ms: median,
        min_ms: s[0],
        mean_ms: s.iter().sum::<f64>() / s.len() as f64,
        p20_ms: percentile(&s, 20.0),
        p80_ms: percentile(&s, 80.0),
        rel_iqr: if median > 0.0 {
            (percentile(&s, 75.0) - percentile(&s, 25.0)) / median
        } else {
            0.0
        },
        n: s.len(),
        quick,
        sm_clock_mhz,
        outliers: s.iter().filter(|&&x| is_outlier(x, median)).count(),
        max_ms: s.last().copied(),
        checked: 0,
    })
}

/// When to stop sampling. A kernel sees its own launches and could try to end timing early
/// (one slow first sample used to end it after one batch): the rule needs a minimum of samples
/// and of batches before the wall budget may end it, and the slow-kernel exit goes by the
/// median, which one slow sample cannot move.
#[derive(Debug, Clone, Copy)]
pub struct StopRule {
    pub min_samples: usize,
    pub max_samples: usize,
    /// Batches (one synchronisation each) before anything but the sample cap may end timing.
    pub min_batches: usize,
    /// Maximum wall time spent sampling (ms), once the minimums are met; also the budget of
    /// a slow kernel (median × samples).
    pub max_wall_ms: f64,
    /// Target relative noise of the median.
    pub target_noise: f64,
}

impl StopRule {
    pub fn quick() -> Self {
        StopRule {
            min_samples: 10,
            max_samples: 200,
            min_batches: 2,
            max_wall_ms: 60.0,
            target_noise: 0.01,
        }
    }
    pub fn full() -> Self {
        StopRule {
            min_samples: 30,
            max_samples: 2000,
            min_batches: 3,
            max_wall_ms: 2000.0,
            target_noise: 0.005,
        }
    }

    /// Whether sampling may stop now, after `batches` batches.
    pub fn done(&self, samples: &[f64], batches: usize, wall_ms: f64) -> bool {
        let n = samples.len();
        if n >= self.max_samples {
            return true;
        }
        if batches < self.min_batches || n < 3 {
            return false;
        }
        let mut s = samples.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let median = percentile(&s, 50.0);
        // Slow kernels: enough once the median sample times the count exceeds the budget.
        if median * n as f64 >= self.max_wall_ms {
            return true;
        }
        if n < self.min_samples {
            return false;
        }
        wall_ms >= self.max_wall_ms || median_noise(samples) <= self.target_noise
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_figures() {
        let s = summarize(&[5.0, 1.0, 3.0, 2.0, 4.0], false, Some(1980)).unwrap();
        assert_eq!(s.median_ms, 3.0);
        assert_eq!(s.min_ms, 1.0);
        assert_eq!(s.mean_ms, 3.0);
        assert!((s.p20_ms - 1.8).abs() < 1e-12);
        assert!((s.p80_ms - 4.2).abs() < 1e-12);
        assert!((s.rel_iqr - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(s.n, 5);
        assert!(summarize(&[], true, None).is_none());
    }

    #[test]
    fn stop_rule_needs_minimum_samples_batches_and_low_noise() {
        let r = StopRule::quick();
        assert!(!r.done(&[1.0; 9], 5, 1.0));
        assert!(r.done(&[1.0; 10], 2, 1.0));
        // Noisy samples whose median times their count exceeds the budget: a slow kernel.
        let slow: Vec<f64> = (0..50)
            .map(|i| if i % 2 == 0 { 1.0 } else { 2.0 })
            .collect();
        assert!(r.done(&slow, 4, 10.0));
        assert!(!r.done(&[1.0; 16], 1, 1e6), "one batch never ends timing");
        let noisy: Vec<f64> = (0..50)
            .map(|i| if i % 2 == 0 { 0.1 } else { 0.2 })
            .collect();
        assert!(!r.done(&noisy, 4, 10.0), "noise {}", median_noise(&noisy));
        assert!(r.done(&noisy, 4, 150.0), "wall-time cap");
        assert!(r.done(&[1.0; 200], 1, 1.0), "sample cap");
        assert!(!r.done(&[60.0, 61.0], 2, 130.0), "at least three samples");
        assert!(
            r.done(&[60.0, 61.0, 59.0], 2, 190.0),
            "slow kernels stop after three samples over the budget"
        );
    }

    #[test]
    fn one_slow_sample_cannot_end_timing() {
        // The first sample takes the whole budget, the others are fast: the median decides.
        let r = StopRule::full();
        let mut s = vec![5000.0];
        s.extend(std::iter::repeat_n(0.01, 15));
        assert!(!r.done(&s, 1, 5001.0), "not after the first batch");
        assert!(!r.done(&s, 3, 1.0), "not below the minimum of samples");
        let s = summarize(&s, false, None).unwrap();
        assert_eq!(s.outliers, 1);
        assert_eq!(s.max_ms, Some(5000.0));
    }

    #[test]
    fn outliers_are_samples_beyond_half_or_twice_the_median() {
        assert!(is_outlier(2.1, 1.0));
        assert!(is_outlier(0.49, 1.0));
        assert!(!is_outlier(1.9, 1.0));
        assert!(!is_outlier(0.6, 1.0));
        let s = summarize(&[1.0, 1.0, 1.0, 3.0, 0.4], true, None).unwrap();
        assert_eq!(s.outliers, 2);
    }
}
