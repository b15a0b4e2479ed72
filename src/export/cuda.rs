//! `--format cuda`: the kernel for a CUDA C++ code base — `OP.cu` (the kernel file as it is),
//! `OP_launch.h` (the operator's parameters and buffers, `resolve`, which computes every launch
//! of the plan from the parameters, and the declaration of `launch`) and `OP_launch.cu` (the
//! plan's defines, the kernel compiled in, and `launch`, which runs the plan on a stream).
//!
//! The header carries the runtime (`runtime.hpp`): the expression language evaluated as
//! `suite::expr` does, and the launching of a resolved plan through the CUDA runtime
//! (`cudaLaunchKernelExC`, clusters and large dynamic shared memory included; tensor maps with
//! the driver's `cuTensorMapEncodeTiled`).

use super::expressions::{cpp, cpp_str as s, cpp_value};
use super::python::{interleave, l2, oob, swizzle, tma_esize};
use super::{Checked, ExportError, File, Kernel};
use crate::contract::plan::{self, Arg, PlanExpr, ScalarType};
use crate::suite::Problem;
use std::fmt::Write;

pub(crate) const RUNTIME: &str = include_str!("runtime.hpp");

const CPP_KEYWORDS: &[&str] = &[
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char16_t",
    "char32_t",
    "char8_t",
    "class",
    "compl",
    "concept",
    "const",
    "const_cast",
    "consteval",
    "constexpr",
    "constinit",
    "continue",
    "co_await",
    "co_return",
    "co_yield",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "requires",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
];

/// A member name for a parameter or tensor: the name itself, `_` appended to a C++ keyword.
pub fn member(name: &str) -> Result<String, ExportError> {
    if !super::is_identifier(name) {
        return Err(ExportError::Unsupported {
            what: format!("the name `{name}`"),
            why: "it is not a C++ identifier".into(),
        });
    }
    Ok(if CPP_KEYWORDS.contains(&name) {
        format!("{name}_")
    } else {
        name.to_string()
    })
}

/// The three files of a `--format cuda` export.
pub fn files(p: &Problem, k: &Kernel, c: &Checked) -> Result<Vec<File>, ExportError> {
    if !super::is_identifier(&p.name) {
        return Err(ExportError::Unsupported {
            what: format!("the operator `{}`", p.name),
            why: "its name is not a C++ identifier".into(),
        });
    }
    Ok(vec![
        File {
            name: format!("{}.cu", p.name),
            text: k.source.clone(),
        },
        File {
            name: format!("{}_launch.h", p.name),
            text: header(p, k, c)?,
        },
        File {
            name: format!("{}_launch.cu", p.name),
            text: launcher(p, c),
        },
    ])
}

fn has_maps(c: &Checked) -> bool {
    used_maps(c).next().is_some()
}

/// The tensor maps some launch passes, in the plan's order.
fn used_maps(c: &Checked) -> impl Iterator<Item = &plan::TensorMap> {
    c.plan.tensor_maps.iter().filter(|t| {
        c.plan
            .launches
            .iter()
            .flat_map(|l| &l.args)
            .any(|a| matches!(a, Arg::Buffer(n) if n == &t.name))
    })
}

/// The unique kernels of the plan, in launch order.
fn kernels(c: &Checked) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in &c.plan.launches {
        if !out.contains(&l.kernel) {
            out.push(l.kernel.clone());
        }
    }
    out
}

fn cpp_type(ty: &str) -> Option<(&'static str, &'static str)> {
    Some(match ty {
        "int" => ("int64_t", "0"),
        "float" => ("double", "0.0"),
        "bool" => ("bool", "false"),
        "str" => ("std::string", ""),
        "int_list" => ("std::vector<int64_t>", ""),
        _ => return None,
    })
}

fn header(p: &Problem, k: &Kernel, c: &Checked) -> Result<String, ExportError> {
    let op = &p.name;
    let maps = has_maps(c);
    let mut o = String::new();
    let _ = write!(
        o,
        "// {op} ({id}): {summary} — the launcher of {op}.cu.\n\
         // Exported by atrex-tui {ver} from {origin}.\n\
         //\n\
         // Compile {op}_launch.cu with nvcc (-std=c++17 -gencode arch=compute_90a,code=sm_90a, or the GPU's architecture) and\n\
         // link the CUDA runtime{driver}. Where the kernel runs:\n\
         //\n\
         //   atrex_export_{op}::Params p;      // the operator's parameters (below)\n\
         //   atrex_export_{op}::Buffers b;     // device pointers of the inputs and outputs\n\
         //   size_t bytes = atrex_export_{op}::workspace_bytes(p);  // scratch; 0 when none\n\
         //   std::string why;\n\
         //   cudaError_t e = atrex_export_{op}::launch(p, b, workspace, bytes, stream, &why);\n\
         //\n\
         // `resolve` gives the plan (grids, blocks, shared memory, arguments, output shapes) without\n\
         // launching; `atrex_export_rt::describe` prints it. Tensors are packed, row-major.\n\
         #pragma once\n\n\
         #include <cstddef>\n#include <cstdint>\n#include <string>\n#include <vector>\n\n",
        id = p.id,
        summary = p.summary,
        ver = env!("CARGO_PKG_VERSION"),
        origin = k.origin,
        driver = if maps {
            " and the driver (-lcuda: the plan encodes tensor maps)"
        } else {
            ""
        },
    );
    o.push_str(RUNTIME);
    let _ = write!(
        o,
        "\nnamespace atrex_export_{op} {{\nnamespace rt = ::atrex_export_rt;\n\n// The operator's parameters (problems/{op}/problem.toml).\nstruct Params {{\n"
    );
    for (name, d) in &p.params {
        let (ty, zero) = cpp_type(&d.ty).ok_or_else(|| ExportError::Unsupported {
            what: format!("the parameter `{name}`"),
            why: format!("its type `{}` has no C++ counterpart", d.ty),
        })?;
        let init = match &d.default {
            Some(v) => default_init(v, &d.ty),
            None if zero.is_empty() => String::new(),
            None => format!(" = {zero}"),
        };
        let _ = writeln!(
            o,
            "  {ty} {}{init};  // {} ({}){}",
            member(name)?,
            d.ty,
            d.source,
            if d.doc.is_empty() {
                String::new()
            } else {
                format!(": {}", d.doc)
            }
        );
    }
    o.push_str("};\n\n// Device pointers of the inputs and outputs, by name.\nstruct Buffers {\n");
    for t in &p.inputs {
        let _ = writeln!(
            o,
            "  {}void* {} = nullptr;  // input{}, {} [{}]",
            if t.inplace { "" } else { "const " },
            member(&t.name)?,
            if t.inplace { " (updated in place)" } else { "" },
            t.dtype.trim_start_matches('='),
            t.shape
                .iter()
                .map(|d| d.src.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for t in &p.outputs {
        let _ = writeln!(
            o,
            "  void* {} = nullptr;  // output, {} [{}]",
            member(&t.name)?,
            t.dtype.trim_start_matches('='),
            t.shape
                .iter()
                .map(|d| d.src.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    o.push_str("};\n\n");
    resolve_fn(&mut o, p, c)?;
    let _ = write!(
        o,
        "// The bytes of scratch memory `launch` needs (0 when the plan cannot be resolved).\n\
         inline size_t workspace_bytes(const Params& p) {{\n  rt::Plan plan;\n  std::string why;\n  return resolve(p, &plan, &why) ? static_cast<size_t>(plan.workspace_bytes) : 0;\n}}\n\n\
         // Launches the plan on `stream` (defined in {op}_launch.cu). On an error, `error` says why.\n\
         cudaError_t launch(const Params& p, const Buffers& b, void* workspace, size_t workspace_bytes,\n                   cudaStream_t stream, std::string* error = nullptr);\n\n\
         }}  // namespace atrex_export_{op}\n"
    );
    Ok(o)
}

fn default_init(v: &crate::suite::expr::Value, ty: &str) -> String {
    use crate::suite::expr::Value;
    match (v, ty) {
        (Value::List(xs), _) => format!(
            "{{{}}}",
            xs.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (Value::Str(t), _) => format!(" = {}", s(t)),
        (Value::Bool(b), _) => format!(" = {b}"),
        (Value::Int(i), "float") => format!(" = {i}.0"),
        (Value::Int(i), _) => format!(" = {i}"),
        (Value::Float(x), _) => format!(" = {}", super::expressions::cpp_double(*x)),
    }
}

fn param_value(name: &str, ty: &str) -> Result<String, ExportError> {
    let m = member(name)?;
    Ok(match ty {
        "int" => format!("rt::Value::I(static_cast<long long>(p.{m}))"),
        "float" => format!("rt::Value::F(p.{m})"),
        "bool" => format!("rt::Value::B(p.{m})"),
        "str" => format!("rt::Value::S(p.{m})"),
        _ => format!("rt::Value::Ints(p.{m})"),
    })
}

const TRY: &str = "  if (c.failed) return c.report(error);\n";

/// `target = size(expr)`, with the error context set: `u32` sizes (grids, blocks, shared
/// memory, clusters, boxes) or `u64` (tensor-map extents and strides, scratch elements).
fn eval(
    o: &mut String,
    at: &str,
    target: &str,
    e: &PlanExpr,
    bits: u32,
) -> Result<(), ExportError> {
    let (ty, lim) = if bits == 32 {
        ("unsigned int", "0xFFFFFFFFULL")
    } else {
        ("unsigned long long", "~0ULL")
    };
    let _ = writeln!(o, "  c.at({});", s(at));
    let _ = writeln!(
        o,
        "  {target} = static_cast<{ty}>(rt::size(c, {}, {lim}));",
        cpp(&e.expr)?
    );
    Ok(())
}

/// `resolve` of the launcher: the plan for a set of parameters, as the harness resolves it
/// (each part below writes its piece of the function, in order).
fn resolve_fn(o: &mut String, p: &Problem, c: &Checked) -> Result<(), ExportError> {
    o.push_str(
        "// The plan for a set of parameters: every launch with its grid, block, shared memory and\n\
         // arguments, the tensor maps, the scratch buffers in the workspace and the outputs' shapes.\n\
         inline bool resolve(const Params& p, rt::Plan* plan, std::string* error) {\n  rt::Ctx c;\n  rt::Env E;\n",
    );
    resolve_tensors(o, p)?;
    let buffers = resolve_scratch(o, p, c)?;
    o.push_str("  rt::lay_out(*plan);\n");
    resolve_whens(o, c)?;
    let maps: Vec<&plan::TensorMap> = used_maps(c).collect();
    resolve_tensor_maps(o, c, &maps, &buffers)?;
    resolve_launches(o, c, &maps, &buffers)?;
    if let Some(first) = c
        .plan
        .launches
        .first()
        .filter(|_| c.plan.launches.iter().any(|l| l.when.is_some()))
    {
        let _ = writeln!(
            o,
            "  if (plan->launches.empty()) {{\n    c.at({});\n    c.fail(\"no launch runs on this shape: every `when` is false\");\n    return c.report(error);\n  }}",
            s(&format!("launch plan line {}", first.line))
        );
    }
    o.push_str("  return true;\n}\n\n");
    Ok(())
}

/// The parameters, the `let`s and every input's and output's dtype and dimensions.
fn resolve_tensors(o: &mut String, p: &Problem) -> Result<(), ExportError> {
    for (name, d) in &p.params {
        let _ = writeln!(o, "  E[{}] = {};", s(name), param_value(name, &d.ty)?);
    }
    for (name, e) in &p.lets {
        let _ = writeln!(o, "  c.at({});", s(&format!("let {name} = {}", e.src)));
        let _ = writeln!(o, "  E[{}] = {};", s(name), cpp(&e.expr)?);
        o.push_str(TRY);
    }
    for (kind, ts) in [("inputs", &p.inputs), ("outputs", &p.outputs)] {
        for t in ts {
            let _ = writeln!(o, "  {{\n    rt::Tensor t;\n    t.name = {};", s(&t.name));
            match t.dtype.strip_prefix('=') {
                None => {
                    let _ = writeln!(o, "    t.dtype = {};", s(&t.dtype));
                }
                Some(src) => {
                    let e = crate::suite::expr::parse(src.trim()).map_err(|x| {
                        ExportError::Unsupported {
                            what: format!("the dtype of `{}`", t.name),
                            why: x.to_string(),
                        }
                    })?;
                    let _ = writeln!(
                        o,
                        "    c.at({});\n    rt::Value d = {};\n    if (!c.failed && d.k != rt::Value::Str) c.fail(\"gives \" + rt::show(d) + \", not a dtype\");\n    t.dtype = d.s;",
                        s(&format!("the dtype of `{}`", t.name)),
                        cpp(&e)?
                    );
                }
            }
            for (j, d) in t.shape.iter().enumerate() {
                let _ = writeln!(
                    o,
                    "    c.at({});\n    t.dims.push_back(static_cast<long long>(rt::size(c, {}, 0x7FFFFFFFFFFFFFFFULL)));",
                    s(&format!("dimension {j} of `{}`: `{}`", t.name, d.src)),
                    cpp(&d.expr)?
                );
            }
            let _ = writeln!(
                o,
                "    if (c.failed) return c.report(error);\n    t.bytes = rt::dtype_size(t.dtype);\n    for (long long n : t.dims) t.bytes *= static_cast<unsigned long long>(n);\n    plan->{kind}.push_back(t);\n  }}"
            );
        }
    }
    Ok(())
}

/// The defines, and the scratch buffers; the buffers by name (inputs, outputs, scratch).
fn resolve_scratch(o: &mut String, p: &Problem, c: &Checked) -> Result<Vec<String>, ExportError> {
    // The plan's environment: the shape's, the defines winning.
    for (k, v) in &c.defines {
        let _ = writeln!(o, "  E[{}] = {};", s(k), cpp_value(v)?);
    }
    // Buffers by name: inputs, outputs, scratch.
    let mut buffers: Vec<String> = p
        .inputs
        .iter()
        .chain(&p.outputs)
        .map(|t| t.name.clone())
        .collect();
    for sc in &c.plan.scratch {
        let _ = writeln!(
            o,
            "  {{\n    rt::Scratch sc;\n    sc.name = {};\n    sc.dtype = {};\n    sc.zero = {};",
            s(&sc.name),
            s(&sc.dtype),
            sc.zero
        );
        eval(
            o,
            &format!("launch plan line {}: scratch {}", sc.size.line, sc.name),
            "    sc.elements",
            &sc.size,
            64,
        )?;
        let _ = writeln!(
            o,
            "    if (c.failed) return c.report(error);\n    sc.bytes = (sc.elements > 0 ? sc.elements : 1) * {};\n    plan->scratch.push_back(sc);\n  }}",
            crate::suite::dtype_size(&sc.dtype).unwrap_or(1)
        );
        buffers.push(sc.name.clone());
    }
    Ok(buffers)
}

/// Every launch's `when`, before any tensor map.
fn resolve_whens(o: &mut String, c: &Checked) -> Result<(), ExportError> {
    // Every launch's `when` first: a tensor map is built only where a launch that uses it runs
    // (as the harness resolves a map only for a launch that runs).
    for (i, l) in c.plan.launches.iter().enumerate() {
        if let Some(w) = &l.when {
            let _ = writeln!(
                o,
                "  c.at({});\n  const bool run_{i} = rt::when(c, {});\n  if (c.failed) return c.report(error);",
                s(&format!(
                    "launch plan line {}: kernel {}: when `{}`",
                    w.line, l.kernel, w.src
                )),
                cpp(&w.expr)?
            );
        }
    }
    Ok(())
}

/// The tensor maps the launches use, each where a launch that uses it runs.
fn resolve_tensor_maps(
    o: &mut String,
    c: &Checked,
    maps: &[&plan::TensorMap],
    buffers: &[String],
) -> Result<(), ExportError> {
    for t in maps {
        let buffer = buffers.iter().position(|b| b == &t.tensor).unwrap_or(0);
        let users: Vec<(usize, &plan::Launch)> = c
            .plan
            .launches
            .iter()
            .enumerate()
            .filter(|(_, l)| {
                l.args
                    .iter()
                    .any(|a| matches!(a, Arg::Buffer(n) if n == &t.name))
            })
            .collect();
        let condition = if users.iter().all(|(_, l)| l.when.is_some()) {
            let runs: Vec<String> = users.iter().map(|(i, _)| format!("run_{i}")).collect();
            Some(runs.join(" || "))
        } else {
            None
        };
        let open = match &condition {
            Some(cond) => format!("if ({cond}) "),
            None => String::new(),
        };
        let _ = writeln!(
            o,
            "  {open}{{\n    rt::TensorMap t;\n    t.name = {};\n    t.buffer = {buffer};\n    t.dtype = {};\n    t.esize = {};\n    t.rank = {};\n    t.line = {};\n    t.swizzle = {};\n    t.interleave = {};\n    t.l2_promotion = {};\n    t.oob_fill = {};",
            s(&t.name),
            s(&t.dtype),
            tma_esize(&t.dtype),
            t.dims.len(),
            t.line,
            swizzle(t.swizzle),
            interleave(t.interleave),
            l2(t.l2_promotion),
            oob(t.oob_fill),
        );
        let at = |what: &str, e: &PlanExpr| {
            format!(
                "launch plan line {}: tensor map {}: {what} `{}`",
                t.line, t.name, e.src
            )
        };
        for (j, e) in t.dims.iter().enumerate() {
            eval(o, &at("dims", e), &format!("    t.dims[{j}]"), e, 64)?;
        }
        for (j, e) in t.strides.iter().enumerate() {
            eval(o, &at("strides", e), &format!("    t.strides[{j}]"), e, 64)?;
        }
        for (j, e) in t.boxes.iter().enumerate() {
            eval(o, &at("box", e), &format!("    t.box[{j}]"), e, 32)?;
        }
        if t.element_strides.is_empty() {
            let _ = writeln!(
                o,
                "    for (int n = 0; n < t.rank; ++n) t.element_strides[n] = 1;"
            );
        }
        for (j, e) in t.element_strides.iter().enumerate() {
            eval(
                o,
                &at("element_strides", e),
                &format!("    t.element_strides[{j}]"),
                e,
                32,
            )?;
        }
        let _ = writeln!(
            o,
            "    c.at({});\n    rt::check_tensor_map(c, t, {});\n    if (c.failed) return c.report(error);\n    plan->tensor_maps.push_back(t);\n  }}",
            s(&format!(
                "launch plan line {}: tensor map {}",
                t.line, t.name
            )),
            t.strides.is_empty()
        );
        if condition.is_some() {
            // Its place kept (launches name maps by index), neither checked nor encoded.
            let _ = writeln!(
                o,
                "  else {{\n    rt::TensorMap t;\n    t.name = {};\n    t.line = {};\n    t.skipped = true;\n    plan->tensor_maps.push_back(t);\n  }}",
                s(&t.name),
                t.line
            );
        }
    }
    Ok(())
}

/// The launches: grid, block, shared memory, cluster and arguments.
fn resolve_launches(
    o: &mut String,
    c: &Checked,
    maps: &[&plan::TensorMap],
    buffers: &[String],
) -> Result<(), ExportError> {
    let ks = kernels(c);
    for (i, l) in c.plan.launches.iter().enumerate() {
        let at = |what: &str, e: &PlanExpr| {
            format!(
                "launch plan line {}: kernel {}: {what} `{}`",
                l.line, l.kernel, e.src
            )
        };
        match &l.when {
            Some(_) => {
                let _ = writeln!(o, "  if (run_{i}) {{");
            }
            None => o.push_str("  {\n"),
        }
        let _ = writeln!(
            o,
            "    rt::Launch L;\n    L.kernel = {};\n    L.name = {};\n    L.line = {};",
            ks.iter().position(|k| k == &l.kernel).unwrap_or(0),
            s(&l.kernel),
            l.line
        );
        for (j, e) in l.grid.iter().enumerate() {
            eval(o, &at("grid", e), &format!("    L.grid[{j}]"), e, 32)?;
        }
        for (j, e) in l.block.iter().enumerate() {
            eval(o, &at("block", e), &format!("    L.block[{j}]"), e, 32)?;
        }
        if let Some(e) = &l.smem {
            eval(o, &at("smem", e), "    L.smem", e, 32)?;
        }
        if l.cooperative {
            o.push_str("    L.cooperative = true;\n");
        }
        if let Some(cl) = &l.cluster {
            o.push_str("    L.has_cluster = true;\n");
            for (j, e) in cl.iter().enumerate() {
                eval(o, &at("cluster", e), &format!("    L.cluster[{j}]"), e, 32)?;
            }
        }
        for a in &l.args {
            match a {
                Arg::Buffer(n) => {
                    if let Some(m) = maps.iter().position(|t| &t.name == n) {
                        let _ = writeln!(o, "    L.args.push_back(rt::map_arg({m}));  // {n}");
                    } else {
                        let b = buffers.iter().position(|b| b == n).unwrap_or(0);
                        let _ = writeln!(o, "    L.args.push_back(rt::buffer_arg({b}));  // {n}");
                    }
                }
                Arg::Scalar { src, expr, ty } => {
                    let kind = match ty {
                        ScalarType::I32 => "rt::ArgI32",
                        ScalarType::I64 => "rt::ArgI64",
                        ScalarType::U32 => "rt::ArgU32",
                        ScalarType::U64 => "rt::ArgU64",
                        ScalarType::F32 => "rt::ArgF32",
                        ScalarType::F64 => "rt::ArgF64",
                    };
                    let _ = writeln!(
                        o,
                        "    c.at({});\n    L.args.push_back(rt::scalar_arg(c, {}, {kind}));",
                        s(&format!(
                            "launch plan line {}: kernel {}: argument `{src}`",
                            l.line, l.kernel
                        )),
                        cpp(expr)?
                    );
                }
            }
        }
        let _ = writeln!(
            o,
            "    c.at({});\n    rt::check_launch(c, L);\n    if (c.failed) return c.report(error);\n    plan->launches.push_back(L);\n  }}",
            s(&format!("launch plan line {}: kernel {}", l.line, l.kernel))
        );
    }
    Ok(())
}

fn launcher(p: &Problem, c: &Checked) -> String {
    let op = &p.name;
    let maps = has_maps(c);
    let mut o = String::new();
    let _ = write!(
        o,
        "// {op}: `launch` of {op}_launch.h, with the kernel of {op}.cu compiled in.\n\
         //   nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -c {op}_launch.cu{lcuda}\n\
         // The kernel is compiled as atrex-tui's harness compiles it with NVRTC, with the plan's\n\
         // defines; nvcc does not make unannotated functions device functions as NVRTC does\n\
         // (--device-as-default-execution-space): every device function must say __device__.\n",
        lcuda = if maps { "   (link with -lcuda)" } else { "" },
    );
    if maps {
        o.push_str("#define ATREX_EXPORT_TENSOR_MAPS\n");
    }
    let _ = writeln!(o, "#include \"{op}_launch.h\"\n");
    let defines: Vec<(String, String)> = plan::define_options(&c.defines)
        .iter()
        .filter_map(|d| {
            let d = d.strip_prefix("-D")?;
            let (k, v) = d.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect();
    // nvcc (unlike NVRTC) does not macro-expand `#pragma unroll NAME`: it looks NAME up as an
    // integral constant, so an integer define is also a constant of that name, declared before
    // the macro exists (after it, the macro would rewrite the declaration).
    for (k, v) in &defines {
        if v.parse::<i32>().is_ok() {
            let _ = writeln!(o, "constexpr int {k} = {v};");
        }
    }
    for (k, v) in &defines {
        let _ = writeln!(o, "#define {k} {v}");
    }
    let _ = writeln!(o, "#include \"{op}.cu\"");
    let kernels: Vec<String> = kernels(c)
        .iter()
        .map(|k| format!("reinterpret_cast<const void*>(&::{k})"))
        .collect();
    let buffers: Vec<String> = p
        .inputs
        .iter()
        .chain(&p.outputs)
        .map(|t| format!("b.{}", member(&t.name).unwrap_or_else(|_| t.name.clone())))
        .collect();
    let _ = write!(
        o,
        "\nnamespace atrex_export_{op} {{\n\n\
         cudaError_t launch(const Params& p, const Buffers& b, void* workspace, size_t workspace_bytes,\n                   cudaStream_t stream, std::string* error) {{\n\
         \x20 rt::Plan plan;\n\
         \x20 if (!resolve(p, &plan, error)) return cudaErrorInvalidValue;\n\
         \x20 const void* const kernels[] = {{{}}};\n\
         \x20 const void* const buffers[] = {{{}}};\n\
         \x20 return rt::launch_plan(plan, buffers, workspace, workspace_bytes, stream, kernels, {}, error);\n\
         }}\n\n}}  // namespace atrex_export_{op}\n",
        kernels.join(", "),
        buffers.join(", "),
        if maps {
            "&rt::encode_tensor_map"
        } else {
            "nullptr"
        },
    );
    o
}
