//! Correctness: candidate outputs against the reference's, compared in f64 at two levels.

use serde::{Deserialize, Serialize};

/// Decodes one element of a dtype from little-endian bytes to f64.
pub fn decode(dtype: &str, b: &[u8]) -> f64 {
    match dtype {
        "bf16" => f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16) as f64,
        "fp16" => f16_to_f64(u16::from_le_bytes([b[0], b[1]])),
        "fp32" | "tf32" => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        "fp64" => f64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])),
        "fp8_e4m3" => e4m3fn_to_f64(b[0]),
        "fp8_e4m3fnuz" => e4m3fnuz_to_f64(b[0]),
        "int8" => b[0] as i8 as f64,
        "uint8" | "bool" => b[0] as f64,
        "int32" => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        "int64" => i64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])) as f64,
        _ => f64::NAN,
    }
}

pub fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let man = (h & 0x3ff) as f64;
    match exp {
        0 => sign * man * 2f64.powi(-24),
        31 => {
            if man == 0.0 {
                sign * f64::INFINITY
            } else {
                f64::NAN
            }
        }
        _ => sign * (1.0 + man / 1024.0) * 2f64.powi(exp - 15),
    }
}

/// float8_e4m3fn: bias 7, no infinities, NaN = 0x7F / 0xFF.
pub fn e4m3fn_to_f64(v: u8) -> f64 {
    let sign = if v & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = ((v >> 3) & 0xf) as i32;
    let man = (v & 7) as f64;
    if exp == 15 && man == 7.0 {
        return f64::NAN;
    }
    if exp == 0 {
        sign * man / 8.0 * 2f64.powi(-6)
    } else {
        sign * (1.0 + man / 8.0) * 2f64.powi(exp - 7)
    }
}

/// float8_e4m3fnuz: bias 8, NaN = 0x80 only, no negative zero.
pub fn e4m3fnuz_to_f64(v: u8) -> f64 {
    if v == 0x80 {
        return f64::NAN;
    }
    let sign = if v & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = ((v >> 3) & 0xf) as i32;
    let man = (v & 7) as f64;
    if exp == 0 {
        sign * man / 8.0 * 2f64.powi(-7)
    } else {
        sign * (1.0 + man / 8.0) * 2f64.powi(exp - 8)
    }
}

/// The outcome of comparing one output tensor.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TensorCheck {
    pub name: String,
    pub elements: u64,
    /// Benchmark-compatible: |ref − cand| ≤ 0.01 + 0.05·|cand| (floats), exact otherwise.
    pub bench_ok: bool,
    /// Strict: per-operator atol/rtol per element plus relative L2 error.
    pub strict_ok: bool,
    pub max_abs: f64,
    pub max_rel: f64,
    pub rel_l2: f64,
    /// Elements failing the strict test.
    pub mismatches: u64,
    pub first_bad: Option<u64>,
    /// First failing element's values (reference, candidate).
    pub first_bad_values: Option<(f64, f64)>,
    /// Why the tensor failed, when it did, in words.
    pub reason: Option<String>,
}

/// Tolerances of the strict level.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Tol {
    pub atol: f64,
    pub rtol: f64,
    pub rel_l2: f64,
}

/// How an output is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Float,
    Exact,
}

/// Compares a candidate output (two runs, each after a different poison) with the reference.
/// `poison_a` / `poison_b` are the element bit patterns written before each run.
#[allow(clippy::too_many_arguments)]
pub fn check_tensor(
    name: &str,
    dtype: &str,
    mode: Mode,
    reference: &[u8],
    run_a: &[u8],
    run_b: &[u8],
    poison_a: &[u8],
    poison_b: &[u8],
    tol: Tol,
    allow_nondeterminism: bool,
) -> TensorCheck {
    let es = crate::suite::dtype_size(dtype).unwrap_or(1);
    let n = (reference.len() / es) as u64;
    let mut c = TensorCheck {
        name: name.to_string(),
        elements: n,
        bench_ok: true,
        strict_ok: true,
        max_abs: 0.0,
        max_rel: 0.0,
        rel_l2: 0.0,
        mismatches: 0,
        first_bad: None,
        first_bad_values: None,
        reason: None,
    };
    if run_a.len() != reference.len() || run_b.len() != reference.len() {
        c.bench_ok = false;
        c.strict_ok = false;
        c.reason = Some(format!(
            "size {} bytes, reference {}",
            run_a.len(),
            reference.len()
        ));
        return c;
    }
    let mut unwritten = 0u64;
    let mut first_unwritten = None;
    let mut differ = 0u64;
    let mut first_differ = None;
    let mut nan = 0u64;
    let mut first_nan = None;
    let mut err2 = 0.0f64;
    let mut ref2 = 0.0f64;
    let mut cand_const = true;
    let mut ref_const = true;
    let mut first_ref = None;
    let mut first_cand = None;
    for i in 0..n as usize {
        let rb = &reference[i * es..(i + 1) * es];
        let ab = &run_a[i * es..(i + 1) * es];
        let bb = &run_b[i * es..(i + 1) * es];
        if ab == poison_a && bb == poison_b && rb != poison_a {
            unwritten += 1;
            first_unwritten.get_or_insert(i as u64);
            continue;
        }
        if ab != bb {
            differ += 1;
            first_differ.get_or_insert(i as u64);
        }
        let r = decode(dtype, rb);
        let x = decode(dtype, ab);
        match first_ref {
            None => first_ref = Some(rb.to_vec()),
            Some(ref f) => {
                if f.as_slice() != rb {
                    ref_const = false
                }
            }
        }
        match first_cand {
            None => first_cand = Some(ab.to_vec()),
            Some(ref f) => {
                if f.as_slice() != ab {
                    cand_const = false
                }
            }
        }
        let both_nan = r.is_nan() && x.is_nan();
        if !x.is_finite() && !(both_nan || (r.is_infinite() && r == x)) {
            nan += 1;
            first_nan.get_or_insert(i as u64);
        }
        let (bench, strict) = match mode {
            Mode::Exact => {
                let same = rb == ab || both_nan;
                (same, same)
            }
            Mode::Float => {
                let d = (r - x).abs();
                // The benchmark's rule: NaN never equals NaN.
                let bench = d <= 0.01 + 0.05 * x.abs();
                let strict = both_nan || (r == x) || d <= tol.atol + tol.rtol * r.abs();
                (bench, strict)
            }
        };
        if !bench {
            c.bench_ok = false;
        }
        if !strict {
            c.mismatches += 1;
            if c.first_bad.is_none() {
                c.first_bad = Some(i as u64);
                c.first_bad_values = Some((r, x));
            }
        }
        if r.is_finite() && x.is_finite() {
            let d = (r - x).abs();
            c.max_abs = c.max_abs.max(d);
            if r != 0.0 {
                c.max_rel = c.max_rel.max(d / r.abs());
            }
            err2 += d * d;
            ref2 += r * r;
        }
    }
    c.rel_l2 = if ref2 > 0.0 {
        (err2 / ref2).sqrt()
    } else if err2 > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    let mut fail = |why: String| {
        c.strict_ok = false;
        if c.reason.is_none() {
            c.reason = Some(why);
        }
    };
    if unwritten > 0 {
        c.bench_ok = false;
        fail(format!(
            "{unwritten} elements never written (first at index {})",
            first_unwritten.unwrap_or(0)
        ));
    }
    if nan > 0 {
        c.bench_ok = false;
        fail(format!(
            "{nan} NaN/Inf elements where the reference is finite (first at index {})",
            first_nan.unwrap_or(0)
        ));
    }
    if differ > 0 && !allow_nondeterminism {
        fail(format!(
            "nondeterministic: two runs on the same inputs differ in {differ} elements (first at index {})",
            first_differ.unwrap_or(0)
        ));
    }
    if n > 1 && cand_const && !ref_const {
        fail("constant output where the reference is not".into());
    }
    if c.mismatches > 0 {
        let (r, x) = c.first_bad_values.unwrap_or((f64::NAN, f64::NAN));
        fail(format!(
            "{} of {n} elements outside tolerance (first at index {}: reference {r}, candidate {x})",
            c.mismatches,
            c.first_bad.unwrap_or(0)
        ));
    }
    if mode == Mode::Float && c.rel_l2 > tol.rel_l2 {
        fail(format!(
            "relative L2 error {:.3e} above {:.1e}",
            c.rel_l2, tol.rel_l2
        ));
    }
    c
}

/// Poison patterns per dtype: two different patterns that are NaN for float types.
pub fn poison(dtype: &str, which: u8) -> Vec<u8> {
    let a = which == 0;
    match dtype {
        "bf16" => (if a { 0x7FA5u16 } else { 0xFFC3u16 })
            .to_le_bytes()
            .to_vec(),
        "fp16" => (if a { 0x7EA5u16 } else { 0xFDC3u16 })
            .to_le_bytes()
            .to_vec(),
        "fp32" | "tf32" => (if a { 0x7FA5_A5A5u32 } else { 0xFFC3_C3C3u32 })
            .to_le_bytes()
            .to_vec(),
        "fp64" => (if a {
            0x7FF5_A5A5_7FF5_A5A5u64
        } else {
            0xFFF3_C3C3_FFF3_C3C3u64
        })
        .to_le_bytes()
        .to_vec(),
        "int32" => (if a { 0xA5A5_A5A5u32 } else { 0xC3C3_C3C3u32 })
            .to_le_bytes()
            .to_vec(),
        "int64" => (if a {
            0xA5A5_A5A5_A5A5_A5A5u64
        } else {
            0xC3C3_C3C3_C3C3_C3C3u64
        })
        .to_le_bytes()
        .to_vec(),
        "fp8_e4m3" => vec![if a { 0x7F } else { 0xFF }],
        "fp8_e4m3fnuz" => vec![if a { 0x80 } else { 0xA5 }],
        _ => vec![if a { 0xA5 } else { 0xC3 }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bf16s(v: &[f32]) -> Vec<u8> {
        v.iter()
            .flat_map(|x| ((x.to_bits() >> 16) as u16).to_le_bytes())
            .collect()
    }

    const TOL: Tol = Tol {
        atol: 1e-3,
        rtol: 0.0078125,
        rel_l2: 0.01,
    };

    fn check(r: &[u8], a: &[u8], b: &[u8]) -> TensorCheck {
        check_tensor(
            "out",
            "bf16",
            Mode::Float,
            r,
            a,
            b,
            &poison("bf16", 0),
            &poison("bf16", 1),
            TOL,
            false,
        )
    }

    #[test]
    fn decodes_formats() {
        assert_eq!(decode("bf16", &bf16s(&[1.5])), 1.5);
        assert_eq!(f16_to_f64(0x3C00), 1.0);
        assert_eq!(f16_to_f64(0x0001), 2f64.powi(-24));
        assert_eq!(e4m3fn_to_f64(0x7E), 448.0);
        assert!(e4m3fn_to_f64(0x7F).is_nan());
        assert_eq!(e4m3fn_to_f64(0x01), 2f64.powi(-9));
        assert_eq!(e4m3fnuz_to_f64(0x7F), 240.0);
        assert!(e4m3fnuz_to_f64(0x80).is_nan());
        assert_eq!(e4m3fnuz_to_f64(0x01), 2f64.powi(-10));
        assert!(decode("bf16", &poison("bf16", 0)).is_nan());
        assert!(decode("bf16", &poison("bf16", 1)).is_nan());
        assert!(decode("fp16", &poison("fp16", 0)).is_nan());
        assert!(decode("fp16", &poison("fp16", 1)).is_nan());
        assert!(decode("fp32", &poison("fp32", 1)).is_nan());
    }

    #[test]
    fn equal_outputs_pass() {
        let r = bf16s(&[1.0, 2.0, -3.0]);
        let c = check(&r, &r, &r);
        assert!(c.bench_ok && c.strict_ok, "{c:?}");
        assert_eq!(c.max_abs, 0.0);
    }

    #[test]
    fn unwritten_elements_are_caught() {
        let r = bf16s(&[1.0, 2.0, 3.0]);
        let mut a = r.clone();
        let mut b = r.clone();
        a[2..4].copy_from_slice(&poison("bf16", 0));
        b[2..4].copy_from_slice(&poison("bf16", 1));
        let c = check(&r, &a, &b);
        assert!(!c.strict_ok && !c.bench_ok);
        assert!(c.reason.unwrap().contains("never written"));
    }

    #[test]
    fn constant_output_is_caught() {
        let r = bf16s(&[0.004, 0.002, -0.003, 0.001]);
        let k = bf16s(&[0.0, 0.0, 0.0, 0.0]);
        let c = check(&r, &k, &k);
        assert!(c.bench_ok, "atol 1e-2 hides it at the benchmark level");
        assert!(!c.strict_ok);
    }

    #[test]
    fn nondeterminism_is_caught() {
        let r = bf16s(&[1.0, 2.0, 3.0]);
        let b = bf16s(&[1.0, 2.0, 3.015625]);
        let c = check(&r, &r, &b);
        assert!(c.reason.unwrap().contains("nondeterministic"));
        let c = check_tensor(
            "out",
            "bf16",
            Mode::Float,
            &r,
            &r,
            &b,
            &poison("bf16", 0),
            &poison("bf16", 1),
            TOL,
            true,
        );
        assert!(c.strict_ok);
    }

    #[test]
    fn tolerance_levels() {
        let r = bf16s(&[1.0, 2.0, 4.0]);
        let one_ulp = bf16s(&[1.0078125, 2.0, 4.0]);
        assert!(check(&r, &one_ulp, &one_ulp).strict_ok);
        let off = bf16s(&[1.0, 2.0, 4.0625]);
        let c = check(&r, &off, &off);
        assert!(c.bench_ok && !c.strict_ok);
        assert_eq!(c.mismatches, 1);
        assert_eq!(c.first_bad, Some(2));
        let nan = bf16s(&[1.0, f32::NAN, 4.0]);
        let c = check(&r, &nan, &nan);
        assert!(!c.bench_ok && !c.strict_ok);
    }

    #[test]
    fn exact_mode_needs_identical_codes() {
        let r = vec![1u8, 2, 3, 4];
        let x = vec![1u8, 2, 3, 5];
        let c = check_tensor(
            "q",
            "fp8_e4m3fnuz",
            Mode::Exact,
            &r,
            &x,
            &x,
            &poison("fp8_e4m3fnuz", 0),
            &poison("fp8_e4m3fnuz", 1),
            Tol {
                atol: 0.0,
                rtol: 0.0,
                rel_l2: 0.0,
            },
            false,
        );
        assert!(!c.bench_ok && !c.strict_ok);
        assert_eq!(c.first_bad, Some(3));
    }
}
