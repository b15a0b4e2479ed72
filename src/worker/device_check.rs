//! The correctness check's comparison on the device: reference and both candidate runs stay in
//! GPU memory and the harness's `check_runs` kernel gathers, element for element, the
//! statistics that the host's scan (`compare::check_tensor`) gathers; `compare::finish` turns
//! them into the verdict, so both paths judge by one set of rules. Only the first failing
//! element's values are copied to the host.
//!
//! Invariants: the three buffers are the harness's (never given to a candidate as anything but
//! the output it was poisoned for); the statistics land in harness memory; the result equals the
//! host's for every dtype `decode_elem` knows (a GPU test compares the two paths).

use super::*;

/// Words of `check_runs`'s result.
const WORDS: usize = 16;

impl Gpu {
    /// Compares two candidate runs with the reference on the device (waits for the result).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn check_on_device(
        &mut self,
        t: &TensorDesc,
        reference: &DevBuf,
        run_a: &DevBuf,
        run_b: &DevBuf,
        tol: compare::Tol,
        allow_nondeterminism: bool,
        scratch: &DevBuf,
    ) -> GResult<TensorCheck> {
        let code = dtype_code(&t.dtype)?;
        let es = crate::suite::dtype_size(&t.dtype).unwrap_or(1);
        let n = t.elements();
        let mode = if t.compare == "exact" {
            CmpMode::Exact
        } else {
            CmpMode::Float
        };
        let word = |p: Vec<u8>| {
            let mut b = [0u8; 8];
            for (i, x) in p.iter().take(8).enumerate() {
                b[i] = *x;
            }
            u64::from_le_bytes(b)
        };
        let (pa, pb) = (
            word(compare::poison(&t.dtype, 0)),
            word(compare::poison(&t.dtype, 1)),
        );
        unsafe { cu::memset_d8_async(scratch.ptr, 0, WORDS * 8, self.stream) }?;
        let mut storage = [
            reference.ptr,
            run_a.ptr,
            run_b.ptr,
            n,
            code,
            es as u64,
            u64::from(mode == CmpMode::Exact),
            tol.atol.to_bits(),
            tol.rtol.to_bits(),
            pa,
            pb,
            scratch.ptr,
        ];
        self.launch_harness("check_runs", n, &mut storage)?;
        self.sync()?;
        let mut w = [0u64; WORDS];
        unsafe { cu::memcpy_dtoh_sync(&mut w, scratch.ptr) }?;
        let first = |c: u64| (c != 0).then_some(!c);
        let value_at = |b: &DevBuf, i: u64| self.element_at(b, &t.dtype, i);
        let first_bad = match first(w[2]) {
            Some(i) => Some((i, value_at(reference, i)?, value_at(run_a, i)?)),
            None => None,
        };
        let scanned = n.saturating_sub(w[7]);
        let (r0, x0) = if n > 0 {
            (value_at(reference, 0)?, value_at(run_a, 0)?)
        } else {
            (0.0, 0.0)
        };
        let p = compare::Partial {
            bench_fail: w[0] > 0,
            mismatches: w[1],
            first_bad,
            max_abs: f64::from_bits(w[3]),
            max_rel: f64::from_bits(w[4]),
            err2: f64::from_bits(w[5]),
            ref2: f64::from_bits(w[6]),
            unwritten: w[7],
            first_unwritten: first(w[8]),
            differ: w[9],
            first_differ: first(w[10]),
            nan: w[11],
            first_nan: first(w[12]),
            shared_nan: w[13],
            ref_const: (scanned > 0).then_some((r0, w[14] == 0)),
            cand_const: (scanned > 0).then_some((x0, w[15] == 0)),
        };
        let c = TensorCheck::passing(&t.name, n);
        Ok(compare::finish(c, p, mode, tol, allow_nondeterminism))
    }
}
