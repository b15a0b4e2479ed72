//! Kernels that leave the tool (docs/export.md): an operator's kernel with its launch plan,
//! written as an Atrex-Bench candidate (one Python file exposing `class Model`, the kernel
//! compiled with NVRTC and launched through the CUDA driver, both through ctypes) or as the
//! kernel file with a C++ launcher for a CUDA code base.
//!
//! Layout: `bind` (how a forward recovers the shape from its arguments), `expressions` (plan and
//! problem expressions into Python and C++), `python` and `cuda` (the two formats; each carries
//! a runtime, `runtime.py` and `runtime.hpp`, that evaluates exactly as `suite::expr` does).
//!
//! Invariants: an export is refused, with the reason, unless the plan resolves on every shape
//! of the operator (tensor maps inside their buffers included) and, for the Python format, the
//! binding gives every name the plan needs the value the harness uses on every shape. Nothing is
//! written unless every file of the export could be generated.

pub mod bind;
pub mod cuda;
pub mod expressions;
pub mod python;

use crate::contract::plan::{self, Plan, PlanError};
use crate::suite::expr::{Env, Value};
use crate::suite::{Problem, Suite, Workspace};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why an export could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{kernel}: launch plan line {}: {}", err.line, err.msg)]
    Plan { kernel: String, err: PlanError },
    #[error("{kernel}: shape {shape}: {msg}")]
    Shape {
        kernel: String,
        shape: u32,
        msg: String,
    },
    #[error("the exported forward cannot know `{name}`: {why}")]
    Unrecoverable { name: String, why: String },
    #[error("shape {shape}: the forward's binding is wrong: {msg}")]
    Binding { shape: u32, msg: String },
    #[error("{what} cannot be exported: {why}")]
    Unsupported { what: String, why: String },
    /// The incumbent the standing names cannot be read.
    #[error("{0}")]
    Kernel(String),
    #[error(transparent)]
    Baseline(#[from] crate::contract::kernels::KernelError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Why a shape's environment, buffers or binding could not be had for an export.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShapeError {
    /// The problem's parameters, dimensions or dtypes on the shape (its file and line named).
    #[error(transparent)]
    Problem(#[from] crate::suite::LoadError),
    #[error("launch plan {0}")]
    Plan(#[from] PlanError),
    /// A binding step's expression.
    #[error(transparent)]
    Expr(#[from] crate::suite::expr::ExprError),
    #[error("shape {shape} gives no `{name}`")]
    NoValue { shape: u32, name: String },
}

/// The output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One Python file exposing `class Model`, the candidate interface of Atrex-Bench.
    AtrexBench,
    /// The kernel file with a C++ launcher (`OP_launch.h`, `OP_launch.cu`).
    Cuda,
}

/// A kernel to export: its source and where it came from.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub source: String,
    /// "the standing's incumbent (session …, rev 3; H200)", "problems/rms_norm/baseline.cu".
    pub origin: String,
}

/// One file of an export: its name in the output folder and its contents.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    pub name: String,
    pub text: String,
}

/// The plan of a kernel and its defines, checked on every shape of the operator.
pub struct Checked {
    pub plan: Plan,
    pub defines: BTreeMap<String, Value>,
}

/// Parses the plan and resolves it on every shape (tensor maps checked against the sizes of
/// the buffers they map), as the harness would before launching.
pub fn check(p: &Problem, kernel: &Kernel) -> Result<Checked, ExportError> {
    let name = kernel.origin.clone();
    let plan = plan::parse(&kernel.source).map_err(|err| ExportError::Plan {
        kernel: name.clone(),
        err,
    })?;
    let defines = plan.defines.clone();
    for s in &p.shapes {
        let fail = |msg: String| ExportError::Shape {
            kernel: name.clone(),
            shape: s.id,
            msg,
        };
        let env = p.env(s).map_err(|e| fail(e.to_string()))?;
        let sizes = buffer_bytes(p, &plan, &env).map_err(|e| fail(e.to_string()))?;
        let penv = plan.env(&env, &defines);
        let launches = plan
            .resolve(&penv, &|n| sizes.contains_key(n))
            .map_err(|e| fail(format!("launch plan line {}: {}", e.line, e.msg)))?;
        for l in &launches {
            for a in &l.args {
                if let plan::ResolvedArg::TensorMap(t) = a {
                    t.check_fits(sizes[&t.tensor])
                        .map_err(|e| fail(format!("launch plan line {}: {}", e.line, e.msg)))?;
                }
            }
        }
    }
    Ok(Checked { plan, defines })
}

/// The bytes of every buffer a plan can name on a shape: inputs, outputs, scratch.
pub fn buffer_bytes(
    p: &Problem,
    plan: &Plan,
    env: &Env,
) -> Result<BTreeMap<String, u64>, ShapeError> {
    let mut out = BTreeMap::new();
    for t in p.inputs.iter().chain(&p.outputs) {
        let dims = p.tensor_dims(t, env)?;
        let dtype = p.tensor_dtype(t, env)?;
        let esize = crate::suite::dtype_size(&dtype).unwrap_or(1) as u64;
        out.insert(
            t.name.clone(),
            dims.iter().map(|d| *d as u64).product::<u64>() * esize,
        );
    }
    let penv = plan.env(env, &plan.defines);
    for (s, n) in plan.scratch_sizes(&penv)? {
        let esize = crate::suite::dtype_size(&s.dtype).unwrap_or(1) as u64;
        out.insert(s.name.clone(), n.max(1) * esize);
    }
    Ok(out)
}

/// The files of an export.
pub fn generate(p: &Problem, kernel: &Kernel, format: Format) -> Result<Vec<File>, ExportError> {
    let checked = check(p, kernel)?;
    match format {
        Format::AtrexBench => {
            let b = bind::bind(p, &checked.plan)?;
            bind::verify(p, &b)?;
            Ok(vec![python::file(p, kernel, &checked, &b)?])
        }
        Format::Cuda => cuda::files(p, kernel, &checked),
    }
}

/// The paths in `dir` that writing `files` would replace: everything already there under one of
/// their names (a file, a folder or anything else).
pub fn existing(dir: &Path, files: &[File]) -> Vec<PathBuf> {
    files
        .iter()
        .map(|f| dir.join(&f.name))
        .filter(|p| p.symlink_metadata().is_ok())
        .collect()
}

/// Writes the files into `dir` (created if missing); returns their paths.
pub fn write(dir: &Path, files: &[File]) -> Result<Vec<PathBuf>, ExportError> {
    std::fs::create_dir_all(dir).map_err(|source| ExportError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    for f in files {
        let path = dir.join(&f.name);
        crate::standing::store::write_atomic(&path, f.text.as_bytes()).map_err(|source| {
            ExportError::Io {
                path: path.clone(),
                source,
            }
        })?;
        out.push(path);
    }
    Ok(out)
}

/// The operator's incumbent on a hardware profile: the standing's kernel (the workspace's
/// record over the shipped one), else the suite's baseline.cu.
pub fn incumbent(
    ws: &Workspace,
    suite: &Suite,
    p: &Problem,
    hardware: &str,
) -> Result<Kernel, ExportError> {
    let store = crate::standing::Store::load(ws, suite);
    let view = store.view(hardware, None);
    if let Some(e) = view.entry(&p.name) {
        return match &e.source {
            Some(src) => {
                let label = e.record.origin.label();
                let from = if label == e.record.kernel {
                    String::new()
                } else {
                    format!(", from {label}")
                };
                Ok(Kernel {
                    source: src.clone(),
                    origin: format!(
                        "{} (the {} standing's incumbent on {hardware}{from})",
                        e.record.kernel,
                        e.layer.name()
                    ),
                })
            }
            None => Err(ExportError::Kernel(format!(
                "{}: the standing names {} as the incumbent on {hardware}, which cannot be read",
                p.name, e.record.kernel
            ))),
        };
    }
    let b = crate::contract::kernels::suite_kernel(suite, p, "baseline.cu")?;
    Ok(Kernel {
        source: b.code,
        origin: format!(
            "problems/{}/baseline.cu (no standing record on {hardware})",
            p.name
        ),
    })
}

/// A name usable as an identifier of the generated code (letters, digits, `_`, not first a
/// digit).
pub fn is_identifier(s: &str) -> bool {
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;
