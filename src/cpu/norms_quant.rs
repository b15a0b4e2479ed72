//! layer_norm, l2_norm, gated_rms_norm, fused_qk_rmsnorm, fused_rmsnorm_quant,
//! fp8_dynamic_per_token_quant, per_token_group_quant_fp8, and the fp32 → fp8 encoders
//! (float8_e4m3fn, float8_e4m3fnuz) of the operator specifications.

use super::fp8::*;
use super::*;

pub fn ops() -> Vec<CpuOp> {
    vec![
        CpuOp {
            name: "layer_norm",
            run: layer_norm,
            reduced: layer_norm_shapes,
        },
        CpuOp {
            name: "l2_norm",
            run: l2_norm,
            reduced: l2_norm_shapes,
        },
        CpuOp {
            name: "gated_rms_norm",
            run: gated_rms_norm,
            reduced: gated_shapes,
        },
        CpuOp {
            name: "fused_qk_rmsnorm",
            run: fused_qk_rmsnorm,
            reduced: qk_shapes,
        },
        CpuOp {
            name: "fused_rmsnorm_quant",
            run: fused_rmsnorm_quant,
            reduced: rmsnorm_quant_shapes,
        },
        CpuOp {
            name: "fp8_dynamic_per_token_quant",
            run: fp8_dynamic_per_token_quant,
            reduced: per_token_shapes,
        },
        CpuOp {
            name: "per_token_group_quant_fp8",
            run: per_token_group_quant_fp8,
            reduced: group_shapes,
        },
    ]
}

fn silu(z: f32) -> f32 {
    z / (1.0 + (-z).exp())
}

/// Σ v² in f64 (each square of a bf16/fp16 value is exact in f32 and in f64).
fn sum_sq(row: &[f32]) -> f64 {
    row.iter().map(|v| (*v as f64) * (*v as f64)).sum()
}

/// rsqrt(v) rounded once to f32 (the GPU's rsqrtf may differ by an ulp).
fn rsqrt(v: f32) -> f32 {
    (1.0 / (v as f64).sqrt()) as f32
}

// ---------------------------------------------------------------------------------------------
// reduced shapes

fn layer_norm_shapes() -> Vec<BTreeMap<String, Value>> {
    let l = |v: &[i128]| {
        params(&[(
            "shape",
            Value::List(v.iter().map(|x| Value::Int(*x)).collect()),
        )])
    };
    vec![l(&[5, 1, 1152]), l(&[1, 2048]), l(&[9, 200]), l(&[3, 5120])]
}

fn l2_norm_shapes() -> Vec<BTreeMap<String, Value>> {
    [(1, 2048), (7, 2048), (5, 200)]
        .iter()
        .map(|(t, h)| {
            params(&[
                ("num_tokens", Value::Int(*t)),
                ("hidden_size", Value::Int(*h)),
            ])
        })
        .collect()
}

fn gated_shapes() -> Vec<BTreeMap<String, Value>> {
    [(1, 128), (37, 128), (300, 128), (6, 200)]
        .iter()
        .map(|(r, h)| {
            params(&[
                ("rows", Value::Int(*r)),
                ("hidden_size", Value::Int(*h)),
                ("eps", Value::Float(1e-6)),
                ("norm_before_gate", Value::Bool(true)),
                ("activation", Value::Str("silu".into())),
            ])
        })
        .collect()
}

fn qk_shapes() -> Vec<BTreeMap<String, Value>> {
    [(1, 8, 2, 128), (1, 5, 1, 128), (3, 4, 2, 64)]
        .iter()
        .map(|(t, hq, hkv, d)| {
            params(&[
                ("num_tokens", Value::Int(*t)),
                ("head_num", Value::Int(*hq)),
                ("kv_head_num", Value::Int(*hkv)),
                ("size_per_head", Value::Int(*d)),
                ("dtype", Value::Str("fp16".into())),
            ])
        })
        .collect()
}

fn rmsnorm_quant_shapes() -> Vec<BTreeMap<String, Value>> {
    [(1, 2048), (13, 2048), (5, 4096), (7, 200)]
        .iter()
        .map(|(t, h)| {
            params(&[
                ("token_count", Value::Int(*t)),
                ("hidden_size", Value::Int(*h)),
            ])
        })
        .collect()
}

fn per_token_shapes() -> Vec<BTreeMap<String, Value>> {
    [(1, 2048), (9, 4096), (3, 7168), (11, 200)]
        .iter()
        .map(|(t, h)| {
            params(&[
                ("token_count", Value::Int(*t)),
                ("hidden_size", Value::Int(*h)),
            ])
        })
        .collect()
}

fn group_shapes() -> Vec<BTreeMap<String, Value>> {
    [(1, 2048), (7, 7168), (33, 256)]
        .iter()
        .map(|(t, h)| {
            params(&[
                ("token_count", Value::Int(*t)),
                ("hidden_size", Value::Int(*h)),
                ("group_size", Value::Int(128)),
            ])
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// operators

/// out = bf16((x − μ) / sqrt(var + eps) · w + b), biased variance, fp32 (moments in f64 here).
fn layer_norm(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (rows, c, eps) = (int(env, "rows")?, int(env, "C")?, float(env, "eps")?);
    let (x, w, b) = (inputs[0].f32s(), inputs[1].f32s(), inputs[2].f32s());
    let mut out = vec![0.0; rows * c];
    for r in 0..rows {
        let row = &x[r * c..(r + 1) * c];
        let mean = row.iter().map(|v| *v as f64).sum::<f64>() / c as f64;
        let var = row.iter().map(|v| (*v as f64 - mean).powi(2)).sum::<f64>() / c as f64;
        let (mu, sd) = (mean as f32, (var as f32 + eps).sqrt());
        for j in 0..c {
            out[r * c + j] = bf16((row[j] - mu) / sd * w[j] + b[j]);
        }
    }
    Ok(vec![HostTensor::from_f32(
        "out",
        "bf16",
        vec![rows, c],
        &out,
    )])
}

/// out = bf16(x · rsqrt(Σx² + eps)).
fn l2_norm(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, h, eps) = (int(env, "T")?, int(env, "H")?, float(env, "eps")?);
    let x = inputs[0].f32s();
    let mut out = vec![0.0; t * h];
    for r in 0..t {
        let row = &x[r * h..(r + 1) * h];
        let inv = rsqrt(sum_sq(row) as f32 + eps);
        for j in 0..h {
            out[r * h + j] = bf16(row[j] * inv);
        }
    }
    Ok(vec![HostTensor::from_f32("out", "bf16", vec![t, h], &out)])
}

/// out = bf16(((x · rstd) · w) · silu(z)), rstd = rsqrt(mean(x²) + eps), one rounding.
fn gated_rms_norm(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (rows, h, eps) = (int(env, "R")?, int(env, "H")?, float(env, "eps")?);
    let (x, w, z) = (inputs[0].f32s(), inputs[1].f32s(), inputs[2].f32s());
    let mut out = vec![0.0; rows * h];
    for r in 0..rows {
        let row = &x[r * h..(r + 1) * h];
        let rstd = rsqrt((sum_sq(row) / h as f64) as f32 + eps);
        for j in 0..h {
            out[r * h + j] = bf16(row[j] * rstd * w[j] * silu(z[r * h + j]));
        }
    }
    Ok(vec![HostTensor::from_f32(
        "out",
        "bf16",
        vec![rows, h],
        &out,
    )])
}

/// Per q and k head: n = fp16(x · rsqrt(mean(x²) + eps)), out = fp16(w · n); v copied.
fn fused_qk_rmsnorm(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, hq, hkv, d, eps) = (
        int(env, "T")?,
        int(env, "Hq")?,
        int(env, "Hkv")?,
        int(env, "D")?,
        float(env, "eps")?,
    );
    let width = (hq + 2 * hkv) * d;
    let (x, qw, kw) = (inputs[0].f32s(), inputs[1].f32s(), inputs[2].f32s());
    let mut out = x.clone();
    for r in 0..t {
        for head in 0..hq + hkv {
            let w = if head < hq { &qw } else { &kw };
            let base = r * width + head * d;
            let v = &x[base..base + d];
            let rstd = rsqrt((sum_sq(v) / d as f64) as f32 + eps);
            for j in 0..d {
                let n = f16(v[j] * rstd);
                out[base + j] = f16(w[j] * n);
            }
        }
    }
    Ok(vec![HostTensor::from_f32(
        "out",
        "fp16",
        vec![t, width],
        &out,
    )])
}

/// r = bf16(x + residual); n = bf16(r · rsqrt(mean(r²) + eps) · w) (one rounding);
/// scale = amax(|n|) / 240 (1 if 0); quantized = fnuz(n / scale), true division, no clamp.
fn fused_rmsnorm_quant(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, h, eps) = (int(env, "T")?, int(env, "H")?, float(env, "eps")?);
    let (x, res, w) = (inputs[0].f32s(), inputs[1].f32s(), inputs[2].f32s());
    let r: Vec<f32> = x.iter().zip(&res).map(|(a, b)| bf16(a + b)).collect();
    let mut q = vec![0u8; t * h];
    let mut scales = vec![0f32; t];
    for row in 0..t {
        let rr = &r[row * h..(row + 1) * h];
        // The reference kernel's rule: Σr² in f64, mean rounded to f32, then rsqrt. The GPU
        // uses rsqrtf (approximate; it may differ by an ulp), so a rare bf16 n, and through it
        // an fp8 code, can differ from the reference kernel's.
        let rstd = rsqrt((sum_sq(rr) / h as f64) as f32 + eps);
        let n: Vec<f32> = (0..h).map(|j| bf16(rr[j] * rstd * w[j])).collect();
        let amax = n.iter().fold(0f32, |m, v| m.max(v.abs()));
        let mut scale = amax / 240.0;
        if scale == 0.0 {
            scale = 1.0;
        }
        scales[row] = scale;
        for j in 0..h {
            q[row * h + j] = e4m3fnuz_bits(n[j] / scale);
        }
    }
    Ok(vec![
        fp8_tensor("quantized", "fp8_e4m3fnuz", vec![t, h], q),
        HostTensor::from_f32("scale", "fp32", vec![t, 1], &scales),
        HostTensor::from_f32("residual_out", "bf16", vec![t, h], &r),
    ])
}

/// scale = max(amax, 1e-12) / 240; q = fnuz(clamp(x · (1/scale), ±240)).
fn fp8_dynamic_per_token_quant(
    env: &Env,
    inputs: &[HostTensor],
) -> Result<Vec<HostTensor>, String> {
    let (t, h) = (int(env, "T")?, int(env, "H")?);
    let x = inputs[0].f32s();
    let mut q = vec![0u8; t * h];
    let mut scales = vec![0f32; t];
    for row in 0..t {
        let xr = &x[row * h..(row + 1) * h];
        let amax = xr.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-12);
        let scale = amax / 240.0;
        let inv = 1.0 / scale;
        scales[row] = scale;
        for j in 0..h {
            q[row * h + j] = e4m3fnuz_bits((xr[j] * inv).clamp(-240.0, 240.0));
        }
    }
    Ok(vec![
        fp8_tensor("q", "fp8_e4m3fnuz", vec![t, h], q),
        HostTensor::from_f32("scale", "fp32", vec![t], &scales),
    ])
}

/// Per 1×G group: s = max(amax / 448, 1e-10); quantized = e4m3fn(clamp(x / s, ±448)).
fn per_token_group_quant_fp8(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, h, g) = (int(env, "T")?, int(env, "H")?, int(env, "G")?);
    if g == 0 || h % g != 0 {
        return Err(format!(
            "hidden_size {h} is not a multiple of group_size {g}"
        ));
    }
    let x = inputs[0].f32s();
    let mut q = vec![0u8; t * h];
    let mut scales = vec![0f32; t * h / g];
    for (k, grp) in x.chunks_exact(g).enumerate() {
        let amax = grp.iter().fold(0f32, |m, v| m.max(v.abs()));
        let s = (amax / 448.0).max(1e-10);
        scales[k] = s;
        for (j, v) in grp.iter().enumerate() {
            q[k * g + j] = e4m3fn_bits((v / s).clamp(-448.0, 448.0));
        }
    }
    Ok(vec![
        fp8_tensor("quantized", "fp8_e4m3", vec![t, h], q),
        HostTensor::from_f32("scales", "fp32", vec![t, h / g], &scales),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::dtype::{e4m3fn_to_f64, e4m3fnuz_to_f64};

    fn env_of(op: &str, params: BTreeMap<String, Value>) -> Env {
        let suite = crate::suite::Suite::load(crate::suite::SuiteSource::Embedded).unwrap();
        let p = suite.problem(op).unwrap();
        let s = crate::suite::Shape {
            id: 9000,
            params,
            note: String::new(),
            production_us: Default::default(),
            line: 0,
        };
        p.env(&s).unwrap()
    }

    fn bf16_tensor(name: &str, dims: Vec<usize>, v: &[f32]) -> HostTensor {
        HostTensor::from_f32(name, "bf16", dims, v)
    }

    /// Every finite code round-trips; midpoints between neighbours go to the even code;
    /// anything just off a midpoint goes to the nearer code.
    fn check_encoder(enc: fn(f32) -> u8, dec: fn(u8) -> f64, max_code: u8) {
        let positives: Vec<(u8, f32)> = (0..=max_code).map(|c| (c, dec(c) as f32)).collect();
        for &(c, v) in &positives {
            assert_eq!(enc(v), c, "code {c:#04x} value {v}");
            if c > 0 {
                assert_eq!(enc(-v), 0x80 | c, "code -{c:#04x} value {v}");
            }
        }
        for w in positives.windows(2) {
            let ((c0, v0), (c1, v1)) = (w[0], w[1]);
            let mid = (v0 + v1) / 2.0; // exact: both are short binary fractions
            let even = if c0 % 2 == 0 { c0 } else { c1 };
            assert_eq!(enc(mid), even, "midpoint of {c0:#04x} and {c1:#04x}");
            assert_eq!(enc(mid.next_up()), c1);
            assert_eq!(enc(mid.next_down()), c0);
        }
    }

    #[test]
    fn e4m3fnuz_encoder_rounds_to_nearest_even_and_saturates_as_specified() {
        check_encoder(e4m3fnuz_bits, e4m3fnuz_to_f64, 0x7F);
        assert_eq!(e4m3fnuz_bits(240.0), 0x7F);
        assert_eq!(e4m3fnuz_bits(247.99), 0x7F);
        assert_eq!(e4m3fnuz_bits(-247.99), 0xFF);
        assert_eq!(e4m3fnuz_bits(248.0), 0x80);
        assert_eq!(e4m3fnuz_bits(-1000.0), 0x80);
        assert_eq!(e4m3fnuz_bits(f32::INFINITY), 0x80);
        assert_eq!(e4m3fnuz_bits(f32::NAN), 0x80);
        // No negative zero: −0 and negative values that round to zero give 0x00.
        assert_eq!(e4m3fnuz_bits(-0.0), 0x00);
        assert_eq!(e4m3fnuz_bits(-(2f32.powi(-11))), 0x00); // tie between 0 and 2^-10: even
        assert_eq!(e4m3fnuz_bits(2f32.powi(-10)), 0x01); // smallest subnormal
        assert_eq!(e4m3fnuz_bits(3.0 * 2f32.powi(-11)), 0x02); // tie 1|2 → 2
        assert_eq!(e4m3fnuz_bits(7.5 * 2f32.powi(-10)), 0x08); // tie 7|8 → smallest normal
        assert_eq!(e4m3fnuz_bits(1.0), 0x40);
        assert_eq!(e4m3fnuz_bits(-1.0), 0xC0);
        assert_eq!(e4m3fnuz_bits(1.0625), 0x40); // tie 1|1.125 → 1
        assert_eq!(e4m3fnuz_bits(1.1875), 0x42); // tie 1.125|1.25 → 1.25
        assert_eq!(e4m3fnuz_bits(1.96875), 0x48); // tie 1.9375|2 → carry into the exponent
    }

    #[test]
    fn e4m3fn_encoder_rounds_to_nearest_even_and_saturates_as_specified() {
        check_encoder(e4m3fn_bits, e4m3fn_to_f64, 0x7E);
        assert_eq!(e4m3fn_bits(448.0), 0x7E);
        assert_eq!(e4m3fn_bits(464.0), 0x7E); // tie 448|480 → 448
        assert_eq!(e4m3fn_bits(-464.0), 0xFE);
        assert_eq!(e4m3fn_bits(464.1), 0x7F);
        assert_eq!(e4m3fn_bits(-500.0), 0xFF);
        assert_eq!(e4m3fn_bits(f32::NAN) & 0x7F, 0x7F);
        assert_eq!(e4m3fn_bits(f32::INFINITY), 0x7F);
        assert_eq!(e4m3fn_bits(-0.0), 0x80); // signed zero
        assert_eq!(e4m3fn_bits(-(2f32.powi(-11))), 0x80);
        assert_eq!(e4m3fn_bits(2f32.powi(-9)), 0x01);
        assert_eq!(e4m3fn_bits(2f32.powi(-10)), 0x00); // tie 0|2^-9 → 0
        assert_eq!(e4m3fn_bits(1.0), 0x38);
        assert!(e4m3fn_to_f64(e4m3fn_bits(300.0)) == 288.0);
    }

    #[test]
    fn layer_norm_rows_have_zero_mean_unit_variance_and_affine_terms_apply() {
        let mut rng = Rng::new(3);
        let (rows, c) = (5usize, 1152usize);
        let e = env_of(
            "layer_norm",
            params(&[(
                "shape",
                Value::List(vec![Value::Int(5), Value::Int(1), Value::Int(1152)]),
            )]),
        );
        let xv: Vec<f32> = rng
            .normal_in("bf16", rows * c, 1.0)
            .iter()
            .map(|v| bf16(v + 3.0))
            .collect();
        let x = bf16_tensor("x", vec![rows, c], &xv);
        let ones = bf16_tensor("weight", vec![c], &vec![1.0; c]);
        let zeros = bf16_tensor("bias", vec![c], &vec![0.0; c]);
        let out = layer_norm(&e, &[x.clone(), ones.clone(), zeros]).unwrap()[0].f32s();
        for r in 0..rows {
            let row = &out[r * c..(r + 1) * c];
            let m = row.iter().map(|v| *v as f64).sum::<f64>() / c as f64;
            let v = row.iter().map(|x| (*x as f64 - m).powi(2)).sum::<f64>() / c as f64;
            assert!(m.abs() < 1e-2, "row {r}: mean {m}");
            assert!((v - 1.0).abs() < 1e-2, "row {r}: var {v}");
        }
        // weight 2, bias 0.5: out = bf16(2·n + 0.5), within one ulp of the plain result.
        let twos = bf16_tensor("weight", vec![c], &vec![2.0; c]);
        let halves = bf16_tensor("bias", vec![c], &vec![0.5; c]);
        let out2 = layer_norm(&e, &[x, twos, halves]).unwrap()[0].f32s();
        for (a, b) in out.iter().zip(&out2) {
            let want = 2.0 * a + 0.5;
            assert!((b - want).abs() <= 0.02 * want.abs() + 1e-2, "{a} → {b}");
        }
    }

    #[test]
    fn l2_norm_rows_have_unit_norm_and_ignore_scale() {
        let mut rng = Rng::new(4);
        let (t, h) = (3usize, 2048usize);
        let e = env_of(
            "l2_norm",
            params(&[
                ("num_tokens", Value::Int(3)),
                ("hidden_size", Value::Int(2048)),
            ]),
        );
        let xv = rng.normal_in("bf16", t * h, 1.0);
        let out = l2_norm(&e, &[bf16_tensor("x", vec![t, h], &xv)]).unwrap()[0].f32s();
        for r in 0..t {
            let n = sum_sq(&out[r * h..(r + 1) * h]).sqrt();
            assert!((n - 1.0).abs() < 4e-3, "row {r}: norm {n}");
        }
        let x8: Vec<f32> = xv.iter().map(|v| v * 8.0).collect();
        let out8 = l2_norm(&e, &[bf16_tensor("x", vec![t, h], &x8)]).unwrap()[0].f32s();
        assert_eq!(out, out8);
    }

    #[test]
    fn gated_rms_norm_normalizes_before_the_gate() {
        let mut rng = Rng::new(5);
        let (r, h) = (6usize, 128usize);
        let mut p = gated_shapes()[0].clone();
        p.insert("rows".into(), Value::Int(r as i128));
        let e = env_of("gated_rms_norm", p);
        let x = rng.normal_in("bf16", r * h, 0.02);
        let z = rng.normal_in("bf16", r * h, 1.0);
        let w = vec![1.0f32; h];
        let out = gated_rms_norm(
            &e,
            &[
                bf16_tensor("x", vec![r, h], &x),
                bf16_tensor("weight", vec![h], &w),
                bf16_tensor("z", vec![r, h], &z),
            ],
        )
        .unwrap()[0]
            .f32s();
        for row in 0..r {
            // Dividing the gate back out leaves a unit-RMS row (the gate does not enter the norm).
            let mut s = 0.0f64;
            let mut n = 0;
            for j in 0..h {
                let g = silu(z[row * h + j]);
                if g.abs() > 0.25 {
                    s += ((out[row * h + j] / g) as f64).powi(2);
                    n += 1;
                }
            }
            let rms = (s / n as f64).sqrt();
            assert!((rms - 1.0).abs() < 0.15, "row {row}: rms {rms}");
            assert!(rms > 0.5 && rms < 2.0);
        }
        // A large gate is (almost) the identity: out ≈ normalized x · z.
        let zbig = vec![30.0f32; r * h];
        let o2 = gated_rms_norm(
            &e,
            &[
                bf16_tensor("x", vec![r, h], &x),
                bf16_tensor("weight", vec![h], &w),
                bf16_tensor("z", vec![r, h], &zbig),
            ],
        )
        .unwrap()[0]
            .f32s();
        for row in 0..r {
            let rms = (sum_sq(&o2[row * h..(row + 1) * h]) / h as f64).sqrt() / 30.0;
            assert!((rms - 1.0).abs() < 4e-3, "row {row}: {rms}");
        }
    }

    #[test]
    fn fused_qk_rmsnorm_normalizes_each_q_and_k_head_and_copies_v() {
        let mut rng = Rng::new(6);
        let e = env_of("fused_qk_rmsnorm", qk_shapes()[2].clone()); // T 3, Hq 4, Hkv 2, D 64
        let (t, hq, hkv, d) = (3usize, 4usize, 2usize, 64usize);
        let width = (hq + 2 * hkv) * d;
        // Heads of very different scales: each is normalized on its own.
        let mut xv = rng.normal_in("fp16", t * width, 1.0);
        for (i, v) in xv.iter_mut().enumerate() {
            *v = f16(*v * (1 + (i / d) % 5) as f32);
        }
        let x = HostTensor::from_f32("hidden_states", "fp16", vec![t, width], &xv);
        let ones = HostTensor::from_f32("q_weight", "fp16", vec![d], &vec![1.0; d]);
        let twos = HostTensor::from_f32("k_weight", "fp16", vec![d], &vec![-2.0; d]);
        let out = fused_qk_rmsnorm(&e, &[x.clone(), ones, twos]).unwrap()[0].f32s();
        for r in 0..t {
            for head in 0..hq + 2 * hkv {
                let base = r * width + head * d;
                let o = &out[base..base + d];
                if head >= hq + hkv {
                    assert_eq!(o, &xv[base..base + d], "v head {head} changed");
                    continue;
                }
                let want = if head < hq { 1.0 } else { 2.0 };
                let rms = (sum_sq(o) / d as f64).sqrt();
                assert!((rms - want).abs() < 2e-3 * want, "head {head}: rms {rms}");
                if head >= hq {
                    assert!(o.iter().zip(&xv[base..]).all(|(a, b)| a * b <= 0.0));
                }
            }
        }
        // fp16 output, so it round-trips.
        assert_eq!(out.iter().map(|v| f16(*v)).collect::<Vec<_>>(), out);
    }

    /// |dequant − value| ≤ half the fp8 step at that magnitude (value within the range).
    fn within_half_step(deq: f64, v: f64, bias: i32) {
        near(deq, v, bias, 1e-12);
    }

    fn near(deq: f64, v: f64, bias: i32, extra: f64) {
        let a = v.abs().min(deq.abs()).max(f64::MIN_POSITIVE);
        let e = a.log2().floor().max((1 - bias) as f64);
        let step = 2f64.powf(e - 3.0);
        assert!(
            (deq - v).abs() <= step / 2.0 + extra,
            "{v} → {deq} (step {step})"
        );
    }

    #[test]
    fn fused_rmsnorm_quant_codes_dequantize_to_the_normalized_row() {
        let mut rng = Rng::new(7);
        let (t, h) = (4usize, 512usize);
        let e = env_of(
            "fused_rmsnorm_quant",
            params(&[
                ("token_count", Value::Int(4)),
                ("hidden_size", Value::Int(512)),
            ]),
        );
        let x = rng.normal_in("bf16", t * h, 1.0);
        let res = rng.normal_in("bf16", t * h, 1.0);
        let w = rng.normal_in("bf16", h, 1.0);
        let ins = [
            bf16_tensor("x", vec![t, h], &x),
            bf16_tensor("residual", vec![t, h], &res),
            bf16_tensor("weight", vec![h], &w),
        ];
        let outs = fused_rmsnorm_quant(&e, &ins).unwrap();
        let (q, scale, r) = (&outs[0], outs[1].f32s(), outs[2].f32s());
        assert_eq!(outs[1].dims, vec![t, 1]);
        for i in 0..t * h {
            assert_eq!(r[i], bf16(x[i] + res[i]));
        }
        for row in 0..t {
            let rr = &r[row * h..(row + 1) * h];
            let rms = (sum_sq(rr) / h as f64).sqrt();
            let n: Vec<f64> = (0..h).map(|j| rr[j] as f64 / rms * w[j] as f64).collect();
            let codes = &q.bytes[row * h..(row + 1) * h];
            // The row maximum lands on ±240.
            assert!(codes.iter().any(|c| *c & 0x7F == 0x7F));
            assert!(codes.iter().all(|c| *c != 0x80));
            let amax = n.iter().fold(0f64, |m, v| m.max(v.abs()));
            assert!((scale[row] as f64 * 240.0 - amax).abs() <= 0.01 * amax);
            for j in 0..h {
                // Against the exact normalized value: half an fp8 step plus the bf16 rounding
                // of n (half a bf16 ulp, ≤ 2^-8 relative) and f32 slack.
                let v = e4m3fnuz_to_f64(codes[j]);
                let exact = n[j] / scale[row] as f64;
                near(v, exact, 8, exact.abs() * (2f64.powi(-8) + 1e-6));
            }
        }
        // A zero row gets scale 1 and all-zero codes.
        let z = vec![0.0f32; h];
        let ins0 = [
            bf16_tensor("x", vec![1, h], &z),
            bf16_tensor("residual", vec![1, h], &z),
            bf16_tensor("weight", vec![h], &w),
        ];
        let e1 = env_of(
            "fused_rmsnorm_quant",
            params(&[
                ("token_count", Value::Int(1)),
                ("hidden_size", Value::Int(512)),
            ]),
        );
        let o0 = fused_rmsnorm_quant(&e1, &ins0).unwrap();
        assert_eq!(o0[1].f32s(), vec![1.0]);
        assert!(o0[0].bytes.iter().all(|c| *c == 0));
    }

    #[test]
    fn fp8_dynamic_per_token_quant_uses_the_reciprocal_and_the_fnuz_range() {
        let mut rng = Rng::new(8);
        let (t, h) = (5usize, 700usize);
        let e = env_of(
            "fp8_dynamic_per_token_quant",
            params(&[
                ("token_count", Value::Int(5)),
                ("hidden_size", Value::Int(700)),
            ]),
        );
        let x = rng.normal_in("bf16", t * h, 1.0);
        let outs = fp8_dynamic_per_token_quant(&e, &[bf16_tensor("x", vec![t, h], &x)]).unwrap();
        let (q, s) = (&outs[0], outs[1].f32s());
        assert_eq!(outs[1].dims, vec![t]);
        for row in 0..t {
            let xr = &x[row * h..(row + 1) * h];
            let amax = xr.iter().fold(0f32, |m, v| m.max(v.abs()));
            assert_eq!(s[row], amax / 240.0);
            let codes = &q.bytes[row * h..(row + 1) * h];
            assert!(codes.iter().any(|c| *c & 0x7F == 0x7F));
            for j in 0..h {
                let v = e4m3fnuz_to_f64(codes[j]);
                within_half_step(v, (xr[j] * (1.0 / s[row])) as f64, 8);
                assert_eq!(codes[j], e4m3fnuz_bits(xr[j] * (1.0 / s[row])));
            }
        }
        // An all-zero row: scale 1e-12/240, codes 0.
        let zeros = vec![0.0f32; h];
        let e1 = env_of(
            "fp8_dynamic_per_token_quant",
            params(&[
                ("token_count", Value::Int(1)),
                ("hidden_size", Value::Int(700)),
            ]),
        );
        let o = fp8_dynamic_per_token_quant(&e1, &[bf16_tensor("x", vec![1, h], &zeros)]).unwrap();
        assert_eq!(o[1].f32s(), vec![1e-12f32 / 240.0]);
        assert!(o[0].bytes.iter().all(|c| *c == 0));
    }

    #[test]
    fn per_token_group_quant_fp8_scales_each_group_to_448() {
        let mut rng = Rng::new(9);
        let (t, h, g) = (3usize, 512usize, 128usize);
        let e = env_of(
            "per_token_group_quant_fp8",
            params(&[
                ("token_count", Value::Int(3)),
                ("hidden_size", Value::Int(512)),
                ("group_size", Value::Int(128)),
            ]),
        );
        // Groups of very different magnitudes get their own scales.
        let mut x = rng.normal_in("bf16", t * h, 1.0);
        for (i, v) in x.iter_mut().enumerate() {
            *v = bf16(*v * 4f32.powi(((i / g) % 4) as i32 - 2));
        }
        let outs = per_token_group_quant_fp8(&e, &[bf16_tensor("x", vec![t, h], &x)]).unwrap();
        let (q, s) = (&outs[0], outs[1].f32s());
        assert_eq!(outs[1].dims, vec![t, h / g]);
        for k in 0..t * h / g {
            let grp = &x[k * g..(k + 1) * g];
            let amax = grp.iter().fold(0f32, |m, v| m.max(v.abs()));
            assert_eq!(s[k], amax / 448.0);
            let codes = &q.bytes[k * g..(k + 1) * g];
            assert!(codes.iter().any(|c| *c & 0x7F == 0x7E), "group {k}");
            for j in 0..g {
                let v = e4m3fn_to_f64(codes[j]);
                within_half_step(v, (grp[j] / s[k]) as f64, 7);
                assert_eq!(v < 0.0 || codes[j] == 0x80, grp[j] < 0.0);
            }
        }
        let bad = env_of(
            "per_token_group_quant_fp8",
            params(&[
                ("token_count", Value::Int(1)),
                ("hidden_size", Value::Int(200)),
                ("group_size", Value::Int(128)),
            ]),
        );
        assert!(
            per_token_group_quant_fp8(&bad, &[bf16_tensor("x", vec![1, 200], &x[..200])]).is_err()
        );
    }

    /// Every kernel file of these operators has a launch plan that resolves on every suite shape
    /// (and the reference on every reduced shape) for every combination of tune values: grid x
    /// within 2^31 − 1, 1-D grids, and whole warps in the baselines (their shuffles use full
    /// masks). The offline compile command checks NVRTC but not the plan against every shape.
    #[test]
    fn launch_plans_resolve_on_every_shape_and_tune_combination() {
        use crate::contract::plan;
        let suite = crate::suite::Suite::load(crate::suite::SuiteSource::Embedded).unwrap();
        let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("problems");
        for op in ops() {
            let p = suite.problem(op.name).unwrap();
            let mut shapes: Vec<(bool, crate::suite::Shape)> =
                p.shapes.iter().map(|s| (false, s.clone())).collect();
            for (k, params) in (op.reduced)().into_iter().enumerate() {
                let s = crate::suite::Shape {
                    id: 9000 + k as u32,
                    params,
                    note: String::new(),
                    production_us: Default::default(),
                    line: 0,
                };
                shapes.push((true, s));
            }
            for file in ["reference.cu", "baseline.cu"] {
                let src = std::fs::read_to_string(root.join(op.name).join(file))
                    .unwrap_or_else(|e| panic!("{}/{file}: {e}", op.name));
                let pl = plan::parse(&src).unwrap_or_else(|e| panic!("{}/{file}: {e:?}", op.name));
                let mut combos = vec![pl.defines.clone()];
                for (k, vals) in &pl.tune {
                    combos = combos
                        .iter()
                        .flat_map(|c| {
                            vals.iter().map(move |v| {
                                let mut d = c.clone();
                                d.insert(k.clone(), v.clone());
                                d
                            })
                        })
                        .collect();
                }
                let is_buf = |n: &str| p.inputs.iter().chain(&p.outputs).any(|t| t.name == n);
                for (reduced, s) in &shapes {
                    if *reduced && file == "baseline.cu" {
                        continue;
                    }
                    let env = p.env(s).unwrap();
                    for d in &combos {
                        let r = pl.resolve(&pl.env(&env, d), &is_buf).unwrap_or_else(|e| {
                            panic!("{}/{file} shape {} {d:?}: {e:?}", op.name, s.id)
                        });
                        for l in r {
                            assert!(l.grid[0] <= i32::MAX as u32, "{}/{file}", op.name);
                            assert_eq!((l.grid[1], l.grid[2]), (1, 1), "{}/{file}", op.name);
                            if file == "baseline.cu" {
                                assert_eq!(l.block[0] % 32, 0, "{}/{file} {d:?}", op.name);
                            }
                        }
                    }
                }
            }
        }
    }
}
