//! The part of running a launch plan on one shape that needs no GPU: the plan's expressions
//! evaluated on the shape's parameters and defines, scratch sizes in bytes, and every tensor
//! map checked to lie inside the buffer it maps (operator tensors as the job sizes them,
//! scratch as the plan does).
//!
//! Invariants: pure (no driver call, no allocation on the device), and total on hostile plans:
//! any plan, define or shape gives Ok or a `PlanError` naming the plan's line, never a panic.
//! The job runs it for every shape before any buffer is made, so a plan that cannot run on a
//! shape is refused there with its line.

use super::inputs::env_from_json;
use crate::contract::plan::{Plan, PlanError, ResolvedArg, ResolvedLaunch};
use crate::contract::protocol::{ShapeJob, TensorDesc};
use crate::suite::expr::Value;
use std::collections::BTreeMap;

/// A tensor's bytes; one whose size does not fit u64 counts as the largest (no map is refused
/// for a size the job itself could never allocate).
fn tensor_bytes(t: &TensorDesc) -> u64 {
    let esize = crate::suite::dtype_size(&t.dtype).unwrap_or(1) as u64;
    t.dims
        .iter()
        .try_fold(esize, |acc, d| acc.checked_mul(*d))
        .unwrap_or(u64::MAX)
}

/// Resolves `plan` with `defines` on `shape`: the launches that run there, every size checked
/// and every tensor map inside its buffer.
pub(crate) fn resolve(
    plan: &Plan,
    defines: &BTreeMap<String, Value>,
    shape: &ShapeJob,
) -> Result<Vec<ResolvedLaunch>, PlanError> {
    let env = plan.env(&env_from_json(&shape.env), defines);
    let mut bytes: BTreeMap<String, u64> = shape
        .inputs
        .iter()
        .chain(&shape.outputs)
        .map(|t| (t.name.clone(), tensor_bytes(t)))
        .collect();
    for (s, b) in plan.scratch_bytes(&env)? {
        bytes.insert(s.name, b);
    }
    let launches = plan.resolve(&env, &|n| bytes.contains_key(n))?;
    for l in &launches {
        for a in &l.args {
            if let ResolvedArg::TensorMap(t) = a {
                // `resolve` admits only maps of known buffers; a missing one holds nothing.
                t.check_fits(bytes.get(&t.tensor).copied().unwrap_or(0))?;
            }
        }
    }
    Ok(launches)
}
