//! Values of the expression language and their conversions (JSON, TOML) and comparison.

use std::fmt;

/// A value of the expression language.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i128),
    Float(f64),
    Bool(bool),
    Str(String),
    List(Vec<Value>),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::List(xs) => {
                write!(f, "[")?;
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{x}")?;
                }
                write!(f, "]")
            }
        }
    }
}

impl Value {
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Int(_) => "integer",
            Value::Float(_) => "float",
            Value::Bool(_) => "bool",
            Value::Str(_) => "string",
            Value::List(_) => "list",
        }
    }

    /// The value as f64 (integers and bools widen).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(x) => Some(*x),
            Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
            _ => None,
        }
    }

    /// The value as an exact integer: integers, and floats that are integral.
    pub fn as_int(&self) -> Option<i128> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Float(x) if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e30 => {
                Some(*x as i128)
            }
            Value::Bool(b) => Some(*b as i128),
            _ => None,
        }
    }

    /// Converts a JSON value (from shapes.json or a session) into a Value.
    pub fn from_json(v: &serde_json::Value) -> Option<Value> {
        Some(match v {
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Int(i as i128)
                } else if let Some(u) = n.as_u64() {
                    Value::Int(u as i128)
                } else {
                    Value::Float(n.as_f64()?)
                }
            }
            serde_json::Value::String(s) => Value::Str(s.clone()),
            serde_json::Value::Array(xs) => Value::List(
                xs.iter()
                    .map(Value::from_json)
                    .collect::<Option<Vec<_>>>()?,
            ),
            _ => return None,
        })
    }

    /// Converts a TOML value into a Value.
    pub fn from_toml(v: &toml::Value) -> Option<Value> {
        Some(match v {
            toml::Value::Boolean(b) => Value::Bool(*b),
            toml::Value::Integer(i) => Value::Int(*i as i128),
            toml::Value::Float(x) => Value::Float(*x),
            toml::Value::String(s) => Value::Str(s.clone()),
            toml::Value::Array(xs) => Value::List(
                xs.iter()
                    .map(Value::from_toml)
                    .collect::<Option<Vec<_>>>()?,
            ),
            _ => return None,
        })
    }

    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Int(i) => {
                if let Ok(v) = i64::try_from(*i) {
                    serde_json::Value::from(v)
                } else {
                    serde_json::Value::from(*i as f64)
                }
            }
            Value::Float(x) => serde_json::Value::from(*x),
            Value::Bool(b) => serde_json::Value::from(*b),
            Value::Str(s) => serde_json::Value::from(s.clone()),
            Value::List(xs) => serde_json::Value::Array(xs.iter().map(|x| x.to_json()).collect()),
        }
    }

    /// Numeric equality used to compare parameters: 1 == 1.0, lists element-wise.
    pub fn num_eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::List(a), Value::List(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.num_eq(y))
            }
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (a, b) => match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) => x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                _ => false,
            },
        }
    }
}
