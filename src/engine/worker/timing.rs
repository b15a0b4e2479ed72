//! Cold-L2 timing with rotating input sets, per-sample poisoning and the check of the timed runs.

use super::*;

/// The outcome of timing one shape.
#[derive(Default)]
pub(super) struct Timed {
    /// None when cancelled.
    pub(super) stats: Option<stats::TimingStats>,
    /// Why the timed runs cannot be trusted (inputs modified, outputs differ from the check).
    pub(super) broken: Option<String>,
    pub(super) cancelled: bool,
}

impl Gpu {
    /// Times one shape: cold L2 (flush before every sample), rotating input sets, adaptive count.
    ///
    /// Every sample runs on poisoned outputs (poisoned before the L2 flush, outside the event
    /// pair), so a kernel that skips work whose output is already there is caught. After timing,
    /// inputs that are not in-place must be unchanged, and (when the job carries the reference)
    /// the outputs of each input set's last timed run must match the reference on that set at the
    /// benchmark-compatible level; otherwise the shape is `incorrect`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn time_shape(
        &mut self,
        job: &Job,
        shape: &ShapeJob,
        env: &Env,
        cand: &Loaded,
        reference: Option<&Loaded>,
        custom: Option<&Loaded>,
        cancel: &AtomicU64,
        id: u64,
        heartbeat: &dyn Fn(usize),
    ) -> GResult<Timed> {
        let set_bytes: u64 = shape
            .inputs
            .iter()
            .chain(&shape.outputs)
            .map(|t| t.bytes())
            .sum::<u64>()
            .max(1);
        let (free, _) = cu::mem_get_info()?;
        let budget = (free as u64 / 2).min(16 << 30);
        let want = (2 * self.info.l2_bytes).div_ceil(set_bytes).clamp(2, 8);
        let sets = want.min((budget / set_bytes).max(1));
        // Timing inputs are fresh for every job too (derived from the job's fresh seeds).
        let seed0 = job.seeds.first().copied().unwrap_or(1) ^ 0x5EED_7153_0000_0000;
        let set_seed = |s: u64| seed0.wrapping_add((s + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let n_in = shape.inputs.len();
        let hash_scratch = DevBuf::new(256)?;
        let mut bufs: Vec<Vec<DevBuf>> = Vec::new();
        let mut maps = Vec::new();
        let mut hashes: Vec<Vec<(usize, u64)>> = Vec::new();
        let scratch = self.scratch_for(cand, env)?;
        for s in 0..sets {
            let mut m = HashMap::new();
            let ins: Vec<DevBuf> = shape
                .inputs
                .iter()
                .map(|t| DevBuf::new(t.bytes() as usize))
                .collect::<GResult<_>>()?;
            self.generate_all(&shape.inputs, &ins, env, set_seed(s), custom)?;
            let mut h = Vec::new();
            for (i, (t, b)) in shape.inputs.iter().zip(&ins).enumerate() {
                m.insert(t.name.clone(), b.ptr);
                if !t.inplace {
                    h.push((i, self.checksum(b, &hash_scratch)?));
                }
            }
            hashes.push(h);
            let mut owned = ins;
            for t in &shape.outputs {
                let b = DevBuf::new(t.bytes() as usize)?;
                m.insert(t.name.clone(), b.ptr);
                owned.push(b);
            }
            for (n, _, _, b) in &scratch {
                m.insert(n.clone(), b.ptr);
            }
            bufs.push(owned);
            maps.push(m);
        }
        let rule = if job.mode == Mode::Quick {
            StopRule::quick()
        } else {
            StopRule::full()
        };
        // Before each run: the set's outputs poisoned, the scratch reset.
        let prime = |g: &Gpu, set: usize| -> GResult<()> {
            for (t, b) in shape.outputs.iter().zip(&bufs[set][n_in..]) {
                g.poison(b, &t.dtype, 0)?;
            }
            g.reset_scratch(&scratch)
        };
        // Warm-up: at least 3 runs and 10 ms.
        let t0 = Instant::now();
        let mut k = 0usize;
        while k < 3 || (t0.elapsed().as_secs_f64() < 0.01 && k < 100) {
            prime(self, k % maps.len())?;
            self.enqueue(cand, env, &maps[k % maps.len()])?;
            self.sync()?;
            k += 1;
        }
        const BATCH: usize = 16;
        let mut starts = Vec::new();
        let mut ends = Vec::new();
        for _ in 0..BATCH {
            starts.push(cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?);
            ends.push(cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?);
        }
        let mut samples: Vec<f64> = Vec::new();
        let wall = Instant::now();
        let mut cancelled = false;
        let has_inplace = shape.inputs.iter().any(|t| t.inplace);
        // A set's inputs as they were generated (in-place inputs drift over repeated runs).
        let regenerate = |g: &mut Gpu, set: usize| -> GResult<()> {
            g.generate_all(
                &shape.inputs,
                &bufs[set][..n_in],
                env,
                set_seed(set as u64),
                custom,
            )
        };
        // One timed run, flush and all, of input set `set` (batch slot `i`).
        let sample = |g: &mut Gpu, set: usize, i: usize| -> GResult<()> {
            prime(g, set)?;
            unsafe {
                sys::cuMemsetD32Async(g.flush.ptr, i as u32, g.flush.bytes / 4, g.stream)
                    .result()?;
                cu::event::record(starts[i], g.stream)?;
            }
            g.enqueue(cand, env, &maps[set])?;
            unsafe { cu::event::record(ends[i], g.stream) }?;
            Ok(())
        };
        // Batches of about 50 ms of kernel time (1 to 16 samples), so that slow kernels still
        // report progress well inside the watchdog.
        let mut batch = BATCH;
        let result = (|| -> GResult<()> {
            loop {
                if let Some(last) = samples.last() {
                    batch = ((50.0 / last.max(1e-3)) as usize).clamp(1, BATCH);
                }
                for i in 0..batch {
                    sample(self, (samples.len() + i) % maps.len(), i)?;
                }
                self.sync()?;
                for i in 0..batch {
                    samples.push(unsafe { cu::event::elapsed(starts[i], ends[i]) }? as f64);
                }
                heartbeat(samples.len());
                if rule.done(&samples, wall.elapsed().as_secs_f64() * 1e3) {
                    break;
                }
                if cancel.load(Ordering::SeqCst) == id {
                    cancelled = true;
                    return Ok(());
                }
            }
            // In-place inputs drift over repeated runs: one more timed run per set on freshly
            // generated inputs, so that the run checked below is one on known inputs.
            if has_inplace && reference.is_some() {
                for set in 0..maps.len() {
                    regenerate(self, set)?;
                    sample(self, set, 0)?;
                    self.sync()?;
                    samples.push(unsafe { cu::event::elapsed(starts[0], ends[0]) }? as f64);
                }
            }
            Ok(())
        })();
        for e in starts.iter().chain(&ends) {
            unsafe {
                let _ = cu::event::destroy(*e);
            }
        }
        result?;
        if cancelled {
            return Ok(Timed {
                cancelled: true,
                ..Default::default()
            });
        }
        heartbeat(samples.len());
        let clock = self.nvml.as_ref().and_then(|n| n.sm_clock());
        let stats = stats::summarize(&samples, job.mode == Mode::Quick, clock);
        // Inputs that are not in-place are as generated.
        for (set, h) in hashes.iter().enumerate() {
            for (i, h0) in h {
                if self.checksum(&bufs[set][*i], &hash_scratch)? != *h0 {
                    return Ok(Timed {
                        stats,
                        broken: Some(format!(
                            "input `{}` was modified during timing, and it is not declared in-place",
                            shape.inputs[*i].name
                        )),
                        ..Default::default()
                    });
                }
            }
        }
        // The last timed run of each set against the reference on the same inputs.
        let Some(reference) = reference else {
            return Ok(Timed {
                stats,
                ..Default::default()
            });
        };
        let ref_scratch = self.scratch_for(reference, env)?;
        let ref_outs: Vec<DevBuf> = shape
            .outputs
            .iter()
            .map(|t| DevBuf::new(t.bytes() as usize))
            .collect::<GResult<_>>()?;
        for set in 0..maps.len() {
            if has_inplace {
                regenerate(self, set)?;
            }
            let mut m = maps[set].clone();
            for (n, _, _, b) in &ref_scratch {
                m.insert(n.clone(), b.ptr);
            }
            for (t, b) in shape.outputs.iter().zip(&ref_outs) {
                self.poison(b, &t.dtype, 1)?;
                m.insert(t.name.clone(), b.ptr);
            }
            self.reset_scratch(&ref_scratch)?;
            self.enqueue(reference, env, &m)?;
            for (i, t) in shape.outputs.iter().enumerate() {
                let (bad, first) = self.timed_check(
                    t,
                    &ref_outs[i],
                    &bufs[set][n_in + i],
                    job.tolerance,
                    &hash_scratch,
                )?;
                if bad > 0 {
                    let es = crate::suite::dtype_size(&t.dtype).unwrap_or(1);
                    let bytes_at = |b: &DevBuf| -> GResult<Vec<u8>> {
                        let mut v = vec![0u8; es];
                        unsafe { cu::memcpy_dtoh_sync(&mut v, b.ptr + first * es as u64) }?;
                        Ok(v)
                    };
                    let timed = bytes_at(&bufs[set][n_in + i])?;
                    let r = compare::decode(&t.dtype, &bytes_at(&ref_outs[i])?);
                    let x = compare::decode(&t.dtype, &timed);
                    let poisoned = timed == compare::poison(&t.dtype, 0);
                    return Ok(Timed {
                        stats,
                        broken: Some(format!(
                            "output of a timed run differs from the check: `{}` on timing input set {} of {}: {bad} of {} elements differ from the reference, the first at index {first} (reference {r}, timed run {x}{})",
                            t.name,
                            set + 1,
                            maps.len(),
                            t.elements(),
                            if poisoned {
                                ", the poison: never written"
                            } else {
                                ""
                            }
                        )),
                        ..Default::default()
                    });
                }
            }
            heartbeat(samples.len());
        }
        Ok(Timed {
            stats,
            ..Default::default()
        })
    }
}
