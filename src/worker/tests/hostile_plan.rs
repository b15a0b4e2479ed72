//! The hostile plans of tests/kernels, read from their files: refused with a plan error naming
//! the line, in the client (`--define` rewrites the plan) and in the worker, without a GPU.

use crate::contract::plan;
use crate::contract::protocol::Source;
use crate::suite::{Suite, SuiteSource};
use crate::worker::compile::plan_and_defines;
use crate::worker::shape_plan;

fn kernel(file: &str) -> Source {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/kernels")
        .join(file);
    Source {
        name: file.into(),
        code: std::fs::read_to_string(&path).unwrap(),
        defines: Default::default(),
    }
}

#[test]
fn a_plan_expression_in_20000_parentheses_is_refused_on_its_line() {
    let src = kernel("hostile_plan_deep_parens.cu");
    assert!(src.code.contains(&"(".repeat(20_000)));
    let e = plan::parse(&src.code).unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert!(
        e.msg.contains("grid") && e.msg.contains("at most 4096"),
        "{e}"
    );
    assert!(
        e.msg.len() < 400,
        "the message quotes the text clipped: {e}"
    );
    // The client's --define rewrite parses the plan in atrex-tui itself.
    let err = crate::cli::defines::apply(src.clone(), &["BLOCK=512".into()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 4"), "{err}");
    // The worker.
    assert_eq!(plan_and_defines(&src).unwrap_err().line, 4);
    // Within the length limit, the nesting limit refuses it, and allows what is under it.
    let nested = |n: usize| {
        let expr = format!("{}T{}", "(".repeat(n), ")".repeat(n));
        let at = src.code.find("[\"(").unwrap() + 2;
        let end = src.code[at..].find('"').unwrap() + at;
        format!("{}{expr}{}", &src.code[..at], &src.code[end..])
    };
    let e = plan::parse(&nested(100)).unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert!(e.msg.contains("nested more than 64 levels"), "{e}");
    assert!(plan::parse(&nested(60)).is_ok());
}

#[test]
fn a_tensor_map_whose_reach_wraps_64_bits_is_refused_on_its_line() {
    let src = kernel("hostile_tensor_map_wrap.cu");
    let (p, defines) = plan_and_defines(&src).unwrap();
    let suite = Suite::load(SuiteSource::Embedded).unwrap();
    let op = suite.problem("rms_norm").unwrap();
    for s in &op.shapes {
        let job = crate::contract::job::shape_job_for(op, s, None).unwrap();
        let e = shape_plan::resolve(&p, &defines, &job).unwrap_err();
        assert_eq!(e.line, 2, "shape {}: {e}", s.id);
        assert!(
            e.msg.contains("tm_x") && e.msg.contains("more than 2^64") && e.msg.contains("`x`"),
            "{e}"
        );
    }
    // What the plan is built to defeat: the reach summed in wrapping 64-bit arithmetic is 16
    // bytes, which `x` holds on every shape.
    let env = p.env(&Default::default(), &defines);
    let t = p.tensor_maps[0].resolve(&env).unwrap();
    let mut last = (t.dims[0] - 1).wrapping_mul(2);
    for (d, s) in t.dims[1..].iter().zip(&t.strides) {
        last = last.wrapping_add((d - 1).wrapping_mul(*s));
    }
    assert_eq!(last.wrapping_add(2), 16);
    assert_eq!(t.extent_bytes(), None);
    assert!(t.check_fits(u64::MAX).is_err());
}
