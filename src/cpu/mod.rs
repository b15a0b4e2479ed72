//! CPU implementations of the operators, for reduced shapes: tests check them on their own
//! properties, and on the GPU the reference kernels must agree with them
//! (tests/gpu_cpu.rs, through `dump` jobs that return a kernel's inputs and outputs).

use crate::suite::expr::{Env, Value};
use std::collections::BTreeMap;

mod attention;
mod delta_rule;
pub mod fp8;
mod moe_gemm;
mod norms_quant;
mod pilots;
mod rope_cache_routing;

/// A tensor on the host: little-endian bytes of its dtype.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    pub name: String,
    pub dtype: String,
    pub dims: Vec<usize>,
    pub bytes: Vec<u8>,
}

impl HostTensor {
    pub fn elements(&self) -> usize {
        self.dims.iter().product()
    }

    /// Values widened exactly to f32 (bf16, fp16, fp32, fp8 formats).
    pub fn f32s(&self) -> Vec<f32> {
        let es = crate::suite::dtype_size(&self.dtype).unwrap_or(1);
        self.bytes
            .chunks_exact(es)
            .map(|c| crate::suite::dtype::decode(&self.dtype, c) as f32)
            .collect()
    }

    pub fn i64s(&self) -> Vec<i64> {
        match self.dtype.as_str() {
            "int32" => self
                .bytes
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect(),
            "int64" => self
                .bytes
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect(),
            _ => self.f32s().into_iter().map(|x| x as i64).collect(),
        }
    }

    /// Encodes f32 values into the dtype with round-to-nearest-even.
    pub fn from_f32(name: &str, dtype: &str, dims: Vec<usize>, v: &[f32]) -> HostTensor {
        let bytes = match dtype {
            "bf16" => v.iter().flat_map(|x| bf16_bits(*x).to_le_bytes()).collect(),
            "fp16" => v.iter().flat_map(|x| f16_bits(*x).to_le_bytes()).collect(),
            "fp32" => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            "int32" => v.iter().flat_map(|x| (*x as i32).to_le_bytes()).collect(),
            "int64" => v.iter().flat_map(|x| (*x as i64).to_le_bytes()).collect(),
            _ => Vec::new(),
        };
        HostTensor {
            name: name.into(),
            dtype: dtype.into(),
            dims,
            bytes,
        }
    }

    pub fn from_i64(name: &str, dtype: &str, dims: Vec<usize>, v: &[i64]) -> HostTensor {
        let bytes = match dtype {
            "int32" => v.iter().flat_map(|x| (*x as i32).to_le_bytes()).collect(),
            _ => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        };
        HostTensor {
            name: name.into(),
            dtype: dtype.into(),
            dims,
            bytes,
        }
    }
}

/// fp32 → bf16 bits, round to nearest even (NaN stays NaN).
pub fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) as u16) | 0x40;
    }
    let round = 0x7FFF + ((b >> 16) & 1);
    ((b.wrapping_add(round)) >> 16) as u16
}

/// bf16(x) as f32.
pub fn bf16(x: f32) -> f32 {
    f32::from_bits((bf16_bits(x) as u32) << 16)
}

/// fp32 → fp16 bits, round to nearest even, with subnormals and overflow to infinity.
pub fn f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 31 {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1u32 << shift) - 1);
        let mut r = m >> shift;
        if rest > half || (rest == half && (r & 1) == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && (r & 1) == 1) {
        r += 1;
    }
    sign | r as u16
}

/// fp16(x) as f32.
pub fn f16(x: f32) -> f32 {
    crate::suite::dtype::f16_to_f64(f16_bits(x)) as f32
}

/// Rounds to the dtype and back (bf16, fp16; fp32 unchanged).
pub fn round_to(dtype: &str, x: f32) -> f32 {
    match dtype {
        "bf16" => bf16(x),
        "fp16" => f16(x),
        _ => x,
    }
}

/// A deterministic N(0,1) stream for property tests on the CPU (splitmix64 + Box–Muller).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn uniform(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 + 0.5) / 16_777_216.0
    }
    pub fn normal(&mut self) -> f32 {
        let (u1, u2) = (self.uniform(), self.uniform());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f32::consts::PI * u2).cos()
    }
    /// s·N(0,1) in a dtype, rounded as the generators do: dtype(dtype(n)·s).
    pub fn normal_in(&mut self, dtype: &str, n: usize, s: f32) -> Vec<f32> {
        (0..n)
            .map(|_| round_to(dtype, round_to(dtype, self.normal()) * s))
            .collect()
    }
}

/// A CPU implementation: the shape's environment and the inputs in problem order; returns the
/// outputs in problem order.
pub type CpuFn = fn(&Env, &[HostTensor]) -> Result<Vec<HostTensor>, String>;

/// One operator's CPU implementation and the reduced shapes (parameter sets) used to check the
/// reference kernel against it on the GPU.
pub struct CpuOp {
    pub name: &'static str,
    pub run: CpuFn,
    pub reduced: fn() -> Vec<BTreeMap<String, Value>>,
}

/// Every operator with a CPU implementation.
pub fn all() -> Vec<CpuOp> {
    let mut v = Vec::new();
    v.extend(pilots::ops());
    v.extend(attention::ops());
    v.extend(delta_rule::ops());
    v.extend(moe_gemm::ops());
    v.extend(norms_quant::ops());
    v.extend(rope_cache_routing::ops());
    v
}

pub fn find(op: &str) -> Option<CpuOp> {
    all().into_iter().find(|c| c.name == op)
}

/// Builds a parameter map from pairs.
pub fn params(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// An integer parameter of the environment.
pub fn int(env: &Env, k: &str) -> Result<usize, String> {
    env.get(k)
        .and_then(|v| v.as_int())
        .map(|i| i as usize)
        .ok_or_else(|| format!("parameter `{k}` missing or not an integer"))
}

/// A float parameter of the environment.
pub fn float(env: &Env, k: &str) -> Result<f32, String> {
    env.get(k)
        .and_then(|v| v.as_f64())
        .map(|x| x as f32)
        .ok_or_else(|| format!("parameter `{k}` missing or not a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_and_f16_round_to_nearest_even() {
        assert_eq!(bf16_bits(1.0), 0x3F80);
        // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even (1).
        assert_eq!(bf16(1.0 + 1.0 / 256.0), 1.0);
        assert_eq!(bf16(1.0 + 3.0 / 256.0), 1.0 + 4.0 / 256.0);
        assert_eq!(f16_bits(1.0), 0x3C00);
        assert_eq!(f16_bits(65504.0), 0x7BFF);
        assert_eq!(f16_bits(1e6), 0x7C00);
        assert_eq!(f16(2f32.powi(-24)), 2f32.powi(-24));
        assert_eq!(f16(1.0 + 1.0 / 2048.0), 1.0);
        assert_eq!(f16(-0.333333), -0.33325195);
    }

    #[test]
    fn every_cpu_op_names_a_suite_operator_with_valid_reduced_shapes() {
        let suite = crate::suite::Suite::load(crate::suite::SuiteSource::Embedded).unwrap();
        for c in all() {
            let p = suite
                .problem(c.name)
                .unwrap_or_else(|| panic!("{} is not an operator", c.name));
            for params in (c.reduced)() {
                let s = crate::suite::Shape {
                    id: 9000,
                    params,
                    note: String::new(),
                    production_us: Default::default(),
                    line: 0,
                };
                let env = p.env(&s).unwrap();
                p.work_in(&env, 9000).unwrap();
            }
        }
    }
}
