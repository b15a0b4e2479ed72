//! gated_delta_rule_update, chunk_gated_delta_rule_state, chunk_delta_rule_output.
//!
//! fp32 math in the order of the specs (the operator specifications, section 5), with their
//! rounding points: bf16 outputs; in the chunked state pass the bf16-rounded state as the GEMM
//! operand and the bf16-rounded decayed values; in the chunked output the bf16-rounded scores A.
//!
//! update.rs holds the recurrent step, chunked.rs the two chunked passes; the operator table
//! and the helpers they share live here.

use super::*;

mod chunked;
mod update;

use chunked::{
    chunk_delta_rule_output, chunk_gated_delta_rule_state, chunk_output_shapes, chunk_state_shapes,
};
use update::{gated_delta_rule_update, gdr_shapes};

pub fn ops() -> Vec<CpuOp> {
    vec![
        CpuOp {
            name: "gated_delta_rule_update",
            run: gated_delta_rule_update,
            reduced: gdr_shapes,
        },
        CpuOp {
            name: "chunk_gated_delta_rule_state",
            run: chunk_gated_delta_rule_state,
            reduced: chunk_state_shapes,
        },
        CpuOp {
            name: "chunk_delta_rule_output",
            run: chunk_delta_rule_output,
            reduced: chunk_output_shapes,
        },
    ]
}

fn ints(pairs: &[(&str, i128)]) -> Vec<(String, Value)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Value::Int(*v)))
        .collect()
}

/// Value head m reads q/k head min(m / max(Hv / Hq, 1), Hq − 1).
fn qk_head(m: usize, hv: usize, hq: usize) -> usize {
    (m / (hv / hq).max(1)).min(hq - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max)
    }

    #[test]
    fn reduced_shapes_run_through_the_entry_points() {
        let suite = crate::suite::Suite::load(crate::suite::SuiteSource::Embedded).unwrap();
        for c in ops() {
            let p = suite.problem(c.name).unwrap();
            let params = (c.reduced)().into_iter().next().unwrap();
            let s = crate::suite::Shape {
                id: 9000,
                params,
                note: String::new(),
                production_us: Default::default(),
                line: 0,
            };
            let env = p.env(&s).unwrap();
            let mut r = Rng::new(11);
            let inputs: Vec<HostTensor> = p
                .inputs
                .iter()
                .map(|t| {
                    let dims = p.tensor_dims(t, &env).unwrap();
                    let n: usize = dims.iter().product();
                    if t.dtype == "int32" {
                        HostTensor::from_i64(&t.name, "int32", dims, &vec![0; n])
                    } else {
                        HostTensor::from_f32(
                            &t.name,
                            &t.dtype,
                            dims,
                            &r.normal_in(&t.dtype, n, 0.02),
                        )
                    }
                })
                .collect();
            let outs = (c.run)(&env, &inputs).unwrap();
            assert_eq!(outs.len(), p.outputs.len(), "{}", c.name);
            for (o, spec) in outs.iter().zip(&p.outputs) {
                assert_eq!(o.name, spec.name);
                assert_eq!(o.dtype, spec.dtype);
                let want = p.tensor_dims(spec, &env).unwrap();
                assert_eq!(o.dims, want, "{} {}", c.name, o.name);
                assert_eq!(
                    o.bytes.len(),
                    o.elements() * crate::suite::dtype_size(&o.dtype).unwrap()
                );
                assert!(o.f32s().iter().all(|v| v.is_finite()));
            }
        }
    }
}
