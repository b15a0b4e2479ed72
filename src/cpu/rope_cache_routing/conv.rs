//! causal_conv1d: the short causal convolution with an initial state and SiLU.

use super::*;

pub(super) fn causal_conv1d_shapes() -> Vec<BTreeMap<String, Value>> {
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
pub(super) fn causal_conv1d(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
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
    use super::super::tests::{bf16s, env_of, suite};
    use super::*;
    use crate::suite::Problem;

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
