//! `--format atrex-bench`: one Python file exposing `class Model`, the candidate interface of
//! the Atrex-Bench evaluator — `Model(**init_kwargs)`, `forward(**inputs)` with the operator's
//! inputs by name, the output tensor (a dict by name when there are several).
//!
//! The file holds the kernel's source as a string, the operator's tables (inputs, outputs, the
//! binding, the launch plan with every expression as a Python lambda over the environment `E`)
//! and the runtime (`runtime.py`), which compiles the source with NVRTC on first use, resolves
//! the plan once per shape and launches on the current PyTorch stream.

use super::bind::{Binding, Step};
use super::expressions::{python as py, python_str as s, python_value};
use super::{Checked, ExportError, File, Kernel};
use crate::contract::plan::{self, Arg, Interleave, L2Promotion, OobFill, PlanExpr, Swizzle};
use crate::suite::Problem;
use std::fmt::Write;

pub(crate) const RUNTIME: &str = include_str!("runtime.py");

/// Python's keywords: a forward's parameter cannot be one.
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "self", "try",
    "while", "with", "yield",
];

fn check_name(what: &str, name: &str) -> Result<(), ExportError> {
    if !super::is_identifier(name) || KEYWORDS.contains(&name) {
        return Err(ExportError::Unsupported {
            what: format!("{what} `{name}`"),
            why: "Atrex-Bench passes it by name, and it is not a Python parameter name".into(),
        });
    }
    Ok(())
}

/// The Python file of an export.
pub fn file(p: &Problem, k: &Kernel, c: &Checked, b: &Binding) -> Result<File, ExportError> {
    let init: Vec<&String> = p
        .params
        .iter()
        .filter(|(_, d)| d.source == "init" || d.source == "init+input")
        .map(|(n, _)| n)
        .collect();
    for n in &init {
        check_name("the constructor argument", n)?;
    }
    for t in &p.inputs {
        check_name("the input", &t.name)?;
    }
    let mut out = String::new();
    header(&mut out, p, k);
    out.push_str(RUNTIME);
    out.push('\n');
    tables(&mut out, p, c, b);
    model(&mut out, p, &init);
    Ok(File {
        name: format!("{}.py", p.name),
        text: out,
    })
}

fn header(out: &mut String, p: &Problem, k: &Kernel) {
    let sha = crate::fingerprint::of_source(&k.source);
    let _ = write!(
        out,
        r#""""{name} ({id}): {summary}, as an Atrex-Bench candidate.

Exported by atrex-tui {version} from {origin}.
The CUDA kernel below (KERNEL_SOURCE) is compiled with NVRTC on first use (cached in
~/.cache/atrex-export, or $ATREX_EXPORT_CACHE) and launched through the CUDA driver on the
current PyTorch stream; PyTorch only allocates the outputs and scratch buffers. Needs PyTorch,
the CUDA driver and NVRTC (libnvrtc: found through CUDA_HOME, the system, or the nvidia-*
wheels; $ATREX_NVRTC names it, $ATREX_CUDA_INCLUDE the CUDA headers).
"""

import ctypes
import ctypes.util
import glob
import hashlib
import math
import os
import sys

import torch
import torch.nn as nn

OPERATOR = {op}
KERNEL_ORIGIN = {origin_lit}
KERNEL_SHA256 = {sha_lit}
KERNEL_SOURCE = {source}
"#,
        name = p.name,
        id = doc(&p.id),
        summary = doc(&p.summary),
        version = env!("CARGO_PKG_VERSION"),
        origin = doc(&k.origin),
        op = s(&p.name),
        origin_lit = s(&k.origin),
        sha_lit = s(&sha),
        source = block_str(&k.source),
    );
    out.push_str(
        "if hashlib.sha256(KERNEL_SOURCE.encode()).hexdigest() != KERNEL_SHA256:\n    raise ImportError(\"%s: KERNEL_SOURCE was changed after export (sha256 differs)\" % OPERATOR)\n\n",
    );
}

/// Text for a docstring: backslashes and double quotes escaped, so that nothing ends it early
/// or starts an escape.
fn doc(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A triple-quoted Python literal holding exactly `src` (newlines kept for reading).
fn block_str(src: &str) -> String {
    let mut out = String::from("'''\\\n");
    for c in src.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' | '\t' => out.push(c),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push_str("'''");
    out
}

fn item(e: &PlanExpr) -> String {
    format!("({}, {}, lambda E: {})", s(&e.src), e.line, py(&e.expr))
}

fn items(es: &[PlanExpr]) -> String {
    let mut v: Vec<String> = es.iter().map(item).collect();
    if v.len() == 1 {
        v.push(String::new()); // a one-element tuple
    }
    format!("({})", v.join(", "))
}

/// The operator's tables: defines, tensors, the binding's steps, and the launch plan.
fn tables(out: &mut String, p: &Problem, c: &Checked, b: &Binding) {
    out.push_str("# -- the operator's tables -------------------------------------------------------------------\n\n");
    let defines: Vec<String> = c
        .defines
        .iter()
        .map(|(k, v)| format!("{}: {}", s(k), python_value(v)))
        .collect();
    let _ = writeln!(out, "_DEFINES = {{{}}}", defines.join(", "));
    let opts: Vec<String> = plan::define_options(&c.defines)
        .iter()
        .map(|o| s(o))
        .collect();
    let _ = writeln!(
        out,
        "_DEFINE_OPTIONS = ({}{})\n",
        opts.join(", "),
        if opts.len() == 1 { "," } else { "" }
    );

    tensor_tables(out, p, b);
    bind_tables(out, p, b);
    plan_tables(out, &c.plan);
}

/// `_INPUTS` (with the binding's checks) and `_OUTPUTS`.
fn tensor_tables(out: &mut String, p: &Problem, b: &Binding) {
    out.push_str("_INPUTS = (\n");
    for (i, t) in p.inputs.iter().enumerate() {
        let (dtype, dtype_expr) = dtype_fields(&t.dtype, b.dtype_checks.contains(&i));
        let checks: Vec<String> = b
            .checks
            .iter()
            .filter(|c| c.tensor == i)
            .map(|c| format!("({}, {}, lambda E: {})", c.dim, s(&c.src), py(&c.expr)))
            .collect();
        let _ = writeln!(
            out,
            "    {{'name': {}, 'rank': {}, 'dtype': {dtype}, 'dtype_expr': {dtype_expr}, 'checks': ({}{})}},",
            s(&t.name),
            t.shape.len(),
            checks.join(", "),
            if checks.len() == 1 { "," } else { "" }
        );
    }
    out.push_str(")\n\n_OUTPUTS = (\n");
    for t in &p.outputs {
        let (dtype, dtype_expr) = dtype_fields(&t.dtype, true);
        let dims: Vec<String> = t
            .shape
            .iter()
            .map(|d| format!("({}, {}, lambda E: {})", s(&d.src), d.line, py(&d.expr)))
            .collect();
        let _ = writeln!(
            out,
            "    {{'name': {}, 'dtype': {dtype}, 'dtype_expr': {dtype_expr}, 'dims': ({}{})}},",
            s(&t.name),
            dims.join(", "),
            if dims.len() == 1 { "," } else { "" }
        );
    }
    out.push_str(")\n\n");
}

/// `_BIND` (the steps that recover a shape from a forward's arguments) and `_HOLDS`.
fn bind_tables(out: &mut String, p: &Problem, b: &Binding) {
    out.push_str("_BIND = (\n");
    for st in &b.steps {
        let line = match st {
            Step::Init { name } => format!("('init', {})", s(name)),
            Step::Default { name, value } => {
                format!("('default', {}, {})", s(name), python_value(value))
            }
            Step::Dim {
                name,
                tensor,
                dim,
                inverse,
            } => format!(
                "('dim', {}, {}, lambda E: {})",
                s(name),
                s(&format!("dimension {dim} of `{}`", p.inputs[*tensor].name)),
                py(inverse)
            ),
            Step::Let { name, expr, src } => format!(
                "('let', {}, {}, lambda E: {})",
                s(name),
                s(&format!("{name} = {src}")),
                py(expr)
            ),
            Step::Dtype { name, tensor } => format!("('dtype', {}, {tensor})", s(name)),
            Step::Holds { name, tensor } => format!("('holds', {}, {tensor})", s(name)),
        };
        let _ = writeln!(out, "    {line},");
    }
    let holds: Vec<String> = b.holds().iter().map(|h| h.to_string()).collect();
    let _ = writeln!(
        out,
        ")\n\n_HOLDS = ({}{})\n",
        holds.join(", "),
        if holds.len() == 1 { "," } else { "" }
    );
}

/// `_TENSOR_MAPS`, `_SCRATCH` and `_LAUNCHES`: the launch plan.
fn plan_tables(out: &mut String, plan: &plan::Plan) {
    out.push_str("_TENSOR_MAPS = {\n");
    for t in &plan.tensor_maps {
        let esize = tma_esize(&t.dtype);
        let _ = writeln!(
            out,
            "    {}: {{'tensor': {}, 'dtype': {}, 'esize': {esize}, 'line': {}, 'dims': {}, 'strides': {}, 'box': {}, 'element_strides': {}, 'swizzle': {}, 'interleave': {}, 'l2_promotion': {}, 'oob_fill': {}}},",
            s(&t.name),
            s(&t.tensor),
            s(&t.dtype),
            t.line,
            items(&t.dims),
            if t.strides.is_empty() {
                "()".into()
            } else {
                items(&t.strides)
            },
            items(&t.boxes),
            if t.element_strides.is_empty() {
                "()".into()
            } else {
                items(&t.element_strides)
            },
            swizzle(t.swizzle),
            interleave(t.interleave),
            l2(t.l2_promotion),
            oob(t.oob_fill),
        );
    }
    out.push_str("}\n\n_SCRATCH = (\n");
    for sc in &plan.scratch {
        let _ = writeln!(
            out,
            "    ({}, {}, {}, {}),",
            s(&sc.name),
            s(&sc.dtype),
            item(&sc.size),
            if sc.zero { "True" } else { "False" }
        );
    }
    out.push_str(")\n\n_LAUNCHES = (\n");
    for l in &plan.launches {
        let args: Vec<String> = l
            .args
            .iter()
            .map(|a| match a {
                Arg::Buffer(n) if plan.tensor_maps.iter().any(|t| &t.name == n) => {
                    format!("('map', {})", s(n))
                }
                Arg::Buffer(n) => format!("('buffer', {})", s(n)),
                Arg::Scalar { src, expr, ty } => format!(
                    "('scalar', {}, {}, lambda E: {})",
                    s(src),
                    s(&format!("{ty:?}").to_lowercase()),
                    py(expr)
                ),
            })
            .collect();
        let _ = writeln!(
            out,
            "    {{\n        'kernel': {},\n        'line': {},\n        'grid': {},\n        'block': {},\n        'smem': {},\n        'cluster': {},\n        'cooperative': {},\n        'when': {},\n        'args': ({}{}),\n    }},",
            s(&l.kernel),
            l.line,
            items(&l.grid),
            items(&l.block),
            l.smem.as_ref().map(item).unwrap_or_else(|| "None".into()),
            l.cluster
                .as_deref()
                .map(items)
                .unwrap_or_else(|| "None".into()),
            if l.cooperative { "True" } else { "False" },
            l.when.as_ref().map(item).unwrap_or_else(|| "None".into()),
            args.join(", "),
            if args.len() == 1 { "," } else { "" }
        );
    }
    out.push_str(")\n\n");
}

/// `'dtype': 'bf16'` and no expression, or (for `=expr`) no static dtype and the expression
/// when the binding determines it.
fn dtype_fields(dtype: &str, with_expr: bool) -> (String, String) {
    match dtype.strip_prefix('=') {
        None => (s(dtype), "None".into()),
        Some(src) => match crate::suite::expr::parse(src.trim()) {
            Ok(e) if with_expr => (
                "None".into(),
                format!("({}, 0, lambda E: {})", s(src.trim()), py(&e)),
            ),
            _ => ("None".into(), "None".into()),
        },
    }
}

/// The element size the harness uses for a tensor map's dtype (`TensorMap::resolve`): the
/// suite's size of that name, else 1.
pub fn tma_esize(d: &str) -> usize {
    crate::contract::plan::tensor_map_dtype_size(d) as usize
}

pub fn swizzle(v: Swizzle) -> u8 {
    match v {
        Swizzle::None => 0,
        Swizzle::B32 => 1,
        Swizzle::B64 => 2,
        Swizzle::B128 => 3,
    }
}

pub fn interleave(v: Interleave) -> u8 {
    match v {
        Interleave::None => 0,
        Interleave::B16 => 1,
        Interleave::B32 => 2,
    }
}

pub fn l2(v: L2Promotion) -> u8 {
    match v {
        L2Promotion::None => 0,
        L2Promotion::B64 => 1,
        L2Promotion::B128 => 2,
        L2Promotion::B256 => 3,
    }
}

pub fn oob(v: OobFill) -> u8 {
    match v {
        OobFill::Zero => 0,
        OobFill::Nan => 1,
    }
}

fn coerce(ty: &str, name: &str) -> String {
    match ty {
        "int" => format!("int({name})"),
        "float" => format!("float({name})"),
        "bool" => format!("bool({name})"),
        "str" => format!("str({name})"),
        "int_list" => format!("[int(v) for v in {name}]"),
        _ => name.to_string(),
    }
}

fn model(out: &mut String, p: &Problem, init: &[&String]) {
    let mut params = Vec::new();
    let mut stores = Vec::new();
    for n in init {
        let d = &p.params[*n];
        let default = match (&d.default, d.source.as_str()) {
            (Some(v), _) => format!("={}", python_value(v)),
            (None, "init+input") => "=None".into(),
            _ => String::new(),
        };
        params.push(format!("{n}{default}"));
        stores.push(format!(
            "\n            {}: None if {n} is None else {},",
            s(n),
            coerce(&d.ty, n)
        ));
    }
    let sig = if params.is_empty() {
        String::new()
    } else {
        format!(", *, {}", params.join(", "))
    };
    let inputs: Vec<&str> = p.inputs.iter().map(|t| t.name.as_str()).collect();
    let describe = |t: &crate::suite::TensorSpec| {
        format!(
            "{} {} [{}]",
            t.name,
            t.dtype.trim_start_matches('='),
            t.shape
                .iter()
                .map(|d| d.src.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let ins: Vec<String> = p.inputs.iter().map(describe).collect();
    let outs: Vec<String> = p.outputs.iter().map(describe).collect();
    let ret = if p.outputs.len() == 1 {
        "the output tensor".to_string()
    } else {
        format!(
            "a dict of the outputs by name ({})",
            p.outputs
                .iter()
                .map(|o| o.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let _ = write!(
        out,
        r#"# -- the candidate interface ------------------------------------------------------------------


class Model(nn.Module):
    """{summary}.

    Inputs: {ins}.
    Outputs: {outs}; forward returns {ret}.
    """

    def __init__(self{sig}):
        super().__init__()
        self._atrex_init = {{{stores}}}
        self._atrex_prepared = {{}}

    def forward(self, {args}):
        return _run(self, ({args}{comma}))
"#,
        summary = doc(&p.summary),
        ins = doc(&ins.join("; ")),
        outs = doc(&outs.join("; ")),
        stores = if stores.is_empty() {
            String::new()
        } else {
            format!("{}\n        ", stores.concat())
        },
        args = inputs.join(", "),
        comma = if inputs.len() == 1 { "," } else { "" },
    );
}
