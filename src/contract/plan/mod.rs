//! The launch plan of a candidate kernel: a TOML block inside a leading comment
//! `/* atrex:plan ... */` (docs/kernel-contract.md).
//!
//! Invariants: a plan is hostile input. Parsing and resolving one returns a `PlanError` naming
//! its line, never panics: its expressions are bounded in length and nesting
//! (`expr::MAX_LEN`, `expr::MAX_DEPTH`), and every size computed from it (grid, block, cluster,
//! shared memory, scratch bytes, tensor-map strides and extents, scalar arguments) is checked
//! arithmetic: a result that does not fit its type, is negative where a size is needed, NaN or
//! infinite is refused, never wrapped or saturated.

pub mod rewrite;
mod tensor_map;

pub use tensor_map::{
    Interleave, L2Promotion, OobFill, ResolvedTensorMap, Swizzle, TMA_DTYPES, TensorMap,
    tma_dtype_size as tensor_map_dtype_size,
};

use crate::suite::expr::{self, Env, Expr, Value};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use toml::Spanned;

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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlan {
    #[serde(default)]
    launch: Vec<Spanned<RawLaunch>>,
    #[serde(default)]
    scratch: Vec<Spanned<RawScratch>>,
    #[serde(default)]
    tensor_map: Vec<Spanned<RawTensorMap>>,
    #[serde(default)]
    tune: BTreeMap<String, Spanned<Vec<toml::Value>>>,
    #[serde(default)]
    defines: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    nondeterministic: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLaunch {
    kernel: String,
    grid: Spanned<ExprList>,
    block: Spanned<ExprList>,
    #[serde(default)]
    smem: Option<Spanned<ExprOrNum>>,
    #[serde(default)]
    cluster: Option<Spanned<ExprList>>,
    #[serde(default)]
    cooperative: bool,
    #[serde(default)]
    when: Option<Spanned<String>>,
    args: Spanned<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTensorMap {
    name: String,
    tensor: String,
    dtype: String,
    dims: Vec<ExprOrNum>,
    #[serde(default)]
    strides: Vec<ExprOrNum>,
    #[serde(rename = "box")]
    boxes: Vec<ExprOrNum>,
    #[serde(default)]
    element_strides: Vec<ExprOrNum>,
    #[serde(default)]
    swizzle: Option<String>,
    #[serde(default)]
    interleave: Option<String>,
    #[serde(default)]
    l2_promotion: Option<String>,
    #[serde(default)]
    oob_fill: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ExprOrNum {
    Num(i64),
    Str(String),
}

impl ExprOrNum {
    fn text(&self) -> String {
        match self {
            ExprOrNum::Num(n) => n.to_string(),
            ExprOrNum::Str(s) => s.clone(),
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ExprList {
    One(ExprOrNum),
    Many(Vec<ExprOrNum>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScratch {
    name: String,
    dtype: String,
    size: ExprOrNum,
    #[serde(default)]
    zero: bool,
}

/// Finds the plan block: returns (TOML text, 1-based line of its first TOML line, last line).
fn find_block(source: &str) -> Result<(String, usize, usize), PlanError> {
    let Some(start) = source.find(PLAN_START) else {
        return Err(PlanError {
            line: 1,
            msg: format!(
                "no launch plan: the file needs a `{PLAN_START} ... */` comment (docs/kernel-contract.md)"
            ),
        });
    };
    let body_start = start + PLAN_START.len();
    let Some(end_rel) = source[body_start..].find("*/") else {
        return Err(PlanError {
            line: crate::suite::line_of(source, start),
            msg: "the launch plan comment is not closed with `*/`".into(),
        });
    };
    let body = &source[body_start..body_start + end_rel];
    let first_line = crate::suite::line_of(source, body_start);
    let last_line = crate::suite::line_of(source, body_start + end_rel);
    Ok((body.to_string(), first_line, last_line))
}

fn value_from_toml(v: &toml::Value) -> Option<Value> {
    Value::from_toml(v)
}

/// A tune or define value: a string is at most `expr::MAX_LEN` characters, as an expression is
/// (it becomes a `-D` option and is quoted in messages).
fn check_value(v: &Value, line: usize, what: &str) -> Result<(), PlanError> {
    if let Value::Str(s) = v
        && s.chars().count() > expr::MAX_LEN
    {
        return Err(PlanError {
            line,
            msg: format!(
                "{what}: a string of {} characters; at most {}",
                s.chars().count(),
                expr::MAX_LEN
            ),
        });
    }
    Ok(())
}

/// Parses the launch plan of a candidate source.
pub fn parse(source: &str) -> Result<Plan, PlanError> {
    let (body, first_line, last_line) = find_block(source)?;
    let at = |span_start: usize| first_line + crate::suite::line_of(&body, span_start) - 1;
    let raw: RawPlan = toml::from_str(&body).map_err(|e| PlanError {
        line: e.span().map(|s| at(s.start)).unwrap_or(first_line),
        msg: format!("launch plan: {}", e.message()),
    })?;
    let pe = |text: String, line: usize, what: &str| -> Result<PlanExpr, PlanError> {
        let expr = expr::parse(&text).map_err(|e| PlanError {
            line,
            msg: format!("bad expression in {what} `{}`: {e}", clip(&text)),
        })?;
        Ok(PlanExpr {
            src: text,
            expr,
            line,
        })
    };
    let mut launches = Vec::new();
    for l in &raw.launch {
        launches.push(parse_launch(l, at(l.span().start), &at, &pe)?);
    }
    if launches.is_empty() {
        return Err(PlanError {
            line: first_line,
            msg: "the launch plan has no [[launch]]".into(),
        });
    }
    let mut scratch = Vec::new();
    for s in &raw.scratch {
        let line = at(s.span().start);
        let r = s.get_ref();
        if crate::suite::dtype_size(&r.dtype).is_none() {
            return Err(PlanError {
                line,
                msg: format!("scratch `{}`: unknown dtype `{}`", r.name, r.dtype),
            });
        }
        scratch.push(Scratch {
            name: r.name.clone(),
            dtype: r.dtype.clone(),
            size: pe(r.size.text(), line, "scratch size")?,
            zero: r.zero,
        });
    }
    let mut tensor_maps = Vec::new();
    for t in &raw.tensor_map {
        tensor_maps.push(parse_tensor_map(t.get_ref(), at(t.span().start), &pe)?);
    }
    let mut tune = BTreeMap::new();
    for (k, vs) in &raw.tune {
        let line = at(vs.span().start);
        let vals: Vec<Value> = vs
            .get_ref()
            .iter()
            .map(value_from_toml)
            .collect::<Option<_>>()
            .ok_or_else(|| PlanError {
                line,
                msg: format!("tune `{k}`: unsupported value"),
            })?;
        if vals.is_empty() {
            return Err(PlanError {
                line,
                msg: format!("tune `{k}` has no values"),
            });
        }
        for v in &vals {
            check_value(v, line, &format!("tune `{k}`"))?;
        }
        tune.insert(k.clone(), vals);
    }
    let mut defines = BTreeMap::new();
    for (k, v) in &raw.defines {
        let line = at(v.span().start);
        let val = value_from_toml(v.get_ref()).ok_or_else(|| PlanError {
            line,
            msg: format!("define `{k}`: unsupported value"),
        })?;
        check_value(&val, line, &format!("define `{k}`"))?;
        if matches!(val, Value::List(_)) {
            return Err(PlanError {
                line,
                msg: format!(
                    "define `{k}` = {}: a define is one number, boolean or string (lists of candidates go under [tune])",
                    clip(&val.to_string())
                ),
            });
        }
        if let Some(allowed) = tune.get(k)
            && !allowed.iter().any(|a| a.num_eq(&val))
        {
            return Err(PlanError {
                line,
                msg: format!(
                    "define {k} = {} is not among its tune values",
                    clip(&val.to_string())
                ),
            });
        }
        defines.insert(k.clone(), val);
    }
    for (k, vals) in &tune {
        defines.entry(k.clone()).or_insert_with(|| vals[0].clone());
    }
    Ok(Plan {
        launches,
        scratch,
        tensor_maps,
        tune,
        defines,
        nondeterministic: raw.nondeterministic,
        lines: (first_line, last_line),
    })
}

fn parse_tensor_map(
    r: &RawTensorMap,
    line: usize,
    pe: &dyn Fn(String, usize, &str) -> Result<PlanExpr, PlanError>,
) -> Result<TensorMap, PlanError> {
    use tensor_map::*;
    let err = |msg: String| PlanError {
        line,
        msg: format!("tensor map `{}`: {msg}", r.name),
    };
    if r.name.is_empty() || !r.name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return Err(err("a name is letters, digits and _".into()));
    }
    if !TMA_DTYPES.contains(&r.dtype.as_str()) {
        return Err(err(format!(
            "dtype `{}`: one of {}",
            r.dtype,
            TMA_DTYPES.join(", ")
        )));
    }
    let list = |xs: &[ExprOrNum], what: &str| -> Result<Vec<PlanExpr>, PlanError> {
        xs.iter().map(|x| pe(x.text(), line, what)).collect()
    };
    let dims = list(&r.dims, "dims")?;
    let rank = dims.len();
    if !(1..=5).contains(&rank) {
        return Err(err(format!("{rank} dims; a tensor map has 1 to 5")));
    }
    let strides = list(&r.strides, "strides")?;
    if !strides.is_empty() && strides.len() != rank - 1 {
        return Err(err(format!(
            "{} strides for {rank} dims: give the byte strides of dims 1.. ({} values) or none (packed)",
            strides.len(),
            rank - 1
        )));
    }
    let boxes = list(&r.boxes, "box")?;
    let element_strides = list(&r.element_strides, "element_strides")?;
    for (what, n) in [
        ("box", boxes.len()),
        ("element_strides", element_strides.len()),
    ] {
        if n != rank && !(what == "element_strides" && n == 0) {
            return Err(err(format!("{n} {what} values for {rank} dims")));
        }
    }
    Ok(TensorMap {
        name: r.name.clone(),
        tensor: r.tensor.clone(),
        dtype: r.dtype.clone(),
        dims,
        strides,
        boxes,
        element_strides,
        swizzle: parse_enum(
            "swizzle",
            r.swizzle.as_deref(),
            Swizzle::None,
            SWIZZLES,
            line,
        )?,
        interleave: parse_enum(
            "interleave",
            r.interleave.as_deref(),
            Interleave::None,
            INTERLEAVES,
            line,
        )?,
        l2_promotion: parse_enum(
            "l2_promotion",
            r.l2_promotion.as_deref(),
            L2Promotion::None,
            PROMOTIONS,
            line,
        )?,
        oob_fill: parse_enum(
            "oob_fill",
            r.oob_fill.as_deref(),
            OobFill::Zero,
            FILLS,
            line,
        )?,
        line,
    })
}

/// One `[[launch]]`: kernel name, grid, block, shared memory, cluster or cooperative, and arguments.
fn parse_launch(
    l: &Spanned<RawLaunch>,
    line: usize,
    at: &dyn Fn(usize) -> usize,
    pe: &dyn Fn(String, usize, &str) -> Result<PlanExpr, PlanError>,
) -> Result<Launch, PlanError> {
    let r = l.get_ref();
    let dims = |d: &Spanned<ExprList>, what: &str| -> Result<Vec<PlanExpr>, PlanError> {
        let line = at(d.span().start);
        let items: Vec<String> = match d.get_ref() {
            ExprList::One(x) => vec![x.text()],
            ExprList::Many(xs) => xs.iter().map(|x| x.text()).collect(),
        };
        if items.is_empty() || items.len() > 3 {
            return Err(PlanError {
                line,
                msg: format!("{what} needs 1 to 3 dimensions, got {}", items.len()),
            });
        }
        items.into_iter().map(|t| pe(t, line, what)).collect()
    };
    if r.kernel.is_empty() || !r.kernel.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return Err(PlanError {
            line,
            msg: format!("bad kernel name `{}`", r.kernel),
        });
    }
    let grid = dims(&r.grid, "grid")?;
    let block = dims(&r.block, "block")?;
    let smem = match &r.smem {
        Some(s) => Some(pe(s.get_ref().text(), at(s.span().start), "smem")?),
        None => None,
    };
    let cluster = match &r.cluster {
        Some(c) => Some(dims(c, "cluster")?),
        None => None,
    };
    if r.cooperative && cluster.is_some() {
        return Err(PlanError {
            line,
            msg: format!(
                "kernel {}: a launch is either cooperative or in clusters, not both",
                r.kernel
            ),
        });
    }
    let when = match &r.when {
        Some(w) => Some(pe(w.get_ref().clone(), at(w.span().start), "when")?),
        None => None,
    };
    let aline = at(r.args.span().start);
    let mut args = Vec::new();
    for a in r.args.get_ref() {
        if let Some((e, ty)) = a.rsplit_once(':') {
            let Some(t) = ScalarType::parse(ty.trim()) else {
                return Err(PlanError {
                    line: aline,
                    msg: format!(
                        "unknown argument type `{}` in `{a}` (i32, i64, u32, u64, f32, f64)",
                        ty.trim()
                    ),
                });
            };
            let x = pe(e.trim().to_string(), aline, "args")?;
            args.push(Arg::Scalar {
                src: x.src,
                expr: x.expr,
                ty: t,
            });
        } else {
            let name = a.trim();
            if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                return Err(PlanError {
                    line: aline,
                    msg: format!("argument `{a}` is neither a buffer name nor `expression:type`"),
                });
            }
            args.push(Arg::Buffer(name.to_string()));
        }
    }
    Ok(Launch {
        kernel: r.kernel.clone(),
        grid,
        block,
        smem,
        cluster,
        cooperative: r.cooperative,
        when,
        args,
        line,
    })
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

/// A launch's `when`: a bool, or a number (0 is false; NaN, which no comparison can settle, is
/// no condition). The launch's other expressions are not evaluated where it is false.
fn eval_when(w: &PlanExpr, env: &Env, kernel: &str) -> Result<bool, PlanError> {
    let v = w.expr.eval(env).map_err(|x| PlanError {
        line: w.line,
        msg: format!("kernel {kernel}: when `{}`: {x}", clip(&w.src)),
    })?;
    match v {
        Value::Bool(b) => Ok(b),
        other => match other.as_f64() {
            Some(x) if !x.is_nan() => Ok(x != 0.0),
            _ => Err(PlanError {
                line: w.line,
                msg: format!(
                    "kernel {kernel}: when `{}` gives {}, not a condition",
                    clip(&w.src),
                    clip(&other.to_string())
                ),
            }),
        },
    }
}

fn eval_dim(e: &PlanExpr, env: &Env, what: &str) -> Result<u32, PlanError> {
    let v = e.expr.eval(env).map_err(|x| PlanError {
        line: e.line,
        msg: format!("{what} `{}`: {x}", clip(&e.src)),
    })?;
    match v.as_int().map(u32::try_from) {
        Some(Ok(i)) => Ok(i),
        _ => Err(PlanError {
            line: e.line,
            msg: format!(
                "{what} `{}` gives {}, not a size (0 to {})",
                clip(&e.src),
                clip(&v.to_string()),
                u32::MAX
            ),
        }),
    }
}

/// The product of dimensions, None where it does not fit u64.
fn product(dims: &[u32]) -> Option<u64> {
    dims.iter()
        .try_fold(1u64, |acc, d| acc.checked_mul(u64::from(*d)))
}

/// A scalar argument's value as its type: refused where it does not fit (an integer out of
/// range, a float that is NaN or infinite or beyond f32).
fn scalar_arg(v: &Value, ty: ScalarType) -> Option<ResolvedArg> {
    let int = || v.as_int();
    let float = || v.as_f64().filter(|x| x.is_finite());
    Some(match ty {
        ScalarType::F32 => {
            let x = float()? as f32;
            if !x.is_finite() {
                return None;
            }
            ResolvedArg::F32(x)
        }
        ScalarType::F64 => ResolvedArg::F64(float()?),
        ScalarType::I32 => ResolvedArg::I32(i32::try_from(int()?).ok()?),
        ScalarType::I64 => ResolvedArg::I64(i64::try_from(int()?).ok()?),
        ScalarType::U32 => ResolvedArg::U32(u32::try_from(int()?).ok()?),
        ScalarType::U64 => ResolvedArg::U64(u64::try_from(int()?).ok()?),
    })
}

impl Plan {
    /// The environment for launch expressions: shape env plus defines (defines win).
    pub fn env(&self, shape_env: &Env, defines: &BTreeMap<String, Value>) -> Env {
        let mut env = shape_env.clone();
        for (k, v) in defines {
            env.insert(k.clone(), v.clone());
        }
        env
    }

    /// Evaluates every launch for a shape. `buffers` are the names that bind to device memory.
    pub fn resolve(
        &self,
        env: &Env,
        is_buffer: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<ResolvedLaunch>, PlanError> {
        let mut out = Vec::new();
        for l in &self.launches {
            if let Some(w) = &l.when
                && !eval_when(w, env, &l.kernel)?
            {
                continue;
            }
            let mut grid = [1u32; 3];
            let mut block = [1u32; 3];
            for (i, e) in l.grid.iter().enumerate() {
                grid[i] = eval_dim(e, env, "grid")?;
            }
            for (i, e) in l.block.iter().enumerate() {
                block[i] = eval_dim(e, env, "block")?;
            }
            if grid.contains(&0) {
                return Err(PlanError {
                    line: l.line,
                    msg: format!("kernel {}: grid {grid:?} has a zero dimension", l.kernel),
                });
            }
            let threads = product(&block);
            if !threads.is_some_and(|t| (1..=1024).contains(&t)) {
                return Err(PlanError {
                    line: l.line,
                    msg: format!(
                        "kernel {}: block {block:?} has {} threads (1 to 1024)",
                        l.kernel,
                        threads.map_or("more than 2^64".to_string(), |t| t.to_string())
                    ),
                });
            }
            let smem = match &l.smem {
                Some(e) => eval_dim(e, env, "smem")?,
                None => 0,
            };
            let cluster = match &l.cluster {
                Some(c) => Some(self.resolve_cluster(l, c, &grid, env)?),
                None => None,
            };
            let mut args = Vec::new();
            for a in &l.args {
                args.push(match a {
                    Arg::Buffer(name) if self.tensor_maps.iter().any(|t| &t.name == name) => {
                        let Some(t) = self.tensor_maps.iter().find(|t| &t.name == name) else {
                            continue;
                        };
                        let t = t.resolve(env)?;
                        if !is_buffer(&t.tensor) {
                            return Err(PlanError {
                                line: t.line,
                                msg: format!(
                                    "tensor map {}: `{}` is not an input, output or scratch buffer",
                                    t.name, t.tensor
                                ),
                            });
                        }
                        ResolvedArg::TensorMap(t)
                    }
                    Arg::Buffer(name) => {
                        if !is_buffer(name) {
                            return Err(PlanError {
                                line: l.line,
                                msg: format!(
                                    "kernel {}: argument `{name}` is not an input, output or scratch buffer; scalars need a type, e.g. `{name}:i32`",
                                    l.kernel
                                ),
                            });
                        }
                        ResolvedArg::Buffer(name.clone())
                    }
                    Arg::Scalar { src, expr, ty } => {
                        let v = expr.eval(env).map_err(|x| PlanError {
                            line: l.line,
                            msg: format!("kernel {}: argument `{}`: {x}", l.kernel, clip(src)),
                        })?;
                        scalar_arg(&v, *ty).ok_or_else(|| PlanError {
                            line: l.line,
                            msg: format!(
                                "kernel {}: argument `{}` = {} does not fit {ty:?}",
                                l.kernel,
                                clip(src),
                                clip(&v.to_string())
                            ),
                        })?
                    }
                });
            }
            out.push(ResolvedLaunch {
                kernel: l.kernel.clone(),
                grid,
                block,
                smem,
                cluster,
                cooperative: l.cooperative,
                args,
            });
        }
        if out.is_empty()
            && let Some(first) = self.launches.first()
        {
            return Err(PlanError {
                line: first.line,
                msg: "no launch runs on this shape: every `when` is false".into(),
            });
        }
        Ok(out)
    }

    /// Cluster dimensions: at most 8 blocks (the portable size), dividing the grid.
    fn resolve_cluster(
        &self,
        l: &Launch,
        c: &[PlanExpr],
        grid: &[u32; 3],
        env: &Env,
    ) -> Result<[u32; 3], PlanError> {
        let mut cl = [1u32; 3];
        for (i, e) in c.iter().enumerate() {
            cl[i] = eval_dim(e, env, "cluster")?;
        }
        let n = product(&cl);
        if !n.is_some_and(|n| (1..=8).contains(&n)) {
            return Err(PlanError {
                line: l.line,
                msg: format!(
                    "kernel {}: cluster {cl:?} has {} blocks (1 to 8)",
                    l.kernel,
                    n.map_or("more than 2^64".to_string(), |n| n.to_string())
                ),
            });
        }
        if grid.iter().zip(&cl).any(|(g, c)| g % c != 0) {
            return Err(PlanError {
                line: l.line,
                msg: format!(
                    "kernel {}: grid {grid:?} is not a whole number of clusters {cl:?}",
                    l.kernel
                ),
            });
        }
        Ok(cl)
    }

    /// Scratch sizes in elements for a shape; each one's bytes (elements times the dtype's
    /// size) fit u64, so a caller may multiply without checking.
    pub fn scratch_sizes(&self, env: &Env) -> Result<Vec<(Scratch, u64)>, PlanError> {
        self.scratch
            .iter()
            .map(|s| {
                let v = s.size.expr.eval(env).map_err(|x| PlanError {
                    line: s.size.line,
                    msg: format!("scratch {}: {x}", s.name),
                })?;
                let esize = crate::suite::dtype_size(&s.dtype).unwrap_or(1) as u64;
                match v.as_int().map(u64::try_from) {
                    Some(Ok(n)) if n.checked_mul(esize).is_some() => Ok((s.clone(), n)),
                    _ => Err(PlanError {
                        line: s.size.line,
                        msg: format!(
                            "scratch {} size gives {}, not a size (0 to 2^64 bytes)",
                            s.name,
                            clip(&v.to_string())
                        ),
                    }),
                }
            })
            .collect()
    }

    /// Scratch sizes in bytes for a shape (elements times the dtype's size).
    pub fn scratch_bytes(&self, env: &Env) -> Result<Vec<(Scratch, u64)>, PlanError> {
        Ok(self
            .scratch_sizes(env)?
            .into_iter()
            .map(|(s, n)| {
                let esize = crate::suite::dtype_size(&s.dtype).unwrap_or(1) as u64;
                // scratch_sizes checked that this product fits.
                (s, n.saturating_mul(esize))
            })
            .collect())
    }
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
