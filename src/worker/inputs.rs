//! Seeded input generation on the device.

use super::*;

impl Gpu {
    /// Fills a tensor per its generator.
    pub(super) fn generate(
        &mut self,
        buf: &DevBuf,
        t: &TensorDesc,
        seed: u64,
        stream_id: u64,
    ) -> GResult<()> {
        let Some(g) = &t.generator else {
            return Err(InputError::NoGenerator(t.name.clone()).into());
        };
        let n = t.elements();
        if n == 0 {
            return Ok(());
        }
        if g.kind == "zeros" {
            // SAFETY: `buf` is live (borrowed) and its allocation holds at least `buf.bytes`;
            // the memset is enqueued on the Gpu's live stream.
            unsafe { cu::memset_d8_async(buf.ptr, 0, buf.bytes, self.stream) }?;
            return Ok(());
        }
        let dt = match t.dtype.as_str() {
            "bf16" | "fp16" | "fp32" | "int32" | "int64" => t.dtype.as_str(),
            other => {
                return Err(InputError::Dtype {
                    input: t.name.clone(),
                    dtype: other.to_string(),
                }
                .into());
            }
        };
        let is_int = dt.starts_with("int");
        let kind = match (g.kind.as_str(), is_int) {
            ("normal" | "one_plus_normal" | "uniform", false) => g.kind.as_str(),
            ("const", _) => {
                if is_int {
                    "arange_const"
                } else {
                    "const"
                }
            }
            ("randint" | "arange", true) => g.kind.as_str(),
            ("custom", _) => {
                return Err(InputError::Custom(t.name.clone()).into());
            }
            (k, _) => {
                return Err(InputError::NotApplicable {
                    input: t.name.clone(),
                    generator: k.to_string(),
                    dtype: dt.to_string(),
                }
                .into());
            }
        };
        let a = g.args.first().copied().unwrap_or(0.0);
        let b = g.args.get(1).copied().unwrap_or(0.0);
        let (fname, mut storage): (String, [u64; 6]) = if is_int {
            // const for integers: arange with a span of 0 is not possible; use randint over [a, a+1).
            let (k, lo, hi) = match kind {
                "arange_const" => ("randint", a as i64, a as i64 + 1),
                "arange" => ("arange", 0i64, 0i64),
                _ => ("randint", a as i64, b as i64),
            };
            if k == "randint" && hi <= lo {
                return Err(InputError::EmptyRange {
                    input: t.name.clone(),
                    lo,
                    hi,
                }
                .into());
            }
            (
                format!("gen_{k}_{dt}"),
                [buf.ptr, n, seed, stream_id, lo as u64, hi as u64],
            )
        } else {
            let (fa, fb) = match kind {
                "normal" | "one_plus_normal" => {
                    (if g.args.is_empty() { 1.0 } else { a as f32 }, 0.0f32)
                }
                _ => (a as f32, b as f32),
            };
            (
                format!("gen_{kind}_{dt}"),
                [
                    buf.ptr,
                    n,
                    seed,
                    stream_id,
                    fa.to_bits() as u64,
                    fb.to_bits() as u64,
                ],
            )
        };
        self.launch_harness(&fname, n, &mut storage)
    }

    /// Generates every input of a shape: built-in generators, then the operator's own generator
    /// kernel (with `seed` in its environment) for `custom` inputs. The random draw (`draw` 0).
    pub(super) fn generate_all(
        &mut self,
        tensors: &[TensorDesc],
        bufs: &[DevBuf],
        env: &Env,
        seed: u64,
        custom: Option<&Loaded>,
    ) -> GResult<()> {
        self.generate_all_coded(tensors, bufs, env, seed, custom, 0)
    }

    /// As `generate_all`, with `draw` = `code` in the operator's generator's environment: 0 for
    /// the random draw, a structured draw's `custom(code)` otherwise.
    pub(super) fn generate_all_coded(
        &mut self,
        tensors: &[TensorDesc],
        bufs: &[DevBuf],
        env: &Env,
        seed: u64,
        custom: Option<&Loaded>,
        code: i64,
    ) -> GResult<()> {
        let mut any_custom = false;
        for (i, (t, b)) in tensors.iter().zip(bufs).enumerate() {
            if t.generator
                .as_ref()
                .map(|g| g.kind == "custom")
                .unwrap_or(false)
            {
                any_custom = true;
            } else {
                self.generate(b, t, seed, i as u64)?;
            }
        }
        if any_custom {
            let Some(l) = custom else {
                return Err(InputError::NoCustomGenerator.into());
            };
            let mut map = HashMap::new();
            for (t, b) in tensors.iter().zip(bufs) {
                map.insert(t.name.clone(), b.ptr);
            }
            let mut env = env.clone();
            env.insert("seed".into(), Value::Int(seed as i128));
            env.insert("draw".into(), Value::Int(code as i128));
            self.enqueue(l, &env, &map)?;
        }
        Ok(())
    }
}

pub(super) fn env_from_json(m: &BTreeMap<String, serde_json::Value>) -> Env {
    m.iter()
        .filter_map(|(k, v)| Value::from_json(v).map(|x| (k.clone(), x)))
        .collect()
}
