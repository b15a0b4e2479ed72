//! Element formats of the suite's dtypes: one element decoded from its little-endian bytes to
//! f64, as the checks compare them (`contract::compare`), the worker reports values and the CPU
//! implementations read fp8 and fp16 (bytes per element: `suite::dtype_size`).
//!
//! Invariant: every finite value of a format decodes exactly (f64 holds each of them); a code
//! that is NaN in the format is NaN, and an unknown dtype decodes as NaN, never as a number.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_formats() {
        assert_eq!(f16_to_f64(0x3C00), 1.0);
        assert_eq!(f16_to_f64(0x0001), 2f64.powi(-24));
        assert_eq!(e4m3fn_to_f64(0x7E), 448.0);
        assert!(e4m3fn_to_f64(0x7F).is_nan());
        assert_eq!(e4m3fn_to_f64(0x01), 2f64.powi(-9));
        assert_eq!(e4m3fnuz_to_f64(0x7F), 240.0);
        assert!(e4m3fnuz_to_f64(0x80).is_nan());
        assert_eq!(e4m3fnuz_to_f64(0x01), 2f64.powi(-10));
        assert_eq!(decode("fp32", &2.5f32.to_le_bytes()), 2.5);
        assert_eq!(decode("int8", &[0xFF]), -1.0);
        assert!(decode("fp4", &[0]).is_nan());
    }
}
