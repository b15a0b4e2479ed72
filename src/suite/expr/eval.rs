//! Evaluation of an Expr: variables, indexing, and the arithmetic and comparison operators
//! (lists broadcast).

use super::builtins::call;
use super::{Env, Expr, ExprError, Value, err};

impl Expr {
    pub fn eval(&self, env: &Env) -> Result<Value, ExprError> {
        match self {
            Expr::Lit(v) => Ok(v.clone()),
            Expr::Var(name, col) => match env.get(name) {
                Some(v) => Ok(v.clone()),
                None => {
                    let known: Vec<&str> = env.keys().map(|s| s.as_str()).collect();
                    err(
                        *col,
                        format!("unknown name `{name}` (known: {})", known.join(", ")),
                    )
                }
            },
            Expr::Neg(e, col) => neg(e.eval(env)?, *col),
            Expr::Bin(op, a, b, col) => binop(op, a.eval(env)?, b.eval(env)?, *col),
            Expr::Index(e, i, col) => {
                let v = e.eval(env)?;
                let idx = i.eval(env)?;
                let Value::List(xs) = v else {
                    return err(*col, format!("cannot index a {}", v.type_name()));
                };
                let Some(k) = idx.as_int() else {
                    return err(*col, "index must be an integer");
                };
                let k = if k < 0 { xs.len() as i128 + k } else { k };
                if k < 0 || k as usize >= xs.len() {
                    return err(
                        *col,
                        format!("index {k} out of range (length {})", xs.len()),
                    );
                }
                Ok(xs[k as usize].clone())
            }
            Expr::List(items) => Ok(Value::List(
                items
                    .iter()
                    .map(|e| e.eval(env))
                    .collect::<Result<_, _>>()?,
            )),
            Expr::Call(name, args, col) => {
                let vals: Vec<Value> =
                    args.iter().map(|a| a.eval(env)).collect::<Result<_, _>>()?;
                call(name, vals, *col)
            }
        }
    }
}

fn neg(v: Value, col: usize) -> Result<Value, ExprError> {
    match v {
        Value::Int(i) => match i.checked_neg() {
            Some(n) => Ok(Value::Int(n)),
            None => err(col, "integer overflow in `-`"),
        },
        Value::Float(x) => Ok(Value::Float(-x)),
        Value::List(xs) => Ok(Value::List(
            xs.into_iter()
                .map(|x| neg(x, col))
                .collect::<Result<_, _>>()?,
        )),
        other => err(col, format!("cannot negate a {}", other.type_name())),
    }
}

pub(super) fn binop(op: &str, a: Value, b: Value, col: usize) -> Result<Value, ExprError> {
    match (a, b) {
        (Value::List(xs), Value::List(ys)) => {
            if xs.len() != ys.len() {
                return err(
                    col,
                    format!("lists of lengths {} and {} in `{op}`", xs.len(), ys.len()),
                );
            }
            Ok(Value::List(
                xs.into_iter()
                    .zip(ys)
                    .map(|(x, y)| binop(op, x, y, col))
                    .collect::<Result<_, _>>()?,
            ))
        }
        (Value::List(xs), y) => Ok(Value::List(
            xs.into_iter()
                .map(|x| binop(op, x, y.clone(), col))
                .collect::<Result<_, _>>()?,
        )),
        (x, Value::List(ys)) => Ok(Value::List(
            ys.into_iter()
                .map(|y| binop(op, x.clone(), y, col))
                .collect::<Result<_, _>>()?,
        )),
        (a, b) => scalar_op(op, a, b, col),
    }
}

fn scalar_op(op: &str, a: Value, b: Value, col: usize) -> Result<Value, ExprError> {
    if matches!(op, "<" | "<=" | ">" | ">=" | "==" | "!=") {
        if let (Value::Str(x), Value::Str(y)) = (&a, &b) {
            return match op {
                "==" => Ok(Value::Bool(x == y)),
                "!=" => Ok(Value::Bool(x != y)),
                _ => err(col, format!("`{op}` needs numbers")),
            };
        }
        let (Some(x), Some(y)) = (num(&a), num(&b)) else {
            return err(
                col,
                format!(
                    "`{op}` needs numbers, got {} and {}",
                    a.type_name(),
                    b.type_name()
                ),
            );
        };
        let r = match (&a, &b) {
            (Value::Int(i), Value::Int(j)) => match op {
                "<" => i < j,
                "<=" => i <= j,
                ">" => i > j,
                ">=" => i >= j,
                "==" => i == j,
                _ => i != j,
            },
            _ => match op {
                "<" => x < y,
                "<=" => x <= y,
                ">" => x > y,
                ">=" => x >= y,
                "==" => x == y,
                _ => x != y,
            },
        };
        return Ok(Value::Bool(r));
    }
    if let (Value::Int(x), Value::Int(y)) = (&a, &b) {
        let (x, y) = (*x, *y);
        let overflow = || ExprError {
            col,
            msg: format!("integer overflow in `{op}`"),
        };
        return match op {
            "+" => x.checked_add(y).map(Value::Int).ok_or_else(overflow),
            "-" => x.checked_sub(y).map(Value::Int).ok_or_else(overflow),
            "*" => x.checked_mul(y).map(Value::Int).ok_or_else(overflow),
            // The checked forms also refuse i128::MIN by -1, which would panic.
            "/" => {
                if y == 0 {
                    err(col, "division by zero")
                } else if x.checked_rem(y).ok_or_else(overflow)? == 0 {
                    x.checked_div(y).map(Value::Int).ok_or_else(overflow)
                } else {
                    Ok(Value::Float(x as f64 / y as f64))
                }
            }
            "//" => {
                if y == 0 {
                    err(col, "division by zero")
                } else {
                    let q = x.checked_div_euclid(y).ok_or_else(overflow)?;
                    let r = x.checked_rem_euclid(y).ok_or_else(overflow)?;
                    if y < 0 && r != 0 {
                        q.checked_sub(1).map(Value::Int).ok_or_else(overflow)
                    } else {
                        Ok(Value::Int(q))
                    }
                }
            }
            "%" => {
                if y == 0 {
                    err(col, "modulo by zero")
                } else {
                    x.checked_rem_euclid(y).map(Value::Int).ok_or_else(overflow)
                }
            }
            "**" => {
                if y >= 0 {
                    let e = u32::try_from(y).map_err(|_| overflow())?;
                    x.checked_pow(e).map(Value::Int).ok_or_else(overflow)
                } else {
                    Ok(Value::Float((x as f64).powf(y as f64)))
                }
            }
            _ => err(col, format!("unknown operator `{op}`")),
        };
    }
    let (Some(x), Some(y)) = (num(&a), num(&b)) else {
        return err(
            col,
            format!(
                "`{op}` needs numbers, got {} and {}",
                a.type_name(),
                b.type_name()
            ),
        );
    };
    let r = match op {
        "+" => x + y,
        "-" => x - y,
        "*" => x * y,
        "/" => {
            if y == 0.0 {
                return err(col, "division by zero");
            }
            x / y
        }
        "//" => {
            if y == 0.0 {
                return err(col, "division by zero");
            }
            return float_to_int((x / y).floor(), col, op);
        }
        "%" => {
            if y == 0.0 {
                return err(col, "modulo by zero");
            }
            x.rem_euclid(y)
        }
        "**" => x.powf(y),
        _ => return err(col, format!("unknown operator `{op}`")),
    };
    Ok(Value::Float(r))
}

/// An integral float as an integer: an error where it is NaN, infinite or beyond i128.
pub(super) fn float_to_int(x: f64, col: usize, what: &str) -> Result<Value, ExprError> {
    // 2^127 is exactly representable; every finite float below it in magnitude fits i128.
    if x.is_finite() && x.abs() < 1.7e38 {
        Ok(Value::Int(x as i128))
    } else {
        err(col, format!("`{what}` gives {x}, not an integer"))
    }
}

pub(super) fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Int(_) | Value::Float(_) | Value::Bool(_) => v.as_f64(),
        _ => None,
    }
}
