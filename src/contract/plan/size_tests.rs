//! Sizes computed from a plan are checked arithmetic: a value that does not fit, a negative
//! size, NaN or infinity is a plan error on its line, never a wrap, a saturation or a panic.

use super::*;
use crate::suite::expr::Env;

/// A one-launch plan with the given grid, block, cluster, arguments and scratch size.
fn plan(grid: &str, block: &str, extra: &str, args: &str, scratch: &str) -> String {
    format!(
        "/* atrex:plan\n[[launch]]\nkernel = \"k\"\ngrid = [{grid}]\nblock = [{block}]\n{extra}args = [{args}]\n\n[[scratch]]\nname = \"s\"\ndtype = \"fp32\"\nsize = \"{scratch}\"\n*/\n"
    )
}

fn resolve(src: &str) -> Result<Vec<ResolvedLaunch>, PlanError> {
    let p = parse(src)?;
    let mut env = Env::new();
    env.insert("T".into(), Value::Int(10));
    p.resolve(&p.env(&env, &p.defines), &|n| n == "x")
}

#[test]
fn dims_that_do_not_fit_or_are_not_numbers_are_refused_on_their_line() {
    for (grid, why) in [
        ("\"-1\"", "not a size"),
        ("\"4294967296\"", "not a size"),
        ("\"ceil(sqrt(-1))\"", "not an integer"),
        ("\"ceil(exp(1000))\"", "not an integer"),
        ("\"floor(T / 0.0)\"", "division by zero"),
        ("\"T * 1e300 * 1e300\"", "not a size"),
        ("\"-(2 ** 126) * 2 // -1\"", "overflow"),
        ("\"(-(2 ** 126) * 2) % -1\"", "overflow"),
    ] {
        let e = resolve(&plan(grid, "\"32\"", "", "\"x\"", "1")).unwrap_err();
        assert_eq!(e.line, 4, "{grid}: {e}");
        assert!(e.msg.contains(why), "{grid}: {e}");
    }
}

#[test]
fn thread_and_cluster_counts_are_multiplied_without_wrapping() {
    // 2^32 - 1 cubed overflows u64: refused, not wrapped to a small count.
    let e = resolve(&plan(
        "\"1\"",
        "\"4294967295\", \"4294967295\", \"4294967295\"",
        "",
        "\"x\"",
        "1",
    ))
    .unwrap_err();
    assert!(e.msg.contains("more than 2^64 threads"), "{e}");
    // 641 × 6700417 = 2^32 + 1, which 32-bit arithmetic wraps to a cluster of one block.
    let e = resolve(&plan(
        "\"641\", \"6700417\"",
        "\"32\"",
        "cluster = [\"641\", \"6700417\", \"1\"]\n",
        "\"x\"",
        "1",
    ))
    .unwrap_err();
    assert!(e.msg.contains("4294967297 blocks (1 to 8)"), "{e}");
    assert_eq!(e.line, 2, "the launch's line");
}

#[test]
fn scalar_arguments_must_fit_their_type() {
    for arg in [
        "2 ** 31:i32",
        "-1:u32",
        "2 ** 64:u64",
        "2 ** 63:i64",
        "sqrt(-1):f32",
        "exp(1000):f64",
        "1e300:f32",
        "0.5:i32",
        "[1, 2]:i32",
    ] {
        let e = resolve(&plan("\"1\"", "\"32\"", "", &format!("\"{arg}\""), "1")).unwrap_err();
        assert!(e.msg.contains("does not fit"), "{arg}: {e}");
        assert_eq!(e.line, 2, "the launch's line: {arg}: {e}");
    }
    let ok = resolve(&plan(
        "\"1\"",
        "\"32\"",
        "",
        "\"2 ** 31 - 1:i32\", \"-2 ** 31:i32\", \"3e38:f32\"",
        "1",
    ))
    .unwrap();
    assert_eq!(
        ok[0].args,
        vec![
            ResolvedArg::I32(i32::MAX),
            ResolvedArg::I32(i32::MIN),
            ResolvedArg::F32(3e38_f64 as f32)
        ]
    );
}

#[test]
fn scratch_bytes_must_fit_64_bits() {
    let env = Env::new();
    for size in ["-1", "2 ** 62", "2 ** 64", "sqrt(-1)", "1e30"] {
        let p = parse(&plan("\"1\"", "\"32\"", "", "\"x\"", size)).unwrap();
        let e = p.scratch_bytes(&env).unwrap_err();
        assert_eq!(e.line, 8, "{size}: {e}");
        assert!(e.msg.contains("scratch s"), "{size}: {e}");
    }
    let p = parse(&plan("\"1\"", "\"32\"", "", "\"x\"", "2 ** 61")).unwrap();
    assert_eq!(p.scratch_bytes(&env).unwrap()[0].1, 1 << 63);
}

#[test]
fn packed_tensor_map_strides_and_reach_do_not_wrap() {
    let map = |dims: &str, strides: &str| {
        format!(
            "/* atrex:plan\n[[tensor_map]]\nname = \"m\"\ntensor = \"x\"\ndtype = \"bf16\"\ndims = [{dims}]\n{strides}box = [\"8\", \"1\", \"1\"]\n\n[[launch]]\nkernel = \"k\"\ngrid = [\"1\"]\nblock = [\"32\"]\nargs = [\"m\"]\n*/\n"
        )
    };
    // Packed: 2 bytes × 2^32 × 2^32 is 2^65.
    let e = resolve(&map("\"4294967296\", \"4294967296\", \"4\"", "")).unwrap_err();
    assert!(e.msg.contains("packed strides do not fit"), "{e}");
    assert_eq!(e.line, 2);
    // Given strides: each dim reaches 2^63 bytes; the sum does not fit.
    let r = resolve(&map(
        "\"8\", \"268435457\", \"268435457\"",
        "strides = [\"34359738368\", \"34359738368\"]\n",
    ))
    .unwrap();
    let ResolvedArg::TensorMap(t) = &r[0].args[0] else {
        panic!("{:?}", r[0].args)
    };
    assert_eq!(t.extent_bytes(), None);
    let e = t.check_fits(u64::MAX).unwrap_err();
    assert!(e.msg.contains("reach more than 2^64 bytes of `x`"), "{e}");
    // A single dim reaching past 2^64 on its own.
    let r = resolve(&map(
        "\"8\", \"4294967296\", \"2\"",
        "strides = [\"1099511627760\", \"16\"]\n",
    ))
    .unwrap();
    let ResolvedArg::TensorMap(t) = &r[0].args[0] else {
        panic!("{:?}", r[0].args)
    };
    assert_eq!(t.extent_bytes(), None);
}

#[test]
fn plan_expressions_past_the_limits_are_refused_on_their_line() {
    let deep = format!("\"{}T{}\"", "(".repeat(65), ")".repeat(65));
    let e = parse(&plan("\"1\"", &deep, "", "\"x\"", "1")).unwrap_err();
    assert_eq!(e.line, 5, "{e}");
    assert!(e.msg.contains("nested more than 64 levels"), "{e}");
    let long = format!("\"{}\"", vec!["T"; 2049].join("+"));
    let e = parse(&plan(&long, "\"32\"", "", "\"x\"", "1")).unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert!(e.msg.contains("at most 4096") && e.msg.len() < 300, "{e}");
    let e = parse(&plan("\"1\"", "\"32\"", "", "\"x\"", &"-".repeat(5000))).unwrap_err();
    assert_eq!(e.line, 8, "{e}");
}
