//! The parser: tokens into an Expr tree (precedence climbing).
//!
//! Invariants: an expression is at most `MAX_LEN` characters; the parser's recursion (brackets,
//! signs, exponents, call arguments, indices) never goes deeper than `MAX_DEPTH`, and neither does
//! the tree it returns (operator chains count), so evaluating, cloning, comparing, printing or
//! dropping an Expr recurses at most `MAX_DEPTH` deep. Past a limit the text is refused with an
//! error, never parsed: a hostile expression cannot overflow the stack.

use super::lex::{Tok, describe, lex};
use super::{ExprError, Value, err};

/// The longest expression, in characters.
pub const MAX_LEN: usize = 4096;
/// The deepest nesting of an expression: brackets, signs, exponents, calls and operators.
pub const MAX_DEPTH: usize = 64;

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
    /// Current recursion depth of `unary`, through which every nested construct passes.
    depth: usize,
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

    /// An operand; counts the nesting (every recursion of the parser passes here).
    fn unary(&mut self) -> Result<Expr, ExprError> {
        if self.depth >= MAX_DEPTH {
            return err(
                self.col(),
                format!("nested more than {MAX_DEPTH} levels deep"),
            );
        }
        self.depth += 1;
        let r = self.unary_inner();
        self.depth -= 1;
        r
    }

    fn unary_inner(&mut self) -> Result<Expr, ExprError> {
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

/// Depth of an Expr tree (a leaf is 1), counted without recursion; stops counting past `limit`.
fn tree_depth(e: &Expr, limit: usize) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(e, 1usize)];
    while let Some((e, d)) = stack.pop() {
        deepest = deepest.max(d);
        if d > limit {
            break;
        }
        match e {
            Expr::Lit(_) | Expr::Var(..) => {}
            Expr::Neg(a, _) => stack.push((a, d + 1)),
            Expr::Bin(_, a, b, _) | Expr::Index(a, b, _) => {
                stack.push((a, d + 1));
                stack.push((b, d + 1));
            }
            Expr::Call(_, xs, _) | Expr::List(xs) => stack.extend(xs.iter().map(|x| (x, d + 1))),
        }
    }
    deepest
}

/// Parses an expression (at most `MAX_LEN` characters, nested at most `MAX_DEPTH` deep).
pub fn parse(src: &str) -> Result<Expr, ExprError> {
    let chars = src.chars().count();
    if chars > MAX_LEN {
        return err(
            0,
            format!("the expression has {chars} characters; at most {MAX_LEN}"),
        );
    }
    let toks = lex(src)?;
    if toks.is_empty() {
        return err(0, "empty expression");
    }
    let mut p = Parser {
        toks,
        pos: 0,
        end: src.len(),
        depth: 0,
    };
    let e = p.expr()?;
    if p.pos < p.toks.len() {
        let (t, col) = p.toks[p.pos].clone();
        return err(
            col,
            format!("unexpected {} after the expression", describe(&t)),
        );
    }
    if tree_depth(&e, MAX_DEPTH) > MAX_DEPTH {
        return err(
            0,
            format!("operators nested more than {MAX_DEPTH} levels deep"),
        );
    }
    Ok(e)
}
