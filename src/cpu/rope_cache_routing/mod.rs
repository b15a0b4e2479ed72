//! reshape_and_cache, mrope, fused_qkv_rope, moe_sum_reduce, moe_topk_gating_softmax,
//! topk_filter, causal_conv1d.
//!
//! One file per operator family: kv_cache, rope, routing, conv; the operator table, the
//! parameter helpers and the launch-plan test live here.

use super::*;

mod conv;
mod kv_cache;
mod rope;
mod routing;

use conv::{causal_conv1d, causal_conv1d_shapes};
use kv_cache::{reshape_and_cache, reshape_and_cache_shapes};
use rope::{fused_qkv_rope, fused_qkv_rope_shapes, mrope, mrope_shapes};
use routing::{
    moe_sum_reduce, moe_sum_reduce_shapes, moe_topk_gating_softmax, moe_topk_shapes, topk_filter,
    topk_filter_shapes,
};

pub fn ops() -> Vec<CpuOp> {
    vec![
        CpuOp {
            name: "reshape_and_cache",
            run: reshape_and_cache,
            reduced: reshape_and_cache_shapes,
        },
        CpuOp {
            name: "mrope",
            run: mrope,
            reduced: mrope_shapes,
        },
        CpuOp {
            name: "fused_qkv_rope",
            run: fused_qkv_rope,
            reduced: fused_qkv_rope_shapes,
        },
        CpuOp {
            name: "moe_sum_reduce",
            run: moe_sum_reduce,
            reduced: moe_sum_reduce_shapes,
        },
        CpuOp {
            name: "moe_topk_gating_softmax",
            run: moe_topk_gating_softmax,
            reduced: moe_topk_shapes,
        },
        CpuOp {
            name: "topk_filter",
            run: topk_filter,
            reduced: topk_filter_shapes,
        },
        CpuOp {
            name: "causal_conv1d",
            run: causal_conv1d,
            reduced: causal_conv1d_shapes,
        },
    ]
}

fn ints(v: &[i128]) -> Value {
    Value::List(v.iter().map(|x| Value::Int(*x)).collect())
}

fn list(env: &Env, k: &str) -> Result<Vec<usize>, String> {
    match env.get(k) {
        Some(Value::List(v)) => v
            .iter()
            .map(|x| x.as_int().map(|i| i as usize))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| format!("parameter `{k}` is not a list of integers")),
        _ => Err(format!("parameter `{k}` missing or not a list")),
    }
}

fn flag(env: &Env, k: &str) -> Result<bool, String> {
    env.get(k)
        .and_then(|v| v.as_int())
        .map(|i| i != 0)
        .ok_or_else(|| format!("parameter `{k}` missing or not a bool"))
}

fn input<'a>(inputs: &'a [HostTensor], name: &str) -> Result<&'a HostTensor, String> {
    inputs
        .iter()
        .find(|t| t.name == name)
        .ok_or_else(|| format!("input `{name}` missing"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::{Problem, Shape, Suite, SuiteSource};

    pub(super) fn suite() -> Suite {
        Suite::load(SuiteSource::Dir(
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("problems"),
        ))
        .unwrap()
    }

    fn shape(params: BTreeMap<String, Value>) -> Shape {
        Shape {
            id: 9000,
            params,
            note: String::new(),
            production_us: Default::default(),
            line: 0,
        }
    }

    pub(super) fn env_of(p: &Problem, params: BTreeMap<String, Value>) -> Env {
        p.env(&shape(params)).unwrap()
    }

    pub(super) fn bf16s(name: &str, dims: Vec<usize>, v: &[f32]) -> HostTensor {
        HostTensor::from_f32(name, "bf16", dims, v)
    }

    // ------------------------------------------------------------ launch plans

    /// Every launch plan of these operators (reference, baseline, inputs.cu) resolves on every
    /// suite shape and every reduced shape, for every value of each tune parameter: buffers
    /// exist, scalars fit their types, grids are legal (x < 2^31, y and z ≤ 65535), blocks have
    /// at most 1024 threads, dynamic shared memory ≤ 227 KB.
    #[test]
    fn launch_plans_resolve_on_every_shape() {
        let s = suite();
        let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("problems");
        for op in ops() {
            let p = s.problem(op.name).unwrap();
            let mut shapes: Vec<BTreeMap<String, Value>> =
                p.shapes.iter().map(|s| s.params.clone()).collect();
            shapes.extend((op.reduced)());
            let buffers: Vec<String> = p
                .inputs
                .iter()
                .chain(&p.outputs)
                .map(|t| t.name.clone())
                .collect();
            let custom = p.inputs.iter().any(|t| t.generator == "custom");
            let mut files = vec!["reference.cu", "baseline.cu"];
            if custom {
                files.push("inputs.cu");
            }
            for f in files {
                let path = root.join(op.name).join(f);
                let src = std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let plan = crate::contract::plan::parse(&src)
                    .unwrap_or_else(|e| panic!("{}: {:?}", path.display(), e));
                let names: Vec<String> = buffers
                    .iter()
                    .cloned()
                    .chain(plan.scratch.iter().map(|s| s.name.clone()))
                    .collect();
                // the defaults, then each tune value with the others at their defaults
                let mut variants = vec![plan.defines.clone()];
                for (k, vals) in &plan.tune {
                    for v in vals {
                        let mut d = plan.defines.clone();
                        d.insert(k.clone(), v.clone());
                        variants.push(d);
                    }
                }
                for params in &shapes {
                    let mut env = env_of(p, params.clone());
                    env.insert("seed".into(), Value::Int(12345));
                    env.insert("draw".into(), Value::Int(0));
                    for defs in &variants {
                        let penv = plan.env(&env, defs);
                        let ls = plan
                            .resolve(&penv, &|n| names.iter().any(|b| b == n))
                            .unwrap_or_else(|e| {
                                panic!(
                                    "{} {params:?} {defs:?}: line {}: {}",
                                    path.display(),
                                    e.line,
                                    e.msg
                                )
                            });
                        for l in &ls {
                            assert!(
                                l.grid[0] < (1 << 31),
                                "{} grid {:?}",
                                path.display(),
                                l.grid
                            );
                            assert!(l.grid[1] <= 65535 && l.grid[2] <= 65535);
                            assert!(l.smem <= 227 * 1024, "{} smem {}", path.display(), l.smem);
                        }
                        plan.scratch_sizes(&penv).unwrap();
                    }
                }
            }
        }
    }
}
