//! unified_attention, attention_forward, paged_attention_decode, mla_decode_attention.
//!
//! Every operator reads its structure (cumulative lengths, block tables, sequence lengths) from
//! the input tensors, as the kernels do, and computes scores, softmax and the weighted sum in f64
//! from the exactly widened bf16 inputs; the only rounding point is the bf16 output.

use super::*;

pub fn ops() -> Vec<CpuOp> {
    vec![
        CpuOp {
            name: "unified_attention",
            run: unified_attention,
            reduced: unified_shapes,
        },
        CpuOp {
            name: "attention_forward",
            run: attention_forward,
            reduced: forward_shapes,
        },
        CpuOp {
            name: "paged_attention_decode",
            run: paged_attention_decode,
            reduced: paged_shapes,
        },
        CpuOp {
            name: "mla_decode_attention",
            run: mla_decode_attention,
            reduced: mla_shapes,
        },
    ]
}

fn ints(xs: &[i128]) -> Value {
    Value::List(xs.iter().map(|x| Value::Int(*x)).collect())
}

fn unified_shapes() -> Vec<BTreeMap<String, Value>> {
    // (seq_lens, Hq, Hk, D): varlen with partial blocks and GQA; one long sequence (two query
    // tiles of 64 in the reference); more than 8 equal sequences (the generator's n > 8 path).
    let cases: [(&[i128], i128, i128, i128); 4] = [
        (&[5, 17, 33], 4, 2, 72),
        (&[100], 4, 1, 128),
        (&[16, 1], 2, 2, 64),
        (&[12; 9], 2, 1, 80),
    ];
    cases
        .iter()
        .map(|(l, hq, hk, d)| {
            params(&[
                ("num_seqs", Value::Int(l.len() as i128)),
                ("seq_lens", ints(l)),
                ("num_query_heads", Value::Int(*hq)),
                ("num_kv_heads", Value::Int(*hk)),
                ("head_size", Value::Int(*d)),
                ("block_size", Value::Int(16)),
            ])
        })
        .collect()
}

fn forward_shapes() -> Vec<BTreeMap<String, Value>> {
    let cases: [(&[i128], i128, i128); 3] = [(&[1], 2, 128), (&[70], 3, 72), (&[3, 20, 9], 2, 72)];
    cases
        .iter()
        .map(|(l, h, d)| {
            params(&[
                ("num_heads", Value::Int(*h)),
                ("head_dim", Value::Int(*d)),
                ("seq_lens", ints(l)),
            ])
        })
        .collect()
}

fn paged_shapes() -> Vec<BTreeMap<String, Value>> {
    // (S, L, Hq, Hk, D): a partial last block; head size 256 with one KV head; MHA.
    [
        (3, 40, 4, 2, 128, "bf16"),
        (2, 16, 3, 1, 256, "bf16"),
        (5, 64, 2, 2, 128, "bf16"),
        (3, 40, 8, 2, 128, "fp16"),
    ]
    .iter()
    .map(|(s, l, hq, hk, d, dt)| {
        params(&[
            ("num_seqs", Value::Int(*s)),
            ("ctx_len", Value::Int(*l)),
            ("num_query_heads", Value::Int(*hq)),
            ("num_kv_heads", Value::Int(*hk)),
            ("head_size", Value::Int(*d)),
            ("block_size", Value::Int(16)),
            ("dtype", Value::Str(dt.to_string())),
        ])
    })
    .collect()
}

fn mla_shapes() -> Vec<BTreeMap<String, Value>> {
    // (B, S, H, L, Rr): the suite's widths; a narrower latent.
    [(2, 20, 4, 512, 64), (3, 7, 2, 128, 32)]
        .iter()
        .map(|(b, s, h, l, r)| {
            params(&[
                ("batch_size", Value::Int(*b)),
                ("ctx_len", Value::Int(*s)),
                ("nhead", Value::Int(*h)),
                ("kv_lora_rank", Value::Int(*l)),
                ("qk_rope_head_dim", Value::Int(*r)),
            ])
        })
        .collect()
}

/// Softmax attention of one query over `n` keys: scores (q·k_p)·scale, softmax, Σ prob·v_p,
/// all in f64. `key(p)` and `val(p)` return the key of width q.len() and the value of width dv.
fn attend(
    q: &[f32],
    n: usize,
    dv: usize,
    scale: f64,
    key: impl Fn(usize) -> Vec<f32>,
    val: impl Fn(usize) -> Vec<f32>,
) -> Vec<f64> {
    let scores: Vec<f64> = (0..n)
        .map(|p| {
            let k = key(p);
            q.iter()
                .zip(&k)
                .map(|(a, b)| *a as f64 * *b as f64)
                .sum::<f64>()
                * scale
        })
        .collect();
    let mx = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = scores.iter().map(|s| (s - mx).exp()).collect();
    let sum: f64 = e.iter().sum();
    let mut o = vec![0.0f64; dv];
    for (p, ep) in e.iter().enumerate() {
        let v = val(p);
        let prob = ep / sum;
        for d in 0..dv {
            o[d] += prob * v[d] as f64;
        }
    }
    o
}

fn to_bf16(o: &[f64]) -> impl Iterator<Item = f32> + '_ {
    o.iter().map(|x| bf16(*x as f32))
}

fn unified_attention(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (hq, hk, d, bs, mb) = (
        int(env, "Hq")?,
        int(env, "Hk")?,
        int(env, "D")?,
        int(env, "bs")?,
        int(env, "MB")?,
    );
    let tq = int(env, "Tq")?;
    let n = int(env, "n")?;
    let (q, kc, vc) = (inputs[0].f32s(), inputs[1].f32s(), inputs[2].f32s());
    let (cu, used, bt) = (inputs[3].i64s(), inputs[4].i64s(), inputs[5].i64s());
    if cu.len() != n + 1 || used.len() != n || bt.len() != n * mb {
        return Err("structure tensors do not match num_seqs".into());
    }
    let mut out = vec![0.0f32; tq * hq * d];
    let scale = 1.0 / (d as f64).sqrt();
    for i in 0..n {
        let (q0, q1) = (cu[i] as usize, cu[i + 1] as usize);
        let q_len = q1 - q0;
        let kv_len = used[i] as usize;
        if q_len == 0 {
            continue;
        }
        let causal = q_len == kv_len;
        let slot = |p: usize| bt[i * mb + p / bs] as usize * bs + p % bs;
        for r in 0..q_len {
            let keys = if causal { r + 1 } else { kv_len };
            for h in 0..hq {
                let g = h / (hq / hk);
                let row = ((q0 + r) * hq + h) * d;
                let o = attend(
                    &q[row..row + d],
                    keys,
                    d,
                    scale,
                    |p| {
                        let a = (slot(p) * hk + g) * d;
                        kc[a..a + d].to_vec()
                    },
                    |p| {
                        let a = (slot(p) * hk + g) * d;
                        vc[a..a + d].to_vec()
                    },
                );
                for (k, x) in to_bf16(&o).enumerate() {
                    out[row + k] = x;
                }
            }
        }
    }
    Ok(vec![HostTensor::from_f32(
        "out",
        "bf16",
        vec![tq, hq, d],
        &out,
    )])
}

fn attention_forward(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (h, d, t, n) = (
        int(env, "H")?,
        int(env, "D")?,
        int(env, "T")?,
        int(env, "n")?,
    );
    let (q, k, v) = (inputs[0].f32s(), inputs[1].f32s(), inputs[2].f32s());
    let (cq, ck) = (inputs[3].i64s(), inputs[4].i64s());
    if cq.len() != n + 1 || ck.len() != n + 1 {
        return Err("cu_seqlens do not match the number of sequences".into());
    }
    let mut out = vec![0.0f32; t * h * d];
    let scale = 1.0 / (d as f64).sqrt();
    for i in 0..n {
        let (k0, k1) = (ck[i] as usize, ck[i + 1] as usize);
        for r in cq[i] as usize..cq[i + 1] as usize {
            for hh in 0..h {
                let row = (r * h + hh) * d;
                let o = attend(
                    &q[row..row + d],
                    k1 - k0,
                    d,
                    scale,
                    |p| {
                        let a = ((k0 + p) * h + hh) * d;
                        k[a..a + d].to_vec()
                    },
                    |p| {
                        let a = ((k0 + p) * h + hh) * d;
                        v[a..a + d].to_vec()
                    },
                );
                for (j, x) in to_bf16(&o).enumerate() {
                    out[row + j] = x;
                }
            }
        }
    }
    Ok(vec![HostTensor::from_f32(
        "out",
        "bf16",
        vec![t, h, d],
        &out,
    )])
}

fn paged_attention_decode(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (s, hq, hk, d, bs, mb) = (
        int(env, "S")?,
        int(env, "Hq")?,
        int(env, "Hk")?,
        int(env, "D")?,
        int(env, "bs")?,
        int(env, "mb")?,
    );
    let x = 8;
    let (q, kc, vc) = (inputs[0].f32s(), inputs[1].f32s(), inputs[2].f32s());
    let (bt, lens) = (inputs[3].i64s(), inputs[4].i64s());
    let dtype = inputs[0].dtype.clone();
    let mut out = vec![0.0f32; s * hq * d];
    let scale = 1.0 / (d as f64).sqrt();
    for i in 0..s {
        let len = lens[i];
        if len <= 0 {
            continue;
        }
        let len = len as usize;
        let at = |p: usize| (bt[i * mb + p / bs] as usize, p % bs);
        for h in 0..hq {
            let g = h / (hq / hk);
            let row = (i * hq + h) * d;
            let o = attend(
                &q[row..row + d],
                len,
                d,
                scale,
                |p| {
                    let (b, o) = at(p);
                    (0..d)
                        .map(|dd| kc[((((b * hk + g) * (d / x) + dd / x) * bs + o) * x) + dd % x])
                        .collect()
                },
                |p| {
                    let (b, o) = at(p);
                    (0..d)
                        .map(|dd| vc[((b * hk + g) * d + dd) * bs + o])
                        .collect()
                },
            );
            for (j, v) in o.iter().enumerate() {
                out[row + j] = round_to(&dtype, *v as f32);
            }
        }
    }
    Ok(vec![HostTensor::from_f32(
        "out",
        &dtype,
        vec![s, hq, d],
        &out,
    )])
}

fn mla_decode_attention(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (b, h, l, dqk) = (
        int(env, "B")?,
        int(env, "H")?,
        int(env, "L")?,
        int(env, "Dqk")?,
    );
    let (q, kv, lens) = (inputs[0].f32s(), inputs[1].f32s(), inputs[2].i64s());
    let mut out = vec![0.0f32; b * h * l];
    let scale = 1.0 / (dqk as f64).sqrt();
    let mut off = 0usize;
    for i in 0..b {
        let len = lens[i].max(0) as usize;
        for hh in 0..h {
            if len == 0 {
                break;
            }
            let row = (i * h + hh) * dqk;
            let o = attend(
                &q[row..row + dqk],
                len,
                l,
                scale,
                |s| kv[(off + s) * dqk..(off + s + 1) * dqk].to_vec(),
                |s| kv[(off + s) * dqk..(off + s) * dqk + l].to_vec(),
            );
            for (j, x) in to_bf16(&o).enumerate() {
                out[(i * h + hh) * l + j] = x;
            }
        }
        off += len;
    }
    Ok(vec![HostTensor::from_f32(
        "out",
        "bf16",
        vec![b, h, l],
        &out,
    )])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::{Shape, Suite, SuiteSource};

    /// The environment of a reduced shape, from the suite's own `let` definitions.
    fn env_of(op: &str, params: BTreeMap<String, Value>) -> Env {
        let suite = Suite::load(SuiteSource::Embedded).unwrap();
        let p = suite.problem(op).unwrap();
        let s = Shape {
            id: 9000,
            params,
            note: String::new(),
            production_us: Default::default(),
            line: 0,
        };
        p.env(&s).unwrap()
    }

    fn bf(name: &str, dims: Vec<usize>, v: &[f32]) -> HostTensor {
        HostTensor::from_f32(name, "bf16", dims, v)
    }
    fn i32t(name: &str, v: &[i64]) -> HostTensor {
        HostTensor::from_i64(name, "int32", vec![v.len()], v)
    }

    /// Inputs of unified_attention with the spec's structure; blocks of each sequence are laid
    /// out in reverse order when `shuffle` (any permutation of blocks is a valid table).
    fn unified_inputs(env: &Env, lens: &[usize], seed: u64, shuffle: bool) -> Vec<HostTensor> {
        let (hq, hk, d, bs, mb, nb, tq) = (
            int(env, "Hq").unwrap(),
            int(env, "Hk").unwrap(),
            int(env, "D").unwrap(),
            int(env, "bs").unwrap(),
            int(env, "MB").unwrap(),
            int(env, "NB").unwrap(),
            int(env, "Tq").unwrap(),
        );
        let mut rng = Rng::new(seed);
        let q = rng.normal_in("bf16", tq * hq * d, 1.0);
        let k = rng.normal_in("bf16", nb * bs * hk * d, 1.0);
        let v = rng.normal_in("bf16", nb * bs * hk * d, 1.0);
        let mut cu = vec![0i64];
        for l in lens {
            cu.push(cu.last().unwrap() + *l as i64);
        }
        let mut bt = vec![0i64; lens.len() * mb];
        for (i, l) in lens.iter().enumerate() {
            let used = l.div_ceil(bs);
            for j in 0..used {
                let jj = if shuffle { used - 1 - j } else { j };
                bt[i * mb + j] = (i * mb + jj) as i64;
            }
        }
        vec![
            bf("q", vec![tq, hq, d], &q),
            bf("k_cache", vec![nb, bs, hk, d], &k),
            bf("v_cache", vec![nb, bs, hk, d], &v),
            i32t("cu_seqlens_q", &cu),
            i32t(
                "seqused_k",
                &lens.iter().map(|l| *l as i64).collect::<Vec<_>>(),
            ),
            HostTensor::from_i64("block_table", "int32", vec![lens.len(), mb], &bt),
        ]
    }

    #[test]
    fn unified_first_row_of_each_sequence_is_its_first_value_row() {
        // Causal: row 0 sees only key 0, so out = bf16(v at position 0) exactly, per KV head.
        let p = unified_shapes().remove(0);
        let lens = [5usize, 17, 33];
        let env = env_of("unified_attention", p);
        let ins = unified_inputs(&env, &lens, 3, false);
        let out = unified_attention(&env, &ins).unwrap()[0].f32s();
        let (hq, hk, d, bs, mb) = (4, 2, 72, 16, int(&env, "MB").unwrap());
        let v = ins[2].f32s();
        let mut start = 0;
        for (i, l) in lens.iter().enumerate() {
            let slot = (i * mb) * bs; // block_table[i, 0] = i·MB, offset 0
            for h in 0..hq {
                let g = h / (hq / hk);
                for j in 0..d {
                    assert_eq!(
                        out[(start * hq + h) * d + j],
                        v[(slot * hk + g) * d + j],
                        "seq {i} head {h} dim {j}"
                    );
                }
            }
            start += l;
        }
    }

    #[test]
    fn unified_reads_kv_through_the_block_table_and_is_causal() {
        let p = unified_shapes().remove(0);
        let lens = [5usize, 17, 33];
        let env = env_of("unified_attention", p);
        let a = unified_inputs(&env, &lens, 4, false);
        let out_a = unified_attention(&env, &a).unwrap()[0].f32s();
        // Same logical KV sequence stored in permuted blocks: identical output.
        let mut b = unified_inputs(&env, &lens, 4, true);
        let (hk, d, bs, mb) = (2, 72, 16, int(&env, "MB").unwrap());
        let (k, v) = (a[1].f32s(), a[2].f32s());
        let (mut k2, mut v2) = (k.clone(), v.clone());
        let bt = b[5].i64s();
        for (i, l) in lens.iter().enumerate() {
            for j in 0..l.div_ceil(bs) {
                let (src, dst) = (i * mb + j, bt[i * mb + j] as usize);
                let w = bs * hk * d;
                k2[dst * w..(dst + 1) * w].copy_from_slice(&k[src * w..(src + 1) * w]);
                v2[dst * w..(dst + 1) * w].copy_from_slice(&v[src * w..(src + 1) * w]);
            }
        }
        b[1] = bf("k_cache", a[1].dims.clone(), &k2);
        b[2] = bf("v_cache", a[2].dims.clone(), &v2);
        assert_eq!(out_a, unified_attention(&env, &b).unwrap()[0].f32s());
        // Changing a key/value after row r's position does not change row r (causal).
        let mut c = a.clone();
        let mut v3 = v.clone();
        let last = (2 * mb + 32 / bs) * bs + 32 % bs; // sequence 2, position 32
        for x in &mut v3[(last * hk) * d..(last * hk + hk) * d] {
            *x += 1.0;
        }
        c[2] = bf("v_cache", a[2].dims.clone(), &v3);
        let out_c = unified_attention(&env, &c).unwrap()[0].f32s();
        let first = 5 + 17;
        let row = |o: &[f32], r: usize| o[r * 4 * d..(r + 1) * 4 * d].to_vec();
        for r in 0..32 {
            assert_eq!(row(&out_a, first + r), row(&out_c, first + r), "row {r}");
        }
        assert_ne!(row(&out_a, first + 32), row(&out_c, first + 32));
    }

    #[test]
    fn forward_is_bidirectional_and_permutation_invariant() {
        let env = env_of("attention_forward", forward_shapes().remove(2));
        let (h, d, t) = (2, 72, 32);
        let mut rng = Rng::new(5);
        let q = rng.normal_in("bf16", t * h * d, 1.0);
        let k = rng.normal_in("bf16", t * h * d, 1.0);
        let v = rng.normal_in("bf16", t * h * d, 1.0);
        let cu = [0i64, 3, 23, 32];
        let mk = |k: &[f32], v: &[f32]| {
            vec![
                bf("q", vec![t, h, d], &q),
                bf("k", vec![t, h, d], k),
                bf("v", vec![t, h, d], v),
                i32t("cu_seqlens_q", &cu),
                i32t("cu_seqlens_k", &cu),
            ]
        };
        let out = attention_forward(&env, &mk(&k, &v)).unwrap()[0].f32s();
        // Reverse the key/value rows inside sequence 1 (rows 3..23): same output.
        let (mut k2, mut v2) = (k.clone(), v.clone());
        for r in 3..23 {
            let s = 3 + 22 - r;
            k2[r * h * d..(r + 1) * h * d].copy_from_slice(&k[s * h * d..(s + 1) * h * d]);
            v2[r * h * d..(r + 1) * h * d].copy_from_slice(&v[s * h * d..(s + 1) * h * d]);
        }
        let out2 = attention_forward(&env, &mk(&k2, &v2)).unwrap()[0].f32s();
        let worst = out
            .iter()
            .zip(&out2)
            .map(|(a, b)| (a - b).abs() / (1e-3 + a.abs()))
            .fold(0.0f32, f32::max);
        assert!(worst <= 2f32.powi(-7), "{worst}");
        // The first row depends on the last key of its sequence (no causal mask) but not on
        // keys of other sequences.
        let mut v3 = v.clone();
        for x in &mut v3[22 * h * d..23 * h * d] {
            *x += 4.0;
        }
        for x in &mut v3[23 * h * d..24 * h * d] {
            *x += 4.0;
        }
        let out3 = attention_forward(&env, &mk(&k, &v3)).unwrap()[0].f32s();
        assert_ne!(out[3 * h * d..4 * h * d], out3[3 * h * d..4 * h * d]);
        assert_eq!(out[..3 * h * d], out3[..3 * h * d]);
        // With zero queries every output row is the mean of its sequence's values.
        let zq = vec![0.0f32; t * h * d];
        let mut ins = mk(&k, &v);
        ins[0] = bf("q", vec![t, h, d], &zq);
        let out4 = attention_forward(&env, &ins).unwrap()[0].f32s();
        for j in 0..d {
            let mean = (0..3).map(|r| v[r * h * d + j] as f64).sum::<f64>() / 3.0;
            assert_eq!(out4[h * d + j], bf16(mean as f32));
        }
    }

    #[test]
    fn forward_single_token_returns_v() {
        let env = env_of("attention_forward", forward_shapes().remove(0));
        let (h, d) = (2, 128);
        let mut rng = Rng::new(6);
        let q = rng.normal_in("bf16", h * d, 1.0);
        let v = rng.normal_in("bf16", h * d, 1.0);
        let ins = vec![
            bf("q", vec![1, h, d], &q),
            bf("k", vec![1, h, d], &q),
            bf("v", vec![1, h, d], &v),
            i32t("cu_seqlens_q", &[0, 1]),
            i32t("cu_seqlens_k", &[0, 1]),
        ];
        assert_eq!(attention_forward(&env, &ins).unwrap()[0].f32s(), v);
    }

    /// paged_attention_decode against a dense computation from an independently built cache:
    /// the dense K/V are written into the x-split layout here, then read back by the operator.
    #[test]
    fn paged_decode_reads_the_x_split_layout_and_maps_gqa_groups() {
        let env = env_of("paged_attention_decode", paged_shapes().remove(0));
        let (s, l, hq, hk, d, bs, mb, nb) = (3, 40, 4, 2, 128, 16, 3, 3 * 3 + 16);
        assert_eq!(int(&env, "NB").unwrap(), nb);
        let x = 8;
        let mut rng = Rng::new(7);
        let mut q = rng.normal_in("bf16", s * hq * d, 1.0);
        // Heads 0 and 1 share KV head 0: give them the same query; head 2 (KV head 1) too.
        for i in 0..s {
            let h0 = q[(i * hq) * d..(i * hq + 1) * d].to_vec();
            q[(i * hq + 1) * d..(i * hq + 2) * d].copy_from_slice(&h0);
            q[(i * hq + 2) * d..(i * hq + 3) * d].copy_from_slice(&h0);
        }
        let dense_k = rng.normal_in("bf16", s * l * hk * d, 1.0); // [S, L, Hk, D]
        let dense_v = rng.normal_in("bf16", s * l * hk * d, 1.0);
        let mut kc = rng.normal_in("bf16", nb * hk * d * bs, 1.0); // garbage elsewhere
        let mut vc = rng.normal_in("bf16", nb * hk * d * bs, 1.0);
        let bt: Vec<i64> = (0..s * mb).map(|i| i as i64).collect();
        for i in 0..s {
            for p in 0..l {
                let (b, o) = (bt[i * mb + p / bs] as usize, p % bs);
                for g in 0..hk {
                    for dd in 0..d {
                        let src = ((i * l + p) * hk + g) * d + dd;
                        kc[(((b * hk + g) * (d / x) + dd / x) * bs + o) * x + dd % x] =
                            dense_k[src];
                        vc[((b * hk + g) * d + dd) * bs + o] = dense_v[src];
                    }
                }
            }
        }
        let ins = vec![
            bf("query", vec![s, hq, d], &q),
            bf("k_cache", vec![nb, hk, d / x, bs, x], &kc),
            bf("v_cache", vec![nb, hk, d, bs], &vc),
            HostTensor::from_i64("block_tables", "int32", vec![s, mb], &bt),
            i32t("seq_lens", &[l as i64; 3]),
        ];
        let out = paged_attention_decode(&env, &ins).unwrap()[0].f32s();
        for i in 0..s {
            for h in 0..hq {
                let g = h / (hq / hk);
                let qr = &q[(i * hq + h) * d..(i * hq + h + 1) * d];
                let o = attend(
                    qr,
                    l,
                    d,
                    1.0 / (d as f64).sqrt(),
                    |p| {
                        dense_k[((i * l + p) * hk + g) * d..((i * l + p) * hk + g + 1) * d].to_vec()
                    },
                    |p| {
                        dense_v[((i * l + p) * hk + g) * d..((i * l + p) * hk + g + 1) * d].to_vec()
                    },
                );
                let want: Vec<f32> = to_bf16(&o).collect();
                assert_eq!(&out[(i * hq + h) * d..(i * hq + h + 1) * d], &want[..]);
            }
            let row = |h: usize| out[(i * hq + h) * d..(i * hq + h + 1) * d].to_vec();
            assert_eq!(row(0), row(1), "same query, same KV head");
            assert_ne!(row(1), row(2), "same query, other KV head");
        }
    }

    #[test]
    fn mla_values_are_the_latent_part_and_rows_are_packed() {
        let env = env_of("mla_decode_attention", mla_shapes().remove(1));
        let (b, s, h, l, dqk) = (3, 7, 2, 128, 160);
        let mut rng = Rng::new(8);
        let q = rng.normal_in("bf16", b * h * dqk, 1.0);
        let kv = rng.normal_in("bf16", b * s * dqk, 1.0);
        let mk = |q: &[f32], kv: &[f32]| {
            vec![
                bf("q", vec![b, h, dqk], q),
                bf("kv_cache", vec![b * s, 1, dqk], kv),
                i32t("seq_lens", &[s as i64; 3]),
            ]
        };
        // Zero queries: out = bf16(mean of the latent part of the request's rows), whatever
        // the rope part holds.
        let zq = vec![0.0f32; b * h * dqk];
        let out = mla_decode_attention(&env, &mk(&zq, &kv)).unwrap()[0].f32s();
        for i in 0..b {
            for j in 0..l {
                let mean = (0..s)
                    .map(|r| kv[(i * s + r) * dqk + j] as f64)
                    .sum::<f64>()
                    / s as f64;
                assert_eq!(
                    out[(i * h + 1) * l + j],
                    bf16(mean as f32),
                    "req {i} dim {j}"
                );
            }
        }
        // The rope dims take part in the scores.
        let base = mla_decode_attention(&env, &mk(&q, &kv)).unwrap()[0].f32s();
        let mut kv2 = kv.clone();
        kv2[(s + 2) * dqk + l + 3] += 8.0; // request 1, row 2, a rope dim
        let changed = mla_decode_attention(&env, &mk(&q, &kv2)).unwrap()[0].f32s();
        assert_eq!(base[..h * l], changed[..h * l]);
        assert_ne!(base[h * l..2 * h * l], changed[h * l..2 * h * l]);
        assert_eq!(base[2 * h * l..], changed[2 * h * l..]);
    }
    /// Every kernel file of these operators has a launch plan that resolves on every suite shape
    /// and every reduced shape, for each value of each tune parameter: grid within the hardware
    /// limits, shared memory within an H200 block's 227 KiB (the offline compile command checks
    /// NVRTC but not the plan against shapes).
    #[test]
    fn launch_plans_resolve_on_every_shape() {
        use crate::contract::plan;
        let suite = Suite::load(SuiteSource::Embedded).unwrap();
        let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("problems");
        for op in ops() {
            let p = suite.problem(op.name).unwrap();
            let mut shapes = p.shapes.clone();
            for (k, params) in (op.reduced)().into_iter().enumerate() {
                shapes.push(Shape {
                    id: 9000 + k as u32,
                    params,
                    note: String::new(),
                    production_us: Default::default(),
                    line: 0,
                });
            }
            for file in ["reference.cu", "baseline.cu", "inputs.cu"] {
                let Ok(src) = std::fs::read_to_string(root.join(op.name).join(file)) else {
                    assert_ne!(file, "reference.cu", "{}: no reference", op.name);
                    assert_ne!(file, "baseline.cu", "{}: no baseline", op.name);
                    continue;
                };
                let pl = plan::parse(&src).unwrap_or_else(|e| panic!("{}/{file}: {e:?}", op.name));
                let mut variants = vec![pl.defines.clone()];
                for (k, vals) in &pl.tune {
                    for v in vals {
                        let mut d = pl.defines.clone();
                        d.insert(k.clone(), v.clone());
                        variants.push(d);
                    }
                }
                let scratch: Vec<String> = pl.scratch.iter().map(|s| s.name.clone()).collect();
                let is_buf = |n: &str| {
                    p.inputs.iter().any(|t| t.name == n)
                        || p.outputs.iter().any(|t| t.name == n)
                        || scratch.iter().any(|s| s == n)
                };
                for s in &shapes {
                    let mut env = p.env(s).unwrap();
                    env.insert("seed".into(), Value::Int(1));
                    env.insert("draw".into(), Value::Int(0));
                    for d in &variants {
                        let e = pl.env(&env, d);
                        let r = pl
                            .resolve(&e, &is_buf)
                            .unwrap_or_else(|e| panic!("{}/{file} shape {}: {e:?}", op.name, s.id));
                        for l in r {
                            assert!(
                                l.grid[1] <= 65535 && l.grid[2] <= 65535,
                                "{}/{file}",
                                op.name
                            );
                            assert!(
                                l.smem <= 227 * 1024,
                                "{}/{file} shape {}: smem {}",
                                op.name,
                                s.id,
                                l.smem
                            );
                        }
                    }
                }
            }
        }
    }
}
