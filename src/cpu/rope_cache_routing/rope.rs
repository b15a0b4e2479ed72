//! Rotary position embeddings: mrope (sectioned multimodal) and fused_qkv_rope.

use super::*;

// ---------------------------------------------------------------- mrope

/// (T, Hq, Hk, D, R, sections, interleaved, neox)
type MropeShape = (i128, i128, i128, i128, i128, [i128; 3], bool, bool);

pub(super) fn mrope_shapes() -> Vec<BTreeMap<String, Value>> {
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
#[allow(
    clippy::too_many_arguments,
    reason = "the reference kernel's arguments, one parameter each"
)]
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

pub(super) fn mrope(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
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

pub(super) fn fused_qkv_rope_shapes() -> Vec<BTreeMap<String, Value>> {
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
pub(super) fn fused_qkv_rope(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
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

#[cfg(test)]
mod tests {
    use super::super::tests::{bf16s, env_of, suite};
    use super::*;
    use crate::suite::Problem;

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
}
