//! The check of timed outputs on the device: every checked timed sample's outputs against the
//! reference's on the same inputs, at the level the correctness check reached.
//!
//! Invariants: the check is enqueued after the sample's end event, so it is never inside the
//! timed interval and never runs beside a timed kernel; its result lands in a slot of harness
//! memory that the candidate is never given; the per-element rules are those of `compare.rs`
//! (the same kernel code decodes every dtype), and the strict level includes its relative L2.

use super::*;

/// Words per (sample, output) slot: strict failures, benchmark failures, !first strict failure,
/// Σ(r − x)², Σr², padding.
pub(super) const SLOT_WORDS: usize = 6;

/// One checked output of one timed sample, read back from its slot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct SlotResult {
    pub(super) strict_bad: u64,
    pub(super) bench_bad: u64,
    pub(super) first_bad: Option<u64>,
    pub(super) rel_l2: f64,
}

impl SlotResult {
    pub(super) fn from_words(w: &[u64]) -> SlotResult {
        let err2 = f64::from_bits(w[3]);
        let ref2 = f64::from_bits(w[4]);
        SlotResult {
            strict_bad: w[0],
            bench_bad: w[1],
            first_bad: (w[2] != 0).then_some(!w[2]),
            rel_l2: if ref2 > 0.0 {
                (err2 / ref2).sqrt()
            } else if err2 > 0.0 {
                f64::INFINITY
            } else {
                0.0
            },
        }
    }

    /// Whether the output meets the strict level (per element and, for float outputs, rel-L2).
    pub(super) fn strict_ok(&self, float: bool, tol: compare::Tol) -> bool {
        self.strict_bad == 0 && !(float && self.rel_l2 > tol.rel_l2)
    }
}

/// The dtype code of the harness's `decode_elem`.
pub(super) fn dtype_code(dtype: &str) -> GResult<u64> {
    Ok(match dtype {
        "bf16" => 0,
        "fp16" => 1,
        "fp32" | "tf32" => 2,
        "fp64" => 3,
        "fp8_e4m3" => 4,
        "fp8_e4m3fnuz" => 5,
        "int8" => 6,
        "uint8" | "bool" => 7,
        "int32" => 8,
        "int64" => 9,
        other => return Err(gerr(format!("no timed-run check for dtype {other}"))),
    })
}

impl Gpu {
    /// Enqueues the check of `cand` against `reference` into the slot at `slot` (zeroed before).
    pub(super) fn enqueue_timed_check(
        &mut self,
        t: &TensorDesc,
        reference: &DevBuf,
        cand: &DevBuf,
        tol: compare::Tol,
        slot: sys::CUdeviceptr,
    ) -> GResult<()> {
        let code = dtype_code(&t.dtype)?;
        let es = crate::suite::dtype_size(&t.dtype).unwrap_or(1) as u64;
        let n = t.elements();
        let mut storage = [
            reference.ptr,
            cand.ptr,
            n,
            code,
            es,
            u64::from(t.compare == "exact"),
            tol.atol.to_bits(),
            tol.rtol.to_bits(),
            slot,
        ];
        self.launch_harness("timed_check", n, &mut storage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tol() -> compare::Tol {
        compare::Tol {
            atol: 1e-5,
            rtol: 1e-2,
            rel_l2: 1e-3,
        }
    }

    #[test]
    fn a_slot_reads_back_counts_first_index_and_rel_l2() {
        let w = [3, 1, !7u64, 4.0f64.to_bits(), 100.0f64.to_bits(), 0];
        let r = SlotResult::from_words(&w);
        assert_eq!(r.strict_bad, 3);
        assert_eq!(r.bench_bad, 1);
        assert_eq!(r.first_bad, Some(7));
        assert!((r.rel_l2 - 0.2).abs() < 1e-12);
        assert!(!r.strict_ok(true, tol()));
    }

    #[test]
    fn rel_l2_alone_fails_the_strict_level_of_float_outputs() {
        // No element outside its tolerance, but the error is spread over all of them.
        let w = [0, 0, 0, 1e-4f64.to_bits(), 1.0f64.to_bits(), 0];
        let r = SlotResult::from_words(&w);
        assert_eq!(r.first_bad, None);
        assert!(!r.strict_ok(true, tol()));
        assert!(r.strict_ok(false, tol()));
        let clean = SlotResult::from_words(&[0; 6]);
        assert!(clean.strict_ok(true, tol()));
        assert_eq!(clean.rel_l2, 0.0);
        // An error where the reference is all zeros is infinite.
        let z = SlotResult::from_words(&[0, 0, 0, 1.0f64.to_bits(), 0, 0]);
        assert!(z.rel_l2.is_infinite());
    }
}
