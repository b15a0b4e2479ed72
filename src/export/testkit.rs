//! Helpers of the export's tests: the tools they run when this machine has them (python3, a
//! C++ compiler), scratch folders, and the canonical text of values and resolved plans that the
//! Rust side, the Python runtime and the C++ runtime all print, so that they can be compared
//! line by line.

use crate::contract::plan::{ResolvedArg, ResolvedLaunch};
use crate::suite::expr::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh folder under the system's temporary folder.
pub fn scratch(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "atrex-export-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temporary folder");
    d
}

fn works(cmd: &str, arg: &str) -> bool {
    Command::new(cmd)
        .arg(arg)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// python3, when this machine has it (else the test says so on stderr and checks less).
pub fn python3() -> Option<&'static str> {
    if works("python3", "--version") {
        Some("python3")
    } else {
        eprintln!("SKIPPED PART: python3 is not on this machine; the Python side is not run");
        None
    }
}

/// A C++17 compiler, when this machine has one.
pub fn cxx() -> Option<&'static str> {
    for c in ["g++", "clang++", "c++"] {
        if works(c, "--version") {
            return Some(c);
        }
    }
    eprintln!(
        "SKIPPED PART: no C++ compiler (g++, clang++) on this machine; the C++ side is not run"
    );
    None
}

/// The stand-in CUDA headers of the tests (tests/fixtures/cuda_stub).
pub fn cuda_stub() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda_stub")
}

/// Runs a command; its stdout, or a panic with everything it printed.
pub fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Compiles a C++ program against the stand-in headers and runs it; its stdout.
pub fn run_cpp(cxx: &str, dir: &Path, source: &str, includes: &[&Path]) -> String {
    run_cpp_with(cxx, dir, source, includes, "-O0")
}

/// `run_cpp` with an optimisation level.
pub fn run_cpp_with(cxx: &str, dir: &Path, source: &str, includes: &[&Path], opt: &str) -> String {
    let src = dir.join("main.cpp");
    std::fs::write(&src, source).unwrap();
    let exe = dir.join("main");
    let mut c = Command::new(cxx);
    c.args(["-std=c++17", opt, "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-I")
        .arg(cuda_stub());
    for i in includes {
        c.arg("-I").arg(i);
    }
    run(&mut c, "compiling the C++ test program");
    run(&mut Command::new(&exe), "the C++ test program")
}

/// The canonical text of a value: `i:7`, `f:<bits>` (`f:nan`), `b:true`, `s:text`, `l:[…]`.
pub fn canon(v: &Value) -> String {
    match v {
        Value::Int(i) => format!("i:{i}"),
        Value::Float(x) if x.is_nan() => "f:nan".into(),
        Value::Float(x) => format!("f:{}", x.to_bits()),
        Value::Bool(b) => format!("b:{b}"),
        Value::Str(s) => format!("s:{s}"),
        Value::List(xs) => format!("l:[{}]", xs.iter().map(canon).collect::<Vec<_>>().join(",")),
    }
}

/// The Python of `canon`.
pub const PY_CANON: &str = r#"
import struct
def _canon(v):
    t = type(v)
    if t is bool:
        return 'b:true' if v else 'b:false'
    if t is int:
        return 'i:%d' % v
    if t is float:
        return 'f:nan' if v != v else 'f:%d' % struct.unpack('<Q', struct.pack('<d', v))[0]
    if t is str:
        return 's:' + v
    return 'l:[' + ','.join(_canon(x) for x in v) + ']'
"#;

/// The C++ of `canon`.
pub const CPP_CANON: &str = r#"
static std::string canon(const atrex_export_rt::Value& v) {
  using atrex_export_rt::Value;
  switch (v.k) {
    case Value::Int: return "i:" + std::to_string(v.i);
    case Value::Float: {
      if (std::isnan(v.f)) return "f:nan";
      unsigned long long bits = 0;
      std::memcpy(&bits, &v.f, 8);
      return "f:" + std::to_string(bits);
    }
    case Value::Bool: return v.b ? "b:true" : "b:false";
    case Value::Str: return "s:" + v.s;
    default: {
      std::string out = "l:[";
      for (size_t n = 0; n < v.l.size(); ++n) out += (n ? "," : "") + canon(v.l[n]);
      return out + "]";
    }
  }
}
"#;

/// The text `atrex_export_rt::describe` prints for a plan, from the harness's own resolution:
/// buffers by their index among inputs, outputs and scratch.
pub fn describe(
    launches: &[ResolvedLaunch],
    buffers: &[String],
    scratch: &[(String, u64, bool)],
    outputs: &[(String, String, Vec<usize>)],
) -> String {
    let mut o = String::new();
    for l in launches {
        o.push_str(&format!(
            "launch {} grid {} {} {} block {} {} {} smem {} cluster {}{}\n",
            l.kernel,
            l.grid[0],
            l.grid[1],
            l.grid[2],
            l.block[0],
            l.block[1],
            l.block[2],
            l.smem,
            match l.cluster {
                Some(c) => format!("{} {} {}", c[0], c[1], c[2]),
                None => "none".into(),
            },
            if l.cooperative { " cooperative" } else { "" }
        ));
        for a in &l.args {
            let line = match a {
                ResolvedArg::Buffer(n) => format!(
                    "arg buffer {}",
                    buffers
                        .iter()
                        .position(|b| b == n)
                        .expect("a buffer of the plan")
                ),
                ResolvedArg::TensorMap(t) => {
                    let mut m = format!("arg map {} dims", t.name);
                    let mut list = |label: &str, xs: Vec<u64>| {
                        m.push_str(label);
                        for x in xs {
                            m.push_str(&format!(" {x}"));
                        }
                    };
                    list("", t.dims.clone());
                    list(" strides", t.strides.clone());
                    list(" box", t.boxes.iter().map(|x| *x as u64).collect());
                    list(
                        " elem",
                        t.element_strides.iter().map(|x| *x as u64).collect(),
                    );
                    m
                }
                ResolvedArg::I32(v) => format!("arg i32 {v}"),
                ResolvedArg::I64(v) => format!("arg i64 {v}"),
                ResolvedArg::U32(v) => format!("arg u32 {v}"),
                ResolvedArg::U64(v) => format!("arg u64 {v}"),
                ResolvedArg::F32(v) => format!("arg f32 {}", v.to_bits()),
                ResolvedArg::F64(v) => format!("arg f64 {}", v.to_bits()),
            };
            o.push_str(&line);
            o.push('\n');
        }
    }
    for (n, e, z) in scratch {
        o.push_str(&format!("scratch {n} {e} {}\n", u8::from(*z)));
    }
    for (n, d, dims) in outputs {
        o.push_str(&format!("output {n} {d}"));
        for x in dims {
            o.push_str(&format!(" {x}"));
        }
        o.push('\n');
    }
    o
}
