//! The chunked operators: chunk_gated_delta_rule_state (the state pass) and
//! chunk_delta_rule_output.

use super::*;

pub(super) fn chunk_state_shapes() -> Vec<BTreeMap<String, Value>> {
    // (T, Hv, Hk, K, V, S, Cs): partial last chunk, a single chunk, many small chunks with a
    // ragged head clamp (Hv = 6, Hk = 4: r = 1, heads 4 and 5 use key head 3), odd K/V.
    [
        (130, 4, 2, 128, 128, 3, 64),
        (64, 2, 1, 128, 128, 2, 64),
        (75, 6, 4, 128, 128, 2, 16),
        (41, 3, 1, 40, 72, 3, 8),
    ]
    .iter()
    .map(|&(t, hv, hk, k, v, s, cs)| {
        ints(&[
            ("token_count", t),
            ("num_v_heads", hv),
            ("num_k_heads", hk),
            ("key_dim", k),
            ("value_dim", v),
            ("state_count", s),
            ("chunk_size", cs),
            ("batch_size", 1),
        ])
        .into_iter()
        .collect()
    })
    .collect()
}

pub(super) fn chunk_output_shapes() -> Vec<BTreeMap<String, Value>> {
    // (T, Hv, Hq, K, V, Cs, B)
    [
        (64, 4, 2, 128, 128, 64, 1),
        (150, 4, 2, 128, 128, 64, 1),
        (37, 3, 2, 128, 128, 16, 1),
        (23, 2, 1, 40, 56, 8, 2),
    ]
    .iter()
    .map(|&(t, hv, hq, k, v, cs, b)| {
        ints(&[
            ("token_count", t),
            ("num_v_heads", hv),
            ("num_q_heads", hq),
            ("key_dim", k),
            ("value_dim", v),
            ("chunk_size", cs),
            ("batch_size", b),
        ])
        .into_iter()
        .collect()
    })
    .collect()
}

/// Dimensions of the chunked operators.
#[derive(Clone, Copy, Debug)]
struct ChunkDims {
    b: usize,
    t: usize,
    hv: usize,
    hq: usize,
    k: usize,
    v: usize,
    cs: usize,
}

impl ChunkDims {
    fn n(&self) -> usize {
        self.t.div_ceil(self.cs)
    }
}

/// (h, v_new, final_state) of the state pass.
type StateOut = (Vec<f32>, Vec<f32>, Vec<f32>);

/// The state pass.
#[allow(
    clippy::too_many_arguments,
    reason = "the reference kernel's arguments, one parameter each"
)]
fn chunk_state_compute(
    d: ChunkDims,
    s: usize,
    kx: &[f32],
    w: &[f32],
    u: &[f32],
    g: &[f32],
    pool: &[f32],
    idx: &[i64],
) -> Result<StateOut, String> {
    let ChunkDims {
        b,
        t,
        hv,
        hq: hk,
        k,
        v,
        cs,
    } = d;
    let n = d.n();
    let mut h_out = vec![0.0f32; b * n * hv * k * v];
    let mut v_new = vec![0.0f32; b * t * hv * v];
    let mut fin = pool.to_vec();
    let row_len = hv * k * v;
    for bi in 0..b {
        let row = idx[bi];
        if row < 0 || row as usize >= s {
            return Err(format!("state index {row} outside the pool of {s} rows"));
        }
        let row = row as usize;
        for m in 0..hv {
            let j = qk_head(m, hv, hk);
            let base = row * row_len + m * k * v;
            let mut hs: Vec<f32> = pool[base..base + k * v].to_vec();
            for c in 0..n {
                let (t0, t1) = (c * cs, ((c + 1) * cs).min(t));
                let hb: Vec<f32> = hs.iter().map(|x| bf16(*x)).collect();
                let ho = ((bi * n + c) * hv + m) * k * v;
                h_out[ho..ho + k * v].copy_from_slice(&hb);
                let gl = g[(bi * t + t1 - 1) * hv + m];
                let mut vs = vec![0.0f32; (t1 - t0) * v];
                for tt in t0..t1 {
                    let tok = bi * t + tt;
                    let wr = &w[(tok * hv + m) * k..(tok * hv + m + 1) * k];
                    let dd = gl - g[tok * hv + m];
                    let f = if dd <= 0.0 { dd.exp() } else { 0.0 };
                    for col in 0..v {
                        let mut acc = 0.0f32;
                        for kk in 0..k {
                            acc += wr[kk] * hb[kk * v + col];
                        }
                        let vb = u[(tok * hv + m) * v + col] - acc;
                        v_new[(tok * hv + m) * v + col] = bf16(vb);
                        vs[(tt - t0) * v + col] = bf16(vb * f);
                    }
                }
                let el = gl.exp();
                for kk in 0..k {
                    for col in 0..v {
                        let mut acc = 0.0f32;
                        for tt in t0..t1 {
                            acc += kx[((bi * t + tt) * hk + j) * k + kk] * vs[(tt - t0) * v + col];
                        }
                        hs[kk * v + col] = hs[kk * v + col] * el + acc;
                    }
                }
            }
            fin[base..base + k * v].copy_from_slice(&hs);
        }
    }
    Ok((h_out, v_new, fin))
}

fn chunk_dims(env: &Env, heads_key: &str) -> Result<ChunkDims, String> {
    Ok(ChunkDims {
        b: int(env, "B")?,
        t: int(env, "T")?,
        hv: int(env, "Hv")?,
        hq: int(env, heads_key)?,
        k: int(env, "K")?,
        v: int(env, "V")?,
        cs: int(env, "Cs")?,
    })
}

pub(super) fn chunk_gated_delta_rule_state(
    env: &Env,
    inputs: &[HostTensor],
) -> Result<Vec<HostTensor>, String> {
    let d = chunk_dims(env, "Hk")?;
    let s = int(env, "S")?;
    if inputs.len() != 6 {
        return Err(format!("expected 6 inputs, got {}", inputs.len()));
    }
    let (h, v_new, fin) = chunk_state_compute(
        d,
        s,
        &inputs[0].f32s(),
        &inputs[1].f32s(),
        &inputs[2].f32s(),
        &inputs[3].f32s(),
        &inputs[4].f32s(),
        &inputs[5].i64s(),
    )?;
    Ok(vec![
        HostTensor::from_f32("h", "bf16", vec![d.b, d.n(), d.hv, d.k, d.v], &h),
        HostTensor::from_f32("v_new", "bf16", vec![d.b, d.t, d.hv, d.v], &v_new),
        HostTensor::from_f32("final_state", "fp32", vec![s, d.hv, d.k, d.v], &fin),
    ])
}

/// The chunked output; returns out (bf16 values as f32).
fn chunk_output_compute(
    d: ChunkDims,
    scale: f32,
    q: &[f32],
    kx: &[f32],
    vx: &[f32],
    h: &[f32],
    g: &[f32],
) -> Vec<f32> {
    let ChunkDims {
        b,
        t,
        hv,
        hq,
        k,
        v,
        cs,
    } = d;
    let n = d.n();
    let mut out = vec![0.0f32; b * t * hv * v];
    for bi in 0..b {
        for m in 0..hv {
            let j = qk_head(m, hv, hq);
            for tt in 0..t {
                let c = tt / cs;
                let tok = bi * t + tt;
                let qr = &q[(tok * hq + j) * k..(tok * hq + j + 1) * k];
                let gt = g[tok * hv + m];
                // A[t, s] for s in the chunk, s ≤ t (padded keys come after every real query).
                let mut a = Vec::new();
                for ss in c * cs..=tt {
                    let toks = bi * t + ss;
                    let dd = gt - g[toks * hv + m];
                    let val = if dd <= 0.0 {
                        let kr = &kx[(toks * hq + j) * k..(toks * hq + j + 1) * k];
                        let dot: f32 = qr.iter().zip(kr).map(|(x, y)| x * y).sum();
                        bf16(dot * dd.exp())
                    } else {
                        0.0
                    };
                    a.push((toks, val));
                }
                let hc = ((bi * n + c) * hv + m) * k * v;
                for col in 0..v {
                    let mut inter = 0.0f32;
                    for kk in 0..k {
                        inter += qr[kk] * h[hc + kk * v + col];
                    }
                    inter *= gt.exp();
                    let mut intra = 0.0f32;
                    for (toks, val) in &a {
                        intra += val * vx[(toks * hv + m) * v + col];
                    }
                    out[(tok * hv + m) * v + col] = bf16(scale * (inter + intra));
                }
            }
        }
    }
    out
}

pub(super) fn chunk_delta_rule_output(
    env: &Env,
    inputs: &[HostTensor],
) -> Result<Vec<HostTensor>, String> {
    let d = chunk_dims(env, "Hq")?;
    if inputs.len() != 5 {
        return Err(format!("expected 5 inputs, got {}", inputs.len()));
    }
    let out = chunk_output_compute(
        d,
        float(env, "scale")?,
        &inputs[0].f32s(),
        &inputs[1].f32s(),
        &inputs[2].f32s(),
        &inputs[3].f32s(),
        &inputs[4].f32s(),
    );
    Ok(vec![HostTensor::from_f32(
        "out",
        "bf16",
        vec![d.b, d.t, d.hv, d.v],
        &out,
    )])
}

#[cfg(test)]
mod tests {
    use super::super::tests::max_abs_diff;
    use super::*;

    const CST: ChunkDims = ChunkDims {
        b: 1,
        t: 11,
        hv: 2,
        hq: 1,
        k: 8,
        v: 6,
        cs: 4,
    };

    struct CsIn {
        k: Vec<f32>,
        w: Vec<f32>,
        u: Vec<f32>,
        g: Vec<f32>,
        pool: Vec<f32>,
    }

    fn cs_random(seed: u64, s: usize) -> CsIn {
        let mut r = Rng::new(seed);
        let d = CST;
        CsIn {
            k: r.normal_in("bf16", d.t * d.hq * d.k, 0.3),
            w: r.normal_in("bf16", d.t * d.hv * d.k, 0.3),
            u: r.normal_in("bf16", d.t * d.hv * d.v, 0.3),
            g: (0..d.t * d.hv).map(|_| -r.uniform()).collect(),
            pool: r.normal_in("fp32", s * d.hv * d.k * d.v, 0.3),
        }
    }

    fn cs(x: &CsIn, s: usize, idx: i64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        chunk_state_compute(CST, s, &x.k, &x.w, &x.u, &x.g, &x.pool, &[idx]).unwrap()
    }

    #[test]
    fn chunk_state_starts_from_the_pool_row_and_leaves_other_rows() {
        let x = cs_random(5, 3);
        let (h, _, fin) = cs(&x, 3, 1);
        let row = CST.hv * CST.k * CST.v;
        assert!(fin[..row] == x.pool[..row]);
        assert!(fin[2 * row..] == x.pool[2 * row..]);
        assert!(max_abs_diff(&fin[row..2 * row], &x.pool[row..2 * row]) > 1e-3);
        // h[chunk 0] = bf16(initial state) for every head.
        let n = CST.n();
        assert_eq!(n, 3);
        for m in 0..CST.hv {
            for i in 0..CST.k * CST.v {
                assert_eq!(
                    h[m * CST.k * CST.v + i],
                    bf16(x.pool[row + m * CST.k * CST.v + i])
                );
            }
        }
    }

    #[test]
    fn chunk_state_without_gates_and_w_accumulates_k_outer_u() {
        // g = 0 (no decay, f = 1), w = 0: v_new = u and H_final = H_0 + Σ_t k_t ⊗ u_t.
        let mut x = cs_random(6, 1);
        x.g.iter_mut().for_each(|g| *g = 0.0);
        x.w.iter_mut().for_each(|w| *w = 0.0);
        let (_, v_new, fin) = cs(&x, 1, 0);
        assert!(v_new == x.u);
        for m in 0..CST.hv {
            for kk in 0..CST.k {
                for col in 0..CST.v {
                    let mut want = x.pool[(m * CST.k + kk) * CST.v + col] as f64;
                    for t in 0..CST.t {
                        want += (x.k[t * CST.k + kk] * x.u[(t * CST.hv + m) * CST.v + col]) as f64;
                    }
                    let got = fin[(m * CST.k + kk) * CST.v + col] as f64;
                    assert!((got - want).abs() < 1e-5, "{got} vs {want}");
                }
            }
        }
    }

    #[test]
    fn chunk_state_uses_the_rounded_state_and_drops_positive_gate_differences() {
        let x = cs_random(7, 1);
        let (h, v_new, fin) = cs(&x, 1, 0);
        // v_new of the second chunk (tokens 4..8) = bf16(u − w·h[1]) with h[1] already bf16.
        let d = CST;
        for t in 4..8 {
            for m in 0..d.hv {
                for col in 0..d.v {
                    let acc: f32 = (0..d.k)
                        .map(|kk| {
                            x.w[(t * d.hv + m) * d.k + kk] * h[((d.hv + m) * d.k + kk) * d.v + col]
                        })
                        .sum();
                    let want = bf16(x.u[(t * d.hv + m) * d.v + col] - acc);
                    assert_eq!(v_new[(t * d.hv + m) * d.v + col], want);
                }
            }
        }
        // A token of the last chunk (8..11, t_L = 10) whose gate is below g[t_L] contributes
        // nothing: changing its u changes v_new but not the final state.
        let mut y = cs_random(7, 1);
        let (m, t) = (0, 8);
        y.g[10 * d.hv + m] = -0.2;
        y.g[t * d.hv + m] = -0.9; // g_L − g_t = 0.7 > 0 → f = 0
        let (_, vn1, f1) = cs(&y, 1, 0);
        y.u[(t * d.hv + m) * d.v] += 0.5;
        let (_, vn2, f2) = cs(&y, 1, 0);
        assert_ne!(vn1[(t * d.hv + m) * d.v], vn2[(t * d.hv + m) * d.v]);
        assert!(f1 == f2);
        // With the opposite order it does contribute.
        y.g[t * d.hv + m] = -0.1;
        let (_, _, f3) = cs(&y, 1, 0);
        y.u[(t * d.hv + m) * d.v] -= 0.5;
        let (_, _, f4) = cs(&y, 1, 0);
        assert!(max_abs_diff(&f3, &f4) > 1e-3);
        let _ = fin;
    }

    const CO: ChunkDims = ChunkDims {
        b: 1,
        t: 10,
        hv: 2,
        hq: 1,
        k: 8,
        v: 4,
        cs: 4,
    };

    struct CoIn {
        q: Vec<f32>,
        k: Vec<f32>,
        v: Vec<f32>,
        h: Vec<f32>,
        g: Vec<f32>,
    }

    fn co_random(seed: u64) -> CoIn {
        let mut r = Rng::new(seed);
        let d = CO;
        CoIn {
            q: r.normal_in("bf16", d.t * d.hq * d.k, 0.5),
            k: r.normal_in("bf16", d.t * d.hq * d.k, 0.5),
            v: r.normal_in("bf16", d.t * d.hv * d.v, 0.5),
            h: r.normal_in("bf16", d.n() * d.hv * d.k * d.v, 0.5),
            g: (0..d.t * d.hv).map(|_| -r.uniform()).collect(),
        }
    }

    fn co(x: &CoIn) -> Vec<f32> {
        chunk_output_compute(CO, 0.5, &x.q, &x.k, &x.v, &x.h, &x.g)
    }

    #[test]
    fn chunk_output_diagonal_and_inter_terms() {
        // h = 0: the first token of each chunk only sees itself with factor exp(0) = 1.
        let mut x = co_random(8);
        x.h.iter_mut().for_each(|v| *v = 0.0);
        let out = co(&x);
        let d = CO;
        for t in [0usize, 4, 8] {
            for m in 0..d.hv {
                let dot: f32 = (0..d.k)
                    .map(|kk| x.q[t * d.k + kk] * x.k[t * d.k + kk])
                    .sum();
                for col in 0..d.v {
                    let want = bf16(0.5 * (bf16(dot) * x.v[(t * d.hv + m) * d.v + col]));
                    assert_eq!(out[(t * d.hv + m) * d.v + col], want);
                }
            }
        }
        // k = 0: out = bf16(σ · exp(g_t) · q_t · h[chunk]).
        let mut y = co_random(9);
        y.k.iter_mut().for_each(|v| *v = 0.0);
        let out = co(&y);
        for t in 0..d.t {
            for m in 0..d.hv {
                for col in 0..d.v {
                    let qh: f32 = (0..d.k)
                        .map(|kk| {
                            y.q[t * d.k + kk]
                                * y.h[(((t / d.cs) * d.hv + m) * d.k + kk) * d.v + col]
                        })
                        .sum();
                    let want = bf16(0.5 * (qh * y.g[t * d.hv + m].exp()));
                    assert_eq!(out[(t * d.hv + m) * d.v + col], want);
                }
            }
        }
    }

    #[test]
    fn chunk_output_is_causal_within_chunks_and_applies_the_gate_mask() {
        let d = CO;
        let x = co_random(10);
        let base = co(&x);
        // A later token (5) of chunk 1 changes nothing before it; a token of chunk 2 changes
        // nothing in chunk 1 (the state h is an input).
        let mut y = co_random(10);
        for kk in 0..d.k {
            y.k[5 * d.k + kk] += 0.25;
        }
        y.v[(9 * d.hv) * d.v] += 0.25;
        let out = co(&y);
        let row = d.hv * d.v;
        assert!(out[..5 * row] == base[..5 * row]);
        assert!(out[5 * row..6 * row] != base[5 * row..6 * row]);
        // Token 6 of chunk 1 with g_6 > g_4 ignores v_4 (below the diagonal, masked by the gate).
        let mut z = co_random(10);
        let m = 1;
        z.g[6 * d.hv + m] = -0.1;
        z.g[4 * d.hv + m] = -0.8;
        let o1 = co(&z);
        z.v[(4 * d.hv + m) * d.v + 2] += 1.0;
        let o2 = co(&z);
        assert_eq!(o1[(6 * d.hv + m) * d.v + 2], o2[(6 * d.hv + m) * d.v + 2]);
        assert_ne!(o1[(4 * d.hv + m) * d.v + 2], o2[(4 * d.hv + m) * d.v + 2]);
        // With g_6 ≤ g_4 the pair counts.
        z.g[6 * d.hv + m] = -0.9;
        let o3 = co(&z);
        z.v[(4 * d.hv + m) * d.v + 2] -= 1.0;
        let o4 = co(&z);
        assert_ne!(o3[(6 * d.hv + m) * d.v + 2], o4[(6 * d.hv + m) * d.v + 2]);
    }
}
