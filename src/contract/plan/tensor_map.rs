//! Tensor maps of a launch plan (`[[tensor_map]]`): what a Hopper kernel's TMA loads and stores
//! (`cp.async.bulk.tensor`) address. The plan names a buffer, its element type, dimensions,
//! strides and the box each copy moves; the worker encodes the `CUtensorMap`
//! (`cuTensorMapEncodeTiled`) for the buffer of each input set and passes it by value, as the
//! kernel's `const __grid_constant__ CUtensorMap` parameter. The harness checks that the mapped
//! region lies inside the buffer: the copy engine does not check it against the allocation.
//!
//! Invariants: every value is evaluated to u64 and range-checked before use (dims 1 to 2^32,
//! strides multiples of 16 below 2^40, boxes 1 to 256, element strides 1 to 8); packed strides
//! and the extent a map reaches are computed in checked arithmetic, so a map whose reach does
//! not fit u64 is refused, not wrapped into a small number that `check_fits` would pass.

use super::{PlanError, PlanExpr, clip};
use crate::suite::expr::Env;

/// How the copy engine swizzles a box in shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Swizzle {
    None,
    B32,
    B64,
    B128,
}

/// Interleaved layouts (for packed sub-word types); `None` for ordinary tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Interleave {
    None,
    B16,
    B32,
}

/// How far the copy engine promotes a load into L2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum L2Promotion {
    None,
    B64,
    B128,
    B256,
}

/// What an element outside the tensor reads as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OobFill {
    Zero,
    Nan,
}

/// A `[[tensor_map]]` entry as written.
#[derive(Debug, Clone)]
pub struct TensorMap {
    /// The name kernels take it by in `args`.
    pub name: String,
    /// The buffer it maps (an operator input or output, or a scratch buffer).
    pub tensor: String,
    pub dtype: String,
    /// Extents in elements, innermost first (1 to 5).
    pub dims: Vec<PlanExpr>,
    /// Byte strides of dimensions 1.. (rank - 1 entries); empty: packed.
    pub strides: Vec<PlanExpr>,
    /// The box one copy moves, innermost first (1 to 256 each).
    pub boxes: Vec<PlanExpr>,
    /// Element strides inside the box (1 to 8 each); empty: all 1.
    pub element_strides: Vec<PlanExpr>,
    pub swizzle: Swizzle,
    pub interleave: Interleave,
    pub l2_promotion: L2Promotion,
    pub oob_fill: OobFill,
    pub line: usize,
}

/// A tensor map with every expression evaluated for one shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResolvedTensorMap {
    pub name: String,
    pub tensor: String,
    pub dtype: String,
    pub dims: Vec<u64>,
    /// Byte strides of dimensions 1.. (rank - 1 entries).
    pub strides: Vec<u64>,
    pub boxes: Vec<u32>,
    pub element_strides: Vec<u32>,
    pub swizzle: Swizzle,
    pub interleave: Interleave,
    pub l2_promotion: L2Promotion,
    pub oob_fill: OobFill,
    pub line: usize,
}

/// The types the copy engine moves, by the suite's dtype names.
pub const TMA_DTYPES: &[&str] = &[
    "u8", "i8", "fp8_e4m3", "fp8_e5m2", "u16", "i16", "fp16", "bf16", "u32", "i32", "fp32", "i64",
    "u64", "fp64",
];

/// Bytes per element of a tensor map's dtype (one of `TMA_DTYPES`; the plan refuses others).
pub fn tma_dtype_size(dtype: &str) -> u64 {
    match dtype {
        "u8" | "i8" | "fp8_e4m3" | "fp8_e5m2" => 1,
        "u16" | "i16" | "fp16" | "bf16" => 2,
        "u32" | "i32" | "fp32" => 4,
        "i64" | "u64" | "fp64" => 8,
        // Not reachable through a parsed plan (its dtype is checked against TMA_DTYPES).
        other => crate::suite::dtype_size(other).unwrap_or(1) as u64,
    }
}

pub(super) fn parse_enum<T: Copy>(
    what: &str,
    text: Option<&str>,
    default: T,
    options: &[(&str, T)],
    line: usize,
) -> Result<T, PlanError> {
    let Some(t) = text else {
        return Ok(default);
    };
    options
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(t))
        .map(|(_, v)| *v)
        .ok_or_else(|| PlanError {
            line,
            msg: format!(
                "{what} `{t}`: one of {}",
                options
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
}

pub(super) const SWIZZLES: &[(&str, Swizzle)] = &[
    ("none", Swizzle::None),
    ("32B", Swizzle::B32),
    ("64B", Swizzle::B64),
    ("128B", Swizzle::B128),
];
pub(super) const INTERLEAVES: &[(&str, Interleave)] = &[
    ("none", Interleave::None),
    ("16B", Interleave::B16),
    ("32B", Interleave::B32),
];
pub(super) const PROMOTIONS: &[(&str, L2Promotion)] = &[
    ("none", L2Promotion::None),
    ("64B", L2Promotion::B64),
    ("128B", L2Promotion::B128),
    ("256B", L2Promotion::B256),
];
pub(super) const FILLS: &[(&str, OobFill)] = &[("zero", OobFill::Zero), ("nan", OobFill::Nan)];

fn eval_u64(e: &PlanExpr, env: &Env, what: &str, name: &str) -> Result<u64, PlanError> {
    let v = e.expr.eval(env).map_err(|x| PlanError {
        line: e.line,
        msg: format!("tensor map {name}: {what} `{}`: {x}", clip(&e.src)),
    })?;
    match v.as_int().map(u64::try_from) {
        Some(Ok(i)) => Ok(i),
        _ => Err(PlanError {
            line: e.line,
            msg: format!(
                "tensor map {name}: {what} `{}` gives {}, not a size",
                clip(&e.src),
                clip(&v.to_string())
            ),
        }),
    }
}

impl TensorMap {
    /// Evaluates the map for a shape and checks what the driver would refuse, naming the line.
    pub fn resolve(&self, env: &Env) -> Result<ResolvedTensorMap, PlanError> {
        let err = |msg: String| PlanError {
            line: self.line,
            msg: format!("tensor map {}: {msg}", self.name),
        };
        let ev = |xs: &[PlanExpr], what: &str| -> Result<Vec<u64>, PlanError> {
            xs.iter()
                .map(|e| eval_u64(e, env, what, &self.name))
                .collect()
        };
        let esize = tma_dtype_size(&self.dtype);
        let dims = ev(&self.dims, "dims")?;
        let rank = dims.len();
        // The parser checks these counts; a map built otherwise is refused, not indexed past.
        if !(1..=5).contains(&rank)
            || self.boxes.len() != rank
            || !(self.strides.is_empty() || self.strides.len() == rank - 1)
            || !(self.element_strides.is_empty() || self.element_strides.len() == rank)
        {
            return Err(err(format!(
                "{rank} dims, {} strides, {} box and {} element_strides values do not agree",
                self.strides.len(),
                self.boxes.len(),
                self.element_strides.len()
            )));
        }
        if let Some(d) = dims.iter().find(|d| **d == 0 || **d > 1 << 32) {
            return Err(err(format!("dims {dims:?}: each 1 to 2^32 (got {d})")));
        }
        let strides = if self.strides.is_empty() {
            let mut s = Vec::new();
            let mut acc = esize;
            for d in &dims[..rank - 1] {
                acc = acc.checked_mul(*d).ok_or_else(|| {
                    err(format!(
                        "dims {dims:?}: the packed strides do not fit 64 bits"
                    ))
                })?;
                s.push(acc);
            }
            s
        } else {
            ev(&self.strides, "strides")?
        };
        let boxes = ev(&self.boxes, "box")?;
        let element_strides = if self.element_strides.is_empty() {
            vec![1; rank]
        } else {
            ev(&self.element_strides, "element_strides")?
        };
        if let Some(s) = strides.iter().find(|s| **s % 16 != 0 || **s >= 1 << 40) {
            return Err(err(format!(
                "strides {strides:?} bytes: each a multiple of 16 below 2^40 (got {s})"
            )));
        }
        if let Some(b) = boxes.iter().find(|b| **b == 0 || **b > 256) {
            return Err(err(format!("box {boxes:?}: each 1 to 256 (got {b})")));
        }
        if let Some(e) = element_strides.iter().find(|e| **e == 0 || **e > 8) {
            return Err(err(format!("element_strides: each 1 to 8 (got {e})")));
        }
        // Boxes are at most 256 and esize at most 8: no overflow.
        let inner_bytes = boxes[0] * esize;
        if self.interleave == Interleave::None && inner_bytes % 16 != 0 {
            return Err(err(format!(
                "the box's inner dimension is {inner_bytes} bytes; it must be a multiple of 16"
            )));
        }
        let span = match self.swizzle {
            Swizzle::None => None,
            Swizzle::B32 => Some(32),
            Swizzle::B64 => Some(64),
            Swizzle::B128 => Some(128),
        };
        if let Some(sp) = span
            && self.interleave == Interleave::None
            && inner_bytes > sp
        {
            return Err(err(format!(
                "the box's inner dimension is {inner_bytes} bytes, more than the {sp}-byte swizzle span"
            )));
        }
        Ok(ResolvedTensorMap {
            name: self.name.clone(),
            tensor: self.tensor.clone(),
            dtype: self.dtype.clone(),
            dims,
            strides,
            // Both checked above: 1 to 256 and 1 to 8.
            boxes: boxes.iter().map(|b| *b as u32).collect(),
            element_strides: element_strides.iter().map(|e| *e as u32).collect(),
            swizzle: self.swizzle,
            interleave: self.interleave,
            l2_promotion: self.l2_promotion,
            oob_fill: self.oob_fill,
            line: self.line,
        })
    }
}

impl ResolvedTensorMap {
    /// The bytes the map reaches from the buffer's start: the last element it can address, + 1.
    /// None where that does not fit u64 (or the map has no dims, or a stride is missing).
    pub fn extent_bytes(&self) -> Option<u64> {
        let esize = tma_dtype_size(&self.dtype);
        let (first, rest) = self.dims.split_first()?;
        if self.strides.len() < rest.len() {
            return None;
        }
        let mut last = first.checked_sub(1)?.checked_mul(esize)?;
        for (d, s) in rest.iter().zip(&self.strides) {
            last = last.checked_add(d.checked_sub(1)?.checked_mul(*s)?)?;
        }
        last.checked_add(esize)
    }

    /// Refuses a map that reaches beyond its buffer (the copy engine would read or write
    /// whatever lies there), or whose reach cannot be computed in 64 bits.
    pub fn check_fits(&self, buffer_bytes: u64) -> Result<(), PlanError> {
        let need = self.extent_bytes();
        if need.is_none_or(|n| n > buffer_bytes) {
            return Err(PlanError {
                line: self.line,
                msg: format!(
                    "tensor map {}: dims {:?} with strides {:?} reach {} bytes of `{}`, which holds {buffer_bytes}",
                    self.name,
                    self.dims,
                    self.strides,
                    need.map_or("more than 2^64".to_string(), |n| n.to_string()),
                    self.tensor
                ),
            });
        }
        Ok(())
    }
}
