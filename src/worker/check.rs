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
        let mut worst: Vec<Option<TensorCheck>> = vec![None; shape.outputs.len()];
        // Per output over every seed: both levels passed, and the most shared NaN.
        let mut all_ok: Vec<(bool, bool, u64)> = vec![(true, true, 0); shape.outputs.len()];
        let mut bench_ok = true;
        let mut strict_ok = true;
        let mut message = None;
        for (k, case) in crate::contract::draws::cases(job).iter().enumerate() {
            heartbeat(k);
            let seed = case.seed;
            let regen = |g: &mut Gpu| -> GResult<()> {
                g.generate_case(&shape.inputs, &inputs, env, case, custom)
            };
            // Reference.
            regen(self)?;
            for (t, b) in shape.outputs.iter().zip(&outputs) {
                self.poison(b, &t.dtype, 0)?;
            }
            self.reset_scratch(&ref_scratch)?;
            self.enqueue(reference, env, &ref_map)?;
            let refs: Vec<Vec<u8>> = match &kept {
                Some((r, _)) => {
                    for (dst, src) in r.iter().zip(&outputs) {
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
            };
            heartbeat(k);
            // Candidate, twice, with different poisons; inputs compared with a pristine copy after the first run.
            let mut runs: Vec<Vec<Vec<u8>>> = Vec::new();
            for which in 0..2u8 {
                regen(self)?;
                let mut before = Vec::new();
                if which == 0 {
                    for (t, b) in shape.inputs.iter().zip(&inputs) {
                        if !t.inplace {
                            before.push((t.name.clone(), self.snapshot(b)?));
                        }
                    }
                }
                for (t, b) in shape.outputs.iter().zip(&outputs) {
                    self.poison(b, &t.dtype, which)?;
                }
                self.reset_scratch(&cand_scratch)?;
                self.enqueue(cand, env, &cand_map)?;
                match &kept {
                    Some((_, a)) => {
                        // The second run stays in the output buffers themselves.
                        if which == 0 {
                            for (dst, src) in a.iter().zip(&outputs) {
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
                heartbeat(k);
                if which == 0 {
                    for (t, b) in shape.inputs.iter().zip(&inputs) {
                        if let Some((_, pristine)) = before.iter().find(|(n, _)| *n == t.name) {
                            if let Some(d) = self.difference(b, pristine, &diff_scratch)? {
                                strict_ok = false;
                                bench_ok = false;
                                message.get_or_insert(format!(
                                    "modified input `{}`, which is not declared in-place (seed {seed}: {} words differ from the harness's copy, the first at byte {})",
                                    t.name, d.words, d.first_byte
                                ));
                            }
                        }
                    }
                }
            }
            for (i, t) in shape.outputs.iter().enumerate() {
                let mode = if t.compare == "exact" {
                    CmpMode::Exact
                } else {
                    CmpMode::Float
                };
                let c = match &kept {
                    Some((r, a)) => self.check_on_device(
                        t,
                        &r[i],
                        &a[i],
                        &outputs[i],
                        job.tolerance,
                        cand.plan.nondeterministic,
                        &diff_scratch,
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
                bench_ok &= c.bench_ok;
                strict_ok &= c.strict_ok;
                all_ok[i].0 &= c.bench_ok;
                all_ok[i].1 &= c.strict_ok;
                all_ok[i].2 = all_ok[i].2.max(c.shared_nan);
                if !c.strict_ok && message.is_none() {
                    message = Some(format!(
                        "output `{}` {}: {}",
                        t.name,
                        case.label(),
                        c.reason.clone().unwrap_or_default()
                    ));
                }
                let replace = match &worst[i] {
                    None => true,
                    Some(w) => {
                        (w.strict_ok && !c.strict_ok)
                            || (w.strict_ok == c.strict_ok && c.max_abs > w.max_abs)
                    }
                };
                if replace {
                    worst[i] = Some(c);
                }
            }
        }
        for (w, (b, st, nan)) in worst.iter_mut().zip(&all_ok) {
            if let Some(w) = w {
                w.bench_ok = *b;
                w.strict_ok = *st;
                w.shared_nan = *nan;
            }
        }
        Ok((
            bench_ok,
            strict_ok,
            worst.into_iter().flatten().collect(),
            message,
        ))
    }
}
