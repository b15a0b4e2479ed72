//! `when` in both exports: a plan whose launches run on some shapes only, with a tensor map that
//! is invalid where its launch does not run and a condition on a name nothing else reads,
//! resolves in the Python runtime and in the C++ launcher as the harness resolves it; and the
//! runtimes refuse a condition that is NaN, and a shape on which no launch runs, naming the line.

use super::{PY_STUB, compare, cpp_assign, harness_plan, py_cases, suite};
use crate::export::testkit;
use crate::export::*;
use crate::suite::expr::Value;
use std::process::Command;

/// rms_norm with two conditional launches: `tall` (T > 64) reads a tensor map whose outer
/// dimension T - 64 is no size where it does not run; `rows` runs where `sqrt(eps)` is not 0,
/// and eps is read by no other expression of the plan.
const KERNEL: &str = r#"/* atrex:plan
[[tensor_map]]
name = "tm_x"
tensor = "x"
dtype = "bf16"
dims = ["H", "T - 64"]
box = ["8", "1"]

[[launch]]
kernel = "tall"
when = "T > 64"
grid = ["T - 64"]
block = ["64"]
args = ["tm_x", "out", "weight", "H:i32"]

[[launch]]
kernel = "rows"
when = "sqrt(eps)"
grid = ["T"]
block = ["32"]
args = ["out", "x", "weight", "H:i32"]
*/
struct alignas(64) TensorMap { unsigned long long opaque[16]; };
extern "C" __global__ void tall(const __grid_constant__ TensorMap tm, void* out, const void* w, int h) {}
extern "C" __global__ void rows(void* out, const void* x, const void* w, int h) {}
"#;

fn line_of(needle: &str) -> usize {
    KERNEL.lines().position(|l| l.starts_with(needle)).unwrap() + 1
}

/// Shapes off the suite: (T, H, eps) and what every side must say of them.
const OFF_SUITE: [(i64, i64, f64, &str); 2] = [
    // sqrt(-1) is NaN: no condition.
    (1, 1024, -1.0, "not a condition"),
    // T <= 64 and sqrt(0) = 0: neither launch runs.
    (1, 1024, 0.0, "no launch runs on this shape"),
];

#[test]
fn when_resolves_alike_in_the_harness_and_both_exports() {
    let s = suite();
    let p = s.problem("rms_norm").unwrap();
    let k = Kernel {
        source: KERNEL.into(),
        origin: "when.cu".into(),
    };
    let c = check(p, &k).unwrap_or_else(|e| panic!("{e}"));
    let plans: Vec<String> = p.shapes.iter().map(|sh| harness_plan(p, &c, sh)).collect();
    // Both sides of the condition are among the suite's shapes.
    assert!(plans.iter().any(|pl| pl.contains("launch tall")));
    assert!(plans.iter().any(|pl| !pl.contains("launch tall")));
    assert!(plans.iter().all(|pl| pl.contains("launch rows")));
    // The harness refuses the off-suite shapes with the `when` line or the plan's first.
    for (t, h, eps, want) in OFF_SUITE {
        let mut env = crate::suite::expr::Env::new();
        env.insert("T".into(), Value::Int(t as i128));
        env.insert("H".into(), Value::Int(h as i128));
        env.insert("eps".into(), Value::Float(eps));
        let e = c
            .plan
            .resolve(&c.plan.env(&env, &c.defines), &|_| true)
            .unwrap_err();
        assert!(e.msg.contains(want), "{e}");
    }
    let dir = testkit::scratch("when");
    let mut expected = String::new();
    for pl in &plans {
        expected.push_str(pl);
        expected.push_str("--\n");
    }
    let when_short = line_of("when = \"sqrt(eps)\"");
    let first_launch = line_of("[[launch]]");

    // Python: the binding keeps eps although only `when` reads it.
    let py = generate(p, &k, Format::AtrexBench).unwrap_or_else(|e| panic!("{e}"));
    let paths = write(&dir.join("py"), &py).unwrap();
    if let Some(py3) = testkit::python3() {
        let mut cases = py_cases(p);
        for (t, h, eps, _) in OFF_SUITE {
            cases.as_array_mut().unwrap().push(serde_json::json!({
                "init": {"eps": eps},
                "inputs": [[[t, h], "bf16", null], [[h], "bf16", null]],
            }));
        }
        let head = PY_STUB
            .split("for path, cases in json.load")
            .next()
            .unwrap();
        let driver = format!(
            "{head}for path, cases in json.load(open(sys.argv[1])):\n    spec = importlib.util.spec_from_file_location('exported', path)\n    m = importlib.util.module_from_spec(spec)\n    spec.loader.exec_module(m)\n    for case in cases:\n        model = m.Model(**case['init'])\n        ts = [FakeTensor(*t) for t in case['inputs']]\n        try:\n            E = m._bind(model._atrex_init, ts, {{}})\n            m._check_inputs(E, ts)\n            launches, scratch = m._resolve(E)\n        except m.AtrexExportError as e:\n            sys.stdout.write('ERR %s\\n' % e)\n            continue\n        sys.stdout.write(describe(m, launches, scratch, m._outputs(E)) + '--\\n')\n"
        );
        std::fs::write(dir.join("driver.py"), driver).unwrap();
        std::fs::write(
            dir.join("cases.json"),
            serde_json::to_string(&serde_json::json!([[paths[0], cases]])).unwrap(),
        )
        .unwrap();
        let out = testkit::run(
            Command::new(py3)
                .arg(dir.join("driver.py"))
                .arg(dir.join("cases.json")),
            "the Python driver",
        );
        let (suite_part, off) = split_errors(&out, OFF_SUITE.len());
        compare("Python", &expected, &suite_part);
        check_errors("Python", &off, when_short, first_launch);
    }

    // C++: the map is neither checked nor encoded where `tall` does not run.
    let files = generate(p, &k, Format::Cuda).unwrap_or_else(|e| panic!("{e}"));
    write(&dir.join("cpp"), &files).unwrap();
    if let Some(cxx) = testkit::cxx() {
        let mut main = String::from(
            "#define ATREX_EXPORT_TENSOR_MAPS\n#include <cstdio>\n#include \"cpp/rms_norm_launch.h\"\nint main() {\n",
        );
        let mut shapes: Vec<Vec<(String, String, Value)>> = Vec::new();
        for sh in &p.shapes {
            let env = p.env(sh).unwrap();
            shapes.push(
                p.params
                    .iter()
                    .filter_map(|(n, d)| env.get(n).map(|v| (n.clone(), d.ty.clone(), v.clone())))
                    .collect(),
            );
        }
        for (t, h, eps, _) in OFF_SUITE {
            shapes.push(vec![
                ("token_count".into(), "int".into(), Value::Int(t as i128)),
                ("hidden_size".into(), "int".into(), Value::Int(h as i128)),
                ("eps".into(), "float".into(), Value::Float(eps)),
            ]);
        }
        for params in &shapes {
            main.push_str("  {\n    atrex_export_rms_norm::Params p;\n");
            for (n, ty, v) in params {
                main.push_str(&cpp_assign(n, ty, v));
            }
            main.push_str(
                "    atrex_export_rt::Plan plan;\n    std::string why;\n    if (!atrex_export_rms_norm::resolve(p, &plan, &why)) std::printf(\"ERR %s\\n\", why.c_str());\n    else std::printf(\"%s--\\n\", atrex_export_rt::describe(plan).c_str());\n  }\n",
            );
        }
        main.push_str("  return 0;\n}\n");
        let out = testkit::run_cpp(cxx, &dir, &main, &[]);
        let (suite_part, off) = split_errors(&out, OFF_SUITE.len());
        compare("C++", &expected, &suite_part);
        check_errors("C++", &off, when_short, first_launch);
    }
}

/// The suite's plans, and the last `n` lines (the off-suite shapes' errors).
fn split_errors(out: &str, n: usize) -> (String, Vec<String>) {
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() >= n, "{out}");
    let (head, tail) = lines.split_at(lines.len() - n);
    let mut suite_part = head.join("\n");
    suite_part.push('\n');
    (suite_part, tail.iter().map(|l| l.to_string()).collect())
}

fn check_errors(who: &str, off: &[String], when_line: usize, first_launch: usize) {
    let [nan, none] = off else {
        panic!("{who}: {off:?}")
    };
    assert!(
        nan.starts_with(&format!(
            "ERR launch plan line {when_line}: kernel rows: when `sqrt(eps)`"
        )) && nan.contains("not a condition"),
        "{who}: {nan}"
    );
    assert!(
        none.starts_with(&format!(
            "ERR launch plan line {first_launch}: no launch runs on this shape"
        )),
        "{who}: {none}"
    );
}
