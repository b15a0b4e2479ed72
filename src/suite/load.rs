//! Loading problem.toml files: the raw TOML forms, their checks into a Problem, and load errors
//! that name the file, operator, field and line.

use super::expr::{self, Value};
use super::phase::Phase;
use super::problem::{DTYPES, ParamDecl, Problem, Shape, SrcExpr, TensorSpec, Tolerance};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use toml::Spanned;

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

/// 1-based line of a byte offset.
pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|b| *b == b'\n')
        .count()
        + 1
}

// ---------- raw TOML ----------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSuite {
    pub(super) name: String,
    #[serde(default)]
    pub(super) version: Option<String>,
    pub(super) operators: Vec<Spanned<String>>,
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
    #[serde(default)]
    draws: Vec<super::draws::RawDraw>,
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
    /// The int_list parameter whose values this input holds, element for element.
    #[serde(default)]
    holds: Option<String>,
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
    let phases = parse_phases(&raw.phase, text, &e)?;
    if !(raw.importance.is_finite() && raw.importance >= 0.0) {
        return Err(LoadError {
            file: file.into(),
            operator: Some(op.into()),
            field: Some("importance".into()),
            line: None,
            msg: format!("importance {} is not a non-negative number", raw.importance),
        });
    }
    let params = parse_params(raw.params, text, &e)?;
    let lets = parse_lets(&raw.lets, text, &e)?;
    let tensors = |raws: Vec<RawTensor>, kind: &str| {
        parse_tensors(raws, kind, file, op, text, &e, &check_dtype)
    };
    let inputs = tensors(raw.inputs, "inputs")?;
    let outputs = tensors(raw.outputs, "outputs")?;
    check_holds(&inputs, &outputs, &params, &e)?;
    let draws = super::draws::parse_draws(raw.draws, &inputs, text, &e)?;
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
    let flops = parse_flops(&raw.work.flops, file, op, text, &e)?;
    let read_bytes = parse_expr(file, op, "work.read_bytes", text, &raw.work.read_bytes)?;
    let write_bytes = parse_expr(file, op, "work.write_bytes", text, &raw.work.write_bytes)?;

    let shapes = parse_shapes(&raw.shapes, &params, text, &e)?;
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
        draws,
    };
    check_evaluates(&p)?;
    Ok(p)
}

/// The `phase` list: each one known, at least one.
fn parse_phases(
    phase: &Spanned<Vec<String>>,
    text: &str,
    e: &dyn Fn(&str, usize, String) -> LoadError,
) -> Result<Vec<Phase>, LoadError> {
    let mut phases = Vec::new();
    for ph in phase.get_ref() {
        phases.push(match ph.as_str() {
            "prefill" => Phase::Prefill,
            "decode" => Phase::Decode,
            other => {
                return Err(e(
                    "phase",
                    line_of(text, phase.span().start),
                    format!("unknown phase `{other}` (prefill, decode)"),
                ));
            }
        });
    }
    if phases.is_empty() {
        return Err(e(
            "phase",
            line_of(text, phase.span().start),
            "no phase given".into(),
        ));
    }
    Ok(phases)
}

/// The `[params]` declarations: known types, defaults that convert.
fn parse_params(
    raw_params: BTreeMap<String, RawParam>,
    text: &str,
    e: &dyn Fn(&str, usize, String) -> LoadError,
) -> Result<BTreeMap<String, ParamDecl>, LoadError> {
    let mut params = BTreeMap::new();
    for (name, p) in raw_params {
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
    Ok(params)
}

/// The `let` lines: `NAME = expression`, in order.
fn parse_lets(
    raw_lets: &[Spanned<String>],
    text: &str,
    e: &dyn Fn(&str, usize, String) -> LoadError,
) -> Result<Vec<(String, SrcExpr)>, LoadError> {
    let mut lets = Vec::new();
    for l in raw_lets {
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
    Ok(lets)
}

/// The `inputs` or `outputs` tensors (`kind`): unique names, known dtypes or `=expression`,
/// shapes that parse, a known compare mode.
fn parse_tensors(
    raws: Vec<RawTensor>,
    kind: &str,
    file: &str,
    op: &str,
    text: &str,
    e: &dyn Fn(&str, usize, String) -> LoadError,
    check_dtype: &dyn Fn(&Spanned<String>, &str) -> Result<String, LoadError>,
) -> Result<Vec<TensorSpec>, LoadError> {
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
            holds: t.holds,
        });
    }
    Ok(out)
}

/// `holds`: only on inputs, naming an `int_list` parameter, on a one-dimensional integer tensor.
fn check_holds(
    inputs: &[TensorSpec],
    outputs: &[TensorSpec],
    params: &BTreeMap<String, ParamDecl>,
    e: &dyn Fn(&str, usize, String) -> LoadError,
) -> Result<(), LoadError> {
    if let Some(o) = outputs.iter().find(|o| o.holds.is_some()) {
        let line = o.shape.first().map(|s| s.line).unwrap_or(1);
        return Err(e(
            &format!("outputs.{}.holds", o.name),
            line,
            "`holds` describes an input".into(),
        ));
    }
    for t in inputs {
        let Some(h) = &t.holds else { continue };
        let line = t.shape.first().map(|s| s.line).unwrap_or(1);
        let field = format!("inputs.{}.holds", t.name);
        match params.get(h) {
            Some(d) if d.ty == "int_list" => {}
            Some(d) => {
                return Err(e(
                    &field,
                    line,
                    format!("`{h}` is a {} parameter; `holds` names an int_list", d.ty),
                ));
            }
            None => return Err(e(&field, line, format!("no parameter `{h}`"))),
        }
        if t.shape.len() != 1 || !matches!(t.dtype.as_str(), "int32" | "int64") {
            return Err(e(
                &field,
                line,
                format!(
                    "`{}` is {} with {} dimensions; a tensor that holds a list is one-dimensional int32 or int64",
                    t.name,
                    t.dtype,
                    t.shape.len()
                ),
            ));
        }
    }
    Ok(())
}

/// `work.flops`: one expression per known dtype.
fn parse_flops(
    raw_flops: &BTreeMap<String, Spanned<String>>,
    file: &str,
    op: &str,
    text: &str,
    e: &dyn Fn(&str, usize, String) -> LoadError,
) -> Result<BTreeMap<String, SrcExpr>, LoadError> {
    let mut flops = BTreeMap::new();
    for (d, s) in raw_flops {
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
    Ok(flops)
}

/// The `[[shapes]]`: unique ids, parameters declared and given (or defaulted).
fn parse_shapes(
    raw_shapes: &[Spanned<RawShape>],
    params: &BTreeMap<String, ParamDecl>,
    text: &str,
    e: &dyn Fn(&str, usize, String) -> LoadError,
) -> Result<Vec<Shape>, LoadError> {
    let mut shapes = Vec::new();
    let mut ids = BTreeSet::new();
    for s in raw_shapes {
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
        for (k, d) in params {
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
    Ok(shapes)
}

/// Evaluates everything once so that a bad expression or a missing parameter is reported at
/// load time, with the shape's line.
fn check_evaluates(p: &Problem) -> Result<(), LoadError> {
    for s in &p.shapes {
        let env = p.env(s).map_err(|mut x| {
            x.msg = format!("{} (shape at line {})", x.msg, s.line);
            x
        })?;
        p.work_in(&env, s.id)?;
        for t in p.inputs.iter().chain(&p.outputs) {
            let dims = p.tensor_dims(t, &env)?;
            p.tensor_dtype(t, &env)?;
            if let Some(Value::List(xs)) = t.holds.as_ref().and_then(|h| env.get(h))
                && dims != [xs.len()]
            {
                return Err(LoadError {
                    file: p.file.clone(),
                    operator: Some(p.name.clone()),
                    field: Some(format!("inputs.{}.holds", t.name)),
                    line: Some(s.line),
                    msg: format!(
                        "shape {}: `{}` has {dims:?} elements but holds `{}` of {} values",
                        s.id,
                        t.name,
                        t.holds.as_deref().unwrap_or_default(),
                        xs.len()
                    ),
                });
            }
        }
        let dims_of = |name: &str| -> Result<(String, Vec<u64>), LoadError> {
            let t = p
                .inputs
                .iter()
                .find(|t| t.name == name)
                .expect("checked at parse");
            let dims = p.tensor_dims(t, &env)?;
            Ok((
                p.tensor_dtype(t, &env)?,
                dims.into_iter().map(|d| d as u64).collect(),
            ))
        };
        let e = |field: &str, line: usize, msg: String| LoadError {
            file: p.file.clone(),
            operator: Some(p.name.clone()),
            field: Some(field.to_string()),
            line: Some(line),
            msg,
        };
        super::draws::check_draws(&p.draws, &env, s.id, &dims_of, &e)?;
    }
    Ok(())
}

/// Commands report a suite that cannot be loaded as text at their edge.
impl From<LoadError> for String {
    fn from(e: LoadError) -> String {
        e.to_string()
    }
}
