//! Cold-L2 timing with rotating input sets, per-sample poisoning, and the check of timed outputs.
//!
//! Invariants (what a kernel cannot game):
//! - every sample runs on the same buffers after the same preparation, outside the event pair:
//!   outputs poisoned with the same pattern, scratch reset, in-place inputs restored from the
//!   harness's pristine copy, the L2 flushed; a checked sample is indistinguishable from another;
//! - outputs are checked on the device against the reference's outputs on the same inputs,
//!   after the sample's end event: every sample in full mode, a secret random subset in quick
//!   mode (at least a quarter, at least one per batch), at the level the correctness check
//!   reached (strict with its relative L2);
//! - after every batch each input that is not in-place is compared byte for byte with its
//!   pristine copy (no checksum a kernel could keep);
//! - the stop rule needs a minimum of samples and batches and goes by the median
//!   (`stats::StopRule`), so a kernel cannot end timing early with one slow sample.

use super::*;

/// The outcome of timing one shape.
#[derive(Default)]
pub(super) struct Timed {
    /// None when cancelled.
    pub(super) stats: Option<stats::TimingStats>,
    /// Why the timed runs cannot be trusted (inputs modified, outputs differ from the check).
    pub(super) broken: Option<String>,
    /// A checked timed sample failed the benchmark's rule although the check passed it.
    pub(super) bench_lost: Option<String>,
    pub(super) cancelled: bool,
}

/// The levels the correctness check reached: what every checked timed sample must meet.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Levels {
    pub(super) strict: bool,
    pub(super) bench: bool,
}

/// Samples in flight between two synchronisations.
const BATCH: usize = 16;

/// The timed samples of a batch whose outputs are checked: all of them in full mode; in quick
/// mode `ceil(batch / 4)` distinct ones drawn at random (at least one).
pub(super) fn checked_samples(batch: usize, full: bool, rng: &mut u64) -> Vec<bool> {
    if full {
        return vec![true; batch];
    }
    let mut pick = vec![false; batch];
    let want = batch.div_ceil(4).max(1).min(batch);
    let mut got = 0;
    while got < want {
        let i = (next_random(rng) % batch as u64) as usize;
        if !pick[i] {
            pick[i] = true;
            got += 1;
        }
    }
    pick
}

/// xorshift64*: the quick mode's choice of checked samples (seeded per shape from the
/// process's random state, which no kernel sees).
fn next_random(s: &mut u64) -> u64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish() | 1
}

/// One input set: its inputs, their pristine copies, the candidate's outputs and the
/// reference's outputs on these inputs.
struct Set {
    inputs: Vec<DevBuf>,
    pristine: Vec<DevBuf>,
    outputs: Vec<DevBuf>,
    refs: Vec<DevBuf>,
    map: HashMap<String, sys::CUdeviceptr>,
}

/// What a shape's timed batches run on.
struct Runs<'a> {
    job: &'a Job,
    shape: &'a ShapeJob,
    env: &'a Env,
    cand: &'a Loaded,
    sets: &'a [Set],
    scratch: &'a [(String, String, bool, DevBuf)],
    /// Whether timed outputs are checked (the job has a reference).
    checking: bool,
    /// The levels the correctness check reached.
    levels: Levels,
    /// Event pairs around each sample of a batch.
    starts: &'a [sys::CUevent],
    ends: &'a [sys::CUevent],
    /// The result slots of a batch's timed checks (`SLOT_WORDS` per sample and output).
    slots: &'a DevBuf,
}

/// What the timed batches found so far.
#[derive(Default)]
struct Found {
    samples: Vec<f64>,
    checked: usize,
    broken: Option<String>,
    bench_lost: Option<String>,
    batches: usize,
}

/// Before each run: the set's outputs poisoned, the scratch reset, in-place inputs restored.
fn prime(
    g: &Gpu,
    shape: &ShapeJob,
    scratch: &[(String, String, bool, DevBuf)],
    set: &Set,
) -> GResult<()> {
    for (t, b) in shape.outputs.iter().zip(&set.outputs) {
        g.poison(b, &t.dtype, 0)?;
    }
    for ((t, b), p) in shape.inputs.iter().zip(&set.inputs).zip(&set.pristine) {
        if t.inplace {
            g.copy_into(b, p)?;
        }
    }
    g.reset_scratch(scratch)
}

impl Gpu {
    /// Times one shape: cold L2 (flush before every sample), rotating input sets, adaptive
    /// count; checks timed outputs and inputs as the module doc says. `reference` (with the
    /// `levels` the check reached) enables the output check.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn time_shape(
        &mut self,
        job: &Job,
        shape: &ShapeJob,
        env: &Env,
        cand: &Loaded,
        reference: Option<&Loaded>,
        custom: Option<&Loaded>,
        levels: Levels,
        cancel: &AtomicU64,
        id: u64,
        heartbeat: &dyn Fn(usize),
    ) -> GResult<Timed> {
        let checking = reference.is_some();
        let nsets = self.set_count(shape, checking)?;
        let diff_scratch = DevBuf::new(256)?;
        let scratch = self.scratch_for(cand, env)?;
        let sets = self.timing_sets(job, shape, env, reference, custom, &scratch, nsets)?;
        let full = job.mode != Mode::Quick;
        let rule = if full {
            StopRule::full()
        } else {
            StopRule::quick()
        };
        // Warm-up: at least 3 runs and 10 ms (2 ms in quick mode).
        let warm_ms = if full { 10.0 } else { 2.0 };
        let t0 = Instant::now();
        let mut k = 0usize;
        while k < 3 || (t0.elapsed().as_secs_f64() * 1e3 < warm_ms && k < 100) {
            prime(self, shape, &scratch, &sets[k % nsets])?;
            self.enqueue(cand, env, &sets[k % nsets].map)?;
            self.sync()?;
            k += 1;
        }
        let mut starts = Vec::new();
        let mut ends = Vec::new();
        for _ in 0..BATCH {
            starts.push(cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?);
            ends.push(cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)?);
        }
        let slots = DevBuf::new(BATCH * shape.outputs.len().max(1) * SLOT_WORDS * 8)?;
        let runs = Runs {
            job,
            shape,
            env,
            cand,
            sets: &sets,
            scratch: &scratch,
            checking,
            levels,
            starts: &starts,
            ends: &ends,
            slots: &slots,
        };
        let mut rng = random_seed();
        let mut found = Found::default();
        let wall = Instant::now();
        let mut cancelled = false;
        let result = (|| -> GResult<()> {
            // Batches of about 50 ms of kernel time (1 to 16 samples, by the median so far), so
            // that slow kernels still report progress well inside the watchdog.
            loop {
                let batch = if found.samples.is_empty() {
                    BATCH
                } else {
                    let mut s = found.samples.clone();
                    s.sort_by(|a, b| a.total_cmp(b));
                    ((50.0 / stats::percentile(&s, 50.0).max(1e-3)) as usize).clamp(1, BATCH)
                };
                let check = if checking {
                    checked_samples(batch, full, &mut rng)
                } else {
                    vec![false; batch]
                };
                let first = found.samples.len();
                self.run_batch(&runs, &check, &mut found)?;
                let out_broken = if checking {
                    self.check_timed_outputs(&runs, first, &check, &mut found)?
                } else {
                    None
                };
                // Inputs that are not in-place are as generated, byte for byte. A modified input
                // is the cause to name when outputs are wrong too.
                if let Some(why) = self.modified_input(&runs, &diff_scratch)? {
                    found.broken.get_or_insert(why);
                }
                if found.broken.is_none() {
                    found.broken = out_broken;
                }
                heartbeat(found.samples.len());
                if found.broken.is_some()
                    || rule.done(
                        &found.samples,
                        found.batches,
                        wall.elapsed().as_secs_f64() * 1e3,
                    )
                {
                    return Ok(());
                }
                if cancel.load(Ordering::SeqCst) == id {
                    cancelled = true;
                    return Ok(());
                }
            }
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
        heartbeat(found.samples.len());
        let clock = self.nvml.as_ref().and_then(|n| n.sm_clock());
        let mut stats = stats::summarize(&found.samples, !full, clock);
        if let Some(s) = &mut stats {
            s.checked = found.checked;
        }
        Ok(Timed {
            stats,
            broken: found.broken,
            bench_lost: found.bench_lost,
            cancelled: false,
        })
    }

    /// How many rotating input sets a shape's timing uses: as many as make twice the L2 (2 to
    /// 8), within half the free memory.
    fn set_count(&self, shape: &ShapeJob, checking: bool) -> GResult<usize> {
        let in_bytes: u64 = shape.inputs.iter().map(|t| t.bytes()).sum();
        let out_bytes: u64 = shape.outputs.iter().map(|t| t.bytes()).sum();
        let set_bytes = (2 * in_bytes + out_bytes * if checking { 2 } else { 1 }).max(1);
        let (free, _) = cu::mem_get_info()?;
        let budget = (free as u64 / 2).min(16 << 30);
        let want = (2 * self.info.l2_bytes).div_ceil(set_bytes).clamp(2, 8);
        Ok(want.min((budget / set_bytes).max(1)) as usize)
    }

    /// The rotating input sets, each with its inputs, their pristine copies, its outputs and
    /// the reference's outputs on these inputs (when checking); returns once they are ready.
    #[allow(clippy::too_many_arguments)]
    fn timing_sets(
        &mut self,
        job: &Job,
        shape: &ShapeJob,
        env: &Env,
        reference: Option<&Loaded>,
        custom: Option<&Loaded>,
        scratch: &[(String, String, bool, DevBuf)],
        nsets: usize,
    ) -> GResult<Vec<Set>> {
        // Timing inputs are fresh for every job too (derived from the job's fresh seeds).
        let seed0 = job.seeds.first().copied().unwrap_or(1) ^ 0x5EED_7153_0000_0000;
        let set_seed = |s: u64| seed0.wrapping_add((s + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let ref_scratch = match reference {
            Some(r) => self.scratch_for(r, env)?,
            None => Vec::new(),
        };
        let mut sets: Vec<Set> = Vec::new();
        for s in 0..nsets {
            let inputs = Gpu::buffers_for(&shape.inputs)?;
            self.generate_all(&shape.inputs, &inputs, env, set_seed(s as u64), custom)?;
            let pristine: Vec<DevBuf> = inputs
                .iter()
                .map(|b| self.snapshot(b))
                .collect::<GResult<_>>()?;
            let outputs = Gpu::buffers_for(&shape.outputs)?;
            let mut map = HashMap::new();
            for (t, b) in shape.inputs.iter().zip(&inputs) {
                map.insert(t.name.clone(), b.ptr);
            }
            let mut refs = Vec::new();
            if let Some(r) = reference {
                // The reference's outputs on this set, before any candidate run.
                let mut m = map.clone();
                for (n, _, _, b) in &ref_scratch {
                    m.insert(n.clone(), b.ptr);
                }
                for t in &shape.outputs {
                    let b = DevBuf::new(t.bytes() as usize)?;
                    self.poison(&b, &t.dtype, 1)?;
                    m.insert(t.name.clone(), b.ptr);
                    refs.push(b);
                }
                self.reset_scratch(&ref_scratch)?;
                self.enqueue(r, env, &m)?;
                for ((t, b), p) in shape.inputs.iter().zip(&inputs).zip(&pristine) {
                    if t.inplace {
                        self.copy_into(b, p)?;
                    }
                }
            }
            for (t, b) in shape.outputs.iter().zip(&outputs) {
                map.insert(t.name.clone(), b.ptr);
            }
            for (n, _, _, b) in scratch {
                map.insert(n.clone(), b.ptr);
            }
            sets.push(Set {
                inputs,
                pristine,
                outputs,
                refs,
                map,
            });
        }
        self.sync()?;
        Ok(sets)
    }

    /// One batch of timed samples: each primed, the L2 flushed, timed between its event pair,
    /// and checked after its end event where `check` says; the samples' times recorded.
    fn run_batch(&mut self, runs: &Runs, check: &[bool], found: &mut Found) -> GResult<()> {
        let (shape, sets, slots) = (runs.shape, runs.sets, runs.slots);
        let (starts, ends) = (runs.starts, runs.ends);
        let batch = check.len();
        let n_out = shape.outputs.len();
        let nsets = sets.len();
        let samples = &mut found.samples;
        if runs.checking {
            unsafe { cu::memset_d8_async(slots.ptr, 0, slots.bytes, self.stream) }?;
        }
        for i in 0..batch {
            let set = &sets[(samples.len() + i) % nsets];
            prime(self, shape, runs.scratch, set)?;
            unsafe {
                sys::cuMemsetD32Async(
                    self.flush.ptr,
                    (samples.len() + i) as u32,
                    self.flush.bytes / 4,
                    self.stream,
                )
                .result()?;
                cu::event::record(starts[i], self.stream)?;
            }
            self.enqueue(runs.cand, runs.env, &set.map)?;
            unsafe { cu::event::record(ends[i], self.stream) }?;
            if check[i] {
                for (o, t) in shape.outputs.iter().enumerate() {
                    let slot = slots.ptr + ((i * n_out + o) * SLOT_WORDS * 8) as u64;
                    self.enqueue_timed_check(
                        t,
                        &set.refs[o],
                        &set.outputs[o],
                        runs.job.tolerance,
                        slot,
                    )?;
                }
            }
        }
        self.sync()?;
        for i in 0..batch {
            samples.push(unsafe { cu::event::elapsed(starts[i], ends[i]) }? as f64);
        }
        found.batches += 1;
        Ok(())
    }

    /// The batch's timed checks read back: why the timed outputs differ from the check (the
    /// first failure), and the first sample that fails the benchmark's rule noted in `found`.
    fn check_timed_outputs(
        &mut self,
        runs: &Runs,
        first: usize,
        check: &[bool],
        found: &mut Found,
    ) -> GResult<Option<String>> {
        let (job, shape, sets, levels) = (runs.job, runs.shape, runs.sets, runs.levels);
        let batch = check.len();
        let n_out = shape.outputs.len();
        let nsets = sets.len();
        let mut out_broken: Option<String> = None;
        let mut words = vec![0u64; batch * n_out * SLOT_WORDS];
        unsafe { cu::memcpy_dtoh_sync(&mut words, runs.slots.ptr) }?;
        for i in (0..batch).filter(|&i| check[i]) {
            found.checked += 1;
            let set_no = (first + i) % nsets;
            // The output buffer still holds this sample's output when no later
            // sample of the batch used the same set.
            let still_there = i + nsets >= batch;
            for (o, t) in shape.outputs.iter().enumerate() {
                let at = (i * n_out + o) * SLOT_WORDS;
                let r = SlotResult::from_words(&words[at..at + SLOT_WORDS]);
                let float = t.compare != "exact";
                let fails = if levels.strict {
                    !r.strict_ok(float, job.tolerance)
                } else {
                    r.bench_bad > 0 && !r.strict_ok(float, job.tolerance)
                };
                if fails && out_broken.is_none() {
                    let values = match r.first_bad {
                        Some(idx) => self.values_at(
                            t,
                            &sets[set_no].refs[o],
                            still_there.then_some(&sets[set_no].outputs[o]),
                            idx,
                        )?,
                        None => String::new(),
                    };
                    out_broken = Some(format!(
                        "output of a timed run differs from the check: `{}` on timed sample {} (input set {} of {nsets}): {} of {} elements outside the strict tolerance{}{values}{}",
                        t.name,
                        first + i + 1,
                        set_no + 1,
                        r.strict_bad,
                        t.elements(),
                        r.first_bad
                            .map(|f| format!(", the first at index {f}"))
                            .unwrap_or_default(),
                        // Over the finite pairs only: not shown when nothing
                        // finite differs (NaN or never written).
                        if r.rel_l2 > 0.0 || r.strict_bad == 0 {
                            format!(
                                ", relative L2 error {:.3e} (limit {:.1e})",
                                r.rel_l2, job.tolerance.rel_l2
                            )
                        } else {
                            String::new()
                        },
                    ));
                }
                if levels.bench && r.bench_bad > 0 && found.bench_lost.is_none() {
                    found.bench_lost = Some(format!(
                        "timed sample {}: {} elements of `{}` fail the benchmark's rule",
                        first + i + 1,
                        r.bench_bad,
                        t.name
                    ));
                }
            }
        }
        Ok(out_broken)
    }

    /// The first input that is not in-place and no longer is as generated, byte for byte.
    fn modified_input(&mut self, runs: &Runs, diff_scratch: &DevBuf) -> GResult<Option<String>> {
        let nsets = runs.sets.len();
        for (s, set) in runs.sets.iter().enumerate() {
            for (j, t) in runs.shape.inputs.iter().enumerate() {
                if t.inplace {
                    continue;
                }
                if let Some(d) = self.difference(&set.inputs[j], &set.pristine[j], diff_scratch)? {
                    return Ok(Some(format!(
                        "input `{}` was modified during timing, and it is not declared in-place (input set {} of {nsets}: {} words differ from the harness's copy, the first at byte {})",
                        t.name,
                        s + 1,
                        d.words,
                        d.first_byte
                    )));
                }
            }
        }
        Ok(None)
    }

    /// "(reference R, timed run X)" at element `idx`; the timed value only where the buffer
    /// still holds the sample's output.
    fn values_at(
        &self,
        t: &TensorDesc,
        reference: &DevBuf,
        timed: Option<&DevBuf>,
        idx: u64,
    ) -> GResult<String> {
        let es = crate::suite::dtype_size(&t.dtype).unwrap_or(1);
        if (idx + 1) * es as u64 > reference.bytes as u64 {
            return Ok(String::new());
        }
        let r = self.element_at(reference, &t.dtype, idx)?;
        Ok(match timed {
            Some(b) => {
                let bytes = self.element_bytes(b, &t.dtype, idx)?;
                let x = crate::suite::dtype::decode(&t.dtype, &bytes);
                let poisoned = bytes == compare::poison(&t.dtype, 0);
                format!(
                    " (reference {r}, timed run {x}{})",
                    if poisoned {
                        ", the poison: never written"
                    } else {
                        ""
                    }
                )
            }
            None => format!(" (reference {r})"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_mode_checks_every_sample() {
        let mut rng = 7;
        assert_eq!(checked_samples(16, true, &mut rng), vec![true; 16]);
    }

    #[test]
    fn quick_mode_checks_a_random_quarter_and_at_least_one_per_batch() {
        let mut rng = 0x1234_5678_9abc_def1;
        let mut seen = [0usize; 16];
        for _ in 0..400 {
            let c = checked_samples(16, false, &mut rng);
            assert_eq!(c.iter().filter(|&&x| x).count(), 4);
            for (i, x) in c.iter().enumerate() {
                seen[i] += usize::from(*x);
            }
        }
        // Every position gets checked: the choice is not a fixed pattern a kernel could learn.
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
        for b in 1..=5 {
            let c = checked_samples(b, false, &mut rng);
            assert_eq!(c.iter().filter(|&&x| x).count(), b.div_ceil(4));
        }
    }

    #[test]
    fn the_random_seed_differs_between_calls() {
        assert_ne!(random_seed(), random_seed());
    }
}
