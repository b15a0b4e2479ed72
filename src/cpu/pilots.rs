//! rms_norm, silu_and_mul, fused_add_rms_norm.

use super::*;

pub fn ops() -> Vec<CpuOp> {
    vec![
        CpuOp {
            name: "rms_norm",
            run: rms_norm,
            reduced: rms_norm_shapes,
        },
        CpuOp {
            name: "silu_and_mul",
            run: silu_and_mul,
            reduced: silu_shapes,
        },
        CpuOp {
            name: "fused_add_rms_norm",
            run: fused_add_rms_norm,
            reduced: rms_norm_shapes,
        },
    ]
}

fn rms_norm_shapes() -> Vec<BTreeMap<String, Value>> {
    [(1, 128), (7, 1024), (33, 1152), (5, 8192)]
        .iter()
        .map(|(t, h)| {
            params(&[
                ("token_count", Value::Int(*t)),
                ("hidden_size", Value::Int(*h)),
                ("eps", Value::Float(1e-6)),
            ])
        })
        .collect()
}

fn silu_shapes() -> Vec<BTreeMap<String, Value>> {
    [(1, 1536), (9, 2816), (64, 512)]
        .iter()
        .map(|(t, w)| params(&[("shape", Value::List(vec![Value::Int(*t), Value::Int(*w)]))]))
        .collect()
}

/// out = bf16(x · rsqrt(mean(x²) + eps) · w), fp32 math; the mean is summed in f64 here.
fn norm_rows(x: &[f32], w: &[f32], t: usize, h: usize, eps: f32) -> Vec<f32> {
    let mut out = vec![0.0; t * h];
    for r in 0..t {
        let row = &x[r * h..(r + 1) * h];
        let ms = (row.iter().map(|v| (*v as f64) * (*v as f64)).sum::<f64>() / h as f64) as f32;
        let inv = 1.0 / (ms + eps).sqrt();
        for j in 0..h {
            out[r * h + j] = bf16(row[j] * inv * w[j]);
        }
    }
    out
}

fn rms_norm(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, h, eps) = (int(env, "T")?, int(env, "H")?, float(env, "eps")?);
    let out = norm_rows(&inputs[0].f32s(), &inputs[1].f32s(), t, h, eps);
    Ok(vec![HostTensor::from_f32("out", "bf16", vec![t, h], &out)])
}

fn silu_and_mul(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, d) = (int(env, "T")?, int(env, "d")?);
    let x = inputs[0].f32s();
    let mut out = vec![0.0; t * d];
    for r in 0..t {
        for j in 0..d {
            let g = x[r * 2 * d + j];
            let u = x[r * 2 * d + d + j];
            let a = bf16(g / (1.0 + (-g).exp()));
            out[r * d + j] = bf16(a * u);
        }
    }
    Ok(vec![HostTensor::from_f32("out", "bf16", vec![t, d], &out)])
}

fn fused_add_rms_norm(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, h, eps) = (int(env, "T")?, int(env, "H")?, float(env, "eps")?);
    let (x, res, w) = (inputs[0].f32s(), inputs[1].f32s(), inputs[2].f32s());
    let r: Vec<f32> = x.iter().zip(&res).map(|(a, b)| bf16(a + b)).collect();
    let out = norm_rows(&r, &w, t, h, eps);
    Ok(vec![
        HostTensor::from_f32("out", "bf16", vec![t, h], &out),
        HostTensor::from_f32("residual_out", "bf16", vec![t, h], &r),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(t: i128, h: i128) -> Env {
        params(&[
            ("T", Value::Int(t)),
            ("H", Value::Int(h)),
            ("eps", Value::Float(1e-6)),
        ])
    }

    #[test]
    fn rms_norm_rows_have_unit_rms_before_the_weight() {
        let mut rng = Rng::new(1);
        let (t, h) = (4, 512);
        let x = HostTensor::from_f32("x", "bf16", vec![t, h], &rng.normal_in("bf16", t * h, 0.02));
        let ones = HostTensor::from_f32("weight", "bf16", vec![h], &vec![1.0; h]);
        let out = rms_norm(&env(t as i128, h as i128), &[x.clone(), ones]).unwrap()[0].f32s();
        for r in 0..t {
            let rms = (out[r * h..(r + 1) * h]
                .iter()
                .map(|v| (*v as f64).powi(2))
                .sum::<f64>()
                / h as f64)
                .sqrt();
            assert!((rms - 1.0).abs() < 4e-3, "row {r}: rms {rms}");
        }
        // Scaling the input leaves the output unchanged (up to eps and rounding).
        let x2: Vec<f32> = x.f32s().iter().map(|v| v * 4.0).collect();
        let x2 = HostTensor::from_f32("x", "bf16", vec![t, h], &x2);
        let ones = HostTensor::from_f32("weight", "bf16", vec![h], &vec![1.0; h]);
        let out2 = rms_norm(&env(t as i128, h as i128), &[x2, ones]).unwrap()[0].f32s();
        let diff = out
            .iter()
            .zip(&out2)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(diff <= 0.016, "{diff}");
    }

    #[test]
    fn silu_and_mul_matches_known_values() {
        let e = params(&[("T", Value::Int(1)), ("d", Value::Int(2))]);
        let x = HostTensor::from_f32("x", "bf16", vec![1, 4], &[0.0, 2.0, 3.0, -1.5]);
        let out = silu_and_mul(&e, &[x]).unwrap()[0].f32s();
        assert_eq!(out[0], 0.0);
        // silu(2) = 1.7616 → bf16 1.765625; × -1.5 = -2.6484375 → bf16 -2.640625
        assert_eq!(out[1], bf16(bf16(2.0 / (1.0 + (-2.0f32).exp())) * -1.5));
        assert!((out[1] + 2.64).abs() < 0.02);
    }

    #[test]
    fn fused_add_rms_norm_returns_the_rounded_sum_and_normalizes_it() {
        let mut rng = Rng::new(2);
        let (t, h) = (3, 256);
        let x = HostTensor::from_f32("x", "bf16", vec![t, h], &rng.normal_in("bf16", t * h, 0.02));
        let r = HostTensor::from_f32(
            "residual",
            "bf16",
            vec![t, h],
            &rng.normal_in("bf16", t * h, 1.0),
        );
        let w = HostTensor::from_f32("weight", "bf16", vec![h], &vec![1.0; h]);
        let outs = fused_add_rms_norm(
            &env(t as i128, h as i128),
            &[x.clone(), r.clone(), w.clone()],
        )
        .unwrap();
        let sum = outs[1].f32s();
        for (i, s) in sum.iter().enumerate() {
            assert_eq!(*s, bf16(x.f32s()[i] + r.f32s()[i]));
        }
        let direct = rms_norm(&env(t as i128, h as i128), &[outs[1].clone(), w]).unwrap();
        assert_eq!(
            direct[0],
            HostTensor {
                name: "out".into(),
                ..outs[0].clone()
            }
        );
    }
}
