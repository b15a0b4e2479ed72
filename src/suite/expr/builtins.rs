//! The built-in functions of the expression language (min, max, ceil, sum, if, len, ...).

use super::eval::{binop, float_to_int, num};
use super::{ExprError, Value, err};

fn flatten_args(name: &str, vals: Vec<Value>, col: usize) -> Result<Vec<Value>, ExprError> {
    if vals.len() == 1
        && let Value::List(xs) = &vals[0]
    {
        return Ok(xs.clone());
    }
    if vals.is_empty() {
        return err(col, format!("`{name}` needs at least one argument"));
    }
    Ok(vals)
}

pub(super) fn call(name: &str, vals: Vec<Value>, col: usize) -> Result<Value, ExprError> {
    let one = |vals: &[Value]| -> Result<Value, ExprError> {
        if vals.len() != 1 {
            return err(
                col,
                format!("`{name}` takes one argument, got {}", vals.len()),
            );
        }
        Ok(vals[0].clone())
    };
    match name {
        "min" | "max" => {
            let xs = flatten_args(name, vals, col)?;
            if xs.is_empty() {
                return err(col, format!("`{name}` of an empty list"));
            }
            let mut best = xs[0].clone();
            for x in xs.into_iter().skip(1) {
                let (Some(a), Some(b)) = (num(&best), num(&x)) else {
                    return err(col, format!("`{name}` needs numbers"));
                };
                let take = if name == "min" { b < a } else { b > a };
                if take {
                    best = x;
                }
            }
            Ok(best)
        }
        "ceil" | "floor" => map1(&one(&vals)?, &|v| match v {
            Value::Int(i) => Ok(Value::Int(*i)),
            Value::Float(x) => {
                float_to_int(if name == "ceil" { x.ceil() } else { x.floor() }, col, name)
            }
            other => err(
                col,
                format!("`{name}` needs a number, got a {}", other.type_name()),
            ),
        }),
        "sqrt" | "log2" | "exp" | "float" => map1(&one(&vals)?, &|v| {
            let Some(x) = num(v) else {
                return err(
                    col,
                    format!("`{name}` needs a number, got a {}", v.type_name()),
                );
            };
            Ok(Value::Float(match name {
                "sqrt" => x.sqrt(),
                "log2" => x.log2(),
                "exp" => x.exp(),
                _ => x,
            }))
        }),
        "int" => map1(&one(&vals)?, &|v| match num(v) {
            Some(x) => float_to_int(x.trunc(), col, "int"),
            None => err(
                col,
                format!("`int` needs a number, got a {}", v.type_name()),
            ),
        }),
        "sum" | "prod" | "numel" => {
            let v = one(&vals)?;
            let Value::List(xs) = v else {
                return err(
                    col,
                    format!("`{name}` needs a list, got a {}", v.type_name()),
                );
            };
            let (mut acc, op) = if name == "sum" {
                (Value::Int(0), "+")
            } else {
                (Value::Int(1), "*")
            };
            for x in xs {
                acc = binop(op, acc, x, col)?;
            }
            Ok(acc)
        }
        "if" => {
            if vals.len() != 3 {
                return err(
                    col,
                    format!(
                        "`if` takes (condition, then, else), got {} arguments",
                        vals.len()
                    ),
                );
            }
            let cond = match &vals[0] {
                Value::Bool(b) => *b,
                other => match other.as_f64() {
                    Some(x) => x != 0.0,
                    None => {
                        return err(
                            col,
                            format!("`if` needs a condition, got a {}", other.type_name()),
                        );
                    }
                },
            };
            Ok(if cond {
                vals[1].clone()
            } else {
                vals[2].clone()
            })
        }
        "len" => match one(&vals)? {
            Value::List(xs) => Ok(Value::Int(xs.len() as i128)),
            other => err(
                col,
                format!("`len` needs a list, got a {}", other.type_name()),
            ),
        },
        _ => err(col, format!("unknown function `{name}`")),
    }
}

/// `f` applied to every element of a list, nested lists included, or to a single value.
fn map1(v: &Value, f: &dyn Fn(&Value) -> Result<Value, ExprError>) -> Result<Value, ExprError> {
    match v {
        Value::List(xs) => Ok(Value::List(
            xs.iter().map(|x| map1(x, f)).collect::<Result<_, _>>()?,
        )),
        other => f(other),
    }
}
