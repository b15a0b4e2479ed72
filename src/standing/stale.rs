//! Staleness, and an operator's fingerprints as the suite defines it now (`OpPrint`, made with
//! `crate::fingerprint`). A record is stale — shown as such and counted 0 in S_agg — when what it
//! measured is no longer what is there: the kernel source, the operator's reference or shapes,
//! the GPU model, or the hardware profile of T_SOL.

use super::format::Record;
use crate::fingerprint;
use crate::suite::{Problem, Suite};
use std::collections::BTreeMap;

/// The fingerprints of an operator as the suite defines it now.
#[derive(Debug, Clone, PartialEq)]
pub struct OpPrint {
    /// reference.cu, inputs.cu and the strict tolerance.
    pub reference: String,
    /// The shapes: ids and parameters.
    pub shapes: String,
}

impl OpPrint {
    /// The fingerprints of an operator; a missing reference.cu counts as empty.
    pub fn of(suite: &Suite, p: &Problem) -> OpPrint {
        let reference = crate::contract::kernels::suite_kernel(suite, p, "reference.cu")
            .map(|s| s.code)
            .unwrap_or_default();
        OpPrint::with_reference(p, &reference)
    }

    pub fn with_reference(p: &Problem, reference: &str) -> OpPrint {
        let tolerance = serde_json::to_string(&p.tolerance).unwrap_or_default();
        let shapes: Vec<serde_json::Value> = p
            .shapes
            .iter()
            .map(|s| {
                let params: serde_json::Map<String, serde_json::Value> = s
                    .params
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect();
                serde_json::json!([s.id, params])
            })
            .collect();
        OpPrint {
            reference: fingerprint::of_parts(&[
                "reference.cu",
                reference,
                "inputs.cu",
                p.generator.as_deref().unwrap_or(""),
                "tolerance",
                &tolerance,
            ]),
            shapes: fingerprint::of_parts(&[&serde_json::Value::Array(shapes).to_string()]),
        }
    }

    /// Every operator's fingerprints.
    pub fn all(suite: &Suite) -> BTreeMap<String, OpPrint> {
        suite
            .problems
            .iter()
            .map(|p| (p.name.clone(), OpPrint::of(suite, p)))
            .collect()
    }
}

/// Why a record is stale.
#[derive(Debug, Clone, PartialEq)]
pub enum Stale {
    /// The operator is not in the suite any more.
    NotInSuite,
    /// The kernel file cannot be read.
    SourceMissing(String),
    SourceChanged,
    ReferenceChanged,
    ShapesChanged,
    /// Measured on another GPU model than this machine's.
    GpuDiffers {
        measured: String,
        now: String,
    },
    /// T_SOL came from another hardware profile than the one in use.
    HardwareDiffers {
        measured: String,
        now: String,
    },
    /// A shape's T_SOL on the profile is not what its S was computed against (the problem's
    /// work or the profile's figures changed, or the calibration was run again).
    SolChanged {
        shape: u32,
        measured_ms: f64,
        now_ms: f64,
    },
    /// Measured in another mode than full (quick: one seed and short timing); S_agg is a
    /// full-mode figure.
    NotFull {
        mode: String,
    },
}

impl Stale {
    /// A short phrase: "source changed", "measured on NVIDIA H200, not NVIDIA H100".
    pub fn label(&self) -> String {
        match self {
            Stale::NotInSuite => "not in the suite".into(),
            Stale::SourceMissing(why) => format!("kernel unreadable ({why})"),
            Stale::SourceChanged => "source changed".into(),
            Stale::ReferenceChanged => "reference changed".into(),
            Stale::ShapesChanged => "shapes changed".into(),
            Stale::GpuDiffers { measured, now } => format!("measured on {measured}, not {now}"),
            Stale::HardwareDiffers { measured, now } => {
                format!("T_SOL on {measured}, not {now}")
            }
            Stale::SolChanged {
                shape,
                measured_ms,
                now_ms,
            } => format!(
                "shape {shape}'s T_SOL is {now_ms:.6} ms now, {measured_ms:.6} ms when measured"
            ),
            Stale::NotFull { mode } => format!("measured {mode}, not in full"),
        }
    }

    /// A key for scripts: `source_changed`, `gpu_differs`, …
    pub fn key(&self) -> &'static str {
        match self {
            Stale::NotInSuite => "not_in_suite",
            Stale::SourceMissing(_) => "source_missing",
            Stale::SourceChanged => "source_changed",
            Stale::ReferenceChanged => "reference_changed",
            Stale::ShapesChanged => "shapes_changed",
            Stale::GpuDiffers { .. } => "gpu_differs",
            Stale::HardwareDiffers { .. } => "hardware_differs",
            Stale::SolChanged { .. } => "sol_changed",
            Stale::NotFull { .. } => "not_full",
        }
    }
}

/// What a record is compared with.
pub struct Now<'a> {
    /// The kernel's text as it is now (Err: why it cannot be read).
    pub source: Result<&'a str, &'a str>,
    /// The operator's fingerprints now (None: not in the suite).
    pub op: Option<&'a OpPrint>,
    /// This machine's GPU model, when known (without a GPU the GPU is not judged).
    pub gpu: Option<&'a str>,
    /// The hardware profile in use for T_SOL.
    pub hardware: &'a str,
    /// Each shape's T_SOL (ms) on that profile now, when known.
    pub sol_ms: Option<&'a BTreeMap<u32, f64>>,
}

/// Every shape's T_SOL (ms) on a profile, by operator.
pub fn sols(
    suite: &Suite,
    hw: &crate::suite::hardware::HardwareProfile,
) -> BTreeMap<String, BTreeMap<u32, f64>> {
    suite
        .problems
        .iter()
        .map(|p| (p.name.clone(), crate::suite::roofline::shape_sols(p, hw)))
        .collect()
}

/// Every reason the record is stale (none: it stands).
pub fn staleness(r: &Record, now: &Now<'_>) -> Vec<Stale> {
    let mut v = Vec::new();
    match now.op {
        None => v.push(Stale::NotInSuite),
        Some(op) => {
            if op.reference != r.fingerprint.reference {
                v.push(Stale::ReferenceChanged);
            }
            if op.shapes != r.fingerprint.shapes {
                v.push(Stale::ShapesChanged);
            }
        }
    }
    match now.source {
        Err(why) => v.push(Stale::SourceMissing(why.to_string())),
        Ok(text) if fingerprint::of_source(text) != r.fingerprint.source => {
            v.push(Stale::SourceChanged)
        }
        Ok(_) => {}
    }
    if let Some(gpu) = now.gpu
        && gpu != r.fingerprint.gpu
    {
        v.push(Stale::GpuDiffers {
            measured: r.fingerprint.gpu.clone(),
            now: gpu.to_string(),
        });
    }
    if r.measurement.hardware != now.hardware {
        v.push(Stale::HardwareDiffers {
            measured: r.measurement.hardware.clone(),
            now: now.hardware.to_string(),
        });
    } else if let Some(sols) = now.sol_ms {
        // S rests on T_SOL: the first scored shape whose T_SOL moved makes the record stale.
        let moved = r.measurement.shapes.iter().find_map(|s| {
            let now_ms = *sols.get(&s.shape)?;
            let moved = s.s.is_some() && (s.sol_ms - now_ms).abs() > 1e-9 * now_ms.abs().max(1e-12);
            moved.then_some(Stale::SolChanged {
                shape: s.shape,
                measured_ms: s.sol_ms,
                now_ms,
            })
        });
        v.extend(moved);
    }
    // A quick record (an accepted revision's quick measurement, before its full one ends, or
    // after the app closed first) stands for the kernel, not for its figure.
    if r.measurement.mode != "full" {
        v.push(Stale::NotFull {
            mode: r.measurement.mode.clone(),
        });
    }
    v
}
