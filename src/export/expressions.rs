//! Expressions of the launch plan and the problem (docs/problem-format.md) translated into the
//! languages an exported kernel's host code is written in: Python for the Atrex-Bench candidate,
//! C++ for the launcher of `--format cuda`.
//!
//! Invariant: a translation evaluates exactly as `suite::expr` does — integers exact, `/` an
//! integer when it divides evenly, `//` floor division, `%` never negative, lists broadcast, every
//! argument evaluated (also both branches of `if`). The operators and functions themselves are
//! implemented once per language by the runtime each generated file carries (`runtime.py`,
//! `runtime.hpp`); a translation only spells the expression tree as calls into it, with the
//! variables read from an environment `E`. Literals are written so that they read back as the
//! same value (floats in their shortest round-trip form).

use super::ExportError;
use crate::suite::expr::{Expr, Value};

/// The Python spelling of an expression over the environment dict `E`.
pub fn python(e: &Expr) -> String {
    match e {
        Expr::Lit(v) => python_value(v),
        Expr::Var(name, _) => format!("E[{}]", python_str(name)),
        Expr::Neg(x, _) => format!("_neg({})", python(x)),
        Expr::Bin(op, a, b, _) => {
            format!("_bin({}, {}, {})", python_str(op), python(a), python(b))
        }
        Expr::Call(name, args, _) => format!(
            "_call({}, [{}])",
            python_str(name),
            args.iter().map(python).collect::<Vec<_>>().join(", ")
        ),
        Expr::Index(x, i, _) => format!("_index({}, {})", python(x), python(i)),
        Expr::List(items) => format!(
            "[{}]",
            items.iter().map(python).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// A value as a Python literal.
pub fn python_value(v: &Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Float(x) if x.is_nan() => "_NAN".into(),
        Value::Float(x) if x.is_infinite() => if *x > 0.0 { "_INF" } else { "(-_INF)" }.into(),
        Value::Float(x) => format!("{x:?}"),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Str(s) => python_str(s),
        Value::List(xs) => format!(
            "[{}]",
            xs.iter().map(python_value).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// A Python string literal holding exactly `s` (ASCII only: everything else escaped).
pub fn python_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            ' '..='~' => out.push(c),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('\'');
    out
}

/// The C++ spelling of an expression: calls into `atrex_export_rt` with the error context `c`
/// and the environment `E`.
pub fn cpp(e: &Expr) -> Result<String, ExportError> {
    Ok(match e {
        Expr::Lit(v) => cpp_value(v)?,
        Expr::Var(name, _) => format!("rt::var(c, E, {})", cpp_str(name)),
        Expr::Neg(x, _) => format!("rt::neg(c, {})", cpp(x)?),
        Expr::Bin(op, a, b, _) => {
            format!("rt::bin(c, {}, {}, {})", cpp_str(op), cpp(a)?, cpp(b)?)
        }
        Expr::Call(name, args, _) => format!(
            "rt::call(c, {}, {{{}}})",
            cpp_str(name),
            args.iter()
                .map(cpp)
                .collect::<Result<Vec<_>, _>>()?
                .join(", ")
        ),
        Expr::Index(x, i, _) => format!("rt::index(c, {}, {})", cpp(x)?, cpp(i)?),
        Expr::List(items) => format!(
            "rt::Value::L({{{}}})",
            items
                .iter()
                .map(cpp)
                .collect::<Result<Vec<_>, _>>()?
                .join(", ")
        ),
    })
}

/// A value as a C++ expression of type `rt::Value`.
pub fn cpp_value(v: &Value) -> Result<String, ExportError> {
    Ok(match v {
        Value::Int(i) => {
            let n = i64::try_from(*i).map_err(|_| ExportError::Unsupported {
                what: format!("the integer {i}"),
                why: "C++ integers of the launcher are 64-bit".into(),
            })?;
            if n == i64::MIN {
                "rt::Value::I(INT64_MIN)".into()
            } else {
                format!("rt::Value::I({n}LL)")
            }
        }
        Value::Float(x) => format!("rt::Value::F({})", cpp_double(*x)),
        Value::Bool(b) => format!("rt::Value::B({b})"),
        Value::Str(s) => format!("rt::Value::S({})", cpp_str(s)),
        Value::List(xs) => format!(
            "rt::Value::L({{{}}})",
            xs.iter()
                .map(cpp_value)
                .collect::<Result<Vec<_>, _>>()?
                .join(", ")
        ),
    })
}

/// A C++ double literal of exactly `x`.
pub fn cpp_double(x: f64) -> String {
    if x.is_nan() {
        "std::numeric_limits<double>::quiet_NaN()".into()
    } else if x.is_infinite() {
        if x > 0.0 {
            "std::numeric_limits<double>::infinity()".into()
        } else {
            "(-std::numeric_limits<double>::infinity())".into()
        }
    } else {
        let s = format!("{x:?}");
        // `1e-6` and `3.0` are doubles in C++ as written; a bare integer spelling is not.
        if s.contains(['.', 'e', 'E']) {
            s
        } else {
            format!("{s}.0")
        }
    }
}

/// A C++ string literal holding exactly the bytes of `s` (octal escapes: they never swallow the
/// next character, unlike `\x`).
pub fn cpp_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for b in s.bytes() {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'?' => out.push_str("\\?"), // no trigraphs
            b' '..=b'~' => out.push(b as char),
            _ => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests;
