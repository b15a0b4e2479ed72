//! gated_delta_rule_update: the recurrent (decode) step of the gated delta rule on a state pool.

use super::*;

pub(super) fn gdr_shapes() -> Vec<BTreeMap<String, Value>> {
    // (T, Hv, Hq, K, V, S, B): pure decode, GQA ratio 2 and 3, a ragged clamp (Hv = 5, Hq = 2:
    // r = 2, head 4 → min(2, 1) = 1), odd K/V, two sequences, untouched pool rows.
    [
        (1, 4, 2, 128, 128, 2, 1),
        (37, 8, 4, 128, 128, 3, 1),
        (70, 6, 2, 128, 128, 2, 1),
        (9, 5, 2, 48, 80, 4, 2),
    ]
    .iter()
    .map(|&(t, hv, hq, k, v, s, b)| {
        let mut p: BTreeMap<String, Value> = ints(&[
            ("token_count", t),
            ("num_v_heads", hv),
            ("num_q_heads", hq),
            ("key_dim", k),
            ("value_dim", v),
            ("state_count", s),
            ("batch_size", b),
        ])
        .into_iter()
        .collect();
        p.insert("softplus_beta".into(), Value::Float(1.0));
        p.insert("softplus_threshold".into(), Value::Float(20.0));
        p.insert("use_qk_l2norm".into(), Value::Bool(true));
        p
    })
    .collect()
}

fn softplus(z: f32, beta: f32, threshold: f32) -> f32 {
    if beta * z > threshold {
        z
    } else {
        (beta * z).exp().ln_1p() / beta
    }
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// x / max(‖x‖₂, 1e-6) (fp32 sum of squares in index order).
fn l2_normalize(x: &[f32]) -> Vec<f32> {
    let n = x.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-6);
    x.iter().map(|v| v / n).collect()
}

/// Dimensions of gated_delta_rule_update.
#[derive(Clone, Copy, Debug)]
struct GdrDims {
    b: usize,
    t: usize,
    hv: usize,
    hq: usize,
    k: usize,
    v: usize,
    s: usize,
}

/// Inputs of gated_delta_rule_update as f32 (exact widenings), problem order.
struct GdrIn {
    a_log: Vec<f32>,
    a: Vec<f32>,
    dt_bias: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    b: Vec<f32>,
    pool: Vec<f32>,
    idx: Vec<i64>,
}

#[allow(
    clippy::too_many_arguments,
    reason = "the reference kernel's arguments, one parameter each"
)]
fn gdr_compute(
    d: GdrDims,
    x: &GdrIn,
    scale: f32,
    beta: f32,
    threshold: f32,
    l2: bool,
) -> Result<(Vec<f32>, Vec<f32>), String> {
    let GdrDims {
        b,
        t,
        hv,
        hq,
        k,
        v,
        s,
    } = d;
    let mut out = vec![0.0f32; b * t * hv * v];
    let mut fin = x.pool.clone();
    let row_len = hv * k * v;
    for bi in 0..b {
        let row = x.idx[bi];
        if row < 0 || row as usize >= s {
            return Err(format!("state index {row} outside the pool of {s} rows"));
        }
        let row = row as usize;
        for m in 0..hv {
            let j = qk_head(m, hv, hq);
            let base = row * row_len + m * k * v;
            let mut hs: Vec<f32> = x.pool[base..base + k * v].to_vec();
            let am = x.a_log[m].exp();
            for tt in 0..t {
                let tok = bi * t + tt;
                let z = x.a[tok * hv + m] + x.dt_bias[m];
                let gamma = -am * softplus(z, beta, threshold);
                let wb = sigmoid(x.b[tok * hv + m]);
                let qr = &x.q[(tok * hq + j) * k..(tok * hq + j + 1) * k];
                let kr = &x.k[(tok * hq + j) * k..(tok * hq + j + 1) * k];
                let (qh, kh) = if l2 {
                    (l2_normalize(qr), l2_normalize(kr))
                } else {
                    (qr.to_vec(), kr.to_vec())
                };
                let decay = gamma.exp();
                for h in hs.iter_mut() {
                    *h *= decay;
                }
                for col in 0..v {
                    let mut p = 0.0f32;
                    for kk in 0..k {
                        p += hs[kk * v + col] * kh[kk];
                    }
                    let delta = (x.v[(tok * hv + m) * v + col] - p) * wb;
                    let mut o = 0.0f32;
                    for kk in 0..k {
                        hs[kk * v + col] += kh[kk] * delta;
                        o += hs[kk * v + col] * (qh[kk] * scale);
                    }
                    out[(tok * hv + m) * v + col] = bf16(o);
                }
            }
            fin[base..base + k * v].copy_from_slice(&hs);
        }
    }
    Ok((out, fin))
}

pub(super) fn gated_delta_rule_update(
    env: &Env,
    inputs: &[HostTensor],
) -> Result<Vec<HostTensor>, String> {
    let d = GdrDims {
        b: int(env, "B")?,
        t: int(env, "T")?,
        hv: int(env, "Hv")?,
        hq: int(env, "Hq")?,
        k: int(env, "K")?,
        v: int(env, "V")?,
        s: int(env, "S")?,
    };
    if inputs.len() != 9 {
        return Err(format!("expected 9 inputs, got {}", inputs.len()));
    }
    let x = GdrIn {
        a_log: inputs[0].f32s(),
        a: inputs[1].f32s(),
        dt_bias: inputs[2].f32s(),
        q: inputs[3].f32s(),
        k: inputs[4].f32s(),
        v: inputs[5].f32s(),
        b: inputs[6].f32s(),
        pool: inputs[7].f32s(),
        idx: inputs[8].i64s(),
    };
    let (out, fin) = gdr_compute(
        d,
        &x,
        float(env, "scale")?,
        float(env, "softplus_beta")?,
        float(env, "softplus_threshold")?,
        int(env, "use_qk_l2norm")? != 0,
    )?;
    Ok(vec![
        HostTensor::from_f32("out", "bf16", vec![d.b, d.t, d.hv, d.v], &out),
        HostTensor::from_f32("final_state", "fp32", vec![d.s, d.hv, d.k, d.v], &fin),
    ])
}

#[cfg(test)]
mod tests {
    use super::super::tests::max_abs_diff;
    use super::*;

    fn gdr_random(d: GdrDims, seed: u64) -> GdrIn {
        let mut r = Rng::new(seed);
        let GdrDims {
            b,
            t,
            hv,
            hq,
            k,
            v,
            s,
        } = d;
        GdrIn {
            a_log: r.normal_in("fp32", hv, 0.02),
            a: r.normal_in("bf16", b * t * hv, 0.02),
            dt_bias: r.normal_in("bf16", hv, 0.02),
            q: r.normal_in("bf16", b * t * hq * k, 0.02),
            k: r.normal_in("bf16", b * t * hq * k, 0.02),
            v: r.normal_in("bf16", b * t * hv * v, 0.02),
            b: r.normal_in("bf16", b * t * hv, 1.0),
            pool: r.normal_in("fp32", s * hv * k * v, 0.02),
            idx: (0..b as i64).map(|i| i % s as i64).collect(),
        }
    }

    const GDR: GdrDims = GdrDims {
        b: 1,
        t: 6,
        hv: 4,
        hq: 2,
        k: 16,
        v: 8,
        s: 3,
    };

    fn gdr(x: &GdrIn) -> (Vec<f32>, Vec<f32>) {
        gdr_compute(GDR, x, 0.25, 1.0, 20.0, true).unwrap()
    }

    #[test]
    fn gdr_returns_the_full_pool_with_only_the_indexed_row_replaced() {
        let x = gdr_random(GDR, 1);
        let (_, fin) = gdr(&x);
        let row = GDR.hv * GDR.k * GDR.v;
        assert!(
            fin[row..] == x.pool[row..],
            "rows 1 and 2 must be copied unchanged"
        );
        assert!(
            max_abs_diff(&fin[..row], &x.pool[..row]) > 1e-3,
            "row 0 must be updated"
        );
        // Row 2 selected, holding row 0's initial state: rows 0 and 1 stay, row 2 gets the same
        // update as before.
        let mut y = gdr_random(GDR, 1);
        y.idx = vec![2];
        let r0 = y.pool[..row].to_vec();
        y.pool[2 * row..].copy_from_slice(&r0);
        let (_, fin2) = gdr_compute(GDR, &y, 0.25, 1.0, 20.0, true).unwrap();
        assert!(fin2[..2 * row] == y.pool[..2 * row]);
        assert!(
            fin2[2 * row..] == fin[..row],
            "the update does not depend on the row used"
        );
    }

    #[test]
    fn gdr_without_writes_only_decays_the_state() {
        // b = −100: sigmoid ≈ 4e-44, so H_T = H_0 · Π exp(γ_t) and nothing is written.
        let mut x = gdr_random(GDR, 2);
        x.b.iter_mut().for_each(|b| *b = -100.0);
        let (_, fin) = gdr(&x);
        for m in 0..GDR.hv {
            let am = x.a_log[m].exp();
            let total: f32 = (0..GDR.t)
                .map(|t| -am * softplus(x.a[t * GDR.hv + m] + x.dt_bias[m], 1.0, 20.0))
                .sum();
            let f = total.exp();
            assert!(f < 0.999, "the decay must be effective: {f}");
            for i in 0..GDR.k * GDR.v {
                let o = m * GDR.k * GDR.v + i;
                assert!((fin[o] - x.pool[o] * f).abs() <= 1e-6 * x.pool[o].abs() + 1e-9);
            }
        }
    }

    #[test]
    fn gdr_delta_rule_writes_the_value_at_the_normalized_key() {
        // Full write strength (b large): after one token H·k̂ = v in exact arithmetic (‖k̂‖ = 1)
        // whatever the decay (≈ 0.5 here), because the decay comes before the update; and
        // out = bf16(σ · H·q̂).
        let d = GdrDims { t: 1, ..GDR };
        let mut x = gdr_random(d, 3);
        x.b.iter_mut().for_each(|b| *b = 60.0);
        let (out, fin) = gdr_compute(d, &x, 0.25, 1.0, 20.0, true).unwrap();
        for m in 0..d.hv {
            let j = qk_head(m, d.hv, d.hq);
            let kh = l2_normalize(&x.k[j * d.k..(j + 1) * d.k]);
            let qh = l2_normalize(&x.q[j * d.k..(j + 1) * d.k]);
            for col in 0..d.v {
                let hk: f32 = (0..d.k)
                    .map(|kk| fin[(m * d.k + kk) * d.v + col] * kh[kk])
                    .sum();
                let want = x.v[m * d.v + col];
                assert!(
                    (hk - want).abs() < 1e-6,
                    "head {m} col {col}: {hk} vs {want}"
                );
                let o: f32 = (0..d.k)
                    .map(|kk| fin[(m * d.k + kk) * d.v + col] * qh[kk] * 0.25)
                    .sum();
                assert!((out[m * d.v + col] - o).abs() <= o.abs() / 128.0 + 1e-9);
            }
        }
    }

    #[test]
    fn gdr_is_invariant_to_the_scale_of_q_and_k() {
        let x = gdr_random(GDR, 4);
        let (out, fin) = gdr(&x);
        let mut y = gdr_random(GDR, 4);
        y.q.iter_mut().for_each(|v| *v *= 4.0);
        y.k.iter_mut().for_each(|v| *v *= 0.5);
        let (out2, fin2) = gdr(&y);
        assert!(
            max_abs_diff(&out, &out2) <= 2e-5,
            "{}",
            max_abs_diff(&out, &out2)
        );
        assert!(max_abs_diff(&fin, &fin2) <= 1e-6);
        // Without the normalization the same change matters.
        let (out3, _) = gdr_compute(GDR, &y, 0.25, 1.0, 20.0, false).unwrap();
        assert!(max_abs_diff(&out, &out3) > 1e-4);
    }

    #[test]
    fn softplus_follows_the_threshold_rule() {
        assert_eq!(softplus(25.0, 1.0, 20.0), 25.0);
        assert!((softplus(0.0, 1.0, 20.0) - std::f32::consts::LN_2).abs() < 1e-7);
        assert!((softplus(-3.0, 1.0, 20.0) - (1.0 + (-3.0f32).exp()).ln()).abs() < 1e-7);
        assert_eq!(qk_head(4, 5, 2), 1);
        assert_eq!(qk_head(5, 32, 16), 2);
        assert_eq!(qk_head(3, 4, 4), 3);
    }
}
