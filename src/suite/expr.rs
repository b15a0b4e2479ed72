//! A small expression language for shapes, W and Q formulas and launch plans.
//!
//! Integers are exact (i128), floats are f64, lists broadcast element-wise.
//! See docs/problem-format.md for the grammar.

use std::collections::BTreeMap;
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

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(Value),
    Ident(String),
    Op(&'static str),
    LParen,
    RParen,
    LBrack,
    RBrack,
    Comma,
}

fn lex(src: &str) -> Result<Vec<(Tok, usize)>, ExprError> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = src.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        match c {
            ' ' | '\t' => i += 1,
            '0'..='9' | '.' => {
                let start = i;
                let mut is_float = false;
                while i < chars.len() {
                    let ch = chars[i].1;
                    if ch.is_ascii_digit() || ch == '_' {
                        i += 1;
                    } else if ch == '.' {
                        is_float = true;
                        i += 1;
                    } else if (ch == 'e' || ch == 'E')
                        && i + 1 < chars.len()
                        && (chars[i + 1].1.is_ascii_digit()
                            || ((chars[i + 1].1 == '-' || chars[i + 1].1 == '+')
                                && i + 2 < chars.len()
                                && chars[i + 2].1.is_ascii_digit()))
                    {
                        is_float = true;
                        i += 2;
                    } else {
                        break;
                    }
                }
                let end = if i < chars.len() {
                    chars[i].0
                } else {
                    src.len()
                };
                let text: String = src[chars[start].0..end]
                    .chars()
                    .filter(|c| *c != '_')
                    .collect();
                let v = if is_float {
                    match text.parse::<f64>() {
                        Ok(x) => Value::Float(x),
                        Err(_) => return err(pos, format!("bad number `{text}`")),
                    }
                } else {
                    match text.parse::<i128>() {
                        Ok(x) => Value::Int(x),
                        Err(_) => return err(pos, format!("bad number `{text}`")),
                    }
                };
                out.push((Tok::Num(v), pos));
            }
            c if c.is_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].1.is_alphanumeric() || chars[i].1 == '_') {
                    i += 1;
                }
                let end = if i < chars.len() {
                    chars[i].0
                } else {
                    src.len()
                };
                out.push((Tok::Ident(src[chars[start].0..end].to_string()), pos));
            }
            '+' => {
                out.push((Tok::Op("+"), pos));
                i += 1;
            }
            '-' | '−' => {
                out.push((Tok::Op("-"), pos));
                i += 1;
            }
            '*' | '·' | '×' => {
                if c == '*' && i + 1 < chars.len() && chars[i + 1].1 == '*' {
                    out.push((Tok::Op("**"), pos));
                    i += 2;
                } else {
                    out.push((Tok::Op("*"), pos));
                    i += 1;
                }
            }
            '^' => {
                out.push((Tok::Op("**"), pos));
                i += 1;
            }
            '/' => {
                if i + 1 < chars.len() && chars[i + 1].1 == '/' {
                    out.push((Tok::Op("//"), pos));
                    i += 2;
                } else {
                    out.push((Tok::Op("/"), pos));
                    i += 1;
                }
            }
            '%' => {
                out.push((Tok::Op("%"), pos));
                i += 1;
            }
            '<' | '>' | '=' | '!' => {
                let two = i + 1 < chars.len() && chars[i + 1].1 == '=';
                let op = match (c, two) {
                    ('<', true) => "<=",
                    ('<', false) => "<",
                    ('>', true) => ">=",
                    ('>', false) => ">",
                    ('=', true) => "==",
                    ('!', true) => "!=",
                    _ => {
                        return err(
                            pos,
                            format!("unexpected character `{c}` (comparisons are < <= > >= == !=)"),
                        );
                    }
                };
                out.push((Tok::Op(op), pos));
                i += if two { 2 } else { 1 };
            }
            '\'' | '"' => {
                let quote = c;
                let mut j = i + 1;
                let mut text = String::new();
                while j < chars.len() && chars[j].1 != quote {
                    text.push(chars[j].1);
                    j += 1;
                }
                if j >= chars.len() {
                    return err(pos, "unterminated string");
                }
                out.push((Tok::Num(Value::Str(text)), pos));
                i = j + 1;
            }
            '(' => {
                out.push((Tok::LParen, pos));
                i += 1;
            }
            ')' => {
                out.push((Tok::RParen, pos));
                i += 1;
            }
            '[' => {
                out.push((Tok::LBrack, pos));
                i += 1;
            }
            ']' => {
                out.push((Tok::RBrack, pos));
                i += 1;
            }
            ',' => {
                out.push((Tok::Comma, pos));
                i += 1;
            }
            other => return err(pos, format!("unexpected character `{other}`")),
        }
    }
    Ok(out)
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Lit(Value),
    Var(String, usize),
    Neg(Box<Expr>, usize),
    Bin(&'static str, Box<Expr>, Box<Expr>, usize),
    Call(String, Vec<Expr>, usize),
    Index(Box<Expr>, Box<Expr>, usize),
    List(Vec<Expr>),
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }
    fn col(&self) -> usize {
        self.toks.get(self.pos).map(|t| t.1).unwrap_or(self.end)
    }
    fn next(&mut self) -> Option<(Tok, usize)> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }
    fn expect(&mut self, want: Tok, what: &str) -> Result<(), ExprError> {
        let col = self.col();
        match self.next() {
            Some((t, _)) if t == want => Ok(()),
            Some((t, _)) => err(col, format!("expected {what}, found {}", describe(&t))),
            None => err(col, format!("expected {what}, found the end")),
        }
    }

    fn expr(&mut self) -> Result<Expr, ExprError> {
        let lhs = self.additive()?;
        if let Some(Tok::Op(op @ ("<" | "<=" | ">" | ">=" | "==" | "!="))) = self.peek() {
            let op = *op;
            let col = self.col();
            self.pos += 1;
            let rhs = self.additive()?;
            return Ok(Expr::Bin(op, Box::new(lhs), Box::new(rhs), col));
        }
        Ok(lhs)
    }

    fn additive(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.term()?;
        while let Some(Tok::Op(op @ ("+" | "-"))) = self.peek() {
            let op = *op;
            let col = self.col();
            self.pos += 1;
            let rhs = self.term()?;
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs), col);
        }
        Ok(lhs)
    }

    fn term(&mut self) -> Result<Expr, ExprError> {
        let mut lhs = self.unary()?;
        while let Some(Tok::Op(op @ ("*" | "/" | "//" | "%"))) = self.peek() {
            let op = *op;
            let col = self.col();
            self.pos += 1;
            let rhs = self.unary()?;
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs), col);
        }
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        if let Some(Tok::Op("-")) = self.peek() {
            let col = self.col();
            self.pos += 1;
            let e = self.unary()?;
            return Ok(Expr::Neg(Box::new(e), col));
        }
        if let Some(Tok::Op("+")) = self.peek() {
            self.pos += 1;
            return self.unary();
        }
        self.power()
    }

    fn power(&mut self) -> Result<Expr, ExprError> {
        let base = self.postfix()?;
        if let Some(Tok::Op("**")) = self.peek() {
            let col = self.col();
            self.pos += 1;
            let exp = self.unary()?; // right associative
            return Ok(Expr::Bin("**", Box::new(base), Box::new(exp), col));
        }
        Ok(base)
    }

    fn postfix(&mut self) -> Result<Expr, ExprError> {
        let mut e = self.atom()?;
        while let Some(Tok::LBrack) = self.peek() {
            let col = self.col();
            self.pos += 1;
            let idx = self.expr()?;
            self.expect(Tok::RBrack, "`]`")?;
            e = Expr::Index(Box::new(e), Box::new(idx), col);
        }
        Ok(e)
    }

    fn atom(&mut self) -> Result<Expr, ExprError> {
        let col = self.col();
        match self.next() {
            Some((Tok::Num(v), _)) => Ok(Expr::Lit(v)),
            Some((Tok::Ident(name), _)) => {
                if let Some(Tok::LParen) = self.peek() {
                    self.pos += 1;
                    let mut args = Vec::new();
                    if let Some(Tok::RParen) = self.peek() {
                        self.pos += 1;
                    } else {
                        loop {
                            args.push(self.expr()?);
                            let c = self.col();
                            match self.next() {
                                Some((Tok::Comma, _)) => continue,
                                Some((Tok::RParen, _)) => break,
                                Some((t, _)) => {
                                    return err(
                                        c,
                                        format!("expected `,` or `)`, found {}", describe(&t)),
                                    );
                                }
                                None => return err(c, "expected `)`, found the end"),
                            }
                        }
                    }
                    Ok(Expr::Call(name, args, col))
                } else {
                    match name.as_str() {
                        "true" => Ok(Expr::Lit(Value::Bool(true))),
                        "false" => Ok(Expr::Lit(Value::Bool(false))),
                        _ => Ok(Expr::Var(name, col)),
                    }
                }
            }
            Some((Tok::LParen, _)) => {
                let e = self.expr()?;
                self.expect(Tok::RParen, "`)`")?;
                Ok(e)
            }
            Some((Tok::LBrack, _)) => {
                let mut items = Vec::new();
                if let Some(Tok::RBrack) = self.peek() {
                    self.pos += 1;
                    return Ok(Expr::List(items));
                }
                loop {
                    items.push(self.expr()?);
                    let c = self.col();
                    match self.next() {
                        Some((Tok::Comma, _)) => continue,
                        Some((Tok::RBrack, _)) => break,
                        Some((t, _)) => {
                            return err(c, format!("expected `,` or `]`, found {}", describe(&t)));
                        }
                        None => return err(c, "expected `]`, found the end"),
                    }
                }
                Ok(Expr::List(items))
            }
            Some((t, _)) => err(col, format!("expected a value, found {}", describe(&t))),
            None => err(col, "expected a value, found the end"),
        }
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Num(v) => format!("number `{v}`"),
        Tok::Ident(s) => format!("`{s}`"),
        Tok::Op(o) => format!("`{o}`"),
        Tok::LParen => "`(`".into(),
        Tok::RParen => "`)`".into(),
        Tok::LBrack => "`[`".into(),
        Tok::RBrack => "`]`".into(),
        Tok::Comma => "`,`".into(),
    }
}

/// Parses an expression.
pub fn parse(src: &str) -> Result<Expr, ExprError> {
    let toks = lex(src)?;
    if toks.is_empty() {
        return err(0, "empty expression");
    }
    let mut p = Parser {
        toks,
        pos: 0,
        end: src.len(),
    };
    let e = p.expr()?;
    if p.pos < p.toks.len() {
        let (t, col) = p.toks[p.pos].clone();
        return err(
            col,
            format!("unexpected {} after the expression", describe(&t)),
        );
    }
    Ok(e)
}

/// Variables visible to an expression.
pub type Env = BTreeMap<String, Value>;

/// Parses and evaluates in one step.
pub fn eval_str(src: &str, env: &Env) -> Result<Value, ExprError> {
    parse(src)?.eval(env)
}

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
        Value::Int(i) => Ok(Value::Int(-i)),
        Value::Float(x) => Ok(Value::Float(-x)),
        Value::List(xs) => Ok(Value::List(
            xs.into_iter()
                .map(|x| neg(x, col))
                .collect::<Result<_, _>>()?,
        )),
        other => err(col, format!("cannot negate a {}", other.type_name())),
    }
}

fn binop(op: &str, a: Value, b: Value, col: usize) -> Result<Value, ExprError> {
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
            "/" => {
                if y == 0 {
                    err(col, "division by zero")
                } else if x % y == 0 {
                    Ok(Value::Int(x / y))
                } else {
                    Ok(Value::Float(x as f64 / y as f64))
                }
            }
            "//" => {
                if y == 0 {
                    err(col, "division by zero")
                } else {
                    Ok(Value::Int(
                        x.div_euclid(y) - if y < 0 && x.rem_euclid(y) != 0 { 1 } else { 0 },
                    ))
                }
            }
            "%" => {
                if y == 0 {
                    err(col, "modulo by zero")
                } else {
                    Ok(Value::Int(x.rem_euclid(y)))
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
            return Ok(Value::Int((x / y).floor() as i128));
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

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Int(_) | Value::Float(_) | Value::Bool(_) => v.as_f64(),
        _ => None,
    }
}

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

fn call(name: &str, vals: Vec<Value>, col: usize) -> Result<Value, ExprError> {
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
        "ceil" | "floor" => map1(&one(&vals)?, col, &|v| match v {
            Value::Int(i) => Ok(Value::Int(*i)),
            Value::Float(x) => Ok(Value::Int(
                if name == "ceil" { x.ceil() } else { x.floor() } as i128,
            )),
            other => err(
                col,
                format!("`{name}` needs a number, got a {}", other.type_name()),
            ),
        }),
        "sqrt" | "log2" | "exp" | "float" => map1(&one(&vals)?, col, &|v| {
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
        "int" => map1(&one(&vals)?, col, &|v| match num(v) {
            Some(x) => Ok(Value::Int(x.trunc() as i128)),
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

fn map1(
    v: &Value,
    col: usize,
    f: &dyn Fn(&Value) -> Result<Value, ExprError>,
) -> Result<Value, ExprError> {
    match v {
        Value::List(xs) => Ok(Value::List(
            xs.iter()
                .map(|x| map1(x, col, f))
                .collect::<Result<_, _>>()?,
        )),
        other => f(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(s: &str) -> Value {
        let mut env = Env::new();
        env.insert("T".into(), Value::Int(7));
        env.insert("L".into(), Value::List(vec![Value::Int(3), Value::Int(5)]));
        eval_str(s, &env).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn arithmetic_is_exact_on_integers() {
        assert_eq!(ev("3*T*1024 + T"), Value::Int(3 * 7 * 1024 + 7));
        assert_eq!(ev("2 ** 62 * 4"), Value::Int(1i128 << 64));
        assert_eq!(ev("T / 7"), Value::Int(1));
        assert_eq!(ev("T / 2"), Value::Float(3.5));
        assert_eq!(ev("T // 2"), Value::Int(3));
        assert_eq!(ev("-T // 2"), Value::Int(-4));
        assert_eq!(ev("T % 4"), Value::Int(3));
        assert_eq!(ev("2·T − 1"), Value::Int(13));
        assert_eq!(ev("2 ^ 3 ^ 2"), Value::Int(512));
    }

    #[test]
    fn lists_broadcast() {
        assert_eq!(ev("sum(L ** 2)"), Value::Int(34));
        assert_eq!(ev("sum(L * (L + 1))"), Value::Int(12 + 30));
        assert_eq!(ev("sum(ceil(L / 2))"), Value::Int(2 + 3));
        assert_eq!(ev("len(L) + L[1] + L[-1]"), Value::Int(12));
        assert_eq!(ev("max(L)"), Value::Int(5));
        assert_eq!(ev("min(T, 4, 9)"), Value::Int(4));
        assert_eq!(ev("numel([2, 3, T])"), Value::Int(42));
    }

    #[test]
    fn floats_and_functions() {
        assert_eq!(ev("ceil(8 * (1 - (1 - 2/8) ** T))"), Value::Int(7));
        assert_eq!(ev("1e-6 * 2"), Value::Float(2e-6));
        assert_eq!(ev("sqrt(16)"), Value::Float(4.0));
    }

    #[test]
    fn comparisons_and_if() {
        assert_eq!(ev("T <= 7"), Value::Bool(true));
        assert_eq!(ev("T > 7"), Value::Bool(false));
        assert_eq!(ev("if(T <= 1024, 4, 1) * 32"), Value::Int(128));
        assert_eq!(ev("if(T == 8, 1, 2 + 1)"), Value::Int(3));
        assert_eq!(ev("1 + 2 < 2 * 2"), Value::Bool(true));
        let mut env = Env::new();
        env.insert("dtype".into(), Value::Str("fp16".into()));
        assert_eq!(
            eval_str("if(dtype == 'fp16', 1, 0)", &env).unwrap(),
            Value::Int(1)
        );
        assert_eq!(
            eval_str("dtype != \"bf16\"", &env).unwrap(),
            Value::Bool(true)
        );
        assert!(parse("'open").is_err());
        assert!(parse("T = 3").is_err());
    }

    #[test]
    fn errors_name_the_column() {
        let env = Env::new();
        let e = eval_str("2 * foo", &env).unwrap_err();
        assert_eq!(e.col, 4);
        assert!(e.msg.contains("unknown name `foo`"), "{}", e.msg);
        let e = parse("2 * (3 + ").unwrap_err();
        assert!(e.msg.contains("expected a value"), "{}", e.msg);
        let e = parse("2 $ 3").unwrap_err();
        assert_eq!(e.col, 2);
        let e = parse("2 3").unwrap_err();
        assert!(e.msg.contains("unexpected"), "{}", e.msg);
        let e = eval_str("bogus(1)", &env).unwrap_err();
        assert!(e.msg.contains("unknown function"), "{}", e.msg);
        let e = eval_str("1 / 0", &env).unwrap_err();
        assert!(e.msg.contains("division by zero"));
        assert!(parse("").is_err());
    }
}
