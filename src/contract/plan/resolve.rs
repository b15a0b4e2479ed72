//! A plan evaluated on one shape: its environment (the shape's parameters and the defines),
//! each launch's `when`, grid, block, cluster, shared memory and arguments, and the scratch
//! buffers' sizes; every size checked (see the module above).

use super::*;
use crate::suite::expr::{Env, Value};
use std::collections::BTreeMap;

/// A launch's `when`: a bool, or a number (0 is false; NaN, which no comparison can settle, is
/// no condition). The launch's other expressions are not evaluated where it is false.
fn eval_when(w: &PlanExpr, env: &Env, kernel: &str) -> Result<bool, PlanError> {
    let v = w.expr.eval(env).map_err(|x| PlanError {
        line: w.line,
        msg: format!("kernel {kernel}: when `{}`: {x}", clip(&w.src)),
    })?;
    match v {
        Value::Bool(b) => Ok(b),
        other => match other.as_f64() {
            Some(x) if !x.is_nan() => Ok(x != 0.0),
            _ => Err(PlanError {
                line: w.line,
                msg: format!(
                    "kernel {kernel}: when `{}` gives {}, not a condition",
                    clip(&w.src),
                    clip(&other.to_string())
                ),
            }),
        },
    }
}

fn eval_dim(e: &PlanExpr, env: &Env, what: &str) -> Result<u32, PlanError> {
    let v = e.expr.eval(env).map_err(|x| PlanError {
        line: e.line,
        msg: format!("{what} `{}`: {x}", clip(&e.src)),
    })?;
    match v.as_int().map(u32::try_from) {
        Some(Ok(i)) => Ok(i),
        _ => Err(PlanError {
            line: e.line,
            msg: format!(
                "{what} `{}` gives {}, not a size (0 to {})",
                clip(&e.src),
                clip(&v.to_string()),
                u32::MAX
            ),
        }),
    }
}

/// The product of dimensions, None where it does not fit u64.
fn product(dims: &[u32]) -> Option<u64> {
    dims.iter()
        .try_fold(1u64, |acc, d| acc.checked_mul(u64::from(*d)))
}

/// A scalar argument's value as its type: refused where it does not fit (an integer out of
/// range, a float that is NaN or infinite or beyond f32).
fn scalar_arg(v: &Value, ty: ScalarType) -> Option<ResolvedArg> {
    let int = || v.as_int();
    let float = || v.as_f64().filter(|x| x.is_finite());
    Some(match ty {
        ScalarType::F32 => {
            let x = float()? as f32;
            if !x.is_finite() {
                return None;
            }
            ResolvedArg::F32(x)
        }
        ScalarType::F64 => ResolvedArg::F64(float()?),
        ScalarType::I32 => ResolvedArg::I32(i32::try_from(int()?).ok()?),
        ScalarType::I64 => ResolvedArg::I64(i64::try_from(int()?).ok()?),
        ScalarType::U32 => ResolvedArg::U32(u32::try_from(int()?).ok()?),
        ScalarType::U64 => ResolvedArg::U64(u64::try_from(int()?).ok()?),
    })
}

impl Plan {
    /// The environment for launch expressions: shape env plus defines (defines win).
    pub fn env(&self, shape_env: &Env, defines: &BTreeMap<String, Value>) -> Env {
        let mut env = shape_env.clone();
        for (k, v) in defines {
            env.insert(k.clone(), v.clone());
        }
        env
    }

    /// Evaluates every launch for a shape. `buffers` are the names that bind to device memory.
    pub fn resolve(
        &self,
        env: &Env,
        is_buffer: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<ResolvedLaunch>, PlanError> {
        let mut out = Vec::new();
        for l in &self.launches {
            if let Some(w) = &l.when
                && !eval_when(w, env, &l.kernel)?
            {
                continue;
            }
            let mut grid = [1u32; 3];
            let mut block = [1u32; 3];
            for (i, e) in l.grid.iter().enumerate() {
                grid[i] = eval_dim(e, env, "grid")?;
            }
            for (i, e) in l.block.iter().enumerate() {
                block[i] = eval_dim(e, env, "block")?;
            }
            if grid.contains(&0) {
                return Err(PlanError {
                    line: l.line,
                    msg: format!("kernel {}: grid {grid:?} has a zero dimension", l.kernel),
                });
            }
            let threads = product(&block);
            if !threads.is_some_and(|t| (1..=1024).contains(&t)) {
                return Err(PlanError {
                    line: l.line,
                    msg: format!(
                        "kernel {}: block {block:?} has {} threads (1 to 1024)",
                        l.kernel,
                        threads.map_or("more than 2^64".to_string(), |t| t.to_string())
                    ),
                });
            }
            let smem = match &l.smem {
                Some(e) => eval_dim(e, env, "smem")?,
                None => 0,
            };
            let cluster = match &l.cluster {
                Some(c) => Some(self.resolve_cluster(l, c, &grid, env)?),
                None => None,
            };
            let mut args = Vec::new();
            for a in &l.args {
                args.push(match a {
                    Arg::Buffer(name) if self.tensor_maps.iter().any(|t| &t.name == name) => {
                        let Some(t) = self.tensor_maps.iter().find(|t| &t.name == name) else {
                            continue;
                        };
                        let t = t.resolve(env)?;
                        if !is_buffer(&t.tensor) {
                            return Err(PlanError {
                                line: t.line,
                                msg: format!(
                                    "tensor map {}: `{}` is not an input, output or scratch buffer",
                                    t.name, t.tensor
                                ),
                            });
                        }
                        ResolvedArg::TensorMap(t)
                    }
                    Arg::Buffer(name) => {
                        if !is_buffer(name) {
                            return Err(PlanError {
                                line: l.line,
                                msg: format!(
                                    "kernel {}: argument `{name}` is not an input, output or scratch buffer; scalars need a type, e.g. `{name}:i32`",
                                    l.kernel
                                ),
                            });
                        }
                        ResolvedArg::Buffer(name.clone())
                    }
                    Arg::Scalar { src, expr, ty } => {
                        let v = expr.eval(env).map_err(|x| PlanError {
                            line: l.line,
                            msg: format!("kernel {}: argument `{}`: {x}", l.kernel, clip(src)),
                        })?;
                        scalar_arg(&v, *ty).ok_or_else(|| PlanError {
                            line: l.line,
                            msg: format!(
                                "kernel {}: argument `{}` = {} does not fit {ty:?}",
                                l.kernel,
                                clip(src),
                                clip(&v.to_string())
                            ),
                        })?
                    }
                });
            }
            out.push(ResolvedLaunch {
                kernel: l.kernel.clone(),
                grid,
                block,
                smem,
                cluster,
                cooperative: l.cooperative,
                args,
            });
        }
        if out.is_empty()
            && let Some(first) = self.launches.first()
        {
            return Err(PlanError {
                line: first.line,
                msg: "no launch runs on this shape: every `when` is false".into(),
            });
        }
        Ok(out)
    }

    /// Cluster dimensions: at most 8 blocks (the portable size), dividing the grid.
    fn resolve_cluster(
        &self,
        l: &Launch,
        c: &[PlanExpr],
        grid: &[u32; 3],
        env: &Env,
    ) -> Result<[u32; 3], PlanError> {
        let mut cl = [1u32; 3];
        for (i, e) in c.iter().enumerate() {
            cl[i] = eval_dim(e, env, "cluster")?;
        }
        let n = product(&cl);
        if !n.is_some_and(|n| (1..=8).contains(&n)) {
            return Err(PlanError {
                line: l.line,
                msg: format!(
                    "kernel {}: cluster {cl:?} has {} blocks (1 to 8)",
                    l.kernel,
                    n.map_or("more than 2^64".to_string(), |n| n.to_string())
                ),
            });
        }
        if grid.iter().zip(&cl).any(|(g, c)| g % c != 0) {
            return Err(PlanError {
                line: l.line,
                msg: format!(
                    "kernel {}: grid {grid:?} is not a whole number of clusters {cl:?}",
                    l.kernel
                ),
            });
        }
        Ok(cl)
    }

    /// Scratch sizes in elements for a shape; each one's bytes (elements times the dtype's
    /// size) fit u64, so a caller may multiply without checking.
    pub fn scratch_sizes(&self, env: &Env) -> Result<Vec<(Scratch, u64)>, PlanError> {
        self.scratch
            .iter()
            .map(|s| {
                let v = s.size.expr.eval(env).map_err(|x| PlanError {
                    line: s.size.line,
                    msg: format!("scratch {}: {x}", s.name),
                })?;
                let esize = crate::suite::dtype_size(&s.dtype).unwrap_or(1) as u64;
                match v.as_int().map(u64::try_from) {
                    Some(Ok(n)) if n.checked_mul(esize).is_some() => Ok((s.clone(), n)),
                    _ => Err(PlanError {
                        line: s.size.line,
                        msg: format!(
                            "scratch {} size gives {}, not a size (0 to 2^64 bytes)",
                            s.name,
                            clip(&v.to_string())
                        ),
                    }),
                }
            })
            .collect()
    }

    /// Scratch sizes in bytes for a shape (elements times the dtype's size).
    pub fn scratch_bytes(&self, env: &Env) -> Result<Vec<(Scratch, u64)>, PlanError> {
        Ok(self
            .scratch_sizes(env)?
            .into_iter()
            .map(|(s, n)| {
                let esize = crate::suite::dtype_size(&s.dtype).unwrap_or(1) as u64;
                // scratch_sizes checked that this product fits.
                (s, n.saturating_mul(esize))
            })
            .collect())
    }
}
