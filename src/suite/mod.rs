//! The operator suite: problems/*.toml loaded at run time, from the workspace or the copy
//! embedded in the binary.

pub mod expr;
pub mod hardware;
pub mod import;
pub mod kernels;
pub mod roofline;

use expr::{Env, Expr, Value};
use hardware::HardwareProfile;
use include_dir::{Dir, include_dir};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The built-in suite, embedded at build time.
pub static EMBEDDED_PROBLEMS: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/problems");

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

/// A load error: names the file, the operator, the field and, where it has one, the line.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadError {
    pub file: String,
    pub operator: Option<String>,
    pub field: Option<String>,
    pub line: Option<usize>,
    pub msg: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(op) = &self.operator {
            write!(f, ": operator {op}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": field `{field}`")?;
        }
        write!(f, ": {}", self.msg)
    }
}

impl std::error::Error for LoadError {}

/// Where the suite's files come from.
#[derive(Debug, Clone)]
pub enum SuiteSource {
    Embedded,
    Dir(PathBuf),
}

impl SuiteSource {
    pub fn describe(&self) -> String {
        match self {
            SuiteSource::Embedded => "built-in suite".into(),
            SuiteSource::Dir(p) => p.display().to_string(),
        }
    }

    /// Reads a file relative to the problems/ root.
    /// A file's text: Ok(None) when it does not exist, Err saying what is wrong with it when it
    /// exists but cannot be used (a folder in its place, not UTF-8 text, unreadable).
    pub fn read_checked(&self, rel: &str) -> Result<Option<String>, String> {
        match self {
            SuiteSource::Embedded => Ok(self.read(rel)),
            SuiteSource::Dir(root) => {
                let p = root.join(rel);
                match std::fs::metadata(&p) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                    Err(e) => return Err(format!("cannot read it: {e}")),
                    Ok(m) if m.is_dir() => {
                        return Err("is a folder, not a file".into());
                    }
                    Ok(_) => {}
                }
                let bytes = std::fs::read(&p).map_err(|e| format!("cannot read it: {e}"))?;
                match String::from_utf8(bytes) {
                    Ok(t) => Ok(Some(t)),
                    Err(e) => {
                        let at = e.utf8_error().valid_up_to();
                        let b = e.as_bytes();
                        let line = b[..at].iter().filter(|c| **c == b'\n').count() + 1;
                        let binary = b.iter().take(4096).filter(|c| **c == 0).count() > 0;
                        Err(format!(
                            "not UTF-8 text{} (first invalid byte at line {line}, byte {at})",
                            if binary {
                                ": it looks like a binary file"
                            } else {
                                ""
                            }
                        ))
                    }
                }
            }
        }
    }

    pub fn read(&self, rel: &str) -> Option<String> {
        match self {
            SuiteSource::Embedded => EMBEDDED_PROBLEMS
                .get_file(rel)
                .and_then(|f| f.contents_utf8())
                .map(|s| s.to_string()),
            SuiteSource::Dir(root) => std::fs::read_to_string(root.join(rel)).ok(),
        }
    }

    /// The names of the files directly under a folder (relative to problems/).
    pub fn list(&self, rel_dir: &str) -> Vec<String> {
        let mut out: Vec<String> = match self {
            SuiteSource::Embedded => EMBEDDED_PROBLEMS
                .get_dir(rel_dir)
                .map(|d| {
                    d.files()
                        .filter_map(|f| f.path().file_name()?.to_str().map(|s| s.to_string()))
                        .collect()
                })
                .unwrap_or_default(),
            SuiteSource::Dir(root) => std::fs::read_dir(root.join(rel_dir))
                .map(|rd| {
                    rd.filter_map(|e| e.ok())
                        .filter(|e| e.path().is_file())
                        .filter_map(|e| e.file_name().to_str().map(|s| s.to_string()))
                        .collect()
                })
                .unwrap_or_default(),
        };
        out.sort();
        out
    }

    /// A printable path for a file under problems/.
    pub fn display_path(&self, rel: &str) -> String {
        match self {
            SuiteSource::Embedded => format!("problems/{rel} (built-in)"),
            SuiteSource::Dir(root) => root.join(rel).display().to_string(),
        }
    }
}

/// 1-based line of a byte offset.
pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|b| *b == b'\n')
        .count()
        + 1
}

/// Operator phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Prefill,
    Decode,
}

/// A phase filter: all operators, or those active in one phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PhaseFilter {
    #[default]
    All,
    Prefill,
    Decode,
}

impl PhaseFilter {
    pub fn admits(self, phases: &[Phase]) -> bool {
        match self {
            PhaseFilter::All => true,
            PhaseFilter::Prefill => phases.contains(&Phase::Prefill),
            PhaseFilter::Decode => phases.contains(&Phase::Decode),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            PhaseFilter::All => "all",
            PhaseFilter::Prefill => "prefill",
            PhaseFilter::Decode => "decode",
        }
    }
    pub fn next(self) -> Self {
        match self {
            PhaseFilter::All => PhaseFilter::Prefill,
            PhaseFilter::Prefill => PhaseFilter::Decode,
            PhaseFilter::Decode => PhaseFilter::All,
        }
    }
}

// ---------- raw TOML ----------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSuite {
    name: String,
    #[serde(default)]
    version: Option<String>,
    operators: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProblem {
    id: Spanned<String>,
    name: Spanned<String>,
    dtype: Spanned<String>,
    phase: Spanned<Vec<String>>,
    importance: f64,
    #[serde(default)]
    upstream: String,
    #[serde(default)]
    summary: String,
    #[serde(default, rename = "let")]
    lets: Vec<Spanned<String>>,
    #[serde(default)]
    params: BTreeMap<String, RawParam>,
    #[serde(default)]
    inputs: Vec<RawTensor>,
    outputs: Vec<RawTensor>,
    work: RawWork,
    tolerance: Tolerance,
    shapes: Vec<Spanned<RawShape>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParam {
    #[serde(rename = "type")]
    ty: Spanned<String>,
    #[serde(default)]
    source: Option<String>,
    /// Used when a shape does not give the parameter (the benchmark's own default).
    #[serde(default)]
    default: Option<toml::Value>,
    #[serde(default)]
    doc: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTensor {
    name: String,
    dtype: Spanned<String>,
    shape: Vec<Spanned<String>>,
    #[serde(default)]
    #[serde(rename = "gen")]
    generator: Option<String>,
    #[serde(default)]
    values: String,
    #[serde(default)]
    inplace: bool,
    #[serde(default)]
    compare: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWork {
    flops: BTreeMap<String, Spanned<String>>,
    read_bytes: Spanned<String>,
    write_bytes: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShape {
    id: u32,
    params: toml::Table,
    #[serde(default)]
    note: String,
    #[serde(default)]
    production_us: BTreeMap<String, f64>,
}

// ---------- model ----------

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

/// The loaded suite.
#[derive(Debug, Clone)]
pub struct Suite {
    pub name: String,
    pub version: String,
    pub source: SuiteSource,
    /// In file order of suite.toml.
    pub problems: Vec<Problem>,
    pub hardware: Vec<HardwareProfile>,
}

impl Suite {
    /// Loads the suite from a source, validating every file.
    pub fn load(source: SuiteSource) -> Result<Suite, LoadError> {
        let file = source.display_path("suite.toml");
        let bad = |file: &str, operator: Option<String>, msg: String| LoadError {
            file: file.to_string(),
            operator,
            field: None,
            line: None,
            msg,
        };
        let text = source
            .read_checked("suite.toml")
            .map_err(|m| bad(&file, None, m))?
            .ok_or_else(|| bad(&file, None, "missing file".into()))?;
        let raw: RawSuite = toml::from_str(&text).map_err(|e| toml_error(&file, None, &text, e))?;
        let mut problems = Vec::new();
        let mut seen_names = BTreeSet::new();
        let mut seen_ids: BTreeMap<String, String> = BTreeMap::new();
        for op in &raw.operators {
            let name = op.get_ref().clone();
            let line = line_of(&text, op.span().start);
            if !seen_names.insert(name.clone()) {
                return Err(LoadError {
                    file: file.clone(),
                    operator: Some(name),
                    field: Some("operators".into()),
                    line: Some(line),
                    msg: "duplicate operator".into(),
                });
            }
            let rel = format!("{name}/problem.toml");
            let pfile = source.display_path(&rel);
            let ptext = source
                .read_checked(&rel)
                .map_err(|m| bad(&pfile, Some(name.clone()), m))?
                .ok_or_else(|| {
                    bad(
                        &pfile,
                        Some(name.clone()),
                        format!("missing file (listed in suite.toml line {line})"),
                    )
                })?;
            let mut p = parse_problem(&pfile, &name, &ptext)?;
            let grel = format!("{name}/inputs.cu");
            p.generator = source
                .read_checked(&grel)
                .map_err(|m| bad(&source.display_path(&grel), Some(name.clone()), m))?;
            if let Some(other) = seen_ids.insert(p.id.clone(), name.clone()) {
                return Err(LoadError {
                    file: pfile,
                    operator: Some(name),
                    field: Some("id".into()),
                    line: Some(1),
                    msg: format!("duplicate operator id {} (also {other})", p.id),
                });
            }
            problems.push(p);
        }
        let mut hardware = crate::suite::hardware::load_all(&source)?;
        let calibrated = crate::suite::hardware::calibrated_variants(&hardware);
        hardware.extend(calibrated);
        let suite = Suite {
            name: raw.name,
            version: raw.version.unwrap_or_default(),
            source,
            problems,
            hardware,
        };
        // Every W dtype must have a peak in every hardware profile.
        for p in &suite.problems {
            for (d, e) in &p.flops {
                for hw in &suite.hardware {
                    if !hw.peak_flops.contains_key(d) {
                        return Err(LoadError {
                            file: hw.file.clone(),
                            operator: Some(p.name.clone()),
                            field: Some("peak_flops".into()),
                            line: None,
                            msg: format!(
                                "no peak for dtype `{d}`, which {} uses in work.flops (line {})",
                                p.name, e.line
                            ),
                        });
                    }
                }
            }
        }
        Ok(suite)
    }

    pub fn problem(&self, name: &str) -> Option<&Problem> {
        self.problems
            .iter()
            .find(|p| p.name == name || p.id == name)
    }

    /// Σ raw importance over all operators.
    pub fn importance_total(&self) -> f64 {
        self.problems.iter().map(|p| p.importance).sum()
    }

    /// Weights (raw importance normalized over the operators admitted by the filter), keyed by name.
    pub fn weights(&self, phase: PhaseFilter) -> BTreeMap<String, f64> {
        let total: f64 = self
            .problems
            .iter()
            .filter(|p| phase.admits(&p.phases))
            .map(|p| p.importance)
            .sum();
        self.problems
            .iter()
            .filter(|p| phase.admits(&p.phases))
            .map(|p| {
                (
                    p.name.clone(),
                    if total > 0.0 {
                        p.importance / total
                    } else {
                        0.0
                    },
                )
            })
            .collect()
    }

    /// Operators admitted by the filter, in descending weight (ties by name).
    pub fn by_weight(&self, phase: PhaseFilter) -> Vec<&Problem> {
        let mut v: Vec<&Problem> = self
            .problems
            .iter()
            .filter(|p| phase.admits(&p.phases))
            .collect();
        v.sort_by(|a, b| {
            b.importance
                .total_cmp(&a.importance)
                .then(a.name.cmp(&b.name))
        });
        v
    }

    pub fn hardware(&self, key: &str) -> Result<&HardwareProfile, String> {
        self.hardware
            .iter()
            .find(|h| h.key.eq_ignore_ascii_case(key) || h.name.eq_ignore_ascii_case(key))
            .ok_or_else(|| {
                let keys: Vec<&str> = self.hardware.iter().map(|h| h.key.as_str()).collect();
                format!("unknown hardware `{key}` (known: {})", keys.join(", "))
            })
    }

    pub fn shape_count(&self) -> usize {
        self.problems.iter().map(|p| p.shapes.len()).sum()
    }
}

pub(crate) fn toml_error(
    file: &str,
    op: Option<&str>,
    text: &str,
    e: toml::de::Error,
) -> LoadError {
    let line = e.span().map(|s| line_of(text, s.start));
    let msg = e.message().to_string();
    let field = msg
        .strip_prefix("missing field `")
        .and_then(|r| r.split('`').next())
        .map(|s| s.to_string());
    LoadError {
        file: file.to_string(),
        operator: op.map(|s| s.to_string()),
        field,
        line,
        msg,
    }
}

fn parse_expr(
    file: &str,
    op: &str,
    field: &str,
    text: &str,
    s: &Spanned<String>,
) -> Result<SrcExpr, LoadError> {
    let line = line_of(text, s.span().start);
    let src = s.get_ref().clone();
    let expr = expr::parse(&src).map_err(|e| LoadError {
        file: file.to_string(),
        operator: Some(op.to_string()),
        field: Some(field.to_string()),
        line: Some(line),
        msg: format!("bad expression `{src}`: {e}"),
    })?;
    Ok(SrcExpr { src, expr, line })
}

/// Parses one problem.toml. `folder` is the operator folder name.
pub fn parse_problem(file: &str, folder: &str, text: &str) -> Result<Problem, LoadError> {
    let raw: RawProblem =
        toml::from_str(text).map_err(|e| toml_error(file, Some(folder), text, e))?;
    let op = folder;
    let e = |field: &str, line: usize, msg: String| LoadError {
        file: file.to_string(),
        operator: Some(op.to_string()),
        field: Some(field.to_string()),
        line: Some(line),
        msg,
    };
    if raw.name.get_ref() != folder {
        return Err(e(
            "name",
            line_of(text, raw.name.span().start),
            format!(
                "`{}` does not match its folder `{folder}`",
                raw.name.get_ref()
            ),
        ));
    }
    let id = raw.id.get_ref().clone();
    if !id.starts_with("atrex_") {
        return Err(e(
            "id",
            line_of(text, raw.id.span().start),
            format!("`{id}` is not of the form atrex_NNN"),
        ));
    }
    let check_dtype = |d: &Spanned<String>, field: &str| -> Result<String, LoadError> {
        if DTYPES.contains(&d.get_ref().as_str()) {
            Ok(d.get_ref().clone())
        } else {
            Err(e(
                field,
                line_of(text, d.span().start),
                format!(
                    "unknown dtype `{}` (known: {})",
                    d.get_ref(),
                    DTYPES.join(", ")
                ),
            ))
        }
    };
    let dtype = check_dtype(&raw.dtype, "dtype")?;
    let mut phases = Vec::new();
    for ph in raw.phase.get_ref() {
        phases.push(match ph.as_str() {
            "prefill" => Phase::Prefill,
            "decode" => Phase::Decode,
            other => {
                return Err(e(
                    "phase",
                    line_of(text, raw.phase.span().start),
                    format!("unknown phase `{other}` (prefill, decode)"),
                ));
            }
        });
    }
    if phases.is_empty() {
        return Err(e(
            "phase",
            line_of(text, raw.phase.span().start),
            "no phase given".into(),
        ));
    }
    if !(raw.importance.is_finite() && raw.importance >= 0.0) {
        return Err(LoadError {
            file: file.into(),
            operator: Some(op.into()),
            field: Some("importance".into()),
            line: None,
            msg: format!("importance {} is not a non-negative number", raw.importance),
        });
    }
    let mut params = BTreeMap::new();
    for (name, p) in raw.params {
        let ty = p.ty.get_ref().clone();
        if !["int", "float", "bool", "str", "int_list", "float_list"].contains(&ty.as_str()) {
            return Err(e(
                &format!("params.{name}.type"),
                line_of(text, p.ty.span().start),
                format!(
                    "unknown parameter type `{ty}` (int, float, bool, str, int_list, float_list)"
                ),
            ));
        }
        let default = match &p.default {
            None => None,
            Some(v) => Some(Value::from_toml(v).ok_or_else(|| {
                e(
                    &format!("params.{name}.default"),
                    line_of(text, p.ty.span().start),
                    format!("unsupported default {v}"),
                )
            })?),
        };
        params.insert(
            name,
            ParamDecl {
                ty,
                source: p.source.unwrap_or_else(|| "input".into()),
                default,
                doc: p.doc,
            },
        );
    }
    let mut lets = Vec::new();
    for l in &raw.lets {
        let line = line_of(text, l.span().start);
        let s = l.get_ref();
        let Some((name, rhs)) = s.split_once('=') else {
            return Err(e(
                "let",
                line,
                format!("`{s}` is not of the form `NAME = expression`"),
            ));
        };
        let name = name.trim().to_string();
        if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return Err(e("let", line, format!("bad name `{name}` in `{s}`")));
        }
        let expr = expr::parse(rhs.trim())
            .map_err(|x| e("let", line, format!("bad expression in `{s}`: {x}")))?;
        lets.push((
            name,
            SrcExpr {
                src: rhs.trim().to_string(),
                expr,
                line,
            },
        ));
    }
    let tensors = |raws: Vec<RawTensor>, kind: &str| -> Result<Vec<TensorSpec>, LoadError> {
        let mut out = Vec::new();
        let mut names = BTreeSet::new();
        for t in raws {
            let field = format!("{kind}.{}", t.name);
            if !names.insert(t.name.clone()) {
                return Err(e(
                    &field,
                    line_of(text, t.dtype.span().start),
                    format!("duplicate {kind} name `{}`", t.name),
                ));
            }
            // `=expression` picks the dtype per shape (a string parameter such as `dtype`).
            let dtype = if let Some(src) = t.dtype.get_ref().strip_prefix('=') {
                expr::parse(src.trim()).map_err(|x| {
                    e(
                        &format!("{field}.dtype"),
                        line_of(text, t.dtype.span().start),
                        format!("bad expression `{src}`: {x}"),
                    )
                })?;
                t.dtype.get_ref().clone()
            } else {
                check_dtype(&t.dtype, &format!("{field}.dtype"))?
            };
            let shape = t
                .shape
                .iter()
                .map(|s| parse_expr(file, op, &format!("{field}.shape"), text, s))
                .collect::<Result<Vec<_>, _>>()?;
            let compare = t.compare.unwrap_or_else(|| {
                if dtype.starts_with("int")
                    || dtype.starts_with("fp8")
                    || dtype == "bool"
                    || dtype == "uint8"
                {
                    "exact".into()
                } else {
                    "float".into()
                }
            });
            if compare != "float" && compare != "exact" {
                return Err(e(
                    &format!("{field}.compare"),
                    line_of(text, t.dtype.span().start),
                    format!("unknown compare `{compare}` (float, exact)"),
                ));
            }
            out.push(TensorSpec {
                name: t.name,
                dtype,
                shape,
                generator: t.generator.unwrap_or_else(|| "custom".into()),
                values: t.values,
                inplace: t.inplace,
                compare,
            });
        }
        Ok(out)
    };
    let inputs = tensors(raw.inputs, "inputs")?;
    let outputs = tensors(raw.outputs, "outputs")?;
    for o in &outputs {
        if inputs.iter().any(|i| i.name == o.name) {
            let line = o.shape.first().map(|s| s.line).unwrap_or(1);
            return Err(e(
                &format!("outputs.{}", o.name),
                line,
                format!(
                    "output `{}` has the name of an input; kernel arguments bind by name, so give it its own (e.g. `{}_out`)",
                    o.name, o.name
                ),
            ));
        }
    }
    if outputs.is_empty() {
        return Err(LoadError {
            file: file.into(),
            operator: Some(op.into()),
            field: Some("outputs".into()),
            line: None,
            msg: "an operator needs at least one output".into(),
        });
    }
    let mut flops = BTreeMap::new();
    for (d, s) in &raw.work.flops {
        if !DTYPES.contains(&d.as_str()) {
            return Err(e(
                &format!("work.flops.{d}"),
                line_of(text, s.span().start),
                format!("unknown dtype `{d}` (known: {})", DTYPES.join(", ")),
            ));
        }
        flops.insert(
            d.clone(),
            parse_expr(file, op, &format!("work.flops.{d}"), text, s)?,
        );
    }
    let read_bytes = parse_expr(file, op, "work.read_bytes", text, &raw.work.read_bytes)?;
    let write_bytes = parse_expr(file, op, "work.write_bytes", text, &raw.work.write_bytes)?;

    let mut shapes = Vec::new();
    let mut ids = BTreeSet::new();
    for s in &raw.shapes {
        let line = line_of(text, s.span().start);
        let r = s.get_ref();
        if !ids.insert(r.id) {
            return Err(e("shapes.id", line, format!("duplicate shape id {}", r.id)));
        }
        let mut sp = BTreeMap::new();
        for (k, v) in &r.params {
            let Some(val) = Value::from_toml(v) else {
                return Err(e(
                    &format!("shapes.params.{k}"),
                    line,
                    format!("shape {}: unsupported value {v}", r.id),
                ));
            };
            if !params.is_empty() && !params.contains_key(k) {
                return Err(e(
                    &format!("shapes.params.{k}"),
                    line,
                    format!(
                        "shape {}: parameter `{k}` is not declared under [params]",
                        r.id
                    ),
                ));
            }
            sp.insert(k.clone(), val);
        }
        for (k, d) in &params {
            if !sp.contains_key(k) && d.default.is_none() {
                return Err(e(
                    &format!("shapes.params.{k}"),
                    line,
                    format!("shape {} is missing parameter `{k}`", r.id),
                ));
            }
        }
        shapes.push(Shape {
            id: r.id,
            params: sp,
            note: r.note.clone(),
            production_us: r.production_us.clone(),
            line,
        });
    }
    if shapes.is_empty() {
        return Err(LoadError {
            file: file.into(),
            operator: Some(op.into()),
            field: Some("shapes".into()),
            line: None,
            msg: "no shapes".into(),
        });
    }
    let p = Problem {
        id,
        name: folder.to_string(),
        dtype,
        phases,
        importance: raw.importance,
        upstream: raw.upstream,
        summary: raw.summary,
        lets,
        params,
        inputs,
        outputs,
        flops,
        read_bytes,
        write_bytes,
        tolerance: raw.tolerance,
        shapes,
        file: file.to_string(),
        generator: None,
    };
    // Evaluate everything once so that a bad expression or a missing parameter is reported at
    // load time, with the shape's line.
    for s in &p.shapes {
        let env = p.env(s).map_err(|mut x| {
            x.msg = format!("{} (shape at line {})", x.msg, s.line);
            x
        })?;
        p.work_in(&env, s.id)?;
        for t in p.inputs.iter().chain(&p.outputs) {
            p.tensor_dims(t, &env)?;
            p.tensor_dtype(t, &env)?;
        }
    }
    Ok(p)
}

/// The workspace: the user's own work (suite edits, accepted kernels, sessions).
#[derive(Debug, Clone)]
pub struct Workspace {
    pub dir: PathBuf,
    /// Why this directory was chosen.
    pub reason: &'static str,
}

impl Workspace {
    /// `--workspace DIR` if given; else the current directory when it has problems/; else the
    /// user's data directory.
    pub fn resolve(explicit: Option<&Path>) -> Workspace {
        if let Some(d) = explicit {
            return Workspace {
                dir: d.to_path_buf(),
                reason: "--workspace",
            };
        }
        if let Ok(cwd) = std::env::current_dir()
            && cwd.join("problems").join("suite.toml").is_file()
        {
            return Workspace {
                dir: cwd,
                reason: "current directory (has problems/)",
            };
        }
        let dir = dirs::data_dir()
            .map(|d| d.join("atrex-tui"))
            .unwrap_or_else(|| PathBuf::from(".atrex-tui"));
        Workspace {
            dir,
            reason: "user data directory",
        }
    }

    /// The suite source: the workspace's problems/ when it has one, else the built-in copy.
    pub fn suite_source(&self) -> SuiteSource {
        let p = self.dir.join("problems");
        if p.join("suite.toml").is_file() {
            SuiteSource::Dir(p)
        } else {
            SuiteSource::Embedded
        }
    }

    pub fn sessions_dir(&self) -> PathBuf {
        self.dir.join("sessions")
    }
}
