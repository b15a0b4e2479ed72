//! Plans as a hostile candidate writes them, through both processes: a deterministic corpus of
//! random and mutated plans (from the knowledge base's templates) goes through the client's plan
//! parse and `--define` rewrite and the worker's plan, defines and per-shape resolution. Every
//! case must give Ok or an error; a panic is reported with the case that caused it (a stack
//! overflow would abort the test binary: the parser's limits make it impossible).

use super::compile::plan_and_defines;
use super::shape_plan;
use crate::agent::SplitMix;
use crate::contract::plan::{self, PLAN_START};
use crate::contract::protocol::{ShapeJob, Source};
use crate::suite::{Suite, SuiteSource};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// A template: its operator, source and the job shapes it is resolved on.
struct Seed {
    name: String,
    code: String,
    shapes: Vec<ShapeJob>,
}

fn seeds() -> Vec<Seed> {
    let suite = Suite::load(SuiteSource::Embedded).unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("knowledge/templates");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let code = std::fs::read_to_string(&f).unwrap();
        let op = code
            .lines()
            .find_map(|l| l.strip_prefix("operator = \""))
            .and_then(|r| r.split('"').next())
            .unwrap_or_else(|| panic!("{}: no operator", f.display()));
        let p = suite.problem(op).unwrap();
        // The smallest and the largest shape.
        let picks = [p.shapes.first(), p.shapes.last()];
        let shapes = picks
            .into_iter()
            .flatten()
            .map(|s| crate::contract::job::shape_job_for(p, s, None).unwrap())
            .collect();
        out.push(Seed {
            name: f.file_name().unwrap().to_string_lossy().into_owned(),
            code,
            shapes,
        });
    }
    assert!(out.len() >= 20, "{} templates", out.len());
    out
}

const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "-0",
    "1",
    "7",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "170141183460469231731687303715884105727",
    "1e308",
    "1e400",
    "-1e400",
    "0.5",
    "2.5e-320",
    "nan",
    "inf",
    "1_000_000_000_000",
];

const ATOMS: &[&str] = &[
    "T",
    "H",
    "BLOCK",
    "UNKNOWN",
    "é",
    "\"s\"",
    "true",
    "[1, 2]",
    "[]",
    "sqrt(-1)",
    "log2(0)",
    "exp(1000)",
    "0.0 / 1",
    "-(2 ** 126) * 2",
    "2 ** 127",
    "len([1,2,3])",
];

const OPS: &[&str] = &[
    "+", "-", "*", "/", "//", "%", "**", "^", "<", "==", "!=", "·", "×", "−",
];

const FUNCS: &[&str] = &[
    "min", "max", "ceil", "floor", "sqrt", "log2", "exp", "float", "int", "sum", "prod", "len",
    "if", "nope",
];

/// A random expression of bounded size (it may be invalid).
fn expr(r: &mut SplitMix, depth: usize) -> String {
    if depth == 0 || r.below(4) == 0 {
        return if r.below(2) == 0 {
            NUMBERS[r.below(NUMBERS.len())].to_string()
        } else {
            ATOMS[r.below(ATOMS.len())].to_string()
        };
    }
    match r.below(6) {
        0 => format!("-{}", expr(r, depth - 1)),
        1 => format!("({})", expr(r, depth - 1)),
        2 => {
            let f = FUNCS[r.below(FUNCS.len())];
            let n = r.below(4);
            let args: Vec<String> = (0..n).map(|_| expr(r, depth - 1)).collect();
            format!("{f}({})", args.join(", "))
        }
        3 => format!("{}[{}]", expr(r, depth - 1), expr(r, depth - 1)),
        _ => format!(
            "{} {} {}",
            expr(r, depth - 1),
            OPS[r.below(OPS.len())],
            expr(r, depth - 1)
        ),
    }
}

/// Expressions past or at the parser's limits.
fn extreme(r: &mut SplitMix) -> String {
    let n = [63, 64, 65, 200, 20_000][r.below(5)];
    match r.below(7) {
        0 => format!("{}T{}", "(".repeat(n), ")".repeat(n)),
        1 => format!("{}T", "-".repeat(n)),
        2 => format!("{}1{}", "[".repeat(n), "]".repeat(n)),
        3 => format!("{}T{}", "ceil(".repeat(n), ")".repeat(n)),
        4 => vec!["1"; n].join(" + "),
        5 => vec!["2"; n].join(" ** "),
        _ => format!("{}T", "(".repeat(n)),
    }
}

/// The quoted strings of `text` as byte ranges (inside the quotes).
fn quoted(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut open = None;
    for (i, c) in text.char_indices() {
        if c == '"' {
            match open.take() {
                Some(s) => out.push((s, i)),
                None => open = Some(i + 1),
            }
        }
    }
    out
}

/// One mutation of a template's source.
fn mutate(r: &mut SplitMix, code: &str) -> String {
    let start = code.find(PLAN_START).unwrap_or(0);
    let end = code[start..]
        .find("*/")
        .map(|e| start + e)
        .unwrap_or(code.len());
    let (head, body, tail) = (&code[..start], &code[start..end], &code[end..]);
    let body = match r.below(10) {
        // An expression (or a name, a type) replaced.
        0..=3 => {
            let q = quoted(body);
            if q.is_empty() {
                body.to_string()
            } else {
                let (a, b) = q[r.below(q.len())];
                let new = match r.below(5) {
                    0 => extreme(r),
                    1 => format!("{}:{}", expr(r, 3), ["i32", "u64", "f32", "u8"][r.below(4)]),
                    2 => ["x", "nope", "", "tm_x", "é"][r.below(5)].to_string(),
                    _ => expr(r, 4),
                };
                // TOML strings cannot hold a bare quote or backslash.
                let new = new.replace(['"', '\\'], "'");
                format!("{}{new}{}", &body[..a], &body[b..])
            }
        }
        // A value's type changed: a number, a bool, a nested array, a table.
        4 => {
            let lines: Vec<&str> = body.lines().collect();
            let k = r.below(lines.len());
            let v = [
                NUMBERS[r.below(NUMBERS.len())].to_string(),
                "true".into(),
                format!("{}1{}", "[".repeat(100), "]".repeat(100)),
                "{ a = 1 }".into(),
                "[\"T\", 1, true]".into(),
                "[]".into(),
            ][r.below(6)]
            .clone();
            let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            if let Some((key, _)) = lines[k].split_once('=') {
                out[k] = format!("{key}= {v}");
            }
            out.join("\n")
        }
        // A line lost or doubled (a missing field, a duplicate key or table).
        5 => {
            let mut lines: Vec<&str> = body.lines().collect();
            let k = r.below(lines.len());
            if r.below(2) == 0 {
                lines.remove(k);
            } else {
                lines.insert(k, lines[k]);
            }
            lines.join("\n")
        }
        // Bytes inserted: unicode, quotes, brackets, a comment end.
        6 => {
            let ins = ["é", "\u{202e}", "\"", "[[", "*/", "\0", "\n[launch]\n", "𝕋"][r.below(8)];
            let mut k = r.below(body.len() + 1);
            while !body.is_char_boundary(k) {
                k -= 1;
            }
            format!("{}{ins}{}", &body[..k], &body[k..])
        }
        // Truncated.
        7 => {
            let mut k = r.below(body.len() + 1);
            while !body.is_char_boundary(k) {
                k -= 1;
            }
            body[..k].to_string()
        }
        // A long string value.
        8 => body.replacen(
            "kernel = \"",
            &format!("kernel = \"{}", "k".repeat(100_000)),
            1,
        ),
        // A tensor renamed, a number made huge.
        _ => body
            .replacen("tensor = \"", "tensor = \"unknown_", 1)
            .replacen(":i32", ":i64", 1)
            .replacen(
                "\"128\"",
                &format!("\"{}\"", NUMBERS[r.below(NUMBERS.len())]),
                1,
            ),
    };
    format!("{head}{body}{tail}")
}

/// A `--define` argument for a plan (its parameters, or others), hostile or not.
fn define_arg(r: &mut SplitMix, code: &str) -> String {
    let names: Vec<String> = plan::parse(code)
        .map(|p| p.tune.keys().cloned().collect())
        .unwrap_or_default();
    let name = if names.is_empty() || r.below(5) == 0 {
        "BLOCK".to_string()
    } else {
        names[r.below(names.len())].clone()
    };
    let value = match r.below(6) {
        0 => extreme(r),
        1 => NUMBERS[r.below(NUMBERS.len())].to_string(),
        2 => ["\"a\\\"b\"", "a\"\n[launch]", "é", "[1, 2]", "{a=1}", ""][r.below(6)].to_string(),
        3 => format!("{}1{}", "[".repeat(100), "]".repeat(100)),
        _ => expr(r, 3),
    };
    format!("{name}={value}")
}

/// What became of the cases that did not panic.
#[derive(Default)]
struct Tally {
    /// Shapes the worker resolved, and shapes it refused with a plan error.
    resolved: usize,
    refused: usize,
    /// Plans the worker could not take at all.
    unparsed: usize,
}

/// Runs one case through the client and the worker (a panic propagates to the caller).
fn run_case(
    code: &str,
    define: Option<&str>,
    json_define: bool,
    shapes: &[ShapeJob],
    tally: &mut Tally,
) {
    // Client: the plan as read, and the `--define` rewrite.
    let _ = plan::parse(code);
    let src = Source {
        name: "case".into(),
        code: code.to_string(),
        defines: Default::default(),
    };
    let src = match define {
        Some(d) => match crate::cli::defines::apply(src.clone(), &[d.to_string()]) {
            Ok(s) => s,
            Err(_) => src,
        },
        None => src,
    };
    // Worker: the plan and the job's defines, then every shape.
    let mut src = src;
    if json_define && let Some(d) = define {
        let (k, v) = d.split_once('=').unwrap_or((d, ""));
        let v = serde_json::from_str(v).unwrap_or(serde_json::Value::String(v.to_string()));
        src.defines.insert(k.to_string(), v);
    }
    match plan_and_defines(&src) {
        Ok((p, defines)) => {
            for s in shapes {
                match shape_plan::resolve(&p, &defines, s) {
                    Ok(_) => tally.resolved += 1,
                    Err(_) => tally.refused += 1,
                }
            }
        }
        Err(_) => tally.unparsed += 1,
    }
}

#[test]
fn hostile_plans_give_errors_never_panics_in_the_client_or_the_worker() {
    let seeds = seeds();
    let mut r = SplitMix(0x5EED_0F_91A4);
    let mut panicked = Vec::new();
    let mut cases = 0;
    let mut tally = Tally::default();
    for round in 0..3000 {
        let seed = &seeds[round % seeds.len()];
        let code = match round % 10 {
            // A fresh plan of random expressions.
            0 => format!(
                "{PLAN_START}\n[[launch]]\nkernel = \"k\"\ngrid = [\"{}\"]\nblock = [\"{}\"]\nsmem = \"{}\"\nargs = [\"{}:i32\", \"x\"]\n[[scratch]]\nname = \"s\"\ndtype = \"fp32\"\nsize = \"{}\"\n[tune]\nBLOCK = [128]\n*/\n",
                expr(&mut r, 4).replace('"', "'"),
                expr(&mut r, 4).replace('"', "'"),
                expr(&mut r, 3).replace('"', "'"),
                expr(&mut r, 3).replace('"', "'"),
                expr(&mut r, 3).replace('"', "'"),
            ),
            // The template as it is (with a hostile define).
            1 => seed.code.clone(),
            // Mutated once, twice or three times.
            k => {
                let mut c = seed.code.clone();
                for _ in 0..(1 + k % 3) {
                    c = mutate(&mut r, &c);
                }
                c
            }
        };
        let define = (r.below(3) != 0).then(|| define_arg(&mut r, &code));
        let json_define = r.below(2) == 0;
        cases += 1;
        let res = catch_unwind(AssertUnwindSafe(|| {
            run_case(
                &code,
                define.as_deref(),
                json_define,
                &seed.shapes,
                &mut tally,
            )
        }));
        if let Err(e) = res {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panicked.push(format!(
                "case {round} ({}, define {:?}): {why}\n{}",
                seed.name,
                define.as_deref().map(plan::clip),
                plan::clip(&code[code.find(PLAN_START).unwrap_or(0)..])
            ));
        }
    }
    assert!(cases >= 3000);
    assert!(
        panicked.is_empty(),
        "{} of {cases} cases panicked:\n{}",
        panicked.len(),
        panicked.join("\n\n")
    );
    // The corpus reaches every stage: plans refused, shapes refused, shapes resolved.
    assert!(
        tally.unparsed >= 300 && tally.refused >= 300 && tally.resolved >= 300,
        "unparsed {}, refused {}, resolved {}",
        tally.unparsed,
        tally.refused,
        tally.resolved
    );
}

/// The corpus is not all refusals: the templates themselves pass through both sides, with
/// their own parameters defined.
#[test]
fn the_templates_pass_the_client_and_the_worker() {
    for seed in seeds() {
        let p = plan::parse(&seed.code).unwrap_or_else(|e| panic!("{}: {e}", seed.name));
        let src = Source {
            name: seed.name.clone(),
            code: seed.code.clone(),
            defines: Default::default(),
        };
        let args: Vec<String> = p.defines.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let src =
            crate::cli::defines::apply(src, &args).unwrap_or_else(|e| panic!("{}: {e}", seed.name));
        let (plan, defines) = plan_and_defines(&src).unwrap();
        for s in &seed.shapes {
            shape_plan::resolve(&plan, &defines, s)
                .unwrap_or_else(|e| panic!("{} shape {}: {e}", seed.name, s.id));
        }
    }
}
