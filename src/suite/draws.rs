//! Structured draws (`[[draws]]` in problem.toml): named adversarial input cases checked beside
//! the random seeds (docs/problem-format.md, "Structured draws").
//!
//! A draw is the seed's random inputs followed by one structure pass: a harness kernel that
//! rewrites the named inputs on the device (rows set to zero or to one value, rows or single
//! elements scaled, integer ids collapsed), or a draw code handed to the operator's own
//! `inputs.cu` as `draw` (0 on random draws). Invariants: a pass's arguments are expressions of
//! the shape's environment and resolve on every shape at load time; a harness pass names at least
//! one input and only inputs of a dtype it applies to, with the dimensions it needs; a `custom`
//! pass names none; names are unique, so a failure message can name its draw.

use super::expr::{self, ExprError, Value};
use super::load::{LoadError, line_of};
use super::problem::TensorSpec;
use serde::Deserialize;
use toml::Spanned;

/// One declared structured draw.
#[derive(Debug, Clone, PartialEq)]
pub struct DrawSpec {
    /// Unique within the operator; named in failure messages.
    pub name: String,
    /// The structure pass, `kind(args)` (args are expressions of the shape's environment).
    pub pass: String,
    /// The inputs the pass rewrites (none for `custom`).
    pub inputs: Vec<String>,
    /// What the draw catches, for people.
    pub doc: String,
    pub line: usize,
}

/// A structure pass with its arguments evaluated for one shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pass {
    /// A few rows (last dimension) set to 0.
    ZeroRows,
    /// A few rows set to one value.
    ConstRows(f64),
    /// A few rows multiplied by a factor.
    ScaleRows(f64),
    /// About one element in 256 (and at least one) multiplied by a factor.
    Outliers(f64),
    /// A few aligned groups of `g` consecutive elements set to 0.
    ZeroGroups(u64),
    /// Integers: every element the same value, drawn from [lo, hi).
    OneValue(i64, i64),
    /// Integers: x → x mod n, so values ≥ n never occur.
    Wrap(i64),
    /// Integers: values in [0, n) mapped by a bijection of [0, n) drawn from the seed (a block
    /// table's pages scattered over the pool); values outside [0, n) kept.
    Permute(i64),
    /// The operator's inputs.cu with `draw` = the code (non-zero).
    Custom(i64),
}

/// The pass kinds, as documented.
pub const PASS_KINDS: &[&str] = &[
    "zero_rows",
    "const_rows(v)",
    "scale_rows(s)",
    "outliers(f)",
    "zero_groups(g)",
    "one_value(lo, hi)",
    "wrap(n)",
    "permute(n)",
    "custom(code)",
];

/// A pass (`kind(args)`, as the problem file writes it in `pass`) that cannot be resolved on a
/// shape.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PassError {
    #[error("pass `{pass}`: {source}")]
    Expr { pass: String, source: ExprError },
    #[error("pass `{pass}` is not of the form kind(args)")]
    Form { pass: String },
    /// `index`: 1-based.
    #[error("pass `{pass}`: argument {index} is not a number")]
    NotANumber { pass: String, index: usize },
    #[error("pass `{pass}`: argument {index} is not an integer")]
    NotAnInteger { pass: String, index: usize },
    #[error("pass `{pass}`: `{kind}` takes {want} argument(s), not {got}")]
    Arity {
        pass: String,
        kind: String,
        want: usize,
        got: usize,
    },
    #[error("pass `{pass}`: group size {size} is not positive")]
    GroupSize { pass: String, size: i64 },
    #[error("pass `{pass}`: [{lo}, {hi}) is an empty range")]
    EmptyRange { pass: String, lo: i64, hi: i64 },
    #[error("pass `{pass}`: modulus {modulus} is not positive")]
    Modulus { pass: String, modulus: i64 },
    #[error("pass `{pass}`: range {range} is not in [1, 2^31]")]
    Range { pass: String, range: i64 },
    #[error("pass `{pass}`: draw code 0 is the random draw")]
    RandomDrawCode { pass: String },
    #[error("pass `{pass}`: unknown kind `{kind}` (known: {known})", known = PASS_KINDS.join(", "))]
    UnknownKind { pass: String, kind: String },
}

/// Why a pass may not rewrite a tensor.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Inapplicable {
    #[error("a custom pass rewrites no named input")]
    Custom,
    #[error("{value} is not exactly representable in {dtype}")]
    NotRepresentable { value: f64, dtype: String },
    #[error("the pass does not apply to {0}")]
    Dtype(String),
    #[error("a row pass needs a tensor of 2 or more dimensions")]
    NotRows,
    #[error("{elements} elements are not whole groups of {group}")]
    NotWholeGroups { elements: u64, group: u64 },
}

impl Pass {
    /// Parses `kind(args)` and evaluates the arguments in a shape's environment.
    pub fn resolve(src: &str, env: &expr::Env) -> Result<Pass, PassError> {
        let pass = || src.to_string();
        let expr_error = |source| PassError::Expr {
            pass: pass(),
            source,
        };
        let e = expr::parse(src).map_err(expr_error)?;
        let (kind, args) = match e {
            expr::Expr::Var(name, _) => (name, Vec::new()),
            expr::Expr::Call(name, args, _) => {
                let mut vals = Vec::new();
                for a in args {
                    vals.push(a.eval(env).map_err(expr_error)?);
                }
                (name, vals)
            }
            _ => return Err(PassError::Form { pass: pass() }),
        };
        let num = |i: usize| match args.get(i).and_then(Value::as_f64) {
            Some(x) if x.is_finite() => Ok(x),
            _ => Err(PassError::NotANumber {
                pass: pass(),
                index: i + 1,
            }),
        };
        let int = |i: usize| {
            args.get(i)
                .and_then(Value::as_int)
                .and_then(|x| i64::try_from(x).ok())
                .ok_or_else(|| PassError::NotAnInteger {
                    pass: pass(),
                    index: i + 1,
                })
        };
        let arity = |n: usize| {
            if args.len() == n {
                Ok(())
            } else {
                Err(PassError::Arity {
                    pass: pass(),
                    kind: kind.clone(),
                    want: n,
                    got: args.len(),
                })
            }
        };
        let p = match kind.as_str() {
            "zero_rows" => arity(0).map(|_| Pass::ZeroRows)?,
            "const_rows" => arity(1).and_then(|_| num(0)).map(Pass::ConstRows)?,
            "scale_rows" => arity(1).and_then(|_| num(0)).map(Pass::ScaleRows)?,
            "outliers" => arity(1).and_then(|_| num(0)).map(Pass::Outliers)?,
            "zero_groups" => {
                arity(1)?;
                match int(0)? {
                    g if g > 0 => Pass::ZeroGroups(g as u64),
                    size => return Err(PassError::GroupSize { pass: pass(), size }),
                }
            }
            "one_value" => {
                arity(2)?;
                let (lo, hi) = (int(0)?, int(1)?);
                if hi <= lo {
                    return Err(PassError::EmptyRange {
                        pass: pass(),
                        lo,
                        hi,
                    });
                }
                Pass::OneValue(lo, hi)
            }
            "wrap" => {
                arity(1)?;
                match int(0)? {
                    n if n > 0 => Pass::Wrap(n),
                    modulus => {
                        return Err(PassError::Modulus {
                            pass: pass(),
                            modulus,
                        });
                    }
                }
            }
            "permute" => {
                arity(1)?;
                match int(0)? {
                    n if n > 0 && n <= 1 << 31 => Pass::Permute(n),
                    range => {
                        return Err(PassError::Range {
                            pass: pass(),
                            range,
                        });
                    }
                }
            }
            "custom" => {
                arity(1)?;
                match int(0)? {
                    0 => return Err(PassError::RandomDrawCode { pass: pass() }),
                    c => Pass::Custom(c),
                }
            }
            other => {
                return Err(PassError::UnknownKind {
                    pass: pass(),
                    kind: other.to_string(),
                });
            }
        };
        Ok(p)
    }

    /// Whether the pass may rewrite a tensor of this dtype with these dimensions (the reason
    /// when not).
    pub fn applies_to(&self, dtype: &str, dims: &[u64]) -> Result<(), Inapplicable> {
        let float = matches!(dtype, "bf16" | "fp16" | "fp32");
        let fp8 = dtype.starts_with("fp8");
        let int = matches!(dtype, "int32" | "int64");
        let n: u64 = dims.iter().product();
        let ok = match self {
            Pass::ZeroRows => float || fp8,
            Pass::ConstRows(v) => float || (fp8 && fp8_code(dtype, *v).is_some()),
            Pass::ScaleRows(_) | Pass::Outliers(_) => float,
            Pass::ZeroGroups(_) => float || fp8,
            Pass::OneValue(..) | Pass::Wrap(_) | Pass::Permute(_) => int,
            Pass::Custom(_) => false,
        };
        if !ok {
            return Err(match self {
                Pass::Custom(_) => Inapplicable::Custom,
                Pass::ConstRows(v) if fp8 => Inapplicable::NotRepresentable {
                    value: *v,
                    dtype: dtype.to_string(),
                },
                _ => Inapplicable::Dtype(dtype.to_string()),
            });
        }
        let rows = matches!(
            self,
            Pass::ZeroRows | Pass::ConstRows(_) | Pass::ScaleRows(_)
        );
        if rows && dims.len() < 2 {
            return Err(Inapplicable::NotRows);
        }
        if let Pass::ZeroGroups(g) = self
            && !n.is_multiple_of(*g)
        {
            return Err(Inapplicable::NotWholeGroups {
                elements: n,
                group: *g,
            });
        }
        Ok(())
    }
}

/// The code of an fp8 value that the format holds exactly (None otherwise; NaN codes skipped).
pub fn fp8_code(dtype: &str, v: f64) -> Option<u8> {
    let dec: fn(u8) -> f64 = match dtype {
        "fp8_e4m3" => super::dtype::e4m3fn_to_f64,
        "fp8_e4m3fnuz" => super::dtype::e4m3fnuz_to_f64,
        _ => return None,
    };
    (0u8..=255).find(|c| {
        let d = dec(*c);
        d == v && (v != 0.0 || d.is_sign_positive())
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDraw {
    name: Spanned<String>,
    pass: String,
    #[serde(default)]
    inputs: Vec<String>,
    #[serde(default)]
    doc: String,
}

/// The `[[draws]]`: unique names of lowercase letters, digits and `_`; inputs that exist; the
/// pass's form (its kind and arity are checked per shape, with the arguments).
pub(super) fn parse_draws(
    raw: Vec<RawDraw>,
    inputs: &[TensorSpec],
    text: &str,
    e: &dyn Fn(&str, usize, String) -> LoadError,
) -> Result<Vec<DrawSpec>, LoadError> {
    let mut out: Vec<DrawSpec> = Vec::new();
    for d in raw {
        let line = line_of(text, d.name.span().start);
        let name = d.name.into_inner();
        let field = format!("draws.{name}");
        let good = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !good {
            return Err(e(
                "draws.name",
                line,
                format!("`{name}`: a draw's name is lowercase letters, digits and `_`"),
            ));
        }
        if out.iter().any(|o| o.name == name) {
            return Err(e(&field, line, format!("a second draw named `{name}`")));
        }
        expr::parse(&d.pass)
            .map_err(|x| e(&format!("{field}.pass"), line, format!("`{}`: {x}", d.pass)))?;
        let custom = d.pass.trim_start().starts_with("custom");
        if custom != d.inputs.is_empty() {
            return Err(e(
                &format!("{field}.inputs"),
                line,
                if custom {
                    "a custom pass is the operator's inputs.cu: it names no inputs".into()
                } else {
                    "the pass names the inputs it rewrites".into()
                },
            ));
        }
        for i in &d.inputs {
            if !inputs.iter().any(|t| &t.name == i) {
                return Err(e(
                    &format!("{field}.inputs"),
                    line,
                    format!("no input `{i}`"),
                ));
            }
        }
        out.push(DrawSpec {
            name,
            pass: d.pass,
            inputs: d.inputs,
            doc: d.doc,
            line,
        });
    }
    Ok(out)
}

/// A tensor's dtype and dims.
pub(super) type DtypeDims = (String, Vec<u64>);

/// Every draw's pass resolves in a shape's environment and applies to its inputs there.
pub(super) fn check_draws(
    draws: &[DrawSpec],
    env: &expr::Env,
    shape: u32,
    dims_of: &dyn Fn(&str) -> Result<DtypeDims, LoadError>,
    e: &dyn Fn(&str, usize, String) -> LoadError,
) -> Result<(), LoadError> {
    for d in draws {
        let field = format!("draws.{}", d.name);
        let pass = Pass::resolve(&d.pass, env).map_err(|m| {
            e(
                &format!("{field}.pass"),
                d.line,
                format!("shape {shape}: {m}"),
            )
        })?;
        for i in &d.inputs {
            let (dtype, dims) = dims_of(i)?;
            pass.applies_to(&dtype, &dims).map_err(|m| {
                e(
                    &format!("{field}.inputs"),
                    d.line,
                    format!("shape {shape}: input `{i}` ({dtype} {dims:?}): {m}"),
                )
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> expr::Env {
        let mut env = expr::Env::new();
        env.insert("E".into(), Value::Int(64));
        env.insert("G".into(), Value::Int(128));
        env
    }

    #[test]
    fn passes_resolve_against_the_shape() {
        let env = env();
        assert_eq!(Pass::resolve("zero_rows", &env), Ok(Pass::ZeroRows));
        assert_eq!(
            Pass::resolve("scale_rows(2e4)", &env),
            Ok(Pass::ScaleRows(2e4))
        );
        assert_eq!(
            Pass::resolve("const_rows(-384)", &env),
            Ok(Pass::ConstRows(-384.0))
        );
        assert_eq!(
            Pass::resolve("zero_groups(G)", &env),
            Ok(Pass::ZeroGroups(128))
        );
        assert_eq!(
            Pass::resolve("one_value(0, E)", &env),
            Ok(Pass::OneValue(0, 64))
        );
        assert_eq!(Pass::resolve("wrap(E / 4)", &env), Ok(Pass::Wrap(16)));
        assert_eq!(Pass::resolve("permute(E + 1)", &env), Ok(Pass::Permute(65)));
        assert_eq!(Pass::resolve("custom(2)", &env), Ok(Pass::Custom(2)));
        for (bad, why) in [
            ("zero_rows(1)", "takes 0 argument"),
            ("scale_rows", "takes 1 argument"),
            ("one_value(E, 0)", "empty range"),
            ("zero_groups(0)", "not positive"),
            ("custom(0)", "random draw"),
            ("wrap(1.5)", "not an integer"),
            ("permute(0)", "not in [1, 2^31]"),
            ("shuffle(2)", "unknown kind `shuffle`"),
            ("scale_rows(Q)", "Q"),
        ] {
            let m = Pass::resolve(bad, &env).unwrap_err().to_string();
            assert!(m.contains(why), "{bad}: {m}");
        }
    }

    #[test]
    fn passes_apply_only_where_they_make_sense() {
        assert!(Pass::ZeroRows.applies_to("bf16", &[4, 8]).is_ok());
        assert!(Pass::ZeroRows.applies_to("bf16", &[8]).is_err());
        assert!(Pass::ScaleRows(10.0).applies_to("int32", &[4, 8]).is_err());
        assert!(
            Pass::ScaleRows(10.0)
                .applies_to("fp8_e4m3", &[4, 8])
                .is_err()
        );
        assert!(Pass::OneValue(0, 8).applies_to("int32", &[4, 8]).is_ok());
        assert!(Pass::OneValue(0, 8).applies_to("bf16", &[4, 8]).is_err());
        assert!(Pass::ZeroGroups(128).applies_to("bf16", &[2, 256]).is_ok());
        assert!(Pass::ZeroGroups(128).applies_to("bf16", &[2, 100]).is_err());
        assert!(
            Pass::ConstRows(448.0)
                .applies_to("fp8_e4m3", &[2, 8])
                .is_ok()
        );
        assert!(
            Pass::ConstRows(448.0)
                .applies_to("fp8_e4m3fnuz", &[2, 8])
                .is_err()
        );
        assert!(Pass::Custom(1).applies_to("bf16", &[2, 8]).is_err());
    }

    #[test]
    fn fp8_codes_are_exact() {
        assert_eq!(fp8_code("fp8_e4m3", 448.0), Some(0x7E));
        assert_eq!(fp8_code("fp8_e4m3", -448.0), Some(0xFE));
        assert_eq!(fp8_code("fp8_e4m3", 0.0), Some(0x00));
        assert_eq!(fp8_code("fp8_e4m3fnuz", 240.0), Some(0x7F));
        assert_eq!(fp8_code("fp8_e4m3fnuz", 0.0), Some(0x00));
        assert_eq!(fp8_code("fp8_e4m3", 449.0), None);
        assert_eq!(fp8_code("bf16", 1.0), None);
    }
}
