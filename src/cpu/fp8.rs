//! fp8 encoders (float8_e4m3fn and float8_e4m3fnuz) as PyTorch converts, per the operator
//! specifications' README, shared by the CPU implementations.

use super::HostTensor;

/// The code of a finite, non-negative magnitude `a` in an e4m3 layout with exponent bias
/// `bias`: round to nearest even with subnormals (below 2^(1−bias)). The mantissa carry of a
/// rounding up moves into the exponent field, which is the correct next code. No saturation.
fn e4m3_magnitude_code(a: f32, bias: i32) -> u32 {
    let min_normal = 2f32.powi(1 - bias);
    if a < min_normal {
        // Subnormal step 2^(1−bias−3); the scaling is exact, the rounding is RNE (0…8, where
        // 8 is the smallest normal's code).
        (a * 2f32.powi(bias + 2)).round_ties_even() as u32
    } else {
        let b = a.to_bits();
        let e = (b >> 23) as i32 - 127;
        let mut m = (b >> 20) & 7;
        let rest = b & 0xF_FFFF;
        if rest > 0x8_0000 || (rest == 0x8_0000 && m & 1 == 1) {
            m += 1;
        }
        (((e + bias) as u32) << 3) + m
    }
}

/// fp32 → float8_e4m3fnuz (bias 8, max 240, NaN = 0x80, no negative zero), as PyTorch converts:
/// RNE with subnormals; |x| < 248 saturates to ±240; |x| ≥ 248, ±inf and NaN give 0x80;
/// results that round to zero are +0.
pub fn e4m3fnuz_bits(x: f32) -> u8 {
    let a = x.abs();
    if a.is_nan() || a >= 248.0 {
        return 0x80;
    }
    let code = e4m3_magnitude_code(a, 8).min(0x7F);
    if code == 0 {
        0
    } else if x.is_sign_negative() {
        0x80 | code as u8
    } else {
        code as u8
    }
}

/// fp32 → float8_e4m3fn (bias 7, max 448, NaN = 0x7F/0xFF, signed zero), as PyTorch converts:
/// RNE with subnormals; |x| ≤ 464 saturates to ±448; larger, ±inf and NaN give NaN.
pub fn e4m3fn_bits(x: f32) -> u8 {
    let s: u8 = if x.is_sign_negative() { 0x80 } else { 0 };
    let a = x.abs();
    if a.is_nan() || a > 464.0 {
        return s | 0x7F;
    }
    s | e4m3_magnitude_code(a, 7).min(0x7E) as u8
}

pub fn fp8_tensor(name: &str, dtype: &str, dims: Vec<usize>, codes: Vec<u8>) -> HostTensor {
    HostTensor {
        name: name.into(),
        dtype: dtype.into(),
        dims,
        bytes: codes,
    }
}

/// fp32 → e4m3fnuz → fp32.
pub fn e4m3fnuz(x: f32) -> f32 {
    crate::suite::dtype::e4m3fnuz_to_f64(e4m3fnuz_bits(x)) as f32
}

/// fp32 → e4m3fn → fp32.
pub fn e4m3fn(x: f32) -> f32 {
    crate::suite::dtype::e4m3fn_to_f64(e4m3fn_bits(x)) as f32
}
