//! The launch plan of a candidate kernel: a TOML block inside a leading comment
//! `/* atrex:plan ... */` (docs/kernel-contract.md).
//!
//! Invariants: a plan is hostile input. Parsing and resolving one returns a `PlanError` naming
//! its line, never panics: its expressions are bounded in length and nesting
//! (`expr::MAX_LEN`, `expr::MAX_DEPTH`), and every size computed from it (grid, block, cluster,
//! shared memory, scratch bytes, tensor-map strides and extents, scalar arguments) is checked
//! arithmetic: a result that does not fit its type, is negative where a size is needed, NaN or
//! infinite is refused, never wrapped or saturated.
//!
//! Files: this one holds the plan's types; `parse` (the block found and read, every expression
//! parsed, errors on their lines), `resolve` (a plan evaluated on one shape's parameters and
//! defines), `tensor_map` (`[[tensor_map]]`), `rewrite` (defines and tune lists rewritten in the
//! source).

mod parse;
mod resolve;
pub mod rewrite;
mod tensor_map;

pub use parse::parse;

pub use tensor_map::{
    Interleave, L2Promotion, OobFill, ResolvedTensorMap, Swizzle, TMA_DTYPES, TensorMap,
    tma_dtype_size as tensor_map_dtype_size,
};

use crate::suite::expr::{Expr, Value};
use std::collections::BTreeMap;
use std::fmt;

pub const PLAN_START: &str = "/* atrex:plan";

#[derive(Debug, Clone, PartialEq)]
pub struct PlanError {
    /// 1-based line in the candidate file.
    pub line: usize,
    pub msg: String,
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.msg)
    }
}

impl std::error::Error for PlanError {}

/// Text of a plan as an error message quotes it: at most 80 characters, the length said beyond.
pub fn clip(text: &str) -> String {
    const SHOWN: usize = 80;
    let n = text.chars().count();
    if n <= SHOWN {
        return text.to_string();
    }
    let head: String = text.chars().take(SHOWN).collect();
    format!("{head}… ({n} characters)")
}

/// Scalar types a kernel argument can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarType {
    I32,
    I64,
    U32,
    U64,
    F32,
    F64,
}

impl ScalarType {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "i32" | "int" => ScalarType::I32,
            "i64" => ScalarType::I64,
            "u32" => ScalarType::U32,
            "u64" => ScalarType::U64,
            "f32" | "float" => ScalarType::F32,
            "f64" | "double" => ScalarType::F64,
            _ => return None,
        })
    }
}

/// One kernel argument: a buffer (operator tensor or scratch, by name) or a scalar expression.
#[derive(Debug, Clone)]
pub enum Arg {
    Buffer(String),
    Scalar {
        src: String,
        expr: Expr,
        ty: ScalarType,
    },
}

#[derive(Debug, Clone)]
pub struct PlanExpr {
    pub src: String,
    pub expr: Expr,
    pub line: usize,
}

#[derive(Debug, Clone)]
pub struct Launch {
    pub kernel: String,
    pub grid: Vec<PlanExpr>,
    pub block: Vec<PlanExpr>,
    pub smem: Option<PlanExpr>,
    /// Thread-block cluster dimensions (Hopper), launched through `cuLaunchKernelEx`.
    pub cluster: Option<Vec<PlanExpr>>,
    /// A cooperative launch: the driver starts every block at once or refuses the launch, so
    /// that a grid-wide barrier cannot hang.
    pub cooperative: bool,
    /// Runs only on the shapes where this is true (a bool, or a number other than 0): a
    /// kernel with nothing to do on a shape need not cost a launch there.
    pub when: Option<PlanExpr>,
    pub args: Vec<Arg>,
    pub line: usize,
}

#[derive(Debug, Clone)]
pub struct Scratch {
    pub name: String,
    pub dtype: String,
    /// Number of elements.
    pub size: PlanExpr,
    /// Zero-initialized before each run (else poisoned).
    pub zero: bool,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub launches: Vec<Launch>,
    pub scratch: Vec<Scratch>,
    /// TMA tensor maps, passed to kernels by name (`[[tensor_map]]`).
    pub tensor_maps: Vec<TensorMap>,
    /// Tunable parameters and their candidate values, passed as -D defines.
    pub tune: BTreeMap<String, Vec<Value>>,
    /// The values in use (default: the first of each `tune` list).
    pub defines: BTreeMap<String, Value>,
    /// The kernel may give different bits from run to run (atomics); skips the determinism check.
    pub nondeterministic: bool,
    /// Lines of the plan block in the file (first, last), 1-based.
    pub lines: (usize, usize),
}

/// A launch with every expression evaluated.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedLaunch {
    pub kernel: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub smem: u32,
    /// Thread-block cluster dimensions, when the launch asks for clusters.
    pub cluster: Option<[u32; 3]>,
    /// Every block resident at once, or the launch fails (`cooperative = true`).
    pub cooperative: bool,
    pub args: Vec<ResolvedArg>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ResolvedArg {
    Buffer(String),
    /// A TMA tensor map, passed by value (128 bytes).
    TensorMap(ResolvedTensorMap),
    I32(i32),
    I64(i64),
    U32(u32),
    U64(u64),
    F32(f32),
    F64(f64),
}

/// `-D` options for NVRTC from defines.
pub fn define_options(defines: &BTreeMap<String, Value>) -> Vec<String> {
    defines
        .iter()
        .map(|(k, v)| match v {
            Value::Str(s) => format!("-D{k}={s}"),
            Value::Bool(b) => format!("-D{k}={}", *b as i32),
            other => format!("-D{k}={other}"),
        })
        .collect()
}

#[cfg(test)]
mod size_tests;
#[cfg(test)]
mod tests;
