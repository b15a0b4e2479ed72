//! MoE routing and sampling filters: moe_sum_reduce, moe_topk_gating_softmax, topk_filter.

use super::*;

// ---------------------------------------------------------------- moe_sum_reduce

pub(super) fn moe_sum_reduce_shapes() -> Vec<BTreeMap<String, Value>> {
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
pub(super) fn moe_sum_reduce(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
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

pub(super) fn moe_topk_shapes() -> Vec<BTreeMap<String, Value>> {
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
pub(super) fn moe_topk_gating_softmax(
    env: &Env,
    inputs: &[HostTensor],
) -> Result<Vec<HostTensor>, String> {
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

pub(super) fn topk_filter_shapes() -> Vec<BTreeMap<String, Value>> {
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
pub(super) fn topk_filter(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
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

#[cfg(test)]
mod tests {
    use super::super::tests::{bf16s, env_of, suite};
    use super::*;
    use crate::suite::Problem;

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
}
