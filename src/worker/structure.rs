//! Structured draws on the device: a check case's inputs are the seed's random draw, then the
//! case's structure pass (harness kernels `structure_*`), or the operator's own generator with
//! `draw` = the pass's code (docs/problem-format.md, "Structured draws").
//!
//! Invariants: a pass touches only the inputs its draw names, each checked against the pass
//! (dtype, dimensions) before any launch; every launch covers exactly the tensor's elements
//! (grid-stride loops bounded by the element count); the result depends only on (seed, draw).

use super::*;
use crate::contract::draws::{self, Case};
use crate::suite::{Inapplicable, Pass, fp8_code};

impl Gpu {
    /// Generates the inputs of one check case.
    pub(super) fn generate_case(
        &mut self,
        tensors: &[TensorDesc],
        bufs: &[DevBuf],
        env: &Env,
        case: &Case,
        custom: Option<&Loaded>,
    ) -> GResult<()> {
        let Some(d) = case.draw else {
            return self.generate_all(tensors, bufs, env, case.seed, custom);
        };
        let what = |e: GpuError| e.during(format!("structured draw `{}`", d.name));
        let pass = Pass::resolve(&d.pass, env).map_err(|e| what(e.into()))?;
        let code = match pass {
            Pass::Custom(c) => c,
            _ => 0,
        };
        self.generate_all_coded(tensors, bufs, env, case.seed, custom, code)?;
        if code != 0 {
            return Ok(());
        }
        for name in &d.inputs {
            let Some(i) = tensors.iter().position(|t| &t.name == name) else {
                return Err(what(gerr(format!("the shape has no input `{name}`"))));
            };
            let t = &tensors[i];
            pass.applies_to(&t.dtype, &t.dims)
                .map_err(|e| what(GpuError::from(e).during(format!("input `{name}`"))))?;
            self.structure(&bufs[i], t, pass, case.seed, draws::salt(&d.name))
                .map_err(what)?;
        }
        Ok(())
    }

    /// One structure pass over one tensor (already checked by `Pass::applies_to`).
    fn structure(
        &mut self,
        buf: &DevBuf,
        t: &TensorDesc,
        pass: Pass,
        seed: u64,
        salt: u64,
    ) -> GResult<()> {
        let n = t.elements();
        if n == 0 {
            return Ok(());
        }
        if buf.bytes < t.bytes() as usize {
            return Err(gerr(format!(
                "input `{}`: buffer smaller than the tensor",
                t.name
            )));
        }
        let row = t.dims.last().copied().unwrap_or(1).max(1);
        let f32b = |x: f64| (x as f32).to_bits() as u64;
        let (fname, storage): (String, Vec<u64>) = if t.dtype.starts_with("fp8") {
            let (group, v) = match pass {
                Pass::ZeroRows => (row, 0.0),
                Pass::ConstRows(v) => (row, v),
                Pass::ZeroGroups(g) => (g, 0.0),
                _ => return Err(Inapplicable::Dtype(t.dtype.clone()).into()),
            };
            let code = fp8_code(&t.dtype, v).ok_or_else(|| Inapplicable::NotRepresentable {
                value: v,
                dtype: t.dtype.clone(),
            })?;
            (
                "structure_fp8".into(),
                vec![buf.ptr, n, group, seed, salt, code as u64],
            )
        } else if t.dtype.starts_with("int") {
            let (op, lo, hi) = match pass {
                Pass::OneValue(lo, hi) => (3u64, lo, hi),
                Pass::Wrap(m) => (4u64, m, 0),
                Pass::Permute(m) => (5u64, m, 0),
                _ => return Err(Inapplicable::Dtype(t.dtype.clone()).into()),
            };
            (
                format!("structure_{}", t.dtype),
                vec![buf.ptr, n, seed, salt, op, lo as u64, hi as u64],
            )
        } else {
            let (op, group, a) = match pass {
                Pass::ZeroRows => (0u64, row, 0.0),
                Pass::ConstRows(v) => (0, row, v),
                Pass::ZeroGroups(g) => (0, g, 0.0),
                Pass::ScaleRows(s) => (1, row, s),
                Pass::Outliers(f) => (2, row, f),
                _ => return Err(Inapplicable::Dtype(t.dtype.clone()).into()),
            };
            (
                format!("structure_{}", t.dtype),
                vec![buf.ptr, n, group, seed, salt, op, f32b(a)],
            )
        };
        let mut storage = storage;
        self.launch_harness(&fname, n, &mut storage)
    }
}
