//! A small expression language for shapes, W and Q formulas and launch plans.
//!
//! Integers are exact (i128), floats are f64, lists broadcast element-wise.
//! See docs/problem-format.md for the grammar.
//!
//! Invariants: text that is too long or nested too deep is refused by `parse` (`MAX_LEN`,
//! `MAX_DEPTH`), so evaluation recurses a bounded depth; integer arithmetic is checked (an
//! overflow is an error, never a wrap or a panic), and a float that becomes an integer (`ceil`,
//! `floor`, `int`, `//`) must be finite.
//!
//! Layout: `lex` (tokens), `parse` (the Expr tree), `value` (Value), `eval` (evaluation and
//! operators), `builtins` (function calls).

mod builtins;
mod eval;
mod lex;
mod parse;
#[cfg(test)]
mod tests;
mod value;

pub use parse::{Expr, MAX_LEN, parse};
pub use value::Value;

use std::collections::BTreeMap;
use std::fmt;

/// A parse or evaluation error, with the byte column in the expression (0-based).
#[derive(Debug, Clone, PartialEq)]
pub struct ExprError {
    pub col: usize,
    pub msg: String,
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.col + 1, self.msg)
    }
}

impl std::error::Error for ExprError {}

fn err<T>(col: usize, msg: impl Into<String>) -> Result<T, ExprError> {
    Err(ExprError {
        col,
        msg: msg.into(),
    })
}

/// Variables visible to an expression.
pub type Env = BTreeMap<String, Value>;

/// Parses and evaluates in one step.
pub fn eval_str(src: &str, env: &Env) -> Result<Value, ExprError> {
    parse(src)?.eval(env)
}
