//! The export against the harness: for every operator of the suite, its shipped incumbent (and
//! every template of the knowledge base) exported in both formats, and on every shape the plan that the exported Python (binding from
//! tensors that look like the benchmark's, then resolution) and the exported C++ header (from
//! the parameters) compute, compared line by line with the harness's own resolution. Also the
//! refusals: a plan that does not resolve on a shape, a plan error with its line.

use super::testkit::{self, describe};
use super::*;
use crate::contract::plan::ResolvedLaunch;
use crate::suite::{SuiteSource, expr::Value};
use std::process::Command;

pub(super) fn suite() -> Suite {
    Suite::load(SuiteSource::Embedded).expect("the built-in suite loads")
}

/// The shipped incumbent of every operator (the standing built into the binary).
fn shipped(s: &Suite, p: &Problem) -> Kernel {
    let file = crate::standing::shipped::load(&s.name)
        .expect("the shipped standing reads")
        .expect("a shipped standing for the suite");
    let rec = &file.operators[&p.name];
    let source =
        crate::standing::store::read_kernel(std::path::Path::new("."), &s.source, &rec.kernel)
            .unwrap_or_else(|e| panic!("{}: {e}", p.name));
    Kernel {
        source,
        origin: rec.kernel.clone(),
    }
}

/// Every template of the knowledge base with the operator it is written for.
fn templates(s: &Suite) -> Vec<(&Problem, Kernel)> {
    let dir = crate::suite::EMBEDDED_KNOWLEDGE
        .get_dir("templates")
        .expect("the knowledge base has templates");
    let mut out = Vec::new();
    for f in dir.files() {
        let Some(text) = f.contents_utf8() else {
            continue;
        };
        let op = text
            .lines()
            .find_map(|l| l.strip_prefix("operator = \""))
            .and_then(|r| r.strip_suffix('"'));
        if let Some(p) = op.and_then(|o| s.problem(o)) {
            out.push((
                p,
                Kernel {
                    source: text.to_string(),
                    origin: format!("knowledge/{}", f.path().display()),
                },
            ));
        }
    }
    out
}

/// What the harness resolves on a shape, as `atrex_export_rt::describe` prints it.
pub(super) fn harness_plan(p: &Problem, c: &Checked, shape: &crate::suite::Shape) -> String {
    let env = p.env(shape).unwrap();
    let penv = c.plan.env(&env, &c.defines);
    let sizes = buffer_bytes(p, &c.plan, &env).unwrap();
    let launches: Vec<ResolvedLaunch> = c.plan.resolve(&penv, &|n| sizes.contains_key(n)).unwrap();
    let mut buffers: Vec<String> = p
        .inputs
        .iter()
        .chain(&p.outputs)
        .map(|t| t.name.clone())
        .collect();
    buffers.extend(c.plan.scratch.iter().map(|s| s.name.clone()));
    let scratch: Vec<(String, u64, bool)> = c
        .plan
        .scratch_sizes(&penv)
        .unwrap()
        .into_iter()
        .map(|(s, n)| (s.name, n, s.zero))
        .collect();
    let outputs: Vec<(String, String, Vec<usize>)> = p
        .outputs
        .iter()
        .map(|o| {
            (
                o.name.clone(),
                p.tensor_dtype(o, &env).unwrap(),
                p.tensor_dims(o, &env).unwrap(),
            )
        })
        .collect();
    describe(&launches, &buffers, &scratch, &outputs)
}

pub(super) const PY_STUB: &str = r#"
import importlib.util, json, struct, sys, types
torch = types.ModuleType('torch')
class _DType:
    def __init__(self, n): self.n = n
    def __repr__(self): return 'torch.' + self.n
for _n in ['bfloat16', 'float16', 'float32', 'float64', 'float8_e4m3fn', 'float8_e4m3fnuz', 'int8', 'int32', 'int64', 'uint8', 'bool']:
    setattr(torch, _n, _DType(_n))
class Tensor:
    pass
torch.Tensor = Tensor
nn = types.ModuleType('torch.nn')
class Module:
    def __init__(self): pass
nn.Module = Module
torch.nn = nn
sys.modules['torch'] = torch
sys.modules['torch.nn'] = nn
TORCH = {'bf16': 'bfloat16', 'fp16': 'float16', 'fp32': 'float32', 'tf32': 'float32', 'fp64': 'float64',
         'fp8_e4m3': 'float8_e4m3fn', 'fp8_e4m3fnuz': 'float8_e4m3fnuz', 'int8': 'int8', 'int32': 'int32',
         'int64': 'int64', 'uint8': 'uint8', 'bool': 'bool'}
class FakeTensor(Tensor):
    def __init__(self, shape, dtype, values):
        self.shape = tuple(shape); self.dtype = getattr(torch, TORCH[dtype]); self._v = values
    def tolist(self):
        if self._v is None:
            raise RuntimeError('read back a tensor the binding does not hold')
        return list(self._v)

def describe(m, launches, scratch, outputs):
    names = [t['name'] for t in m._INPUTS] + [o['name'] for o in m._OUTPUTS] + [s[0] for s in m._SCRATCH]
    out = []
    for k, grid, block, smem, cluster, cooperative, args in launches:
        out.append('launch %s grid %d %d %d block %d %d %d smem %d cluster %s%s' % (
            (k,) + tuple(grid) + tuple(block) + (smem, 'none' if cluster is None else '%d %d %d' % tuple(cluster),
                                                 ' cooperative' if cooperative else '')))
        for a in args:
            if a[0] == 'buffer':
                out.append('arg buffer %d' % names.index(a[1]))
            elif a[0] == 'map':
                name, _, dims, strides, boxes, elems, _ = a[1]
                j = lambda xs: ''.join(' %d' % x for x in xs)
                out.append('arg map %s dims%s strides%s box%s elem%s' % (name, j(dims), j(strides), j(boxes), j(elems)))
            elif a[0] == 'f32':
                out.append('arg f32 %d' % struct.unpack('<I', struct.pack('<f', a[1]))[0])
            elif a[0] == 'f64':
                out.append('arg f64 %d' % struct.unpack('<Q', struct.pack('<d', a[1]))[0])
            else:
                out.append('arg %s %d' % a)
    for name, dtype, n, zero in scratch:
        out.append('scratch %s %d %d' % (name, n, 1 if zero else 0))
    for name, dims, dtype in outputs:
        out.append('output %s %s%s' % (name, dtype, ''.join(' %d' % d for d in dims)))
    return '\n'.join(out) + '\n'

for path, cases in json.load(open(sys.argv[1])):
    spec = importlib.util.spec_from_file_location('exported', path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    for case in cases:
        model = m.Model(**case['init'])
        ts = [FakeTensor(*t) for t in case['inputs']]
        held = {i: tuple(ts[i].tolist()) for i in m._HOLDS}
        E = m._bind(model._atrex_init, ts, held)
        m._check_inputs(E, ts)
        launches, scratch = m._resolve(E)
        m._Prepared(E)
        sys.stdout.write(describe(m, launches, scratch, m._outputs(E)) + '--\n')
"#;

/// The cases of an operator for the Python driver: constructor arguments, and the inputs as
/// the benchmark would pass them (dimensions, dtype, the values of a list they hold).
pub(super) fn py_cases(p: &Problem) -> serde_json::Value {
    let mut cases = Vec::new();
    for s in &p.shapes {
        let env = p.env(s).unwrap();
        let init: serde_json::Map<String, serde_json::Value> = p
            .params
            .iter()
            .filter(|(n, d)| {
                (d.source == "init" || d.source == "init+input") && env.contains_key(*n)
            })
            .map(|(n, _)| (n.clone(), env[n].to_json()))
            .collect();
        let inputs: Vec<serde_json::Value> = p
            .inputs
            .iter()
            .map(|t| {
                let holds = t.holds.as_ref().map(|h| env[h].to_json());
                serde_json::json!([
                    p.tensor_dims(t, &env).unwrap(),
                    p.tensor_dtype(t, &env).unwrap(),
                    holds
                ])
            })
            .collect();
        cases.push(serde_json::json!({"init": init, "inputs": inputs}));
    }
    serde_json::Value::Array(cases)
}

pub(super) fn cpp_assign(name: &str, ty: &str, v: &Value) -> String {
    let m = cuda::member(name).unwrap();
    let rhs = match (ty, v) {
        ("int_list", Value::List(xs)) => format!(
            "{{{}}}",
            xs.iter()
                .map(|x| format!("{x}LL"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ("str", Value::Str(t)) => expressions::cpp_str(t),
        ("bool", Value::Bool(b)) => b.to_string(),
        ("float", Value::Float(x)) => expressions::cpp_double(*x),
        ("float", Value::Int(i)) => format!("{i}.0"),
        (_, Value::Int(i)) => format!("{i}LL"),
        (_, other) => panic!("{name}: {other} as {ty}"),
    };
    format!("    p.{m} = {rhs};\n")
}

/// Every operator's shipped incumbent, exported in both formats; the Python binding and
/// resolution, and the C++ resolution, agree with the harness on every shape.
#[test]
fn exported_plans_resolve_as_the_harness_does_on_every_shape() {
    let s = suite();
    let dir = testkit::scratch("plans");
    let mut py_jobs = Vec::new();
    let mut expected_py = String::new();
    let mut cpp_src = String::from("#include <cstdio>\n");
    let mut cpp_main = String::from("int main() {\n");
    let mut expected_cpp = String::new();
    let mut refused = Vec::new();
    let mut kernels: Vec<(&Problem, Kernel)> =
        s.problems.iter().map(|p| (p, shipped(&s, p))).collect();
    let shipped_count = kernels.len();
    kernels.extend(templates(&s));
    assert!(
        kernels.len() >= shipped_count + 15,
        "the templates are there"
    );
    let mut cpp_names = std::collections::BTreeSet::new();
    for (n, (p, k)) in kernels.iter().enumerate() {
        let (p, k) = (*p, k.clone());
        let c = match check(p, &k) {
            Ok(c) => c,
            Err(e) if n >= shipped_count => {
                eprintln!("not compared (its plan does not resolve on every shape): {e}");
                continue;
            }
            Err(e) => panic!("{}: {e}", p.name),
        };
        let plans: Vec<String> = p.shapes.iter().map(|sh| harness_plan(p, &c, sh)).collect();
        // C++: every operator (the caller gives the parameters).
        let files =
            generate(p, &k, Format::Cuda).unwrap_or_else(|e| panic!("{} (cuda): {e}", p.name));
        // One header per operator in the C++ program: the first kernel of each.
        let cpp = cpp_names.insert(p.name.clone());
        let dir = dir.join(n.to_string());
        assert_eq!(
            files.iter().map(|f| f.name.clone()).collect::<Vec<_>>(),
            [
                format!("{}.cu", p.name),
                format!("{}_launch.h", p.name),
                format!("{}_launch.cu", p.name)
            ]
        );
        assert_eq!(
            files[0].text, k.source,
            "the kernel file is the kernel as it is"
        );
        write(&dir, &files).unwrap();
        if cpp {
            cpp_src.push_str(&format!("#include \"{}/{}_launch.h\"\n", n, p.name));
        }
        for (sh, plan) in p.shapes.iter().zip(&plans).filter(|_| cpp) {
            let env = p.env(sh).unwrap();
            cpp_main.push_str(&format!("  {{\n    atrex_export_{}::Params p;\n", p.name));
            for (n, d) in &p.params {
                if let Some(v) = env.get(n) {
                    cpp_main.push_str(&cpp_assign(n, &d.ty, v));
                }
            }
            cpp_main.push_str(&format!(
                "    atrex_export_rt::Plan plan;\n    std::string why;\n    if (!atrex_export_{}::resolve(p, &plan, &why)) std::printf(\"ERR %s\\n\", why.c_str());\n    else std::printf(\"%s--\\n\", atrex_export_rt::describe(plan).c_str());\n  }}\n",
                p.name
            ));
            expected_cpp.push_str(plan);
            expected_cpp.push_str("--\n");
        }
        // Python: the operators whose forward can recover what the plan needs.
        match generate(p, &k, Format::AtrexBench) {
            Ok(files) => {
                let paths = write(&dir, &files).unwrap();
                py_jobs.push(serde_json::json!([paths[0], py_cases(p)]));
                for plan in &plans {
                    expected_py.push_str(plan);
                    expected_py.push_str("--\n");
                }
            }
            Err(e) => refused.push(format!("{}: {} ({e})", p.name, k.origin)),
        }
    }
    eprintln!("Python exports refused:\n  {}", refused.join("\n  "));
    for op in ["rms_norm", "silu_and_mul", "unified_attention"] {
        assert!(
            !refused.iter().any(|r| r.starts_with(&format!(
                "{op}: {}",
                shipped(&s, s.problem(op).unwrap()).origin
            ))),
            "{op} must export: {refused:?}"
        );
    }
    assert!(
        refused.iter().all(|r| r.contains("cannot know")),
        "a refusal says which name the forward cannot know: {refused:?}"
    );
    if let Some(py3) = testkit::python3() {
        std::fs::write(
            dir.join("cases.json"),
            serde_json::to_string(&py_jobs).unwrap(),
        )
        .unwrap();
        std::fs::write(dir.join("driver.py"), PY_STUB).unwrap();
        let out = testkit::run(
            Command::new(py3)
                .arg(dir.join("driver.py"))
                .arg(dir.join("cases.json")),
            "the Python driver",
        );
        compare("Python", &expected_py, &out);
    }
    if let Some(cxx) = testkit::cxx() {
        cpp_main.push_str("  return 0;\n}\n");
        let src = format!("#define ATREX_EXPORT_TENSOR_MAPS\n{cpp_src}{cpp_main}");
        let out = testkit::run_cpp(cxx, &dir, &src, &[]);
        compare("C++", &expected_cpp, &out);
    }
}

pub(super) fn compare(who: &str, want: &str, got: &str) {
    if want == got {
        return;
    }
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    let first = w
        .iter()
        .zip(&g)
        .position(|(a, b)| a != b)
        .unwrap_or(w.len().min(g.len()));
    panic!(
        "{who} resolves differently from the harness at line {first}:\n harness: {:?}\n {who}: {:?}\n({} lines against {})",
        w.get(first),
        g.get(first),
        w.len(),
        g.len()
    );
}

#[test]
fn a_plan_that_does_not_resolve_on_a_shape_is_refused_with_the_shape() {
    let s = suite();
    let p = s.problem("rms_norm").unwrap();
    let k = Kernel {
        source: "/* atrex:plan\n[[launch]]\nkernel = \"k\"\ngrid = [\"T\"]\nblock = [\"H\"]\nargs = [\"out\", \"x\"]\n*/\n".into(),
        origin: "wide.cu".into(),
    };
    let e = generate(p, &k, Format::AtrexBench).unwrap_err().to_string();
    assert!(
        e.starts_with("wide.cu: shape ") && e.contains("threads (1 to 1024)"),
        "{e}"
    );
    let k = Kernel {
        source: "/* atrex:plan\n[[launch]]\nkernel = \"k\"\ngrid = [\"T +\"]\nblock = [\"32\"]\nargs = []\n*/\n".into(),
        origin: "bad.cu".into(),
    };
    let e = generate(p, &k, Format::Cuda).unwrap_err().to_string();
    assert!(e.starts_with("bad.cu: launch plan line 4:"), "{e}");
    let k = Kernel {
        source: "/* atrex:plan\n[[launch]]\nkernel = \"k\"\ngrid = [\"T\"]\nblock = [\"32\"]\nargs = [\"out\", \"nowhere\"]\n*/\n".into(),
        origin: "arg.cu".into(),
    };
    let e = generate(p, &k, Format::AtrexBench).unwrap_err().to_string();
    assert!(
        e.contains("`nowhere` is not an input, output or scratch buffer"),
        "{e}"
    );
}

#[test]
fn the_python_file_holds_the_kernel_exactly_and_the_candidate_interface() {
    let s = suite();
    let p = s.problem("rms_norm").unwrap();
    let k = Kernel {
        source: "// a 'quoted' \\ backslash, \"\"\" and ''' and \r a CR, é\n".to_string()
            + &s.source
                .read_checked("rms_norm/baseline.cu")
                .unwrap()
                .unwrap(),
        origin: r#"C:\New\odd """quoted""" \N{x}.cu"#.into(),
    };
    let f = &generate(p, &k, Format::AtrexBench).unwrap()[0];
    assert_eq!(f.name, "rms_norm.py");
    assert!(f.text.contains("\nclass Model(nn.Module):\n"));
    assert!(
        f.text.contains("def __init__(self, *, eps):"),
        "eps is a constructor argument"
    );
    assert!(f.text.contains("def forward(self, x, weight):"));
    assert!(f.text.contains(&format!(
        "KERNEL_SHA256 = '{}'",
        crate::fingerprint::of_source(&k.source)
    )));
    let Some(py3) = testkit::python3() else {
        return;
    };
    let dir = testkit::scratch("source");
    let paths = write(&dir, std::slice::from_ref(f)).unwrap();
    // The module (docstring with the odd origin included) imports, and checks the source
    // against its sha256 when it does.
    let script = format!(
        "{PY_STUB_HEAD}\nimport importlib.util\nspec = importlib.util.spec_from_file_location('m', {path:?})\nm = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(m)\nimport hashlib\nprint(hashlib.sha256(m.KERNEL_SOURCE.encode()).hexdigest())\nprint(m.KERNEL_ORIGIN)\n",
        path = paths[0]
    );
    std::fs::write(dir.join("load.py"), script).unwrap();
    let out = testkit::run(
        Command::new(py3).arg(dir.join("load.py")),
        "importing the export",
    );
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some(crate::fingerprint::of_source(&k.source).as_str())
    );
    assert_eq!(lines.next(), Some(k.origin.as_str()));
}

const PY_STUB_HEAD: &str = "import sys, types\ntorch = types.ModuleType('torch')\nnn = types.ModuleType('torch.nn')\nnn.Module = object\ntorch.nn = nn\nsys.modules['torch'] = torch\nsys.modules['torch.nn'] = nn\n";
