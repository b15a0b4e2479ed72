//! A job built from a problem: each shape's parameters, tensors (sizes, generators, checks) and
//! T_SOL on the hardware in use, fresh seeds, the tolerance, the structured draws and the
//! watchdog.
//!
//! Invariants: seeds are fresh on every call (never the same inputs twice); a generator is
//! resolved against the shape's own parameters, and a malformed one is an error naming it,
//! never a default.

use super::protocol::*;
use super::{compare, draws};
use crate::suite::expr::{self, ExprError};
use crate::suite::hardware::HardwareProfile;
use crate::suite::roofline::NoPeak;
use crate::suite::{LoadError, Problem, TensorSpec};

/// Why a job could not be built from a problem.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobError {
    /// A tensor's generator (`generator`, as the problem writes it) does not parse or evaluate.
    #[error("generator `{generator}`: {source}")]
    Generator {
        generator: String,
        source: ExprError,
    },
    #[error("generator `{generator}`: argument {value} is not a number")]
    GeneratorArgument { generator: String, value: String },
    #[error("generator `{generator}` is not of the form name(args)")]
    GeneratorForm { generator: String },
    #[error("{operator} has no shape {shape}")]
    NoShape { operator: String, shape: u32 },
    /// A shape's parameters, tensors or work (the problem file's line named).
    #[error(transparent)]
    Problem(#[from] LoadError),
    #[error(transparent)]
    Sol(#[from] NoPeak),
}

crate::error::text_at_the_edge!(JobError);

/// Resolves a generator string (`normal(1 / sqrt(H))`) against a shape's environment.
pub fn resolve_gen(gen_src: &str, env: &expr::Env) -> Result<GenSpec, JobError> {
    let generator = |source| JobError::Generator {
        generator: gen_src.to_string(),
        source,
    };
    let e = expr::parse(gen_src).map_err(generator)?;
    match e {
        expr::Expr::Var(name, _) => Ok(GenSpec {
            kind: name,
            args: vec![],
        }),
        expr::Expr::Call(name, args, _) => {
            let mut out = Vec::new();
            for a in args {
                let v = a.eval(env).map_err(generator)?;
                out.push(v.as_f64().ok_or_else(|| JobError::GeneratorArgument {
                    generator: gen_src.to_string(),
                    value: v.to_string(),
                })?);
            }
            Ok(GenSpec {
                kind: name,
                args: out,
            })
        }
        _ => Err(JobError::GeneratorForm {
            generator: gen_src.to_string(),
        }),
    }
}

fn tensor_desc(
    p: &Problem,
    t: &TensorSpec,
    env: &expr::Env,
    input: bool,
) -> Result<TensorDesc, JobError> {
    let dims = p.tensor_dims(t, env)?;
    Ok(TensorDesc {
        name: t.name.clone(),
        dtype: p.tensor_dtype(t, env)?,
        dims: dims.into_iter().map(|d| d as u64).collect(),
        generator: if input {
            Some(resolve_gen(&t.generator, env)?)
        } else {
            None
        },
        inplace: t.inplace,
        compare: t.compare.clone(),
    })
}

/// One shape of a job: parameters, tensors and SOL on the given hardware.
pub fn shape_job(
    p: &Problem,
    shape_id: u32,
    hw: Option<&HardwareProfile>,
) -> Result<ShapeJob, JobError> {
    let s = p.shape(shape_id).ok_or_else(|| JobError::NoShape {
        operator: p.name.clone(),
        shape: shape_id,
    })?;
    shape_job_for(p, s, hw)
}

/// A job shape for any parameter set of the operator (reduced shapes in tests).
pub fn shape_job_for(
    p: &Problem,
    s: &crate::suite::Shape,
    hw: Option<&HardwareProfile>,
) -> Result<ShapeJob, JobError> {
    let env = p.env(s)?;
    let w = p.work_in(&env, s.id)?;
    let sol_s = match hw {
        Some(h) => crate::suite::roofline::sol(&w, h)?.sol_s,
        None => 0.0,
    };
    Ok(ShapeJob {
        id: s.id,
        env: env.iter().map(|(k, v)| (k.clone(), v.to_json())).collect(),
        inputs: p
            .inputs
            .iter()
            .map(|t| tensor_desc(p, t, &env, true))
            .collect::<Result<_, _>>()?,
        outputs: p
            .outputs
            .iter()
            .map(|t| tensor_desc(p, t, &env, false))
            .collect::<Result<_, _>>()?,
        sol_s,
    })
}

/// Fresh seeds for a check: different on every call (never the same inputs twice), recorded in
/// results.
pub fn fresh_seeds(n: usize) -> Vec<u64> {
    use std::time::{SystemTime, UNIX_EPOCH};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    (0..n)
        .map(|i| {
            let c = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut z = t
                ^ (c.wrapping_mul(0x9E37_79B9_7F4A_7C15))
                ^ ((i as u64) << 32)
                ^ std::process::id() as u64;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z ^ (z >> 31)
        })
        .collect()
}

/// Builds a job for an operator.
pub fn build_job(
    p: &Problem,
    candidate: Source,
    reference: Option<Source>,
    shape_ids: &[u32],
    kind: JobKind,
    mode: Mode,
    hw: Option<&HardwareProfile>,
) -> Result<Job, JobError> {
    let shapes = shape_ids
        .iter()
        .map(|id| shape_job(p, *id, hw))
        .collect::<Result<Vec<_>, _>>()?;
    // 10 s between progress events, plus 4 s per GB of the largest shape's tensors.
    let largest = shapes
        .iter()
        .map(|s| {
            s.inputs
                .iter()
                .chain(&s.outputs)
                .map(|t| t.bytes())
                .sum::<u64>()
        })
        .max()
        .unwrap_or(0);
    let watchdog = 10.0 + 4.0 * largest as f64 / 1e9;
    Ok(Job {
        operator: p.name.clone(),
        kind,
        mode,
        candidate,
        reference,
        shapes,
        tolerance: compare::Tol {
            atol: p.tolerance.atol,
            rtol: p.tolerance.rtol,
            rel_l2: p.tolerance.rel_l2,
        },
        seeds: fresh_seeds(if mode == Mode::Quick { 1 } else { 5 }),
        generator: p.generator.as_ref().map(|code| Source {
            name: format!("{} inputs", p.name),
            code: code.clone(),
            defines: Default::default(),
        }),
        arch: None,
        watchdog_s: Some(watchdog),
        sass: false,
        // A dump is of the random draw unless a caller asks for a structured one.
        draws: if kind == JobKind::Dump {
            Vec::new()
        } else {
            draws::of_problem(p)
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::expr::Value;

    #[test]
    fn generators_resolve_against_the_shape() {
        let mut env = expr::Env::new();
        env.insert("H".into(), Value::Int(4096));
        let g = resolve_gen("normal(1 / sqrt(H))", &env).unwrap();
        assert_eq!(g.kind, "normal");
        assert!((g.args[0] - 1.0 / 64.0).abs() < 1e-15);
        assert_eq!(
            resolve_gen("zeros", &env).unwrap(),
            GenSpec {
                kind: "zeros".into(),
                args: vec![]
            }
        );
        assert!(resolve_gen("normal(Q)", &env).is_err());
    }

    #[test]
    fn seeds_are_fresh() {
        let a = fresh_seeds(5);
        let b = fresh_seeds(5);
        assert_eq!(a.len(), 5);
        assert!(a.iter().all(|x| !b.contains(x)));
    }
}
