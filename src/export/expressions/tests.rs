//! The translations evaluate as `suite::expr` does: thousands of generated expressions over
//! several environments, evaluated by the Rust evaluator, by the Python runtime (python3) and
//! by the C++ runtime (a C++ compiler), value for value and error for error; and the literal
//! spellings, which are checked as text everywhere.

use super::*;
use crate::export::testkit::{self, canon};
use crate::suite::expr::{Env, parse};
use std::process::Command;

/// A small deterministic generator of expressions in the plan language.
struct Gen {
    state: u64,
}

impl Gen {
    fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }
    fn expr(&mut self, depth: u32) -> String {
        if depth == 0 || self.next().is_multiple_of(4) {
            return self.atom();
        }
        let d = depth - 1;
        match self.next() % 12 {
            0..=4 => {
                let op = self.pick(&[
                    "+", "-", "*", "/", "//", "%", "<", "<=", ">", ">=", "==", "!=",
                ]);
                format!("({} {op} {})", self.expr(d), self.expr(d))
            }
            5 => format!(
                "({} ** {})",
                self.expr(d),
                self.pick(&["0", "1", "2", "-1", "0.5", "2.0"])
            ),
            6 => format!("-{}", self.expr(d)),
            7 => {
                let f = self.pick(&[
                    "ceil", "floor", "sqrt", "log2", "float", "int", "sum", "prod", "numel", "len",
                    "exp",
                ]);
                format!("{f}({})", self.expr(d))
            }
            8 => {
                let f = self.pick(&["min", "max"]);
                if self.next().is_multiple_of(2) {
                    format!("{f}({})", self.expr(d))
                } else {
                    format!("{f}({}, {})", self.expr(d), self.expr(d))
                }
            }
            9 => format!("if({}, {}, {})", self.expr(d), self.expr(d), self.expr(d)),
            10 => format!(
                "{}[{}]",
                self.pick(&["L", "M", "[a, b, 3]", "L * 2"]),
                self.expr(d)
            ),
            _ => format!("[{}, {}]", self.expr(d), self.expr(d)),
        }
    }
    fn atom(&mut self) -> String {
        self.pick(&[
            "a", "b", "c", "x", "y", "t", "L", "M", "s", "0", "1", "2", "3", "7", "12", "-3",
            "0.5", "2.0", "1e-6", "3.25", "'fp16'", "'bf16'", "true", "false",
        ])
        .to_string()
    }
}

fn envs() -> Vec<Env> {
    let ints = |xs: &[i128]| Value::List(xs.iter().map(|x| Value::Int(*x)).collect());
    let floats = |xs: &[f64]| Value::List(xs.iter().map(|x| Value::Float(*x)).collect());
    let mk =
        |a: i128, b: i128, c: i128, x: f64, y: f64, t: bool, l: &[i128], m: &[f64], s: &str| {
            let mut e = Env::new();
            e.insert("a".into(), Value::Int(a));
            e.insert("b".into(), Value::Int(b));
            e.insert("c".into(), Value::Int(c));
            e.insert("x".into(), Value::Float(x));
            e.insert("y".into(), Value::Float(y));
            e.insert("t".into(), Value::Bool(t));
            e.insert("L".into(), ints(l));
            e.insert("M".into(), floats(m));
            e.insert("s".into(), Value::Str(s.into()));
            e
        };
    vec![
        mk(
            7,
            -3,
            0,
            2.5,
            -0.75,
            true,
            &[3, 5, 8],
            &[1.5, -2.0, 0.25],
            "fp16",
        ),
        mk(
            12,
            5,
            1,
            0.0,
            3.0,
            false,
            &[1, 2, 3],
            &[0.5, 0.5, 4.0],
            "bf16",
        ),
        mk(
            -8,
            2,
            -1,
            -1.0,
            1e-6,
            true,
            &[4, -6, 9],
            &[-0.0, 7.5, 1e3],
            "fp16",
        ),
    ]
}

/// (expression, environment index, Rust's canonical result or ERR) for every case.
fn cases() -> Vec<(String, usize, String)> {
    let mut g = Gen {
        state: 0x9E37_79B9_7F4A_7C15,
    };
    let envs = envs();
    let mut fixed: Vec<String> = [
        "3*a*1024 + a",
        "a / 7",
        "a / 2",
        "a // 2",
        "-a // 2",
        "b % 4",
        "b // -2",
        "b % -4",
        "2 ^ 3 ^ 2",
        "sum(L ** 2)",
        "sum(ceil(L / 2))",
        "len(L) + L[1] + L[-1]",
        "max(L)",
        "min(a, 4, 9)",
        "numel([2, 3, a])",
        "ceil(8 * (1 - (1 - 2/8) ** a))",
        "1e-6 * 2",
        "sqrt(16)",
        "if(a <= 1024, 4, 1) * 32",
        "if(s == 'fp16', 1, 0)",
        "s != 'bf16'",
        "ceil(max(L) / 128)",
        "32 * ceil(min(1024, max(32, a // 8)) / 32)",
        "x // 0.5",
        "x % -0.75",
        "0 ** -1",
        "(-8.0) ** 0.5",
        "log2(0)",
        "log2(-1)",
        "exp(1000)",
        "int(-2.5)",
        "floor(-2.5)",
        "t + 1",
        "min(t, 3)",
        "L[4]",
        "a / 0",
        "x // 0",
        "b % 0",
        "ceil(t)",
        "len(s)",
        "s < 'x'",
        "min([])",
        "-t",
        "L + [1, 2]",
        "if(L, 1, 2)",
        "L * M",
        "M // 0.25",
        "max(s)",
        "int(exp(1000)) > 0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for _ in 0..1500 {
        fixed.push(g.expr(4));
    }
    let mut out = Vec::new();
    for src in fixed {
        let e = parse(&src).unwrap_or_else(|err| panic!("{src}: {err}"));
        for (k, env) in envs.iter().enumerate() {
            let want = match e.eval(env) {
                Ok(v) => canon(&v),
                Err(_) => "ERR".into(),
            };
            out.push((src.clone(), k, want));
        }
    }
    out
}

fn py_env(env: &Env) -> String {
    let items: Vec<String> = env
        .iter()
        .map(|(k, v)| format!("{}: {}", python_str(k), python_value(v)))
        .collect();
    format!("{{{}}}", items.join(", "))
}

/// A value of the generated environments whose integers fit the C++ runtime's 64 bits.
fn fits_i64(canon: &str) -> bool {
    canon
        .split(|c: char| !(c.is_ascii_digit() || c == '-' || c == ':' || c == 'i'))
        .filter_map(|t| t.strip_prefix("i:"))
        .all(|n| n.parse::<i64>().is_ok())
}

#[test]
fn python_evaluates_as_the_harness_does() {
    let Some(py3) = testkit::python3() else {
        return;
    };
    let cases = cases();
    let mut script = String::from(
        "import ctypes, ctypes.util, glob, hashlib, math, os, sys, types\ntorch = types.SimpleNamespace()\n",
    );
    script.push_str(crate::export::python::RUNTIME);
    script.push_str(testkit::PY_CANON);
    script.push_str("ENVS = [");
    for env in envs() {
        script.push_str(&py_env(&env));
        script.push_str(",\n");
    }
    script.push_str("]\nCASES = [\n");
    for (src, k, _) in &cases {
        let e = parse(src).unwrap();
        script.push_str(&format!("    ({k}, lambda E: {}),\n", python(&e)));
    }
    script.push_str(
        "]\nfor k, f in CASES:\n    try:\n        print(_canon(f(ENVS[k])))\n    except AtrexExportError:\n        print('ERR')\n",
    );
    let dir = testkit::scratch("py-eval");
    std::fs::write(dir.join("cases.py"), &script).unwrap();
    let out = testkit::run(
        Command::new(py3).arg(dir.join("cases.py")),
        "python3 cases.py",
    );
    let got: Vec<&str> = out.lines().collect();
    assert_eq!(got.len(), cases.len());
    let mut bad = Vec::new();
    for ((src, k, want), got) in cases.iter().zip(got) {
        if want != got {
            bad.push(format!("{src} in env {k}: Rust {want}, Python {got}"));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} differ:\n{}",
        bad.len(),
        cases.len(),
        bad[..bad.len().min(20)].join("\n")
    );
}

#[test]
fn cpp_evaluates_as_the_harness_does() {
    let Some(cxx) = testkit::cxx() else { return };
    let cases: Vec<(String, usize, String)> = cases()
        .into_iter()
        .filter(|(_, _, w)| fits_i64(w))
        .collect();
    let mut src = String::from("#include <cstdio>\n");
    src.push_str(crate::export::cuda::RUNTIME);
    src.push_str(testkit::CPP_CANON);
    src.push_str("namespace rt = atrex_export_rt;\nint main() {\n  std::vector<rt::Env> envs;\n");
    for env in envs() {
        src.push_str("  { rt::Env E;\n");
        for (k, v) in &env {
            src.push_str(&format!(
                "    E[{}] = {};\n",
                cpp_str(k),
                cpp_value(v).unwrap()
            ));
        }
        src.push_str("    envs.push_back(E); }\n");
    }
    src.push_str("  for (size_t n = 0; n < envs.size(); ++n) { (void)n; }\n  return 0;\n}\n");
    // One function: a switch over the expressions (cheap to compile, unlike thousands of lambdas).
    let mut exprs: Vec<&String> = Vec::new();
    for (s, _, _) in &cases {
        if exprs.last() != Some(&s) {
            exprs.push(s);
        }
    }
    let mut f = String::from(
        "static rt::Value eval_case(int i, rt::Ctx& c, const rt::Env& E) {\n  (void)c; (void)E;\n  switch (i) {\n",
    );
    for (i, s) in exprs.iter().enumerate() {
        f.push_str(&format!(
            "    case {i}: return {};\n",
            cpp(&parse(s).unwrap()).unwrap()
        ));
    }
    f.push_str("  }\n  return rt::Value();\n}\n");
    let mut calls = String::from("int run_all(const std::vector<rt::Env>& envs) {\n");
    let mut i = 0usize;
    let mut prev: Option<&String> = None;
    for (s, k, _) in &cases {
        if prev.is_some() && prev != Some(s) {
            i += 1;
        }
        prev = Some(s);
        calls.push_str(&format!(
            "  {{ rt::Ctx c; rt::Value v = eval_case({i}, c, envs[{k}]); std::printf(\"%s\\n\", c.failed ? \"ERR\" : canon(v).c_str()); }}\n"
        ));
    }
    calls.push_str("  return 0;\n}\n");
    let src = src.replace(
        "namespace rt = atrex_export_rt;\nint main() {",
        &format!("namespace rt = atrex_export_rt;\n{f}int run_all(const std::vector<rt::Env>& envs);\nint main() {{"),
    ) + &calls;
    let src = src.replace(
        "  for (size_t n = 0; n < envs.size(); ++n) { (void)n; }\n  return 0;\n}\n",
        "  return run_all(envs);\n}\n",
    );
    let dir = testkit::scratch("cpp-eval");
    let out = testkit::run_cpp(cxx, &dir, &src, &[]);
    let got: Vec<&str> = out.lines().collect();
    assert_eq!(got.len(), cases.len());
    let mut bad = Vec::new();
    for ((s, k, want), got) in cases.iter().zip(got) {
        if want != got {
            bad.push(format!("{s} in env {k}: Rust {want}, C++ {got}"));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} differ:\n{}",
        bad.len(),
        cases.len(),
        bad[..bad.len().min(20)].join("\n")
    );
}

#[test]
fn literals_read_back_as_the_same_values() {
    assert_eq!(python_value(&Value::Float(1e-6)), "1e-6");
    assert_eq!(python_value(&Value::Float(3.0)), "3.0");
    assert_eq!(python_value(&Value::Float(f64::INFINITY)), "_INF");
    assert_eq!(
        python_value(&Value::Int(-(1i128 << 100))),
        "-1267650600228229401496703205376"
    );
    assert_eq!(python_value(&Value::Bool(true)), "True");
    assert_eq!(
        python_str("it's a \\ \"q\"\n\u{e9}"),
        "'it\\'s a \\\\ \"q\"\\n\\xe9'"
    );
    assert_eq!(cpp_double(1e16), "1e16");
    assert_eq!(cpp_double(2.0), "2.0");
    assert_eq!(cpp_double(0.1), "0.1");
    assert_eq!(cpp_str("a\"b\\c?\n"), "\"a\\\"b\\\\c\\?\\012\"");
    assert_eq!(cpp_str("é"), "\"\\303\\251\"");
    assert_eq!(cpp_value(&Value::Int(5)).unwrap(), "rt::Value::I(5LL)");
    assert!(
        cpp_value(&Value::Int(1i128 << 70)).is_err(),
        "64-bit integers only"
    );
}

#[test]
fn expressions_are_spelled_as_calls_into_the_runtime() {
    let e = parse("32 * ceil(min(MAX, max(32, H // 8)) / 32)").unwrap();
    assert_eq!(
        python(&e),
        "_bin('*', 32, _call('ceil', [_bin('/', _call('min', [E['MAX'], _call('max', [32, _bin('//', E['H'], 8)])]), 32)]))"
    );
    assert_eq!(
        cpp(&e).unwrap(),
        "rt::bin(c, \"*\", rt::Value::I(32LL), rt::call(c, \"ceil\", {rt::bin(c, \"/\", rt::call(c, \"min\", {rt::var(c, E, \"MAX\"), rt::call(c, \"max\", {rt::Value::I(32LL), rt::bin(c, \"//\", rt::var(c, E, \"H\"), rt::Value::I(8LL))})}), rt::Value::I(32LL))}))"
    );
    let e = parse("L[-1] + -x").unwrap();
    assert_eq!(
        python(&e),
        "_bin('+', _index(E['L'], _neg(1)), _neg(E['x']))"
    );
}
