//! A launch plan rewritten in its source: the `[defines]` table set (the tuner's steps,
//! `--define`) and a value added to a `[tune]` list (`--define` of a value the plan does not
//! list yet). Only the plan's own lines change; everything else of the source stays byte for byte.
//!
//! Invariants: `set_defines` parses the rewritten source again and checks that each define
//! holds the value asked for, so what it returns is a plan the worker reads as intended; values
//! are written as TOML literals (strings escaped), so a value cannot add plan lines.

use super::PlanError;
use crate::suite::expr::Value;
use std::collections::BTreeMap;

/// Why a plan could not be rewritten.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RewriteError {
    #[error("no launch plan in the source")]
    NoPlan,
    #[error("the launch plan is not closed")]
    NotClosed,
    /// `list` and `value` as the plan and the caller wrote them (clipped).
    #[error("`{key}` = {list}: its [tune] list is not on one line; add {value} to it to try it")]
    TuneListSpread {
        key: String,
        list: String,
        value: String,
    },
    #[error("`{key}` has no list under [tune]")]
    NoTuneList { key: String },
    #[error("the rewritten plan is invalid: {0}")]
    Invalid(#[source] PlanError),
    #[error("define {key} did not take the value {value}")]
    NotTaken { key: String, value: String },
}

crate::error::text_at_the_edge!(RewriteError);

/// Where the launch plan's body is in `source`: after its opening marker, up to its `*/`.
fn plan_body(source: &str) -> Result<(usize, usize), RewriteError> {
    let start = source.find(super::PLAN_START).ok_or(RewriteError::NoPlan)?;
    let body_start = start + super::PLAN_START.len();
    let end = body_start
        + source[body_start..]
            .find("*/")
            .ok_or(RewriteError::NotClosed)?;
    Ok((body_start, end))
}

/// The source with `value` appended to the `[tune]` list of `key` (a one-line list, as the
/// plans write them; a comment after it stays; nothing else changes).
pub fn extend_tune(source: &str, key: &str, value: &Value) -> Result<String, RewriteError> {
    let (body_start, end) = plan_body(source)?;
    let mut lines: Vec<String> = source[body_start..end]
        .split('\n')
        .map(str::to_string)
        .collect();
    let mut in_tune = false;
    for l in lines.iter_mut() {
        let t = l.trim();
        if t.starts_with('[') {
            in_tune = t == "[tune]";
            continue;
        }
        let Some((k, rest)) = t.split_once('=') else {
            continue;
        };
        if !in_tune || k.trim() != key {
            continue;
        }
        let eq = l.find('=').unwrap_or(0);
        let close = l[eq..]
            .find('[')
            .and_then(|o| l[eq + o..].find(']').map(|c| eq + o + c));
        let Some(close) = close else {
            return Err(RewriteError::TuneListSpread {
                key: key.to_string(),
                list: super::clip(rest.trim()),
                value: super::clip(&value.to_string()),
            });
        };
        l.insert_str(close, &format!(", {}", toml_value(value)));
        return Ok(format!(
            "{}{}{}",
            &source[..body_start],
            lines.join("\n"),
            &source[end..]
        ));
    }
    Err(RewriteError::NoTuneList {
        key: key.to_string(),
    })
}

/// A value as TOML writes it: strings quoted with their quotes, backslashes and control
/// characters escaped (a `--define` value cannot end the string and add plan lines), floats
/// that TOML spells differently (nan, inf) as TOML spells them.
fn toml_value(v: &Value) -> String {
    match v {
        Value::Str(s) => {
            let mut out = String::with_capacity(s.len() + 2);
            out.push('"');
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
        Value::Float(f) if f.is_nan() => "nan".into(),
        Value::Float(f) if f.is_infinite() => (if *f > 0.0 { "inf" } else { "-inf" }).into(),
        Value::Float(f) => format!("{f:?}"),
        other => other.to_string(),
    }
}

/// Sets the `[defines]` table of a kernel's launch plan (keeping every other line), and checks
/// the result with the plan parser.
pub fn set_defines(
    source: &str,
    defines: &BTreeMap<String, Value>,
) -> Result<String, RewriteError> {
    let (body_start, end) = plan_body(source)?;
    let body = &source[body_start..end];
    let mut lines: Vec<String> = body.lines().map(|s| s.to_string()).collect();
    let header = lines.iter().position(|l| l.trim() == "[defines]");
    let mut todo: Vec<(&String, &Value)> = defines.iter().collect();
    match header {
        Some(h) => {
            let mut i = h + 1;
            while i < lines.len() && !lines[i].trim_start().starts_with('[') {
                let key = lines[i].split('=').next().unwrap_or("").trim().to_string();
                if let Some(pos) = todo.iter().position(|(k, _)| **k == key) {
                    let (k, v) = todo.remove(pos);
                    lines[i] = format!("{k} = {}", toml_value(v));
                }
                i += 1;
            }
            for (j, (k, v)) in todo.iter().enumerate() {
                lines.insert(h + 1 + j, format!("{k} = {}", toml_value(v)));
            }
        }
        None => {
            // Keep a trailing empty line before `*/`.
            let at = if lines.last().is_some_and(|l| l.trim().is_empty()) {
                lines.len() - 1
            } else {
                lines.len()
            };
            let mut add = vec![String::new(), "[defines]".to_string()];
            add.extend(todo.iter().map(|(k, v)| format!("{k} = {}", toml_value(v))));
            lines.splice(at..at, add);
        }
    }
    let mut new_body = lines.join("\n");
    if !new_body.ends_with('\n') {
        new_body.push('\n');
    }
    let out = format!("{}{}{}", &source[..body_start], new_body, &source[end..]);
    let p = super::parse(&out).map_err(RewriteError::Invalid)?;
    for (k, v) in defines {
        if !p.defines.get(k).is_some_and(|x| x.num_eq(v)) {
            return Err(RewriteError::NotTaken {
                key: k.clone(),
                value: super::clip(&v.to_string()),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::plan;

    #[test]
    fn set_defines_rewrites_the_plan() {
        let src = "/* atrex:plan\n[[launch]]\nkernel = \"k\"\ngrid = [\"1\"]\nblock = [\"B\"]\nargs = []\n\n[tune]\nB = [128, 256]\nV = [1, 2]\n*/\nextern \"C\" __global__ void k() {}\n";
        let mut d = BTreeMap::new();
        d.insert("B".to_string(), Value::Int(256));
        let out = set_defines(src, &d).unwrap();
        assert!(out.contains("[defines]\nB = 256"), "{out}");
        let p = plan::parse(&out).unwrap();
        assert_eq!(p.defines["B"], Value::Int(256));
        assert_eq!(p.defines["V"], Value::Int(1));
        d.insert("V".to_string(), Value::Int(2));
        d.insert("B".to_string(), Value::Int(128));
        let out2 = set_defines(&out, &d).unwrap();
        assert_eq!(out2.matches("[defines]").count(), 1);
        let p = plan::parse(&out2).unwrap();
        assert_eq!(
            (p.defines["B"].clone(), p.defines["V"].clone()),
            (Value::Int(128), Value::Int(2))
        );
        d.insert("B".to_string(), Value::Int(64));
        assert!(set_defines(src, &d).is_err(), "64 is not a tune value");
    }
}
