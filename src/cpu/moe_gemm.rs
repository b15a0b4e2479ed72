//! fused_moe, fp8_blockscale_fused_moe, block_scaled_mm, linear_sigmoid_mul,
//! moe_align_block_size, moe_count_and_sort.
//!
//! The GEMMs mirror the reference kernels' order exactly: every dot product is one fp32 FMA
//! chain in increasing reduction index (`acc = fma(a, b, acc)` from 0), so the CPU and the
//! reference kernels agree bit for bit except where an exponential is involved; exp is taken
//! as `(float)exp((double)x)` on both sides, which is correctly rounded in practice.

use super::fp8::*;
use super::*;

pub fn ops() -> Vec<CpuOp> {
    vec![
        CpuOp {
            name: "fused_moe",
            run: fused_moe,
            reduced: fused_moe_shapes,
        },
        CpuOp {
            name: "fp8_blockscale_fused_moe",
            run: fp8_moe,
            reduced: fp8_moe_shapes,
        },
        CpuOp {
            name: "block_scaled_mm",
            run: block_scaled_mm,
            reduced: bsmm_shapes,
        },
        CpuOp {
            name: "linear_sigmoid_mul",
            run: linear_sigmoid_mul,
            reduced: lsm_shapes,
        },
        CpuOp {
            name: "moe_align_block_size",
            run: moe_align_block_size,
            reduced: align_shapes,
        },
        CpuOp {
            name: "moe_count_and_sort",
            run: moe_count_and_sort,
            reduced: count_sort_shapes,
        },
    ]
}

/// exp as the kernels compute it: in double, rounded once to float.
fn expf(x: f32) -> f32 {
    (x as f64).exp() as f32
}

/// silu(g) = g / (1 + exp(−g)), fp32 (division correctly rounded, as on the GPU).
fn silu(g: f32) -> f32 {
    g / (1.0 + expf(-g))
}

/// One fp32 FMA chain in increasing index: Σ a[i]·b[i] from 0.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in a.iter().zip(b) {
        acc = x.mul_add(*y, acc);
    }
    acc
}

fn ints(pairs: &[(&str, i128)]) -> BTreeMap<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Value::Int(*v)))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// fused_moe

fn fused_moe_shapes() -> Vec<BTreeMap<String, Value>> {
    // (T, H, I, E, K)
    [
        (1, 256, 128, 8, 2),
        (13, 128, 256, 4, 2),
        (37, 256, 128, 16, 4),
        (9, 384, 384, 8, 8),
    ]
    .iter()
    .map(|&(t, h, i, e, k)| {
        ints(&[
            ("token_count", t),
            ("hidden_size", h),
            ("intermediate_size", i),
            ("num_experts", e),
            ("top_k", k),
            ("distinct_experts", e.min(t * k)),
            ("distinct_pairs", t * k),
        ])
    })
    .collect()
}

/// The distinct experts of one routing row in increasing order, with their merged weights
/// (duplicate slots' weights added in slot order).
fn merged_row(ids: &[i64], w: &[f32]) -> Vec<(usize, f32)> {
    let mut v: Vec<(usize, f32)> = Vec::new();
    for (k, &e) in ids.iter().enumerate() {
        let e = e as usize;
        match v.iter_mut().find(|(x, _)| *x == e) {
            Some(p) => p.1 += w[k],
            None => v.push((e, w[k])),
        }
    }
    v.sort_by_key(|p| p.0);
    v
}

/// The expert FFN on fp32 rows: a = W1·x (2I), z = silu(a[..I])·a[I..], y = W2·z (H).
fn ffn(x: &[f32], w1: &[f32], w2: &[f32], h: usize, i: usize) -> Vec<f32> {
    let a: Vec<f32> = (0..2 * i)
        .map(|n| dot(x, &w1[n * h..(n + 1) * h]))
        .collect();
    let z: Vec<f32> = (0..i).map(|j| silu(a[j]) * a[i + j]).collect();
    (0..h).map(|d| dot(&z, &w2[d * i..(d + 1) * i])).collect()
}

fn fused_moe(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, h, i, k) = (
        int(env, "T")?,
        int(env, "H")?,
        int(env, "I")?,
        int(env, "K")?,
    );
    let x = inputs[0].f32s();
    let w1 = inputs[1].f32s();
    let w2 = inputs[2].f32s();
    let tw = inputs[3].f32s();
    let ids = inputs[4].i64s();
    let mut out = vec![0.0f32; t * h];
    for r in 0..t {
        let row = &mut out[r * h..(r + 1) * h];
        for (e, om) in merged_row(&ids[r * k..(r + 1) * k], &tw[r * k..(r + 1) * k]) {
            let y = ffn(
                &x[r * h..(r + 1) * h],
                &w1[e * 2 * i * h..(e + 1) * 2 * i * h],
                &w2[e * h * i..(e + 1) * h * i],
                h,
                i,
            );
            for d in 0..h {
                row[d] += om * y[d];
            }
        }
    }
    Ok(vec![HostTensor::from_f32("out", "fp32", vec![t, h], &out)])
}

// ---------------------------------------------------------------------------------------------
// fp8_blockscale_fused_moe

fn fp8_moe_shapes() -> Vec<BTreeMap<String, Value>> {
    // (T, H, I, E, K)
    [
        (1, 256, 128, 8, 8),
        (7, 384, 256, 16, 4),
        (20, 256, 256, 12, 8),
    ]
    .iter()
    .map(|&(t, h, i, e, k)| {
        ints(&[
            ("token_count", t),
            ("hidden_size", h),
            ("intermediate_size", i),
            ("num_experts", e),
            ("top_k", k),
        ])
    })
    .collect()
}

/// float(code) · scale per 128×128 (or 1×128) block: rows × cols with scales [rows/br, cols/128].
fn dequant(v: &[f32], s: &[f32], rows: usize, cols: usize, br: usize) -> Vec<f32> {
    let nb = cols.div_ceil(128);
    let mut o = vec![0.0; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            o[r * cols + c] = v[r * cols + c] * s[(r / br) * nb + c / 128];
        }
    }
    o
}

fn fp8_moe(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, h, i, e_n, k) = (
        int(env, "T")?,
        int(env, "H")?,
        int(env, "I")?,
        int(env, "E")?,
        int(env, "K")?,
    );
    let x = dequant(&inputs[0].f32s(), &inputs[1].f32s(), t, h, 1);
    let w1 = dequant(&inputs[2].f32s(), &inputs[3].f32s(), e_n * 2 * i, h, 128);
    let w2 = dequant(&inputs[4].f32s(), &inputs[5].f32s(), e_n * h, i, 128);
    let tw = inputs[6].f32s();
    let ids = inputs[7].i64s();
    let mut out = vec![0u8; t * h];
    for r in 0..t {
        let mut acc = vec![0.0f32; h];
        for s in 0..k {
            let e = ids[r * k + s] as usize;
            let y = ffn(
                &x[r * h..(r + 1) * h],
                &w1[e * 2 * i * h..(e + 1) * 2 * i * h],
                &w2[e * h * i..(e + 1) * h * i],
                h,
                i,
            );
            let w = tw[r * k + s];
            for d in 0..h {
                acc[d] = if s == 0 { w * y[d] } else { acc[d] + w * y[d] };
            }
        }
        for d in 0..h {
            out[r * h + d] = e4m3fnuz_bits(acc[d]);
        }
    }
    Ok(vec![fp8_tensor("out", "fp8_e4m3fnuz", vec![t, h], out)])
}

// ---------------------------------------------------------------------------------------------
// block_scaled_mm

fn bsmm_shapes() -> Vec<BTreeMap<String, Value>> {
    [(5, 128, 128), (37, 256, 384), (130, 384, 256)]
        .iter()
        .map(|&(m, n, k)| {
            ints(&[
                ("m", m),
                ("n", n),
                ("k", k),
                ("group_n", 128),
                ("group_k", 128),
            ])
        })
        .collect()
}

fn block_scaled_mm(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (m, n, k, gn, gk) = (
        int(env, "M")?,
        int(env, "N")?,
        int(env, "K")?,
        int(env, "gn")?,
        int(env, "gk")?,
    );
    let nk = k / gk;
    let a = inputs[0].f32s();
    let b = inputs[1].f32s();
    let sa = inputs[2].f32s();
    let sb = inputs[3].f32s();
    let mut out = vec![0.0f32; m * n];
    for r in 0..m {
        for c in 0..n {
            let mut acc = 0.0f32;
            for g in 0..nk {
                let p = dot(
                    &a[r * k + g * gk..r * k + (g + 1) * gk],
                    &b[c * k + g * gk..c * k + (g + 1) * gk],
                );
                acc += (p * sa[r * nk + g]) * sb[(c / gn) * nk + g];
            }
            out[r * n + c] = acc;
        }
    }
    Ok(vec![HostTensor::from_f32("out", "fp32", vec![m, n], &out)])
}

// ---------------------------------------------------------------------------------------------
// linear_sigmoid_mul

fn lsm_shapes() -> Vec<BTreeMap<String, Value>> {
    [(1, 128, 64), (13, 256, 384), (70, 384, 128)]
        .iter()
        .map(|&(t, h, o)| ints(&[("token_count", t), ("hidden_size", h), ("out_features", o)]))
        .collect()
}

fn linear_sigmoid_mul(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (t, h, o) = (int(env, "T")?, int(env, "H")?, int(env, "O")?);
    let x = inputs[0].f32s();
    let w = inputs[1].f32s();
    let b = inputs[2].f32s();
    let p = inputs[3].f32s();
    let mut out = vec![0.0f32; t * o];
    for r in 0..t {
        for c in 0..o {
            let g = bf16(dot(&x[r * h..(r + 1) * h], &w[c * h..(c + 1) * h]) + b[c]);
            let sg = 1.0 / (1.0 + expf(-g));
            out[r * o + c] = bf16(sg * p[r * o + c]);
        }
    }
    Ok(vec![HostTensor::from_f32("out", "bf16", vec![t, o], &out)])
}

// ---------------------------------------------------------------------------------------------
// moe_align_block_size, moe_count_and_sort

fn align_shapes() -> Vec<BTreeMap<String, Value>> {
    // (T, K, E, BS, declared NB): the declared NB is the recorded draw's; a case's own NB may
    // differ (tail filled / truncated, see problem.toml).
    [
        (1, 8, 128, 128, 8),
        (37, 4, 16, 16, 16),
        (300, 8, 8, 32, 80),
        (64, 8, 128, 128, 128),
    ]
    .iter()
    .map(|&(t, k, e, bs, nb)| {
        ints(&[
            ("token_count", t),
            ("top_k", k),
            ("num_experts", e),
            ("block_size", bs),
            ("num_blocks", nb),
        ])
    })
    .collect()
}

/// The full (unbounded) moe_align_block_size result: padded sorted ids and block experts.
pub fn align_full(ids: &[i64], e_n: usize, bs: usize) -> (Vec<i64>, Vec<i64>) {
    let n = ids.len() as i64;
    let mut sorted = Vec::new();
    let mut experts = Vec::new();
    for e in 0..e_n {
        let group: Vec<i64> = (0..ids.len())
            .filter(|&f| ids[f] == e as i64)
            .map(|f| f as i64)
            .collect();
        if group.is_empty() {
            continue;
        }
        let blocks = group.len().div_ceil(bs);
        sorted.extend(&group);
        sorted.extend(std::iter::repeat_n(n, blocks * bs - group.len()));
        experts.extend(std::iter::repeat_n(e as i64, blocks));
    }
    (sorted, experts)
}

fn moe_align_block_size(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let (e_n, bs, nb) = (int(env, "E")?, int(env, "BS")?, int(env, "NB")?);
    let ids = inputs[0].i64s();
    let n = ids.len() as i64;
    let (mut sorted, mut experts) = align_full(&ids, e_n, bs);
    let post = sorted.len() as i64;
    sorted.resize(nb * bs, n);
    experts.resize(nb, -1);
    Ok(vec![
        HostTensor::from_i64("sorted_token_ids", "int32", vec![nb * bs], &sorted),
        HostTensor::from_i64("expert_ids", "int32", vec![nb], &experts),
        HostTensor::from_i64("num_tokens_post_pad", "int32", vec![1], &[post]),
    ])
}

fn count_sort_shapes() -> Vec<BTreeMap<String, Value>> {
    [(1, 8, 128), (76, 8, 128), (33, 3, 5)]
        .iter()
        .map(|&(t, k, e)| {
            ints(&[
                ("token_count", t),
                ("top_k", k),
                ("num_experts", e),
                ("block_size", 128),
            ])
        })
        .collect()
}

fn moe_count_and_sort(env: &Env, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, String> {
    let e_n = int(env, "E")?;
    let ids = inputs[0].i64s();
    let mut counts = vec![0i64; e_n];
    for &e in &ids {
        if e >= 0 && (e as usize) < e_n {
            counts[e as usize] += 1;
        }
    }
    let mut cumsum = vec![0i64; e_n + 1];
    for e in 0..e_n {
        cumsum[e + 1] = cumsum[e] + counts[e];
    }
    let mut sorted = vec![0i64; ids.len()];
    let mut next = cumsum.clone();
    for (f, &e) in ids.iter().enumerate() {
        if e >= 0 && (e as usize) < e_n {
            sorted[next[e as usize] as usize] = f as i64;
            next[e as usize] += 1;
        }
    }
    Ok(vec![
        HostTensor::from_i64("sorted_token_ids", "int32", vec![ids.len()], &sorted),
        HostTensor::from_i64("expert_token_counts", "int32", vec![e_n], &counts),
        HostTensor::from_i64("cumsum", "int32", vec![e_n + 1], &cumsum),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::dtype::{e4m3fn_to_f64, e4m3fnuz_to_f64};

    #[test]
    fn fnuz_encoder_boundaries() {
        assert_eq!(e4m3fnuz_bits(1.0), 0x40);
        assert_eq!(e4m3fnuz_bits(-1.0), 0xC0);
        assert_eq!(e4m3fnuz_bits(240.0), 0x7F);
        assert_eq!(e4m3fnuz_bits(247.99), 0x7F);
        assert_eq!(e4m3fnuz_bits(-247.99), 0xFF);
        assert_eq!(e4m3fnuz_bits(248.0), 0x80);
        assert_eq!(e4m3fnuz_bits(-1e6), 0x80);
        assert_eq!(e4m3fnuz_bits(f32::NAN), 0x80);
        assert_eq!(e4m3fnuz_bits(f32::INFINITY), 0x80);
        assert_eq!(e4m3fnuz_bits(-0.0), 0x00);
        assert_eq!(e4m3fnuz_bits(-1e-5), 0x00);
        assert_eq!(e4m3fnuz_bits(2f32.powi(-10)), 0x01);
        assert_eq!(e4m3fnuz_bits(2f32.powi(-11)), 0x00); // tie to even 0
        assert_eq!(e4m3fnuz_bits(1.5 * 2f32.powi(-10)), 0x02); // tie to even 2
        assert_eq!(e4m3fnuz_bits(7.5 * 2f32.powi(-10)), 0x08); // rounds up into the normals
        assert_eq!(e4m3fnuz_bits(2f32.powi(-7)), 0x08);
        assert_eq!(e4m3fnuz_bits(1.0625), 0x40); // tie between 1 and 1.125 → even (1)
        assert_eq!(e4m3fnuz_bits(1.1875), 0x42); // tie between 1.125 and 1.25 → even (1.25)
        assert_eq!(e4m3fnuz_bits(1.96875), 0x48); // rounds up to 2 (exponent carry)
        // Every finite code round-trips.
        for c in 0u8..=255 {
            if c == 0x80 {
                continue;
            }
            assert_eq!(e4m3fnuz_bits(e4m3fnuz_to_f64(c) as f32), c, "code {c:#x}");
        }
    }

    #[test]
    fn fn_encoder_boundaries() {
        assert_eq!(e4m3fn_bits(1.0), 0x38);
        assert_eq!(e4m3fn_bits(448.0), 0x7E);
        assert_eq!(e4m3fn_bits(464.0), 0x7E);
        assert_eq!(e4m3fn_bits(-464.0), 0xFE);
        assert_eq!(e4m3fn_bits(464.5) & 0x7F, 0x7F);
        assert_eq!(e4m3fn_bits(f32::NAN) & 0x7F, 0x7F);
        assert_eq!(e4m3fn_bits(2f32.powi(-9)), 0x01);
        assert_eq!(e4m3fn_bits(2f32.powi(-10)), 0x00);
        assert_eq!(e4m3fn_bits(-2f32.powi(-11)), 0x80); // negative zero exists in e4m3fn
        assert_eq!(e4m3fn_bits(2f32.powi(-6)), 0x08);
        assert_eq!(e4m3fn_bits(432.0), 0x7E); // tie between 416 and 448 → 448 (even mantissa)
        for c in 0u8..=255 {
            if c & 0x7F == 0x7F {
                continue;
            }
            assert_eq!(e4m3fn_bits(e4m3fn_to_f64(c) as f32), c, "code {c:#x}");
        }
    }

    #[test]
    fn fp8_dequantized_values_are_within_half_a_step() {
        let mut rng = Rng::new(5);
        for _ in 0..20000 {
            let x = rng.normal() * 60.0;
            for (q, lim) in [(e4m3fnuz(x), 240.0f32), (e4m3fn(x), 448.0)] {
                if x.abs() > lim {
                    continue;
                }
                // Step at x: 2^(e-3) for normals.
                let e = (x.abs().max(2f32.powi(-6))).log2().floor();
                let step = 2f32.powf(e - 3.0);
                assert!((q - x).abs() <= step / 2.0 + 1e-9, "{x} → {q}");
            }
        }
    }

    fn rand_fp8_fnuz(rng: &mut Rng, n: usize) -> Vec<u8> {
        (0..n).map(|_| e4m3fnuz_bits(rng.normal() * 40.0)).collect()
    }

    fn moe_env(t: usize, h: usize, i: usize, e: usize, k: usize) -> Env {
        ints(&[
            ("T", t as i128),
            ("H", h as i128),
            ("I", i as i128),
            ("E", e as i128),
            ("K", k as i128),
        ])
    }

    #[test]
    fn fused_moe_merges_duplicate_slots_and_is_linear_in_the_weights() {
        let mut rng = Rng::new(7);
        let (t, h, i, e, k) = (3, 64, 32, 4, 2);
        let x = HostTensor::from_f32("x", "bf16", vec![t, h], &rng.normal_in("bf16", t * h, 0.1));
        let w1 = HostTensor::from_f32(
            "w1",
            "bf16",
            vec![e, 2 * i, h],
            &rng.normal_in("bf16", e * 2 * i * h, 0.125),
        );
        let w2 = HostTensor::from_f32(
            "w2",
            "bf16",
            vec![e, h, i],
            &rng.normal_in("bf16", e * h * i, 0.18),
        );
        let tw = HostTensor::from_f32("tw", "fp32", vec![t, k], &[0.25, 0.75, 0.5, 0.5, 1.0, 0.0]);
        // Row 0: experts 1 and 3; row 1: expert 2 twice; row 2: expert 0 only (weight 1).
        let ids = HostTensor::from_i64("ids", "int32", vec![t, k], &[3, 1, 2, 2, 0, 1]);
        let env = moe_env(t, h, i, e, k);
        let out = fused_moe(&env, &[x.clone(), w1.clone(), w2.clone(), tw, ids]).unwrap()[0].f32s();
        // Row 1 with a duplicate equals a single slot of weight 1.0 on expert 2.
        let tw1 = HostTensor::from_f32("tw", "fp32", vec![t, k], &[0.25, 0.75, 1.0, 0.0, 1.0, 0.0]);
        let ids1 = HostTensor::from_i64("ids", "int32", vec![t, k], &[3, 1, 2, 0, 0, 1]);
        let out1 =
            fused_moe(&env, &[x.clone(), w1.clone(), w2.clone(), tw1, ids1]).unwrap()[0].f32s();
        assert_eq!(&out[h..2 * h], &out1[h..2 * h]);
        assert!(out[h..2 * h].iter().any(|v| *v != 0.0));
        // Row 0 is the weighted sum of the single-expert outputs.
        let single = |ex: i64| {
            let tw =
                HostTensor::from_f32("tw", "fp32", vec![t, k], &[1.0, 0.0, 1.0, 0.0, 1.0, 0.0]);
            let ids =
                HostTensor::from_i64("ids", "int32", vec![t, k], &[ex, (ex + 1) % 4, 0, 1, 0, 1]);
            fused_moe(&env, &[x.clone(), w1.clone(), w2.clone(), tw, ids]).unwrap()[0].f32s()
        };
        let (y3, y1) = (single(3), single(1));
        for d in 0..h {
            let want = 0.25 * y3[d] + 0.75 * y1[d];
            assert!((out[d] - want).abs() <= 1e-6 * (1.0 + want.abs()), "{d}");
        }
        // Direct check of one element of the FFN against f64.
        let (xf, w1f, w2f) = (x.f32s(), w1.f32s(), w2.f32s());
        let e0 = 0;
        let a: Vec<f64> = (0..2 * i)
            .map(|n| {
                (0..h)
                    .map(|d| xf[2 * h + d] as f64 * w1f[(e0 * 2 * i + n) * h + d] as f64)
                    .sum()
            })
            .collect();
        let z: Vec<f64> = (0..i)
            .map(|j| a[j] / (1.0 + (-a[j]).exp()) * a[i + j])
            .collect();
        let y0: f64 = (0..i).map(|j| w2f[e0 * h * i + j] as f64 * z[j]).sum();
        assert!(
            (out[2 * h] as f64 - y0).abs() <= 1e-6 * y0.abs().max(1e-3),
            "{} {y0}",
            out[2 * h]
        );
    }

    #[test]
    fn fp8_moe_output_is_the_fnuz_of_the_weighted_sum_and_overflows_to_nan() {
        let mut rng = Rng::new(9);
        let (t, h, i, e, k) = (2, 128, 128, 3, 2);
        let hs = rand_fp8_fnuz(&mut rng, t * h);
        let a_scale: Vec<f32> = (0..t).map(|_| 0.01).collect();
        let w1 = rand_fp8_fnuz(&mut rng, e * 2 * i * h);
        let w2 = rand_fp8_fnuz(&mut rng, e * h * i);
        let s1 = vec![0.004f32; e * 2];
        let s2 = vec![0.004f32; e];
        let mk = |n: &str, d: Vec<usize>, v: &[f32]| HostTensor::from_f32(n, "fp32", d, v);
        let run = |scale2: f32| {
            let s2s: Vec<f32> = s2.iter().map(|v| v * scale2).collect();
            fp8_moe(
                &moe_env(t, h, i, e, k),
                &[
                    fp8_tensor("hs", "fp8_e4m3fnuz", vec![t, h], hs.clone()),
                    mk("a_scale", vec![t, 1], &a_scale),
                    fp8_tensor("w1", "fp8_e4m3fnuz", vec![e, 2 * i, h], w1.clone()),
                    mk("fc1", vec![e, 2, 1], &s1),
                    fp8_tensor("w2", "fp8_e4m3fnuz", vec![e, h, i], w2.clone()),
                    mk("fc2", vec![e, 1, 1], &s2s),
                    mk("tw", vec![t, k], &[0.5, 0.5, 0.9, 0.1]),
                    HostTensor::from_i64("ids", "int32", vec![t, k], &[0, 2, 1, 0]),
                ],
            )
            .unwrap()
            .remove(0)
        };
        let small = run(1.0);
        // Independent f64 computation of element (1, 5).
        let deq = |c: u8| e4m3fnuz_to_f64(c);
        let y = |ex: usize, r: usize, d: usize| -> f64 {
            let a: Vec<f64> = (0..2 * i)
                .map(|n| {
                    (0..h)
                        .map(|c| {
                            deq(hs[r * h + c]) * 0.01 * deq(w1[(ex * 2 * i + n) * h + c]) * 0.004
                        })
                        .sum()
                })
                .collect();
            (0..i)
                .map(|j| {
                    a[j] / (1.0 + (-a[j]).exp()) * a[i + j] * deq(w2[(ex * h + d) * i + j]) * 0.004
                })
                .sum()
        };
        let acc = 0.9 * y(1, 1, 5) + 0.1 * y(0, 1, 5);
        let got = deq(small.bytes[h + 5]);
        assert!(
            (got - acc).abs() <= acc.abs() / 16.0 + 1e-3,
            "{got} vs {acc}"
        );
        // Scaling W2 up pushes some outputs past 248: NaN (0x80), never clamped to 240.
        let big = run(4000.0);
        assert!(big.bytes.contains(&0x80));
        assert!(!small.bytes.contains(&0x80));
    }

    #[test]
    fn block_scaled_mm_equals_dequantized_f64_gemm() {
        let mut rng = Rng::new(11);
        let (m, n, k) = (3, 256, 256);
        let a: Vec<u8> = (0..m * k)
            .map(|_| e4m3fn_bits(rng.normal() * 100.0))
            .collect();
        let b: Vec<u8> = (0..n * k)
            .map(|_| e4m3fn_bits(rng.normal() * 100.0))
            .collect();
        let sa: Vec<f32> = (0..m * 2).map(|_| 0.01 * (1.0 + rng.uniform())).collect();
        let sb: Vec<f32> = (0..4).map(|_| 0.01 * (1.0 + rng.uniform())).collect();
        let env = ints(&[("M", 3), ("N", 256), ("K", 256), ("gn", 128), ("gk", 128)]);
        let out = block_scaled_mm(
            &env,
            &[
                fp8_tensor("a", "fp8_e4m3", vec![m, k], a.clone()),
                fp8_tensor("b", "fp8_e4m3", vec![n, k], b.clone()),
                HostTensor::from_f32("sa", "fp32", vec![m, 2], &sa),
                HostTensor::from_f32("sb", "fp32", vec![2, 2], &sb),
            ],
        )
        .unwrap()[0]
            .f32s();
        for r in 0..m {
            for c in 0..n {
                let want: f64 = (0..k)
                    .map(|j| {
                        e4m3fn_to_f64(a[r * k + j])
                            * sa[r * 2 + j / 128] as f64
                            * e4m3fn_to_f64(b[c * k + j])
                            * sb[(c / 128) * 2 + j / 128] as f64
                    })
                    .sum();
                assert!((out[r * n + c] as f64 - want).abs() <= 1e-4 * (1.0 + want.abs()));
            }
        }
    }

    #[test]
    fn linear_sigmoid_mul_matches_known_values() {
        let env = ints(&[("T", 1), ("H", 2), ("O", 2)]);
        let x = HostTensor::from_f32("x", "bf16", vec![1, 2], &[1.0, 2.0]);
        let w = HostTensor::from_f32("w", "bf16", vec![2, 2], &[0.5, 0.25, -1.0, 0.0]);
        let b = HostTensor::from_f32("b", "bf16", vec![2], &[0.0, 1.0]);
        let p = HostTensor::from_f32("p", "bf16", vec![1, 2], &[2.0, 4.0]);
        let out = linear_sigmoid_mul(&env, &[x, w, b, p]).unwrap()[0].f32s();
        // gate = [1.0, 0.0] → sigmoid [0.7311, 0.5] → × [2, 4] = [1.4621, 2.0]
        assert_eq!(out[0], bf16(2.0 / (1.0 + (-1.0f32).exp())));
        assert_eq!(out[1], 2.0);
    }

    #[test]
    fn moe_align_groups_pads_and_fills_the_declared_length() {
        // N = 6 slots; E = 4; BS = 4.
        let ids = HostTensor::from_i64("ids", "int32", vec![3, 2], &[2, 0, 2, 2, 0, 3]);
        let env = |nb: i128| ints(&[("E", 4), ("BS", 4), ("NB", nb)]);
        let o = moe_align_block_size(&env(3), &[ids.clone()]).unwrap();
        assert_eq!(o[0].i64s(), vec![1, 4, 6, 6, 0, 2, 3, 6, 5, 6, 6, 6]);
        assert_eq!(o[1].i64s(), vec![0, 2, 3]);
        assert_eq!(o[2].i64s(), vec![12]);
        // A larger declared length is filled with the sentinel and expert −1.
        let o = moe_align_block_size(&env(4), &[ids.clone()]).unwrap();
        assert_eq!(&o[0].i64s()[12..], &[6, 6, 6, 6]);
        assert_eq!(o[1].i64s(), vec![0, 2, 3, -1]);
        assert_eq!(o[2].i64s(), vec![12]);
        // A shorter one is truncated; the true length is still reported.
        let o = moe_align_block_size(&env(2), &[ids]).unwrap();
        assert_eq!(o[0].i64s(), vec![1, 4, 6, 6, 0, 2, 3, 6]);
        assert_eq!(o[2].i64s(), vec![12]);
    }

    #[test]
    fn count_and_sort_is_a_stable_counting_sort() {
        let mut rng = Rng::new(3);
        let (n, e) = (200usize, 7usize);
        let v: Vec<i64> = (0..n).map(|_| (rng.next_u64() % e as u64) as i64).collect();
        let ids = HostTensor::from_i64("ids", "int32", vec![n], &v);
        let o = moe_count_and_sort(&ints(&[("E", e as i128)]), &[ids]).unwrap();
        let (sorted, counts, cum) = (o[0].i64s(), o[1].i64s(), o[2].i64s());
        assert_eq!(counts.iter().sum::<i64>(), n as i64);
        assert_eq!(cum[0], 0);
        assert_eq!(cum[e], n as i64);
        // A permutation, grouped by expert, ascending inside a group.
        let mut seen = sorted.clone();
        seen.sort();
        assert_eq!(seen, (0..n as i64).collect::<Vec<_>>());
        for x in 0..e {
            let g = &sorted[cum[x] as usize..cum[x + 1] as usize];
            assert!(g.iter().all(|f| v[*f as usize] == x as i64));
            assert!(g.windows(2).all(|w| w[0] < w[1]));
        }
        // Agrees with align's unpadded grouping.
        let (full, _) = align_full(&v, e, 1);
        assert_eq!(full, sorted);
    }
}
