//! Correctness: reference and candidate on fresh inputs over the job's seeds and structured
//! draws, compared on the device (`device_check`; on the host when the device lacks the memory
//! for the kept copies), and dumps for CPU cross-checks.

use super::*;

impl Gpu {
    /// Runs the candidate once on fresh inputs (the first seed; on the job's first structured
    /// draw when it has any) and returns every tensor (Event::Tensors, id 0).
    pub(super) fn dump_shape(
        &mut self,
        job: &Job,
        shape: &ShapeJob,
        env: &Env,
        cand: &Loaded,
        custom: Option<&Loaded>,
    ) -> GResult<(u32, u64, Vec<TensorData>, Vec<TensorData>)> {
        use base64::Engine;
        let case = crate::contract::draws::Case {
            seed: job.seeds.first().copied().unwrap_or(1),
            draw: job.draws.first(),
        };
        let seed = case.seed;
        let inputs = Gpu::buffers_for(&shape.inputs)?;
        let outputs = Gpu::buffers_for(&shape.outputs)?;
        let scratch = self.scratch_for(cand, env)?;
        let mut map: HashMap<String, sys::CUdeviceptr> = HashMap::new();
        for (t, b) in shape.inputs.iter().zip(&inputs) {
            map.insert(t.name.clone(), b.ptr);
        }
        for (t, b) in shape.outputs.iter().zip(&outputs) {
            map.insert(t.name.clone(), b.ptr);
            self.poison(b, &t.dtype, 0)?;
        }
        for (n, _, _, b) in &scratch {
            map.insert(n.clone(), b.ptr);
        }
        self.generate_case(&shape.inputs, &inputs, env, &case, custom)?;
        self.sync()?;
        let enc = |g: &Gpu, t: &TensorDesc, b: &DevBuf| -> GResult<TensorData> {
            Ok(TensorData {
                name: t.name.clone(),
                dtype: t.dtype.clone(),
                dims: t.dims.clone(),
                data_b64: base64::engine::general_purpose::STANDARD.encode(g.download(b)?),
            })
        };
        let ins: Vec<TensorData> = shape
            .inputs
            .iter()
            .zip(&inputs)
            .map(|(t, b)| enc(self, t, b))
            .collect::<GResult<_>>()?;
        self.reset_scratch(&scratch)?;
        self.enqueue(cand, env, &map)?;
        self.sync()?;
        let outs: Vec<TensorData> = shape
            .outputs
            .iter()
            .zip(&outputs)
            .map(|(t, b)| enc(self, t, b))
            .collect::<GResult<_>>()?;
        Ok((shape.id, seed, ins, outs))
    }

    /// Correctness of one shape over the job's seeds, then its selected structured draws
    /// (`contract::draws::cases`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn check_shape(
        &mut self,
        job: &Job,
        shape: &ShapeJob,
        env: &Env,
        cand: &Loaded,
        reference: &Loaded,
        custom: Option<&Loaded>,
        heartbeat: &dyn Fn(usize),
    ) -> GResult<(bool, bool, Vec<TensorCheck>, Option<String>)> {
        let bufs = self.check_buffers(shape, env, cand, reference)?;
        let mut tally = Tally::new(shape.outputs.len());
        for (k, case) in crate::contract::draws::cases(job).iter().enumerate() {
            heartbeat(k);
            let run = CaseRun {
                shape,
                env,
                case,
                custom,
                bufs: &bufs,
            };
            let refs = self.reference_run(&run, reference)?;
            heartbeat(k);
            let runs = self.candidate_runs(&run, cand, &mut tally, &|| heartbeat(k))?;
            self.compare_case(&run, job, cand, &refs, &runs, &mut tally)?;
        }
        Ok(tally.finish())
    }

    /// The check's buffers: inputs, outputs, scratch and the device copies it keeps.
    fn check_buffers(
        &self,
        shape: &ShapeJob,
        env: &Env,
        cand: &Loaded,
        reference: &Loaded,
    ) -> GResult<CheckBufs> {
        let inputs = Gpu::buffers_for(&shape.inputs)?;
        let outputs = Gpu::buffers_for(&shape.outputs)?;
        let diff_scratch = DevBuf::new(256)?;
        // The reference's output and the candidate's first run kept on the device, where the
        // comparison runs; without the memory for them the host compares downloads.
        // ATREX_HOST_CHECK (a diagnostic) compares on the host as before.
        let kept: Option<(Vec<DevBuf>, Vec<DevBuf>)> =
            if std::env::var_os("ATREX_HOST_CHECK").is_some() {
                None
            } else {
                match (
                    Gpu::buffers_for(&shape.outputs),
                    Gpu::buffers_for(&shape.outputs),
                ) {
                    (Ok(r), Ok(a)) => Some((r, a)),
                    _ => None,
                }
            };
        let cand_scratch = self.scratch_for(cand, env)?;
        let ref_scratch = self.scratch_for(reference, env)?;
        let mut map: HashMap<String, sys::CUdeviceptr> = HashMap::new();
        for (t, b) in shape.inputs.iter().zip(&inputs) {
            map.insert(t.name.clone(), b.ptr);
        }
        for (t, b) in shape.outputs.iter().zip(&outputs) {
            map.insert(t.name.clone(), b.ptr);
        }
        let with = |map: &HashMap<String, sys::CUdeviceptr>,
                    s: &[(String, String, bool, DevBuf)]| {
            let mut m = map.clone();
            for (n, _, _, b) in s {
                m.insert(n.clone(), b.ptr);
            }
            m
        };
        let cand_map = with(&map, &cand_scratch);
        let ref_map = with(&map, &ref_scratch);
        Ok(CheckBufs {
            inputs,
            outputs,
            diff_scratch,
            kept,
            cand_scratch,
            ref_scratch,
            cand_map,
            ref_map,
        })
    }

    /// The reference on the case's inputs: its outputs kept on the device (an empty result),
    /// else downloaded.
    fn reference_run(&mut self, run: &CaseRun, reference: &Loaded) -> GResult<Vec<Vec<u8>>> {
        let (shape, env, bufs) = (run.shape, run.env, run.bufs);
        let outputs = &bufs.outputs;
        run.regenerate(self)?;
        for (t, b) in shape.outputs.iter().zip(outputs) {
            self.poison(b, &t.dtype, 0)?;
        }
        self.reset_scratch(&bufs.ref_scratch)?;
        self.enqueue(reference, env, &bufs.ref_map)?;
        Ok(match &bufs.kept {
            Some((r, _)) => {
                for (dst, src) in r.iter().zip(outputs) {
                    self.copy_into(dst, src)?;
                }
                self.sync()?;
                Vec::new()
            }
            None => {
                self.sync()?;
                outputs
                    .iter()
                    .map(|b| self.download(b))
                    .collect::<GResult<_>>()?
            }
        })
    }

    /// The candidate, twice, with different poisons; inputs compared with a pristine copy after
    /// the first run (a modified input fails both levels). The runs' outputs are kept on the
    /// device (an empty result), else downloaded.
    fn candidate_runs(
        &mut self,
        run: &CaseRun,
        cand: &Loaded,
        tally: &mut Tally,
        heartbeat: &dyn Fn(),
    ) -> GResult<Vec<Vec<Vec<u8>>>> {
        let (shape, env, bufs) = (run.shape, run.env, run.bufs);
        let (inputs, outputs) = (&bufs.inputs, &bufs.outputs);
        let seed = run.case.seed;
        let mut runs: Vec<Vec<Vec<u8>>> = Vec::new();
        for which in 0..2u8 {
            run.regenerate(self)?;
            let mut before = Vec::new();
            if which == 0 {
                for (t, b) in shape.inputs.iter().zip(inputs) {
                    if !t.inplace {
                        before.push((t.name.clone(), self.snapshot(b)?));
                    }
                }
            }
            for (t, b) in shape.outputs.iter().zip(outputs) {
                self.poison(b, &t.dtype, which)?;
            }
            self.reset_scratch(&bufs.cand_scratch)?;
            self.enqueue(cand, env, &bufs.cand_map)?;
            match &bufs.kept {
                Some((_, a)) => {
                    // The second run stays in the output buffers themselves.
                    if which == 0 {
                        for (dst, src) in a.iter().zip(outputs) {
                            self.copy_into(dst, src)?;
                        }
                    }
                    self.sync()?;
                }
                None => {
                    self.sync()?;
                    runs.push(
                        outputs
                            .iter()
                            .map(|b| self.download(b))
                            .collect::<GResult<_>>()?,
                    );
                }
            }
            heartbeat();
            if which == 0 {
                for (t, b) in shape.inputs.iter().zip(inputs) {
                    if let Some((_, pristine)) = before.iter().find(|(n, _)| *n == t.name) {
                        if let Some(d) = self.difference(b, pristine, &bufs.diff_scratch)? {
                            tally.strict_ok = false;
                            tally.bench_ok = false;
                            tally.message.get_or_insert(format!(
                                "modified input `{}`, which is not declared in-place (seed {seed}: {} words differ from the harness's copy, the first at byte {})",
                                t.name, d.words, d.first_byte
                            ));
                        }
                    }
                }
            }
        }
        Ok(runs)
    }

    /// Every output of the case compared with the reference's, into the tally.
    fn compare_case(
        &mut self,
        run: &CaseRun,
        job: &Job,
        cand: &Loaded,
        refs: &[Vec<u8>],
        runs: &[Vec<Vec<u8>>],
        tally: &mut Tally,
    ) -> GResult<()> {
        let (shape, bufs) = (run.shape, run.bufs);
        for (i, t) in shape.outputs.iter().enumerate() {
            let mode = if t.compare == "exact" {
                CmpMode::Exact
            } else {
                CmpMode::Float
            };
            let c = match &bufs.kept {
                Some((r, a)) => self.check_on_device(
                    t,
                    &r[i],
                    &a[i],
                    &bufs.outputs[i],
                    job.tolerance,
                    cand.plan.nondeterministic,
                    &bufs.diff_scratch,
                )?,
                None => compare::check_tensor(
                    &t.name,
                    &t.dtype,
                    mode,
                    &refs[i],
                    &runs[0][i],
                    &runs[1][i],
                    &compare::poison(&t.dtype, 0),
                    &compare::poison(&t.dtype, 1),
                    job.tolerance,
                    cand.plan.nondeterministic,
                ),
            };
            tally.add(i, &t.name, run.case, c);
        }
        Ok(())
    }
}

/// The buffers of one shape's check.
struct CheckBufs {
    inputs: Vec<DevBuf>,
    outputs: Vec<DevBuf>,
    diff_scratch: DevBuf,
    /// The reference's outputs and the candidate's first run, kept on the device (None: the
    /// host compares downloads).
    kept: Option<(Vec<DevBuf>, Vec<DevBuf>)>,
    cand_scratch: Vec<(String, String, bool, DevBuf)>,
    ref_scratch: Vec<(String, String, bool, DevBuf)>,
    /// Buffer names to device pointers for each kernel's launch (its scratch included).
    cand_map: HashMap<String, sys::CUdeviceptr>,
    ref_map: HashMap<String, sys::CUdeviceptr>,
}

/// One case (a seed, and a structured draw or none) of a shape's check.
struct CaseRun<'a> {
    shape: &'a ShapeJob,
    env: &'a Env,
    case: &'a crate::contract::draws::Case<'a>,
    custom: Option<&'a Loaded>,
    bufs: &'a CheckBufs,
}

impl CaseRun<'_> {
    /// The case's inputs, generated afresh.
    fn regenerate(&self, g: &mut Gpu) -> GResult<()> {
        g.generate_case(
            &self.shape.inputs,
            &self.bufs.inputs,
            self.env,
            self.case,
            self.custom,
        )
    }
}

/// What a shape's check found so far, over its cases.
struct Tally {
    /// Per output: its worst check (a strict failure first, then the largest difference).
    worst: Vec<Option<TensorCheck>>,
    /// Per output over every case: both levels passed, and the most shared NaN.
    all_ok: Vec<(bool, bool, u64)>,
    bench_ok: bool,
    strict_ok: bool,
    /// The first failure's reason.
    message: Option<String>,
}

impl Tally {
    fn new(outputs: usize) -> Tally {
        Tally {
            worst: vec![None; outputs],
            all_ok: vec![(true, true, 0); outputs],
            bench_ok: true,
            strict_ok: true,
            message: None,
        }
    }

    /// Output `i`'s check on one case.
    fn add(&mut self, i: usize, name: &str, case: &crate::contract::draws::Case, c: TensorCheck) {
        self.bench_ok &= c.bench_ok;
        self.strict_ok &= c.strict_ok;
        self.all_ok[i].0 &= c.bench_ok;
        self.all_ok[i].1 &= c.strict_ok;
        self.all_ok[i].2 = self.all_ok[i].2.max(c.shared_nan);
        if !c.strict_ok && self.message.is_none() {
            self.message = Some(format!(
                "output `{}` {}: {}",
                name,
                case.label(),
                c.reason.clone().unwrap_or_default()
            ));
        }
        let replace = match &self.worst[i] {
            None => true,
            Some(w) => {
                (w.strict_ok && !c.strict_ok)
                    || (w.strict_ok == c.strict_ok && c.max_abs > w.max_abs)
            }
        };
        if replace {
            self.worst[i] = Some(c);
        }
    }

    /// (bench level passed, strict level passed, each output's worst check over every case
    /// with its levels over all of them, the first failure's reason).
    fn finish(mut self) -> (bool, bool, Vec<TensorCheck>, Option<String>) {
        for (w, (b, st, nan)) in self.worst.iter_mut().zip(&self.all_ok) {
            if let Some(w) = w {
                w.bench_ok = *b;
                w.strict_ok = *st;
                w.shared_nan = *nan;
            }
        }
        (
            self.bench_ok,
            self.strict_ok,
            self.worst.into_iter().flatten().collect(),
            self.message,
        )
    }
}
