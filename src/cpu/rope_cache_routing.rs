//! reshape_and_cache, mrope, fused_qkv_rope, moe_sum_reduce, moe_topk_gating_softmax,
//! topk_filter, causal_conv1d.

use super::*;

pub fn ops() -> Vec<CpuOp> {
    vec![
        CpuOp {
            name: "reshape_and_cache",
            run: reshape_and_cache,
            reduced: reshape_and_cache_shapes,
        },
        CpuOp {
            name: "mrope",
            run: mrope,
            reduced: mrope_shapes,
        },
        CpuOp {
            name: "fused_qkv_rope",
            run: fused_qkv_rope,
            reduced: fused_qkv_rope_shapes,
        },
        CpuOp {
            name: "moe_sum_reduce",
            run: moe_sum_reduce,
            reduced: moe_sum_reduce_shapes,
        },
        CpuOp {
            name: "moe_topk_gating_softmax",
            run: moe_topk_gating_softmax,
            reduced: moe_topk_shapes,
        },
        CpuOp {
            name: "topk_filter",
            run: topk_filter,
            reduced: topk_filter_shapes,
        },
        CpuOp {
            name: "causal_conv1d",
            run: causal_conv1d,
            reduced: causal_conv1d_shapes,
        },
    ]
}

fn ints(v: &[i128]) -> Value {
    Value::List(v.iter().map(|x| Value::Int(*x)).collect())
}

fn list(env: &Env, k: &str) -> Result<Vec<usize>, String> {
    match env.get(k) {
        Some(Value::List(v)) => v
            .iter()
            .map(|x| x.as_int().map(|i| i as usize))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| format!("parameter `{k}` is not a list of integers")),
        _ => Err(format!("parameter `{k}` missing or not a list")),
    }
}

fn flag(env: &Env, k: &str) -> Result<bool, String> {
    env.get(k)
        .and_then(|v| v.as_int())
        .map(|i| i != 0)
        .ok_or_else(|| format!("parameter `{k}` missing or not a bool"))
}

fn input<'a>(inputs: &'a [HostTensor], name: &str) -> Result<&'a HostTensor, String> {
    inputs
        .iter()
        .find(|t| t.name == name)
        .ok_or_else(|| format!("input `{name}` missing"))
}

// ---------------------------------------------------------------- reshape_and_cache

fn reshape_and_cache_shapes() -> Vec<BTreeMap<String, Value>> {
    [
        ([5, 2, 64], 16),
        ([37, 3, 32], 16),
        ([16, 1, 128], 16),
        ([9, 3, 6], 4),
    ]
    .iter()
    .map(|(s, bs)| params(&[("shape", ints(s)), ("block_size", Value::Int(*bs))]))
    .collect()
}

/// The caches are copied whole; token t's key/value rows go to slot s = slot_mapping[t]
/// (block s / bs, offset s % bs, i.e. row s of the [NB·bs, H·D] view); s < 0 is skipped.
fn reshape_and_cache(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, h, d, bs) = (
        int(env, "T")?,
        int(env, "H")?,
        int(env, "D")?,
        int(env, "bs")?,
    );
    let hd = h * d;
    let key = input(inputs, "key")?;
    let value = input(inputs, "value")?;
    let mut kc = input(inputs, "key_cache")?.clone();
    let mut vc = input(inputs, "value_cache")?.clone();
    let slots = input(inputs, "slot_mapping")?.i64s();
    let rows = kc.elements() / hd.max(1);
    for (tok, s) in slots.iter().enumerate().take(t) {
        if *s < 0 {
            continue;
        }
        let s = *s as usize;
        let (blk, off) = (s / bs, s % bs);
        let row = blk * bs + off;
        if row >= rows {
            return Err(format!(
                "slot {s} of token {tok} is outside the cache ({rows} slots)"
            ));
        }
        let (src, dst) = (tok * hd * 2, row * hd * 2);
        kc.bytes[dst..dst + hd * 2].copy_from_slice(&key.bytes[src..src + hd * 2]);
        vc.bytes[dst..dst + hd * 2].copy_from_slice(&value.bytes[src..src + hd * 2]);
    }
    kc.name = "key_cache_out".into();
    vc.name = "value_cache_out".into();
    Ok(vec![kc, vc])
}

// ---------------------------------------------------------------- mrope

/// (T, Hq, Hk, D, R, sections, interleaved, neox)
type MropeShape = (i128, i128, i128, i128, i128, [i128; 3], bool, bool);

fn mrope_shapes() -> Vec<BTreeMap<String, Value>> {
    let v: [MropeShape; 3] = [
        (5, 4, 1, 128, 128, [16, 24, 24], false, true),
        (3, 2, 2, 64, 48, [8, 8, 8], false, true),
        (7, 3, 1, 32, 32, [4, 6, 6], true, false),
    ];
    v.iter()
        .map(|(t, hq, hk, d, r, sec, il, neox)| {
            params(&[
                ("token_count", Value::Int(*t)),
                ("num_query_heads", Value::Int(*hq)),
                ("num_kv_heads", Value::Int(*hk)),
                ("head_size", Value::Int(*d)),
                ("rotary_dim", Value::Int(*r)),
                ("mrope_section", ints(sec)),
                ("mrope_interleaved", Value::Bool(*il)),
                ("is_neox_style", Value::Bool(*neox)),
            ])
        })
        .collect()
}

/// The position axis (0 temporal, 1 height, 2 width) whose cos/sin frequency f uses.
fn mrope_axis(f: usize, sec: &[usize], interleaved: bool) -> usize {
    if interleaved {
        if f % 3 == 1 && f <= 3 * sec[1] {
            1
        } else if f % 3 == 2 && f <= 3 * sec[2] {
            2
        } else {
            0
        }
    } else if f < sec[0] {
        0
    } else if f < sec[0] + sec[1] {
        1
    } else {
        2
    }
}

/// Rotates the first R dims of every head (NeoX halves or GPT-J pairs) with c = cos[a(f), t, f],
/// s = sin[a(f), t, f]: y1 = bf16(x1·c − x2·s), y2 = bf16(x2·c + x1·s) in f32 (Rust never
/// contracts to FMA, like the reference's explicit _rn intrinsics). Dims ≥ R are copied.
#[allow(clippy::too_many_arguments)]
fn mrope_rotate(
    x: &[f32],
    cos: &[f32],
    sin: &[f32],
    t: usize,
    heads: usize,
    d: usize,
    r: usize,
    sec: &[usize],
    interleaved: bool,
    neox: bool,
) -> Vec<f32> {
    let half = r / 2;
    let mut y = x.to_vec();
    for tok in 0..t {
        for h in 0..heads {
            let base = (tok * heads + h) * d;
            for f in 0..half {
                let a = mrope_axis(f, sec, interleaved);
                let c = cos[(a * t + tok) * half + f];
                let s = sin[(a * t + tok) * half + f];
                let (i1, i2) = if neox {
                    (base + f, base + f + half)
                } else {
                    (base + 2 * f, base + 2 * f + 1)
                };
                let (x1, x2) = (x[i1], x[i2]);
                y[i1] = bf16(x1 * c - x2 * s);
                y[i2] = bf16(x2 * c + x1 * s);
            }
        }
    }
    y
}

fn mrope(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, hq, hk) = (int(env, "T")?, int(env, "Hq")?, int(env, "Hk")?);
    let (d, r) = (int(env, "D")?, int(env, "R")?);
    let sec = list(env, "mrope_section")?;
    if sec.len() != 3 {
        return Err("mrope_section must have 3 entries".into());
    }
    let il = flag(env, "mrope_interleaved")?;
    let neox = flag(env, "is_neox_style")?;
    let cos = input(inputs, "cos")?.f32s();
    let sin = input(inputs, "sin")?.f32s();
    let q = mrope_rotate(
        &input(inputs, "q")?.f32s(),
        &cos,
        &sin,
        t,
        hq,
        d,
        r,
        &sec,
        il,
        neox,
    );
    let k = mrope_rotate(
        &input(inputs, "k")?.f32s(),
        &cos,
        &sin,
        t,
        hk,
        d,
        r,
        &sec,
        il,
        neox,
    );
    Ok(vec![
        HostTensor::from_f32("q_out", "bf16", vec![t, hq * d], &q),
        HostTensor::from_f32("k_out", "bf16", vec![t, hk * d], &k),
    ])
}

// ---------------------------------------------------------------- fused_qkv_rope

fn fused_qkv_rope_shapes() -> Vec<BTreeMap<String, Value>> {
    [
        (4, 4, 2, 128, 128, "fp16"),
        (3, 2, 1, 64, 32, "fp16"),
        (1, 32, 4, 128, 128, "bf16"),
        (3, 2, 1, 64, 64, "bf16"),
    ]
    .iter()
    .map(|(t, h, kv, d, r, dt)| {
        params(&[
            ("total_tokens", Value::Int(*t)),
            ("num_heads", Value::Int(*h)),
            ("num_kv_heads", Value::Int(*kv)),
            ("head_dim", Value::Int(*d)),
            ("rope_dim", Value::Int(*r)),
            ("dtype", Value::Str(dt.to_string())),
        ])
    })
    .collect()
}

/// cos/sin of θ = pos · inv_freq_j, inv_freq_j = 1 / base^(f32(2j) / R), all in f32.
fn rope_cos_sin(pos: f32, r: usize, base: f32) -> (Vec<f32>, Vec<f32>) {
    (0..r / 2)
        .map(|j| {
            let inv = 1.0f32 / base.powf((2 * j) as f32 / r as f32);
            let th = pos * inv;
            (th.cos(), th.sin())
        })
        .unzip()
}

/// The buffers are fp16 (problem.toml): the element type follows the tensors' dtype.
fn fused_qkv_rope(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, h, kv, d, r) = (
        int(env, "T")?,
        int(env, "H")?,
        int(env, "KV")?,
        int(env, "D")?,
        int(env, "R")?,
    );
    let base = float(env, "rope_base")?;
    let qkv_t = input(inputs, "qkv")?;
    let dt = qkv_t.dtype.clone();
    let qkv = qkv_t.f32s();
    let pos = input(inputs, "positions")?.i64s();
    let nh = h + 2 * kv;
    let half = r / 2;
    let (mut q, mut k, mut v) = (
        Vec::with_capacity(t * h * d),
        Vec::with_capacity(t * kv * d),
        Vec::with_capacity(t * kv * d),
    );
    for tok in 0..t {
        let (c, s) = rope_cos_sin(pos[tok] as f32, r, base);
        for head in 0..nh {
            let x = &qkv[(tok * nh + head) * d..(tok * nh + head + 1) * d];
            for i in 0..d {
                let y = if head < h + kv && i < r {
                    let j = i % half;
                    let rot = if i < half { -x[i + half] } else { x[i - half] };
                    round_to(&dt, x[i] * c[j] + rot * s[j])
                } else {
                    x[i]
                };
                if head < h {
                    q.push(y);
                } else if head < h + kv {
                    k.push(y);
                } else {
                    v.push(y);
                }
            }
        }
    }
    Ok(vec![
        HostTensor::from_f32("q", &dt, vec![t, h, d], &q),
        HostTensor::from_f32("k", &dt, vec![t, kv, d], &k),
        HostTensor::from_f32("v", &dt, vec![t, kv, d], &v),
    ])
}

// ---------------------------------------------------------------- moe_sum_reduce

fn moe_sum_reduce_shapes() -> Vec<BTreeMap<String, Value>> {
    [(5, 8, 2048, 1.0), (3, 3, 100, 2.5), (17, 8, 264, 1.0)]
        .iter()
        .map(|(t, k, h, f)| {
            params(&[
                ("token_count", Value::Int(*t)),
                ("top_k", Value::Int(*k)),
                ("hidden_size", Value::Int(*h)),
                ("routed_scaling_factor", Value::Float(*f)),
            ])
        })
        .collect()
}

/// out[t,h] = bf16(factor · Σ_k x[t,k,h]), f32 sum in k order.
fn moe_sum_reduce(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, k, h) = (int(env, "T")?, int(env, "K")?, int(env, "H")?);
    let factor = float(env, "routed_scaling_factor")?;
    let x = input(inputs, "expert_outputs")?.f32s();
    let mut out = vec![0.0; t * h];
    for tok in 0..t {
        for j in 0..h {
            let mut acc = 0.0f32;
            for e in 0..k {
                acc += x[(tok * k + e) * h + j];
            }
            out[tok * h + j] = bf16(factor * acc);
        }
    }
    Ok(vec![HostTensor::from_f32("out", "bf16", vec![t, h], &out)])
}

// ---------------------------------------------------------------- moe_topk_gating_softmax

fn moe_topk_shapes() -> Vec<BTreeMap<String, Value>> {
    [(7, 128, 8), (5, 256, 8), (4, 96, 6), (3, 64, 40)]
        .iter()
        .map(|(t, e, k)| {
            params(&[
                ("token_count", Value::Int(*t)),
                ("num_experts", Value::Int(*e)),
                ("top_k", Value::Int(*k)),
            ])
        })
        .collect()
}

/// Column indices of a row in the order "larger value first, equal values by lower index".
fn order_desc(row: &[f32]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.sort_by(|&a, &b| {
        row[b]
            .partial_cmp(&row[a])
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.cmp(&b))
    });
    idx
}

/// p = softmax(x) (computed in f64 from the f32 logits and rounded once: the exact value the
/// f32 reference approximates); ids = the K largest logits in the order above, weights = p.
fn moe_topk_gating_softmax(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, e, k) = (int(env, "T")?, int(env, "E")?, int(env, "K")?);
    let x = input(inputs, "gating_output")?.f32s();
    let mut w = Vec::with_capacity(t * k);
    let mut ids = Vec::with_capacity(t * k);
    for r in 0..t {
        let row = &x[r * e..(r + 1) * e];
        let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let s: f64 = row.iter().map(|v| ((v - m) as f64).exp()).sum();
        for &j in order_desc(row).iter().take(k) {
            ids.push(j as i64);
            w.push((((row[j] - m) as f64).exp() / s) as f32);
        }
    }
    Ok(vec![
        HostTensor::from_f32("topk_weights", "fp32", vec![t, k], &w),
        HostTensor::from_i64("topk_ids", "int32", vec![t, k], &ids),
    ])
}

// ---------------------------------------------------------------- topk_filter

fn topk_filter_shapes() -> Vec<BTreeMap<String, Value>> {
    let mut v = Vec::new();
    for (t, vv, k) in [
        (3, 4002, None),
        (2, 40, Some(50)),
        (4, 1000, Some(7)),
        (1, 20000, Some(50)),
    ] {
        let mut p = params(&[("seq_len", Value::Int(t)), ("hidden_size", Value::Int(vv))]);
        if let Some(k) = k {
            p.insert("top_k".into(), Value::Int(k));
        }
        v.push(p);
    }
    v
}

/// τ = the k'-th largest value (k' = min(top_k, V), duplicates counted); out = x < τ ? −inf : x.
fn topk_filter(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, v) = (int(env, "T")?, int(env, "V")?);
    let kk = int(env, "top_k")?.min(v);
    let x = input(inputs, "logits")?.f32s();
    let mut out = Vec::with_capacity(t * v);
    for r in 0..t {
        let row = &x[r * v..(r + 1) * v];
        let mut sorted = row.to_vec();
        sorted.sort_by(|a, b| b.partial_cmp(a).unwrap_or(std::cmp::Ordering::Equal));
        let tau = if kk == 0 {
            f32::INFINITY
        } else {
            sorted[kk - 1]
        };
        out.extend(
            row.iter()
                .map(|&xv| if xv < tau { f32::NEG_INFINITY } else { xv }),
        );
    }
    Ok(vec![HostTensor::from_f32("out", "fp32", vec![t, v], &out)])
}

// ---------------------------------------------------------------- causal_conv1d

fn causal_conv1d_shapes() -> Vec<BTreeMap<String, Value>> {
    [(1, 64, 4), (13, 16, 4), (40, 8, 4), (5, 6, 3)]
        .iter()
        .map(|(t, c, w)| {
            params(&[
                ("token_count", Value::Int(*t)),
                ("dim", Value::Int(*c)),
                ("width", Value::Int(*w)),
                ("activation", Value::Str("silu".into())),
            ])
        })
        .collect()
}

/// y = bf16(bias + Σ_j w[c,j]·s_c[t+j]) (f32 from the bias in tap order), out = bf16(silu(y)),
/// s_c = (initial_state[0, c, ..], x[c, ..]).
fn causal_conv1d(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, c, w) = (int(env, "T")?, int(env, "C")?, int(env, "W")?);
    let x = input(inputs, "x")?.f32s();
    let wt = input(inputs, "weight")?.f32s();
    let b = input(inputs, "bias")?.f32s();
    let init = input(inputs, "initial_state")?.f32s();
    let mut out = vec![0.0; c * t];
    for ch in 0..c {
        let s = |m: usize| {
            if m < w - 1 {
                init[ch * (w - 1) + m]
            } else {
                x[ch * t + m - (w - 1)]
            }
        };
        for tok in 0..t {
            let mut acc = b[ch];
            for j in 0..w {
                acc += wt[ch * w + j] * s(tok + j);
            }
            let y = bf16(acc);
            out[ch * t + tok] = bf16(y / (1.0 + (-y).exp()));
        }
    }
    Ok(vec![HostTensor::from_f32("out", "bf16", vec![c, t], &out)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::{Problem, Shape, Suite, SuiteSource};

    fn suite() -> Suite {
        Suite::load(SuiteSource::Dir(
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("problems"),
        ))
        .unwrap()
    }

    fn shape(params: BTreeMap<String, Value>) -> Shape {
        Shape {
            id: 9000,
            params,
            note: String::new(),
            production_us: Default::default(),
            line: 0,
        }
    }

    fn env_of(p: &Problem, params: BTreeMap<String, Value>) -> Env {
        p.env(&shape(params)).unwrap()
    }

    fn bf16s(name: &str, dims: Vec<usize>, v: &[f32]) -> HostTensor {
        HostTensor::from_f32(name, "bf16", dims, v)
    }

    // ------------------------------------------------------------ launch plans

    /// Every launch plan of these operators (reference, baseline, inputs.cu) resolves on every
    /// suite shape and every reduced shape, for every value of each tune parameter: buffers
    /// exist, scalars fit their types, grids are legal (x < 2^31, y and z ≤ 65535), blocks have
    /// at most 1024 threads, dynamic shared memory ≤ 227 KB.
    #[test]
    fn launch_plans_resolve_on_every_shape() {
        let s = suite();
        let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("problems");
        for op in ops() {
            let p = s.problem(op.name).unwrap();
            let mut shapes: Vec<BTreeMap<String, Value>> =
                p.shapes.iter().map(|s| s.params.clone()).collect();
            shapes.extend((op.reduced)());
            let buffers: Vec<String> = p
                .inputs
                .iter()
                .chain(&p.outputs)
                .map(|t| t.name.clone())
                .collect();
            let custom = p.inputs.iter().any(|t| t.generator == "custom");
            let mut files = vec!["reference.cu", "baseline.cu"];
            if custom {
                files.push("inputs.cu");
            }
            for f in files {
                let path = root.join(op.name).join(f);
                let src = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let plan = crate::engine::plan::parse(&src)
                    .unwrap_or_else(|e| panic!("{}: {:?}", path.display(), e));
                let names: Vec<String> = buffers
                    .iter()
                    .cloned()
                    .chain(plan.scratch.iter().map(|s| s.name.clone()))
                    .collect();
                // the defaults, then each tune value with the others at their defaults
                let mut variants = vec![plan.defines.clone()];
                for (k, vals) in &plan.tune {
                    for v in vals {
                        let mut d = plan.defines.clone();
                        d.insert(k.clone(), v.clone());
                        variants.push(d);
                    }
                }
                for params in &shapes {
                    let mut env = env_of(p, params.clone());
                    env.insert("seed".into(), Value::Int(12345));
                    for defs in &variants {
                        let penv = plan.env(&env, defs);
                        let ls = plan
                            .resolve(&penv, &|n| names.iter().any(|b| b == n))
                            .unwrap_or_else(|e| {
                                panic!(
                                    "{} {params:?} {defs:?}: line {}: {}",
                                    path.display(),
                                    e.line,
                                    e.msg
                                )
                            });
                        for l in &ls {
                            assert!(
                                l.grid[0] < (1 << 31),
                                "{} grid {:?}",
                                path.display(),
                                l.grid
                            );
                            assert!(l.grid[1] <= 65535 && l.grid[2] <= 65535);
                            assert!(l.smem <= 227 * 1024, "{} smem {}", path.display(), l.smem);
                        }
                        plan.scratch_sizes(&penv).unwrap();
                    }
                }
            }
        }
    }

    // ------------------------------------------------------------ reshape_and_cache

    #[test]
    fn reshape_and_cache_writes_mapped_slots_and_keeps_the_rest() {
        let s = suite();
        let p = s.problem("reshape_and_cache").unwrap();
        let env = env_of(
            p,
            params(&[("shape", ints(&[6, 2, 8])), ("block_size", Value::Int(4))]),
        );
        let (t, hd, nb, bs) = (6, 16, 2, 4);
        let mut rng = Rng::new(7);
        let key = bf16s("key", vec![t, 2, 8], &rng.normal_in("bf16", t * hd, 1.0));
        let value = bf16s("value", vec![t, 2, 8], &rng.normal_in("bf16", t * hd, 1.0));
        let kc0 = bf16s(
            "key_cache",
            vec![nb, bs, 2, 8],
            &rng.normal_in("bf16", nb * bs * hd, 1.0),
        );
        let vc0 = bf16s(
            "value_cache",
            vec![nb, bs, 2, 8],
            &rng.normal_in("bf16", nb * bs * hd, 1.0),
        );
        // a permutation with one skipped token; slots 1 and 6 stay untouched
        let slots: Vec<i64> = vec![7, 0, -1, 5, 2, 3];
        let sm = HostTensor::from_i64("slot_mapping", "int64", vec![t], &slots);
        let out = reshape_and_cache(
            &env,
            &[key.clone(), value.clone(), kc0.clone(), vc0.clone(), sm],
        )
        .unwrap();
        assert_eq!(out[0].name, "key_cache_out");
        let (kc, vc) = (out[0].f32s(), out[1].f32s());
        let (k, v, k0, v0) = (key.f32s(), value.f32s(), kc0.f32s(), vc0.f32s());
        let mut written = [false; 8];
        for (tok, s) in slots.iter().enumerate() {
            if *s < 0 {
                continue;
            }
            let s = *s as usize;
            written[s] = true;
            assert_eq!(&kc[s * hd..(s + 1) * hd], &k[tok * hd..(tok + 1) * hd]);
            assert_eq!(&vc[s * hd..(s + 1) * hd], &v[tok * hd..(tok + 1) * hd]);
        }
        for s in 0..8 {
            if !written[s] {
                assert_eq!(
                    &kc[s * hd..(s + 1) * hd],
                    &k0[s * hd..(s + 1) * hd],
                    "slot {s}"
                );
                assert_eq!(
                    &vc[s * hd..(s + 1) * hd],
                    &v0[s * hd..(s + 1) * hd],
                    "slot {s}"
                );
            }
        }
        // the skipped token's key appears nowhere
        let skipped = &k[2 * hd..3 * hd];
        assert!((0..8).all(|s| &kc[s * hd..(s + 1) * hd] != skipped));
    }

    // ------------------------------------------------------------ mrope

    fn mrope_env(p: &Problem, t: i128, d: i128, interleaved: bool, neox: bool) -> Env {
        env_of(
            p,
            params(&[
                ("token_count", Value::Int(t)),
                ("num_query_heads", Value::Int(2)),
                ("num_kv_heads", Value::Int(1)),
                ("head_size", Value::Int(d)),
                ("rotary_dim", Value::Int(d)),
                ("mrope_section", ints(&[16, 24, 24])),
                ("mrope_interleaved", Value::Bool(interleaved)),
                ("is_neox_style", Value::Bool(neox)),
            ]),
        )
    }

    #[test]
    fn mrope_takes_each_frequency_from_its_section_axis() {
        let s = suite();
        let p = s.problem("mrope").unwrap();
        let (t, d, half) = (2usize, 128usize, 64usize);
        let env = mrope_env(p, t as i128, d as i128, false, true);
        let mut rng = Rng::new(3);
        let q = rng.normal_in("bf16", t * 2 * d, 0.02);
        let k = rng.normal_in("bf16", t * d, 0.02);
        // axis 0: identity (cos 1, sin 0); axis 1: +90° (cos 0, sin 1); axis 2: 180° (cos −1).
        let mut cos = vec![0.0f32; 3 * t * half];
        let mut sin = vec![0.0f32; 3 * t * half];
        for i in 0..t * half {
            cos[i] = 1.0;
            sin[t * half + i] = 1.0;
            cos[2 * t * half + i] = -1.0;
        }
        let out = mrope(
            &env,
            &[
                bf16s("q", vec![t, 2 * d], &q),
                bf16s("k", vec![t, d], &k),
                HostTensor::from_f32("cos", "fp32", vec![3, t, half], &cos),
                HostTensor::from_f32("sin", "fp32", vec![3, t, half], &sin),
            ],
        )
        .unwrap();
        let y = out[0].f32s();
        for head in 0..t * 2 {
            let b = head * d;
            for f in 0..half {
                let (x1, x2, y1, y2) = (q[b + f], q[b + f + half], y[b + f], y[b + f + half]);
                if f < 16 {
                    assert_eq!((y1, y2), (x1, x2), "f {f}");
                } else if f < 40 {
                    assert_eq!((y1, y2), (-x2, x1), "f {f}");
                } else {
                    assert_eq!((y1, y2), (-x1, -x2), "f {f}");
                }
            }
        }
        assert_eq!(out[1].dims, vec![t, d]);
    }

    #[test]
    fn mrope_preserves_pair_norms_in_both_styles() {
        let s = suite();
        let p = s.problem("mrope").unwrap();
        for (il, neox) in [(false, true), (true, false)] {
            let (t, d, half) = (3usize, 128usize, 64usize);
            let env = mrope_env(p, t as i128, d as i128, il, neox);
            let mut rng = Rng::new(11);
            let q = rng.normal_in("bf16", t * 2 * d, 0.02);
            let k = rng.normal_in("bf16", t * d, 0.02);
            let th: Vec<f32> = (0..3 * t * half).map(|_| 0.1 * rng.normal()).collect();
            let cos: Vec<f32> = th.iter().map(|a| a.cos()).collect();
            let sin: Vec<f32> = th.iter().map(|a| a.sin()).collect();
            let out = mrope(
                &env,
                &[
                    bf16s("q", vec![t, 2 * d], &q),
                    bf16s("k", vec![t, d], &k),
                    HostTensor::from_f32("cos", "fp32", vec![3, t, half], &cos),
                    HostTensor::from_f32("sin", "fp32", vec![3, t, half], &sin),
                ],
            )
            .unwrap();
            let y = out[1].f32s();
            let mut changed = 0;
            for tok in 0..t {
                for f in 0..half {
                    let (i1, i2) = if neox {
                        (tok * d + f, tok * d + f + half)
                    } else {
                        (tok * d + 2 * f, tok * d + 2 * f + 1)
                    };
                    let n0 = (k[i1] * k[i1] + k[i2] * k[i2]).sqrt();
                    let n1 = (y[i1] * y[i1] + y[i2] * y[i2]).sqrt();
                    assert!((n0 - n1).abs() <= 0.008 * n0 + 1e-6, "{n0} {n1}");
                    changed += (y[i1] != k[i1]) as usize;
                }
            }
            assert!(changed > t * half / 2, "rotation did nothing ({changed})");
        }
    }

    // ------------------------------------------------------------ fused_qkv_rope

    fn qkv_env(p: &Problem, t: i128, h: i128, kv: i128, d: i128, r: i128, dt: &str) -> Env {
        env_of(
            p,
            params(&[
                ("total_tokens", Value::Int(t)),
                ("num_heads", Value::Int(h)),
                ("num_kv_heads", Value::Int(kv)),
                ("head_dim", Value::Int(d)),
                ("rope_dim", Value::Int(r)),
                ("dtype", Value::Str(dt.into())),
            ]),
        )
    }

    #[test]
    fn fused_qkv_rope_is_the_identity_at_position_zero_and_splits_heads() {
        let s = suite();
        let p = s.problem("fused_qkv_rope").unwrap();
        let (h, kv, d) = (4usize, 2usize, 64usize);
        let env = qkv_env(p, 1, h as i128, kv as i128, d as i128, d as i128, "fp16");
        let mut rng = Rng::new(5);
        let x = rng.normal_in("fp16", (h + 2 * kv) * d, 1.0);
        let qkv = HostTensor::from_f32("qkv", "fp16", vec![1, (h + 2 * kv) * d], &x);
        let pos = HostTensor::from_i64("positions", "int32", vec![1], &[0]);
        let out = fused_qkv_rope(&env, &[qkv.clone(), pos]).unwrap();
        let all: Vec<u8> = out.iter().flat_map(|o| o.bytes.clone()).collect();
        assert_eq!(all, qkv.bytes);
        assert_eq!(out[0].dims, vec![1, h, d]);
        assert_eq!(out[2].dims, vec![1, kv, d]);
    }

    #[test]
    fn fused_qkv_rope_rotates_neox_halves_by_the_position_angle() {
        let s = suite();
        let p = s.problem("fused_qkv_rope").unwrap();
        for (dt, ulp) in [("fp16", 1024.0), ("bf16", 128.0)] {
            let (t, h, kv, d, r) = (3usize, 2usize, 1usize, 64usize, 32usize);
            let env = qkv_env(
                p, t as i128, h as i128, kv as i128, d as i128, r as i128, dt,
            );
            let mut rng = Rng::new(9);
            let nh = h + 2 * kv;
            let x = rng.normal_in(dt, t * nh * d, 1.0);
            let qkv = HostTensor::from_f32("qkv", dt, vec![t, nh * d], &x);
            let pos = HostTensor::from_i64("positions", "int32", vec![t], &[0, 1, 7]);
            let out = fused_qkv_rope(&env, &[qkv, pos]).unwrap();
            assert_eq!(out[0].dtype, dt);
            let (q, k, v) = (out[0].f32s(), out[1].f32s(), out[2].f32s());
            for tok in 0..t {
                let p = [0.0f64, 1.0, 7.0][tok];
                for head in 0..nh {
                    let xr = &x[(tok * nh + head) * d..(tok * nh + head + 1) * d];
                    let y: &[f32] = if head < h {
                        &q[(tok * h + head) * d..(tok * h + head + 1) * d]
                    } else if head < h + kv {
                        &k[(tok * kv + head - h) * d..(tok * kv + head - h + 1) * d]
                    } else {
                        &v[(tok * kv + head - h - kv) * d..(tok * kv + head - h - kv + 1) * d]
                    };
                    for i in 0..d {
                        if head >= h + kv || i >= r {
                            assert_eq!(y[i], xr[i]);
                            continue;
                        }
                        let j = i % (r / 2);
                        let th = p / 10000f64.powf((2 * j) as f64 / r as f64);
                        let e = if i < r / 2 {
                            xr[i] as f64 * th.cos() - xr[i + r / 2] as f64 * th.sin()
                        } else {
                            xr[i] as f64 * th.cos() + xr[i - r / 2] as f64 * th.sin()
                        };
                        // within one ulp of the dtype of the exact rotation (plus f32 angle error)
                        assert!(
                            (y[i] as f64 - e).abs() <= e.abs() / ulp + 1e-4,
                            "tok {tok} head {head} i {i}: {} vs {e}",
                            y[i]
                        );
                    }
                }
            }
        }
    }

    // ------------------------------------------------------------ moe_sum_reduce

    #[test]
    fn moe_sum_reduce_sums_the_k_outputs_and_scales() {
        let s = suite();
        let p = s.problem("moe_sum_reduce").unwrap();
        let env = env_of(
            p,
            params(&[
                ("token_count", Value::Int(2)),
                ("top_k", Value::Int(3)),
                ("hidden_size", Value::Int(2)),
                ("routed_scaling_factor", Value::Float(2.0)),
            ]),
        );
        let x = bf16s(
            "expert_outputs",
            vec![2, 3, 2],
            &[
                1.0, 0.5, 2.0, -0.25, 3.0, 0.125, -1.0, 0.0, 0.5, 0.0, 0.25, 0.0,
            ],
        );
        let out = moe_sum_reduce(&env, &[x]).unwrap()[0].f32s();
        assert_eq!(out, vec![12.0, 0.75, -0.5, 0.0]);
    }

    #[test]
    fn moe_sum_reduce_rounds_once_after_the_fp32_sum() {
        let s = suite();
        let p = s.problem("moe_sum_reduce").unwrap();
        let env = |k: i128| {
            env_of(
                p,
                params(&[
                    ("token_count", Value::Int(1)),
                    ("top_k", Value::Int(k)),
                    ("hidden_size", Value::Int(1)),
                    ("routed_scaling_factor", Value::Float(1.0)),
                ]),
            )
        };
        // 1 + 2^-8 + 2^-8: rounding after each add would give 1 (ties to even); once, 1 + 2^-7.
        let x = bf16s(
            "expert_outputs",
            vec![1, 3, 1],
            &[1.0, 0.00390625, 0.00390625],
        );
        let out = moe_sum_reduce(&env(3), &[x]).unwrap()[0].f32s();
        assert_eq!(out, vec![1.0078125]);
        let x = bf16s("expert_outputs", vec![1, 2, 1], &[1.0, 0.00390625]);
        let out = moe_sum_reduce(&env(2), &[x]).unwrap()[0].f32s();
        assert_eq!(out, vec![1.0]); // the tie 1 + 2^-8 goes to even
    }

    // ------------------------------------------------------------ moe_topk_gating_softmax

    fn topk_env(p: &Problem, t: i128, e: i128, k: i128) -> Env {
        env_of(
            p,
            params(&[
                ("token_count", Value::Int(t)),
                ("num_experts", Value::Int(e)),
                ("top_k", Value::Int(k)),
            ]),
        )
    }

    #[test]
    fn moe_topk_ids_are_the_largest_in_descending_order() {
        let s = suite();
        let p = s.problem("moe_topk_gating_softmax").unwrap();
        let (t, e, k) = (6usize, 128usize, 8usize);
        let env = topk_env(p, t as i128, e as i128, k as i128);
        let mut rng = Rng::new(21);
        let x: Vec<f32> = (0..t * e).map(|_| rng.normal()).collect();
        let out = moe_topk_gating_softmax(
            &env,
            &[HostTensor::from_f32(
                "gating_output",
                "fp32",
                vec![t, e],
                &x,
            )],
        )
        .unwrap();
        let (w, ids) = (out[0].f32s(), out[1].i64s());
        for r in 0..t {
            let row = &x[r * e..(r + 1) * e];
            let sel: Vec<usize> = ids[r * k..(r + 1) * k]
                .iter()
                .map(|i| *i as usize)
                .collect();
            let min_sel = sel.iter().map(|&j| row[j]).fold(f32::INFINITY, f32::min);
            for (j, v) in row.iter().enumerate() {
                if !sel.contains(&j) {
                    assert!(*v <= min_sel);
                }
            }
            for i in 1..k {
                assert!(row[sel[i - 1]] >= row[sel[i]]);
                assert!(w[r * k + i - 1] >= w[r * k + i]);
            }
            // weights are softmax probabilities (not renormalized over the K)
            let z: f64 = row.iter().map(|v| (*v as f64).exp()).sum();
            for i in 0..k {
                let pe = (row[sel[i]] as f64).exp() / z;
                assert!((w[r * k + i] as f64 - pe).abs() <= 1e-7 * pe);
            }
            assert!(w[r * k..(r + 1) * k].iter().sum::<f32>() < 0.999);
        }
    }

    #[test]
    fn moe_topk_all_experts_sum_to_one_and_ties_go_to_the_lower_index() {
        let s = suite();
        let p = s.problem("moe_topk_gating_softmax").unwrap();
        let env = topk_env(p, 1, 6, 6);
        let x = [0.5f32, 2.0, -1.0, 2.0, 0.5, 3.0];
        let out = moe_topk_gating_softmax(
            &env,
            &[HostTensor::from_f32(
                "gating_output",
                "fp32",
                vec![1, 6],
                &x,
            )],
        )
        .unwrap();
        assert_eq!(out[1].i64s(), vec![5, 1, 3, 0, 4, 2]);
        let sum: f64 = out[0].f32s().iter().map(|v| *v as f64).sum();
        assert!((sum - 1.0).abs() < 1e-6, "{sum}");
    }

    // ------------------------------------------------------------ topk_filter

    fn filter_env(p: &Problem, t: i128, v: i128, k: Option<i128>) -> Env {
        let mut pr = params(&[("seq_len", Value::Int(t)), ("hidden_size", Value::Int(v))]);
        if let Some(k) = k {
            pr.insert("top_k".into(), Value::Int(k));
        }
        env_of(p, pr)
    }

    #[test]
    fn topk_filter_keeps_exactly_the_k_largest_and_masks_with_negative_infinity() {
        let s = suite();
        let p = s.problem("topk_filter").unwrap();
        let (t, v) = (3usize, 1000usize);
        let env = filter_env(p, t as i128, v as i128, None); // default top_k = 50
        let mut rng = Rng::new(33);
        let x: Vec<f32> = (0..t * v).map(|_| rng.normal()).collect();
        let out = topk_filter(
            &env,
            &[HostTensor::from_f32("logits", "fp32", vec![t, v], &x)],
        )
        .unwrap()[0]
            .f32s();
        for r in 0..t {
            let (xr, or) = (&x[r * v..(r + 1) * v], &out[r * v..(r + 1) * v]);
            let kept: Vec<usize> = (0..v).filter(|&j| or[j] == xr[j]).collect();
            assert_eq!(kept.len(), 50);
            let min_kept = kept.iter().map(|&j| xr[j]).fold(f32::INFINITY, f32::min);
            for j in 0..v {
                if !kept.contains(&j) {
                    assert!(or[j] == f32::NEG_INFINITY);
                    assert!(xr[j] < min_kept);
                }
            }
        }
    }

    #[test]
    fn topk_filter_keeps_all_ties_at_the_threshold_and_short_rows_whole() {
        let s = suite();
        let p = s.problem("topk_filter").unwrap();
        let env = filter_env(p, 1, 8, Some(3));
        let x = [1.0f32, 5.0, 2.0, 2.0, -3.0, 2.0, 0.0, 4.0];
        let out = topk_filter(
            &env,
            &[HostTensor::from_f32("logits", "fp32", vec![1, 8], &x)],
        )
        .unwrap()[0]
            .f32s();
        let ni = f32::NEG_INFINITY;
        assert_eq!(out, vec![ni, 5.0, 2.0, 2.0, ni, 2.0, ni, 4.0]);
        // V < top_k: k' = V, everything kept
        let env = filter_env(p, 1, 8, Some(50));
        let out = topk_filter(
            &env,
            &[HostTensor::from_f32("logits", "fp32", vec![1, 8], &x)],
        )
        .unwrap()[0]
            .f32s();
        assert_eq!(out, x.to_vec());
    }

    // ------------------------------------------------------------ causal_conv1d

    fn conv_env(p: &Problem, t: i128, c: i128, w: i128) -> Env {
        env_of(
            p,
            params(&[
                ("token_count", Value::Int(t)),
                ("dim", Value::Int(c)),
                ("width", Value::Int(w)),
                ("activation", Value::Str("silu".into())),
            ]),
        )
    }

    fn silu_bf16(y: f32) -> f32 {
        let y = bf16(y);
        bf16(y / (1.0 + (-y).exp()))
    }

    #[test]
    fn causal_conv1d_impulse_response_is_the_reversed_kernel() {
        let s = suite();
        let p = s.problem("causal_conv1d").unwrap();
        let (t, c, w) = (10usize, 2usize, 4usize);
        let env = conv_env(p, t as i128, c as i128, w as i128);
        let mut x = vec![0.0f32; c * t];
        x[4] = 1.0; // channel 0, token 4
        x[t + 2] = 1.0; // channel 1, token 2
        let wt = [0.5f32, -0.25, 0.125, 2.0, 1.0, 0.75, -0.5, 0.25];
        let out = causal_conv1d(
            &env,
            &[
                bf16s("x", vec![c, t], &x),
                bf16s("weight", vec![c, w], &wt),
                bf16s("bias", vec![c], &[0.0, 0.0]),
                bf16s("initial_state", vec![1, c, w - 1], &[0.0; 6]),
            ],
        )
        .unwrap()[0]
            .f32s();
        for ch in 0..c {
            let t0 = [4usize, 2][ch];
            for tok in 0..t {
                // x[t0] is tap j at output t = t0 + (W-1) - j
                let e = if tok >= t0 && tok - t0 < w {
                    silu_bf16(wt[ch * w + w - 1 - (tok - t0)])
                } else {
                    0.0
                };
                assert_eq!(out[ch * t + tok], e, "channel {ch} token {tok}");
            }
        }
    }

    #[test]
    fn causal_conv1d_initial_state_feeds_only_the_first_outputs() {
        let s = suite();
        let p = s.problem("causal_conv1d").unwrap();
        let (t, c, w) = (12usize, 3usize, 4usize);
        let env = conv_env(p, t as i128, c as i128, w as i128);
        let mut rng = Rng::new(17);
        let x = bf16s("x", vec![c, t], &rng.normal_in("bf16", c * t, 0.5));
        let wt = bf16s("weight", vec![c, w], &rng.normal_in("bf16", c * w, 0.5));
        let b = bf16s("bias", vec![c], &rng.normal_in("bf16", c, 0.5));
        let i0 = bf16s(
            "initial_state",
            vec![1, c, w - 1],
            &rng.normal_in("bf16", c * (w - 1), 0.5),
        );
        let i1 = bf16s(
            "initial_state",
            vec![1, c, w - 1],
            &rng.normal_in("bf16", c * (w - 1), 0.5),
        );
        let o0 =
            causal_conv1d(&env, &[x.clone(), wt.clone(), b.clone(), i0.clone()]).unwrap()[0].f32s();
        let o1 = causal_conv1d(&env, &[x.clone(), wt.clone(), b.clone(), i1]).unwrap()[0].f32s();
        for ch in 0..c {
            for tok in 0..t {
                let same = o0[ch * t + tok] == o1[ch * t + tok];
                if tok >= w - 1 {
                    assert!(
                        same,
                        "channel {ch} token {tok} depends on the initial state"
                    );
                }
            }
            assert!((0..w - 1).any(|tok| o0[ch * t + tok] != o1[ch * t + tok]));
        }
        // output 0 by hand: taps = (init[0..3], x[0]), from the bias in tap order
        let (xv, wv, bv, iv) = (x.f32s(), wt.f32s(), b.f32s(), i0.f32s());
        let mut acc = bv[1];
        for j in 0..3 {
            acc += wv[w + j] * iv[3 + j];
        }
        acc += wv[w + 3] * xv[t];
        assert_eq!(o0[t], silu_bf16(acc));
    }
}
