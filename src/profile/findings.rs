//! Bottleneck classification from profiler figures, by the documented rules of docs/profiler.md.
//! Each finding carries its evidence.

use super::ncu::KernelProfile;
use crate::suite::roofline::Bottleneck;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Finding {
    /// A stable identifier (`grid_too_small`, `tail_effect`, …).
    pub rule: String,
    pub kernel: String,
    pub summary: String,
    pub evidence: String,
}

fn f(rule: &'static str, k: &KernelProfile, summary: String, evidence: String) -> Finding {
    Finding {
        rule: rule.to_string(),
        kernel: k.name.clone(),
        summary,
        evidence,
    }
}

/// Applies every rule to every kernel. `redundant` is DRAM bytes over the operator's Q;
/// `bottleneck` the roofline's classification of the shape; `low_precision` whether the operator
/// works in bf16/fp16/fp8 (tensor cores apply); `sm_count` the GPU's SMs.
pub fn classify(
    kernels: &[KernelProfile],
    redundant: Option<f64>,
    bottleneck: Option<Bottleneck>,
    low_precision: bool,
    sm_count: Option<u32>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for k in kernels {
        let dram = k.dram_throughput_pct.unwrap_or(0.0);
        let sm = k.sm_throughput_pct.unwrap_or(0.0);
        let mem = k.memory_throughput_pct.unwrap_or(dram).max(dram);
        // Grid too small / tail effect.
        launch_findings(&mut out, k, sm_count);
        // Uncoalesced global access, register spills.
        memory_access_findings(&mut out, k);
        // Unintended fp64.
        fp64_findings(&mut out, k);
        // Shared-memory bank conflicts.
        bank_conflict_findings(&mut out, k);
        // Warp divergence.
        divergence_findings(&mut out, k);
        // Occupancy.
        occupancy_findings(&mut out, k);
        // Compute-bound without tensor cores.
        tensor_core_findings(&mut out, k, low_precision, bottleneck, sm, mem);
        // Overall classification.
        bound_findings(&mut out, k, dram, sm, mem);
    }
    redundant_traffic_findings(&mut out, kernels, redundant);
    out
}

/// Grid too small for the GPU, or a mostly empty last wave.
fn launch_findings(out: &mut Vec<Finding>, k: &KernelProfile, sm_count: Option<u32>) {
    if let Some(w) = k.waves_per_sm {
        if w < 1.0 {
            let blocks = k.grid_size.unwrap_or(0.0);
            if sm_count.map(|s| blocks < s as f64).unwrap_or(true) || w < 0.5 {
                out.push(f(
                    "grid_too_small",
                    k,
                    "grid too small: the GPU is partly idle".into(),
                    format!(
                        "{blocks:.0} blocks, {w:.2} waves per SM{}",
                        sm_count.map(|s| format!(" on {s} SMs")).unwrap_or_default()
                    ),
                ));
            }
        } else if w < 4.0 && w.fract() > 0.0 && w.fract() < 0.5 {
            out.push(f(
                "tail_effect",
                k,
                "tail effect: the last wave runs mostly empty".into(),
                format!(
                    "{w:.2} waves per SM: the last wave is {:.0}% full",
                    w.fract() * 100.0
                ),
            ));
        }
    }
}

/// Uncoalesced global loads and register spills to local memory.
fn memory_access_findings(out: &mut Vec<Finding>, k: &KernelProfile) {
    if let Some(spr) = k.global_ld_sectors_per_request
        && spr > 16.5
    {
        out.push(f(
            "uncoalesced_access",
            k,
            "uncoalesced global loads".into(),
            format!(
                "{spr:.1} sectors per load request (16 at most for fully used 16-byte accesses)"
            ),
        ));
    }
    // Register spills.
    let local_bytes = k.local_bytes_per_thread.unwrap_or(0.0);
    let local_traffic = k.local_sectors.unwrap_or(0.0);
    if local_bytes > 0.0 || local_traffic > 0.0 {
        out.push(f(
            "register_spills",
            k,
            "register spills to local memory".into(),
            format!("{local_bytes:.0} bytes of local memory per thread, {local_traffic:.0} local sectors moved"),
        ));
    }
}

/// fp64 arithmetic the kernel probably did not mean.
fn fp64_findings(out: &mut Vec<Finding>, k: &KernelProfile) {
    if let Some(n) = k.fp64_per_cycle
        && n > 0.0
    {
        out.push(f("unintended_fp64", k, "fp64 arithmetic in the kernel".into(), format!("{n:.3} fp64 thread instructions per cycle (dadd/dmul/dfma); a `double` literal or libm call is the usual cause")));
    }
}

/// Shared-memory bank conflicts over 10 % of the wavefronts.
fn bank_conflict_findings(out: &mut Vec<Finding>, k: &KernelProfile) {
    if let (Some(c), Some(w)) = (k.shared_bank_conflicts, k.shared_wavefronts)
        && w > 0.0
        && c / w > 0.1
        && c > 1000.0
    {
        out.push(f(
            "bank_conflicts",
            k,
            "shared-memory bank conflicts".into(),
            format!(
                "{c:.0} conflicts over {w:.0} shared wavefronts ({:.0}%)",
                100.0 * c / w
            ),
        ));
    }
}

/// Warp divergence or partial warps.
fn divergence_findings(out: &mut Vec<Finding>, k: &KernelProfile) {
    if let Some(t) = k.threads_per_instruction
        && t < 24.0
    {
        out.push(f(
            "warp_divergence",
            k,
            "warp divergence or partial warps".into(),
            format!("{t:.1} active threads per warp instruction (32 is full)"),
        ));
    }
}

/// Low achieved or theoretical occupancy.
fn occupancy_findings(out: &mut Vec<Finding>, k: &KernelProfile) {
    if let (Some(a), Some(t)) = (k.achieved_occupancy_pct, k.theoretical_occupancy_pct)
        && (t < 50.0 || a < 25.0)
    {
        out.push(f(
                "low_occupancy",
                k,
                "low occupancy".into(),
                format!(
                    "achieved {a:.0}% of the warp slots, theoretical {t:.0}% ({} registers/thread, {:.0} B shared/block)",
                    k.registers_per_thread.map(|r| format!("{r:.0}")).unwrap_or_else(|| "?".into()),
                    k.shared_static_bytes.unwrap_or(0.0) + k.shared_dynamic_bytes.unwrap_or(0.0)
                ),
            ));
    }
}

/// A low-precision compute-bound kernel that leaves the tensor cores idle.
fn tensor_core_findings(
    out: &mut Vec<Finding>,
    k: &KernelProfile,
    low_precision: bool,
    bottleneck: Option<Bottleneck>,
    sm: f64,
    mem: f64,
) {
    if low_precision
        && sm >= 60.0
        && sm > mem
        && k.tensor_pipe_pct.map(|t| t < 5.0).unwrap_or(true)
        && bottleneck == Some(Bottleneck::Compute)
    {
        out.push(f(
            "compute_without_tensor_cores",
            k,
            "compute-bound without tensor cores".into(),
            format!(
                "SM throughput {sm:.0}%, tensor pipe {}",
                k.tensor_pipe_pct
                    .map(|t| format!("{t:.1}%"))
                    .unwrap_or_else(|| "idle".into())
            ),
        ));
    }
}

/// The overall classification: memory-, compute- or latency-bound.
fn bound_findings(out: &mut Vec<Finding>, k: &KernelProfile, dram: f64, sm: f64, mem: f64) {
    let top = k
        .stalls
        .first()
        .map(|(r, v)| format!("top stall {r} ({v:.1} cycles per instruction)"))
        .unwrap_or_default();
    if mem >= 60.0 && mem >= sm {
        out.push(f(
            "memory_bound",
            k,
            "memory-bound".into(),
            format!("memory throughput {mem:.0}% of peak (DRAM {dram:.0}%), SM {sm:.0}%"),
        ));
    } else if sm >= 60.0 && sm > mem {
        out.push(f(
            "compute_bound",
            k,
            "compute-bound".into(),
            format!("SM throughput {sm:.0}% of peak, memory {mem:.0}%"),
        ));
    } else if k.dram_throughput_pct.is_some() || k.sm_throughput_pct.is_some() {
        out.push(f(
            "latency_bound",
            k,
            "latency-bound: neither memory nor compute is near its peak".into(),
            format!(
                "memory {mem:.0}%, SM {sm:.0}%{}",
                if top.is_empty() {
                    String::new()
                } else {
                    format!("; {top}")
                }
            ),
        ));
    }
}

/// More DRAM traffic than the operator's Q, over all kernels.
fn redundant_traffic_findings(
    out: &mut Vec<Finding>,
    kernels: &[KernelProfile],
    redundant: Option<f64>,
) {
    if let Some(r) = redundant
        && r > 1.25
    {
        out.push(Finding {
            rule: "redundant_traffic".into(),
            kernel: kernels
                .iter()
                .map(|k| k.name.clone())
                .collect::<Vec<_>>()
                .join("+"),
            summary: "more DRAM traffic than the operator needs".into(),
            evidence: format!("DRAM bytes are {r:.2}× the operator's Q (read + write)"),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k() -> KernelProfile {
        KernelProfile {
            name: "k".into(),
            ..Default::default()
        }
    }

    fn rules(v: &[Finding]) -> Vec<&str> {
        v.iter().map(|f| f.rule.as_str()).collect()
    }

    #[test]
    fn memory_bound_kernel() {
        let p = KernelProfile {
            dram_throughput_pct: Some(88.0),
            sm_throughput_pct: Some(30.0),
            waves_per_sm: Some(12.0),
            achieved_occupancy_pct: Some(80.0),
            theoretical_occupancy_pct: Some(100.0),
            ..k()
        };
        assert_eq!(
            rules(&classify(
                &[p],
                Some(1.01),
                Some(Bottleneck::Memory),
                true,
                Some(132)
            )),
            vec!["memory_bound"]
        );
    }

    #[test]
    fn small_grid_and_latency() {
        let p = KernelProfile {
            dram_throughput_pct: Some(5.0),
            sm_throughput_pct: Some(3.0),
            waves_per_sm: Some(0.05),
            grid_size: Some(7.0),
            stalls: vec![("long_scoreboard".into(), 9.0)],
            ..k()
        };
        let f = classify(&[p], None, None, true, Some(132));
        assert_eq!(rules(&f), vec!["grid_too_small", "latency_bound"]);
        assert!(f[0].evidence.contains("7 blocks"));
        assert!(f[1].evidence.contains("long_scoreboard"));
    }

    #[test]
    fn tail_effect_spills_fp64_conflicts_divergence() {
        let p = KernelProfile {
            waves_per_sm: Some(1.2),
            local_bytes_per_thread: Some(64.0),
            fp64_per_cycle: Some(0.5),
            shared_bank_conflicts: Some(5e5),
            shared_wavefronts: Some(1e6),
            threads_per_instruction: Some(12.0),
            ..k()
        };
        assert_eq!(
            rules(&classify(&[p], None, None, false, None)),
            vec![
                "tail_effect",
                "register_spills",
                "unintended_fp64",
                "bank_conflicts",
                "warp_divergence"
            ]
        );
    }

    #[test]
    fn compute_bound_without_tensor_cores_and_redundant_traffic() {
        let p = KernelProfile {
            sm_throughput_pct: Some(85.0),
            dram_throughput_pct: Some(20.0),
            tensor_pipe_pct: Some(0.0),
            waves_per_sm: Some(8.0),
            ..k()
        };
        let f = classify(
            std::slice::from_ref(&p),
            Some(2.5),
            Some(Bottleneck::Compute),
            true,
            Some(132),
        );
        assert_eq!(
            rules(&f),
            vec![
                "compute_without_tensor_cores",
                "compute_bound",
                "redundant_traffic"
            ]
        );
        // fp32 operators: tensor cores are not the point.
        assert_eq!(
            rules(&classify(
                &[p],
                None,
                Some(Bottleneck::Compute),
                false,
                Some(132)
            )),
            vec!["compute_bound"]
        );
    }

    #[test]
    fn low_occupancy_and_uncoalesced() {
        let p = KernelProfile {
            achieved_occupancy_pct: Some(12.0),
            theoretical_occupancy_pct: Some(25.0),
            registers_per_thread: Some(168.0),
            global_ld_sectors_per_request: Some(32.0),
            ..k()
        };
        let f = classify(&[p], None, None, true, None);
        assert_eq!(rules(&f), vec!["uncoalesced_access", "low_occupancy"]);
        assert!(f[1].evidence.contains("168 registers"));
    }
}
