//! Correctness: candidate outputs against the reference's, compared in f64 at two levels.

use crate::suite::dtype::decode;
use serde::{Deserialize, Serialize};

/// The outcome of comparing one output tensor.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TensorCheck {
    pub name: String,
    pub elements: u64,
    /// Benchmark-compatible: |ref − cand| ≤ 0.01 + 0.05·|cand| (floats), exact otherwise.
    pub bench_ok: bool,
    /// Strict: per-operator atol/rtol per element plus relative L2 error.
    pub strict_ok: bool,
    /// The error figures are NaN or infinite where the candidate wrote NaN or infinity; JSON
    /// writes those as null, which reads back as NaN (`not_finite`).
    #[serde(deserialize_with = "not_finite::f64")]
    pub max_abs: f64,
    #[serde(deserialize_with = "not_finite::f64")]
    pub max_rel: f64,
    #[serde(deserialize_with = "not_finite::f64")]
    pub rel_l2: f64,
    /// Elements failing the strict test.
    pub mismatches: u64,
    pub first_bad: Option<u64>,
    /// First failing element's values (reference, candidate).
    #[serde(default, deserialize_with = "not_finite::pair")]
    pub first_bad_values: Option<(f64, f64)>,
    /// Why the tensor failed, when it did, in words.
    pub reason: Option<String>,
    /// Elements where the reference is NaN and the candidate has NaN at the same place (a
    /// match at the strict level, never at the benchmark level).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shared_nan: u64,
}

impl TensorCheck {
    /// A check of `elements` elements before any is compared: both levels passed, no errors.
    pub(crate) fn passing(name: &str, elements: u64) -> TensorCheck {
        TensorCheck {
            name: name.to_string(),
            elements,
            bench_ok: true,
            strict_ok: true,
            max_abs: 0.0,
            max_rel: 0.0,
            rel_l2: 0.0,
            mismatches: 0,
            first_bad: None,
            first_bad_values: None,
            reason: None,
            shared_nan: 0,
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Reading back figures that were not finite: JSON has no NaN or infinity, so serde_json writes
/// them as null; a null figure reads as NaN (a candidate's NaN must reach the verdict as
/// `incorrect`, never as a protocol error).
mod not_finite {
    use serde::{Deserialize, Deserializer};

    pub fn f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }

    pub fn pair<'de, D: Deserializer<'de>>(d: D) -> Result<Option<(f64, f64)>, D::Error> {
        let p = Option::<(Option<f64>, Option<f64>)>::deserialize(d)?;
        Ok(p.map(|(a, b)| (a.unwrap_or(f64::NAN), b.unwrap_or(f64::NAN))))
    }
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

/// Statistics of a range of elements (the host's scan, or the device's check of the same
/// rules: `worker`); ranges merge in index order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Partial {
    pub(crate) bench_fail: bool,
    pub(crate) mismatches: u64,
    pub(crate) first_bad: Option<(u64, f64, f64)>,
    pub(crate) max_abs: f64,
    pub(crate) max_rel: f64,
    pub(crate) err2: f64,
    pub(crate) ref2: f64,
    pub(crate) unwritten: u64,
    pub(crate) first_unwritten: Option<u64>,
    pub(crate) differ: u64,
    pub(crate) first_differ: Option<u64>,
    pub(crate) nan: u64,
    pub(crate) first_nan: Option<u64>,
    pub(crate) shared_nan: u64,
    /// (first value, all equal to it) of the reference and of the candidate.
    pub(crate) ref_const: Option<(f64, bool)>,
    pub(crate) cand_const: Option<(f64, bool)>,
}

fn same_value(a: f64, b: f64) -> bool {
    a == b || (a.is_nan() && b.is_nan())
}

fn merge_const(a: Option<(f64, bool)>, b: Option<(f64, bool)>) -> Option<(f64, bool)> {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some((va, ca)), Some((vb, cb))) => Some((va, ca && cb && same_value(va, vb))),
    }
}

impl Partial {
    fn merge(mut self, o: Partial) -> Partial {
        self.bench_fail |= o.bench_fail;
        self.mismatches += o.mismatches;
        self.first_bad = self.first_bad.or(o.first_bad);
        self.max_abs = self.max_abs.max(o.max_abs);
        self.max_rel = self.max_rel.max(o.max_rel);
        self.err2 += o.err2;
        self.ref2 += o.ref2;
        self.unwritten += o.unwritten;
        self.first_unwritten = self.first_unwritten.or(o.first_unwritten);
        self.differ += o.differ;
        self.first_differ = self.first_differ.or(o.first_differ);
        self.nan += o.nan;
        self.first_nan = self.first_nan.or(o.first_nan);
        self.shared_nan += o.shared_nan;
        self.ref_const = merge_const(self.ref_const, o.ref_const);
        self.cand_const = merge_const(self.cand_const, o.cand_const);
        self
    }
}

struct Inputs<'a> {
    dtype: &'a str,
    mode: Mode,
    es: usize,
    reference: &'a [u8],
    run_a: &'a [u8],
    run_b: &'a [u8],
    poison_a: &'a [u8],
    poison_b: &'a [u8],
    tol: Tol,
}

fn scan(inp: &Inputs, from: usize, to: usize) -> Partial {
    let es = inp.es;
    let mut p = Partial::default();
    for i in from..to {
        let rb = &inp.reference[i * es..(i + 1) * es];
        let ab = &inp.run_a[i * es..(i + 1) * es];
        let bb = &inp.run_b[i * es..(i + 1) * es];
        if ab == inp.poison_a && bb == inp.poison_b && rb != inp.poison_a {
            p.unwritten += 1;
            p.first_unwritten.get_or_insert(i as u64);
            continue;
        }
        if ab != bb {
            p.differ += 1;
            p.first_differ.get_or_insert(i as u64);
        }
        let r = decode(inp.dtype, rb);
        let x = decode(inp.dtype, ab);
        // Constant by value (0.0 and -0.0 are the same constant).
        p.ref_const = merge_const(p.ref_const, Some((r, true)));
        p.cand_const = merge_const(p.cand_const, Some((x, true)));
        let both_nan = r.is_nan() && x.is_nan();
        if both_nan {
            p.shared_nan += 1;
        }
        if !x.is_finite() && !(both_nan || (r.is_infinite() && r == x)) {
            p.nan += 1;
            p.first_nan.get_or_insert(i as u64);
        }
        let (bench, strict) = match inp.mode {
            Mode::Exact => {
                // Strict: identical codes, NaN at the same place counting as a match. The
                // benchmark compares fp8 tensors as floats (allclose, NaN never equal) and
                // integers exactly.
                let strict = rb == ab || both_nan;
                let bench = if inp.dtype.starts_with("fp8") {
                    !r.is_nan() && !x.is_nan() && (r == x || (r - x).abs() <= 0.01 + 0.05 * x.abs())
                } else {
                    rb == ab
                };
                (bench, strict)
            }
            Mode::Float => {
                let d = (r - x).abs();
                // The benchmark's rule: NaN never equals NaN.
                let bench = r == x || d <= 0.01 + 0.05 * x.abs();
                let strict = both_nan || (r == x) || d <= inp.tol.atol + inp.tol.rtol * r.abs();
                (bench, strict)
            }
        };
        if !bench {
            p.bench_fail = true;
        }
        if !strict {
            p.mismatches += 1;
            if p.first_bad.is_none() {
                p.first_bad = Some((i as u64, r, x));
            }
        }
        if r.is_finite() && x.is_finite() {
            let d = (r - x).abs();
            p.max_abs = p.max_abs.max(d);
            if r != 0.0 {
                p.max_rel = p.max_rel.max(d / r.abs());
            }
            p.err2 += d * d;
            p.ref2 += r * r;
        }
    }
    p
}

/// Compares a candidate output (two runs, each after a different poison) with the reference.
/// `poison_a` / `poison_b` are the element bit patterns written before each run. Large tensors
/// are scanned on several threads.
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
    let n = reference.len() / es;
    let mut c = TensorCheck::passing(name, n as u64);
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
    let inp = Inputs {
        dtype,
        mode,
        es,
        reference,
        run_a,
        run_b,
        poison_a,
        poison_b,
        tol,
    };
    const CHUNK: usize = 1 << 20;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(16);
    let p = if n <= CHUNK || threads == 1 {
        scan(&inp, 0, n)
    } else {
        let per = n.div_ceil(threads);
        let parts: Vec<Partial> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..threads)
                .map(|t| {
                    let inp = &inp;
                    sc.spawn(move || scan(inp, (t * per).min(n), ((t + 1) * per).min(n)))
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        });
        parts.into_iter().fold(Partial::default(), Partial::merge)
    };
    finish(c, p, mode, tol, allow_nondeterminism)
}

/// The verdict of a comparison from its statistics: the same rules whoever gathered them.
pub(crate) fn finish(
    mut c: TensorCheck,
    p: Partial,
    mode: Mode,
    tol: Tol,
    allow_nondeterminism: bool,
) -> TensorCheck {
    let n = c.elements;
    c.bench_ok = !p.bench_fail;
    c.shared_nan = p.shared_nan;
    c.mismatches = p.mismatches;
    c.first_bad = p.first_bad.map(|b| b.0);
    c.first_bad_values = p.first_bad.map(|b| (b.1, b.2));
    c.max_abs = p.max_abs;
    c.max_rel = p.max_rel;
    c.rel_l2 = if p.ref2 > 0.0 {
        (p.err2 / p.ref2).sqrt()
    } else if p.err2 > 0.0 {
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
    if p.unwritten > 0 {
        c.bench_ok = false;
        fail(format!(
            "{} elements never written (first at index {})",
            p.unwritten,
            p.first_unwritten.unwrap_or(0)
        ));
    }
    if p.nan > 0 {
        c.bench_ok = false;
        fail(format!(
            "{} NaN/Inf elements where the reference is finite (first at index {})",
            p.nan,
            p.first_nan.unwrap_or(0)
        ));
    }
    if p.differ > 0 && !allow_nondeterminism {
        fail(format!(
            "nondeterministic: two runs on the same inputs differ in {} elements (first at index {})",
            p.differ,
            p.first_differ.unwrap_or(0)
        ));
    }
    let cand_const = p.cand_const.map(|c| c.1).unwrap_or(false);
    let ref_const = p.ref_const.map(|c| c.1).unwrap_or(true);
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

    /// A candidate's NaN gives NaN figures; they cross the worker's JSON line (as null) and read
    /// back as NaN, so the verdict stays `incorrect` instead of a protocol error.
    #[test]
    fn figures_that_are_not_finite_survive_the_json_line() {
        let mut c = TensorCheck::passing("out", 4);
        c.strict_ok = false;
        c.bench_ok = false;
        c.max_abs = f64::NAN;
        c.max_rel = f64::INFINITY;
        c.rel_l2 = f64::NAN;
        c.mismatches = 1;
        c.first_bad = Some(2);
        c.first_bad_values = Some((0.5, f64::NAN));
        let line = serde_json::to_string(&c).unwrap();
        assert!(line.contains("\"max_abs\":null"), "{line}");
        let back: TensorCheck = serde_json::from_str(&line).unwrap();
        assert!(back.max_abs.is_nan() && back.max_rel.is_nan() && back.rel_l2.is_nan());
        let (r, k) = back.first_bad_values.unwrap();
        assert_eq!(r, 0.5);
        assert!(k.is_nan());
        assert!(!back.strict_ok && !back.bench_ok);
        // Finite figures read back as they were.
        let ok: TensorCheck =
            serde_json::from_str(&serde_json::to_string(&TensorCheck::passing("o", 1)).unwrap())
                .unwrap();
        assert_eq!(ok, TensorCheck::passing("o", 1));
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
    fn poisons_decode_as_nan() {
        assert_eq!(decode("bf16", &bf16s(&[1.5])), 1.5);
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
        let k = bf16s(&[0.0, -0.0, 0.0, -0.0]);
        let c = check(&r, &k, &k);
        assert!(c.bench_ok, "atol 1e-2 hides it at the benchmark level");
        assert!(!c.strict_ok);
        assert!(c.reason.unwrap().contains("constant output"));
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
        let inf = bf16s(&[1.0, f32::NEG_INFINITY, 4.0]);
        let c = check(&inf, &inf, &inf);
        assert!(
            c.bench_ok && c.strict_ok,
            "equal infinities match at both levels"
        );
        let nan = bf16s(&[1.0, f32::NAN, 4.0]);
        let c = check(&r, &nan, &nan);
        assert!(!c.bench_ok && !c.strict_ok);
    }

    #[test]
    fn large_tensors_scan_in_parallel_with_the_same_result() {
        let n = (1 << 20) * 3 + 17;
        let r: Vec<f32> = (0..n).map(|i| ((i % 97) as f32) * 0.25 - 3.0).collect();
        let mut x = r.clone();
        x[2_500_000] += 1.0;
        x[3_000_001] += 2.0;
        let (rb, xb) = (bf16s(&r), bf16s(&x));
        let c = check(&rb, &xb, &xb);
        assert_eq!(c.elements, n as u64);
        assert_eq!(c.mismatches, 2);
        assert_eq!(c.first_bad, Some(2_500_000));
        assert_eq!(c.max_abs, 2.0);
        assert!(!c.strict_ok && c.reason.unwrap().contains("2 of"));
        let k = bf16s(&vec![1.5; n]);
        let c = check(&rb, &k, &k);
        assert!(c.reason.unwrap().contains("constant output"));
    }

    #[test]
    fn nan_codes_match_strictly_but_never_at_the_benchmark_level() {
        let r = vec![0x80u8, 0x10, 0x20];
        let c = check_tensor(
            "q",
            "fp8_e4m3fnuz",
            Mode::Exact,
            &r,
            &r,
            &r,
            &poison("fp8_e4m3fnuz", 0),
            &poison("fp8_e4m3fnuz", 1),
            Tol {
                atol: 0.0,
                rtol: 0.0,
                rel_l2: 0.0,
            },
            false,
        );
        assert!(c.strict_ok, "{c:?}");
        assert!(!c.bench_ok, "NaN never equals NaN in the benchmark");
        assert_eq!(c.shared_nan, 1, "the shared NaN is counted");
        let ints = 7i32.to_le_bytes().repeat(3);
        let c = check_tensor(
            "ids",
            "int32",
            Mode::Exact,
            &ints,
            &ints,
            &ints,
            &poison("int32", 0),
            &poison("int32", 1),
            Tol {
                atol: 0.0,
                rtol: 0.0,
                rel_l2: 0.0,
            },
            false,
        );
        assert!(c.bench_ok && c.strict_ok);
        assert_eq!(c.shared_nan, 0);
    }

    #[test]
    fn exact_mode_needs_identical_codes() {
        let r = vec![1u8, 2, 3, 0x70];
        let x = vec![1u8, 2, 3, 0x71];
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
