//! `--define KEY=VALUE`: run a kernel with other values of its tunable parameters without
//! editing the file. The launch plan's `[defines]` table is rewritten
//! (`contract::plan::rewrite`, as the tuner does), and a value outside the parameter's `[tune]`
//! list is added to that list first (the plan accepts a define only among its tune values), so
//! what is measured or recorded is exactly the kernel that ran, and that kernel says what was
//! tried. The name must be one of the plan's: an
//! unknown name is most likely a typo.

use crate::contract::kernels::KernelError;
use crate::contract::plan::rewrite::RewriteError;
use crate::contract::plan::{PlanError, clip};
use crate::contract::protocol::Source;
use crate::suite::expr::Value;
use crate::suite::{Problem, Suite};
use std::collections::BTreeMap;
use std::path::Path;

/// A `--define` that cannot be applied. `arg`, `name` and `args` as the command line gave them
/// (clipped); `kernel`: the kernel's name (its file, or `OP baseline`).
#[derive(Debug, thiserror::Error)]
pub enum DefineError {
    #[error("--define `{arg}`: expected KEY=VALUE")]
    NotKeyValue { arg: String },
    #[error("--define `{arg}`: `{name}` is not a parameter name")]
    NotAName { arg: String, name: String },
    #[error("{kernel}: {source}")]
    Plan { kernel: String, source: PlanError },
    /// `tune`: the plan's tunable parameters, joined (or "none").
    #[error("{kernel}: `{name}` is not a tunable parameter of its plan (its [tune]: {tune})")]
    NotTunable {
        kernel: String,
        name: String,
        tune: String,
    },
    /// A value outside its `[tune]` list that could not be added to it.
    #[error("{kernel}: {source}")]
    Extend {
        kernel: String,
        source: RewriteError,
    },
    #[error("{kernel} with {args}: {source}")]
    Set {
        kernel: String,
        args: String,
        source: RewriteError,
    },
    #[error(transparent)]
    Kernel(#[from] KernelError),
}

crate::error::text_at_the_edge!(DefineError);

/// Parses `KEY=VALUE`: VALUE as in the plan's TOML (integer, float, boolean, quoted string),
/// else a bare string.
pub fn parse(arg: &str) -> Result<(String, Value), DefineError> {
    let (k, v) = arg
        .split_once('=')
        .ok_or_else(|| DefineError::NotKeyValue { arg: clip(arg) })?;
    let (k, v) = (k.trim(), v.trim());
    if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(DefineError::NotAName {
            arg: clip(arg),
            name: clip(k),
        });
    }
    // As the plan writes values (TOML); a bare word is a string.
    let value = toml::from_str::<toml::Table>(&format!("v = {v}"))
        .ok()
        .and_then(|t| t.get("v").and_then(Value::from_toml))
        .unwrap_or_else(|| Value::Str(v.to_string()));
    Ok((k.to_string(), value))
}

/// The source with its `[defines]` set to the given values (unchanged when there are none).
pub fn apply(mut src: Source, args: &[String]) -> Result<Source, DefineError> {
    if args.is_empty() {
        return Ok(src);
    }
    let plan = crate::contract::plan::parse(&src.code).map_err(|source| DefineError::Plan {
        kernel: src.name.clone(),
        source,
    })?;
    let mut defines = BTreeMap::new();
    for a in args {
        let (k, v) = parse(a)?;
        // A name the plan does not know is most likely a typo: it would only add a -D nobody reads.
        if !plan.tune.contains_key(&k) && !plan.defines.contains_key(&k) {
            let known: Vec<&str> = plan.tune.keys().map(|k| k.as_str()).collect();
            return Err(DefineError::NotTunable {
                kernel: src.name.clone(),
                name: k,
                tune: if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                },
            });
        }
        defines.insert(k, v);
    }
    for (k, v) in &defines {
        if plan
            .tune
            .get(k)
            .is_some_and(|vals| !vals.iter().any(|a| a.num_eq(v)))
        {
            src.code =
                crate::contract::plan::rewrite::extend_tune(&src.code, k, v).map_err(|source| {
                    DefineError::Extend {
                        kernel: src.name.clone(),
                        source,
                    }
                })?;
        }
    }
    let shown: Vec<String> = args.iter().map(|a| clip(a)).collect();
    src.code =
        crate::contract::plan::rewrite::set_defines(&src.code, &defines).map_err(|source| {
            DefineError::Set {
                kernel: src.name.clone(),
                args: shown.join(" "),
                source,
            }
        })?;
    src.name = format!("{} ({})", src.name, shown.join(", "));
    Ok(src)
}

/// The kernel a command works on (the file given, else the baseline) with `--define`s applied.
pub fn candidate(
    suite: &Suite,
    p: &Problem,
    kernel: Option<&Path>,
    args: &[String],
) -> Result<Source, DefineError> {
    apply(
        crate::contract::kernels::candidate_kernel(suite, p, kernel)?,
        args,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::{Suite, SuiteSource};

    #[test]
    fn values_parse_by_kind() {
        assert_eq!(
            parse("BLOCK=256").unwrap(),
            ("BLOCK".into(), Value::Int(256))
        );
        assert_eq!(parse(" EPS = 1e-6").unwrap().1, Value::Float(1e-6));
        assert_eq!(parse("FAST=true").unwrap().1, Value::Bool(true));
        assert_eq!(parse("MODE=\"x\"").unwrap().1, Value::Str("x".into()));
        assert!(
            parse("BLOCK")
                .unwrap_err()
                .to_string()
                .contains("KEY=VALUE")
        );
        assert!(matches!(
            parse("a-b=1").unwrap_err(),
            DefineError::NotAName { .. }
        ));
    }

    #[test]
    fn a_define_rewrites_the_plan_and_is_checked_against_the_tune_list() {
        let suite = Suite::load(SuiteSource::Embedded).unwrap();
        let p = suite.problem("unified_attention").unwrap();
        let base = candidate(&suite, p, None, &[]).unwrap();
        assert_eq!(base.name, "unified_attention baseline");
        let k = candidate(&suite, p, None, &["WARPS=8".into(), "BKV=32".into()]).unwrap();
        assert_eq!(k.name, "unified_attention baseline (WARPS=8, BKV=32)");
        let plan = crate::contract::plan::parse(&k.code).unwrap();
        assert_eq!(plan.defines["WARPS"], Value::Int(8));
        assert_eq!(plan.defines["BKV"], Value::Int(32));
        // Everything but the defines is the file as it was.
        let strip = |s: &str| -> String {
            s.lines()
                .filter(|l| {
                    !l.starts_with("WARPS =")
                        && !l.starts_with("BKV =")
                        && !l.trim().is_empty()
                        && l.trim() != "[defines]"
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(strip(&k.code), strip(&base.code));
        // A value outside the tune list joins the list, so the plan (and the record) says it.
        let k = candidate(&suite, p, None, &["WARPS=6".into()]).unwrap();
        let plan = crate::contract::plan::parse(&k.code).unwrap();
        assert_eq!(plan.defines["WARPS"], Value::Int(6));
        assert!(
            plan.tune["WARPS"].contains(&Value::Int(6)) && plan.tune["WARPS"].len() >= 2,
            "{:?}",
            plan.tune["WARPS"]
        );
        assert_eq!(
            plan.tune["BKV"],
            crate::contract::plan::parse(&base.code).unwrap().tune["BKV"]
        );
        let e = candidate(&suite, p, None, &["NOPE=1".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`NOPE` is not a tunable parameter")
                && e.contains("(its [tune]: BKV, PV_SPLIT, WARPS)"),
            "{e}"
        );
    }

    #[test]
    fn a_value_outside_the_tune_list_joins_it_and_the_line_keeps_its_comment() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/knowledge/templates/unified_attention_wgmma.cu"
        );
        let src = Source {
            name: "ua".into(),
            code: std::fs::read_to_string(path).unwrap(),
            defines: BTreeMap::new(),
        };
        let before = crate::contract::plan::parse(&src.code).unwrap();
        let out = apply(src.clone(), &["VPRE=2".into(), "OVL=0".into()]).unwrap();
        let plan = crate::contract::plan::parse(&out.code).unwrap();
        let mut want = before.tune["VPRE"].clone();
        want.push(Value::Int(2));
        assert_eq!(plan.tune["VPRE"], want);
        assert_eq!(plan.defines["VPRE"], Value::Int(2));
        // OVL = 0 was in the list: the list is as it was.
        assert_eq!(plan.tune["OVL"], before.tune["OVL"]);
        let line = out.code.lines().find(|l| l.starts_with("VPRE =")).unwrap();
        assert!(
            line.contains(", 2]") && line.contains("# V converted"),
            "{line}"
        );
        // Only the plan changed: the code after it is the file's.
        let body = |c: &str| {
            let plan = c.find(crate::contract::plan::PLAN_START).unwrap();
            c[plan + c[plan..].find("*/").unwrap()..].to_string()
        };
        assert_eq!(body(&out.code), body(&src.code));
    }
}
