//! The operator model: Problem, its tensors, parameters and shapes, the dtypes the suite knows,
//! and W and Q (WorkQ) of a shape.

use super::expr::{self, Env, Expr, Value};
use super::load::LoadError;
use super::phase::Phase;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The dtype labels the suite knows.
pub const DTYPES: &[&str] = &[
    "bf16",
    "fp16",
    "fp32",
    "fp64",
    "tf32",
    "fp8_e4m3",
    "fp8_e4m3fnuz",
    "int8",
    "int32",
    "int64",
    "uint8",
    "bool",
];

/// Bytes per element of a tensor dtype.
pub fn dtype_size(dtype: &str) -> Option<usize> {
    Some(match dtype {
        "bf16" | "fp16" => 2,
        "fp32" | "int32" | "tf32" => 4,
        "fp64" | "int64" => 8,
        "fp8_e4m3" | "fp8_e4m3fnuz" | "int8" | "uint8" | "bool" => 1,
        _ => return None,
    })
}

/// Strict correctness tolerances of an operator (section 7 of its spec).
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    #[serde(default)]
    pub atol: f64,
    #[serde(default)]
    pub rtol: f64,
    #[serde(default = "default_rel_l2")]
    pub rel_l2: f64,
    #[serde(default)]
    pub notes: String,
}

fn default_rel_l2() -> f64 {
    1e-2
}

/// A declared shape parameter.
#[derive(Debug, Clone)]
pub struct ParamDecl {
    pub ty: String,
    pub source: String,
    pub default: Option<Value>,
    pub doc: String,
}

/// An expression with its source text and line, for error messages.
#[derive(Debug, Clone)]
pub struct SrcExpr {
    pub src: String,
    pub expr: Expr,
    pub line: usize,
}

/// A tensor of an operator.
#[derive(Debug, Clone)]
pub struct TensorSpec {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<SrcExpr>,
    pub generator: String,
    pub values: String,
    pub inplace: bool,
    pub compare: String,
    /// An `int_list` parameter whose values this input holds element for element (e.g. the
    /// per-sequence lengths in `seqused_k`): what an exported kernel reads back when its launch
    /// plan needs the list.
    pub holds: Option<String>,
}

/// One benchmark shape of an operator.
#[derive(Debug, Clone)]
pub struct Shape {
    pub id: u32,
    pub params: BTreeMap<String, Value>,
    pub note: String,
    pub production_us: BTreeMap<String, f64>,
    pub line: usize,
}

/// An operator of the suite.
#[derive(Debug, Clone)]
pub struct Problem {
    pub id: String,
    pub name: String,
    pub dtype: String,
    pub phases: Vec<Phase>,
    pub importance: f64,
    pub upstream: String,
    pub summary: String,
    pub lets: Vec<(String, SrcExpr)>,
    pub params: BTreeMap<String, ParamDecl>,
    pub inputs: Vec<TensorSpec>,
    pub outputs: Vec<TensorSpec>,
    pub flops: BTreeMap<String, SrcExpr>,
    pub read_bytes: SrcExpr,
    pub write_bytes: SrcExpr,
    pub tolerance: Tolerance,
    pub shapes: Vec<Shape>,
    /// problems/<name>/problem.toml, as printed in errors.
    pub file: String,
    /// The operator's own input generator (`inputs.cu`), for `custom` inputs.
    pub generator: Option<String>,
    /// Structured draws checked beside the random seeds (`[[draws]]`).
    pub draws: Vec<super::draws::DrawSpec>,
}

/// W and Q of one shape.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkQ {
    pub flops: BTreeMap<String, f64>,
    pub read_bytes: f64,
    pub write_bytes: f64,
}

impl WorkQ {
    pub fn bytes(&self) -> f64 {
        self.read_bytes + self.write_bytes
    }
    pub fn total_flops(&self) -> f64 {
        self.flops.values().sum()
    }
}

impl Problem {
    pub fn phase_label(&self) -> String {
        self.phases
            .iter()
            .map(|p| match p {
                Phase::Prefill => "prefill",
                Phase::Decode => "decode",
            })
            .collect::<Vec<_>>()
            .join("/")
    }

    pub fn shape(&self, id: u32) -> Option<&Shape> {
        self.shapes.iter().find(|s| s.id == id)
    }

    fn err(&self, field: &str, line: usize, msg: impl Into<String>) -> LoadError {
        LoadError {
            file: self.file.clone(),
            operator: Some(self.name.clone()),
            field: Some(field.to_string()),
            line: Some(line),
            msg: msg.into(),
        }
    }

    /// The environment of a shape: its parameters plus the `let` names.
    pub fn env(&self, shape: &Shape) -> Result<Env, LoadError> {
        let mut env: Env = shape.params.clone();
        for (k, d) in &self.params {
            if let (false, Some(v)) = (env.contains_key(k), &d.default) {
                env.insert(k.clone(), v.clone());
            }
        }
        for (name, e) in &self.lets {
            let v = e.expr.eval(&env).map_err(|x| {
                self.err(
                    &format!("let {name}"),
                    e.line,
                    format!("shape {}: {} in `{}`", shape.id, x, e.src),
                )
            })?;
            env.insert(name.clone(), v);
        }
        Ok(env)
    }

    fn eval_num(&self, env: &Env, e: &SrcExpr, field: &str, shape: u32) -> Result<f64, LoadError> {
        let v = e
            .expr
            .eval(env)
            .map_err(|x| self.err(field, e.line, format!("shape {shape}: {x} in `{}`", e.src)))?;
        match v.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(x),
            _ => Err(self.err(
                field,
                e.line,
                format!(
                    "shape {shape}: `{}` gives {v}, not a non-negative number",
                    e.src
                ),
            )),
        }
    }

    /// W and Q of a shape.
    pub fn work(&self, shape: &Shape) -> Result<WorkQ, LoadError> {
        let env = self.env(shape)?;
        self.work_in(&env, shape.id)
    }

    pub fn work_in(&self, env: &Env, shape_id: u32) -> Result<WorkQ, LoadError> {
        let mut flops = BTreeMap::new();
        for (d, e) in &self.flops {
            flops.insert(
                d.clone(),
                self.eval_num(env, e, &format!("work.flops.{d}"), shape_id)?,
            );
        }
        Ok(WorkQ {
            flops,
            read_bytes: self.eval_num(env, &self.read_bytes, "work.read_bytes", shape_id)?,
            write_bytes: self.eval_num(env, &self.write_bytes, "work.write_bytes", shape_id)?,
        })
    }

    /// The dtype of a tensor for a shape (`=expression` dtypes are evaluated).
    pub fn tensor_dtype(&self, t: &TensorSpec, env: &Env) -> Result<String, LoadError> {
        let Some(src) = t.dtype.strip_prefix('=') else {
            return Ok(t.dtype.clone());
        };
        let line = t.shape.first().map(|e| e.line).unwrap_or(0);
        let v = expr::eval_str(src.trim(), env).map_err(|x| {
            self.err(
                &format!("tensor {}", t.name),
                line,
                format!("dtype `{src}`: {x}"),
            )
        })?;
        match v {
            Value::Str(d) if DTYPES.contains(&d.as_str()) => Ok(d),
            other => Err(self.err(
                &format!("tensor {}", t.name),
                line,
                format!(
                    "dtype `{src}` gives {other}, not one of {}",
                    DTYPES.join(", ")
                ),
            )),
        }
    }

    /// The dimensions of a tensor for a shape.
    pub fn tensor_dims(&self, t: &TensorSpec, env: &Env) -> Result<Vec<usize>, LoadError> {
        t.shape
            .iter()
            .map(|e| {
                let v = e.expr.eval(env).map_err(|x| {
                    self.err(
                        &format!("tensor {}", t.name),
                        e.line,
                        format!("{x} in `{}`", e.src),
                    )
                })?;
                match v.as_int() {
                    Some(i) if i >= 0 => Ok(i as usize),
                    _ => Err(self.err(
                        &format!("tensor {}", t.name),
                        e.line,
                        format!("`{}` gives {v}, not a size", e.src),
                    )),
                }
            })
            .collect()
    }
}
