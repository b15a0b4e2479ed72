//! The lexer: expression text into tokens with their columns.

use super::{ExprError, Value, err};

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Num(Value),
    Ident(String),
    Op(&'static str),
    LParen,
    RParen,
    LBrack,
    RBrack,
    Comma,
}

pub(super) fn lex(src: &str) -> Result<Vec<(Tok, usize)>, ExprError> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = src.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        match c {
            ' ' | '\t' => i += 1,
            '0'..='9' | '.' => {
                let (v, next) = number(src, &chars, i, pos)?;
                i = next;
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

/// A number starting at `chars[i]` (byte `pos`): its value and the index just after it.
fn number(
    src: &str,
    chars: &[(usize, char)],
    mut i: usize,
    pos: usize,
) -> Result<(Value, usize), ExprError> {
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
    Ok((v, i))
}

pub(super) fn describe(t: &Tok) -> String {
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
