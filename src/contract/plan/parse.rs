//! Reading a plan: the `/* atrex:plan ... */` block found in the source, its TOML read with
//! every key checked (unknown keys are errors), every expression parsed and every value checked,
//! each error naming its line in the kernel file.

use super::tensor_map::TensorMap;
use super::*;
use crate::suite::expr::{self, Value};
use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

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
