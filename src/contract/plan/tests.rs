//! Launch plans: parsing, resolving per shape, tensor maps and clusters, errors on their lines.

use super::*;
use crate::suite::expr::Env;

const SRC: &str = r#"// a kernel
/* atrex:plan
[[launch]]
kernel = "k"
grid = ["T"]
block = "BLOCK"
smem = "BLOCK * 4"
args = ["out", "x", "T:i32", "eps:f32", "H * 2:i64"]

[[scratch]]
name = "tmp"
dtype = "fp32"
size = "T * 2"
zero = true

[tune]
BLOCK = [256, 128, 512]
VEC = [1, 2]

[defines]
VEC = 2
*/
__global__ void k() {}
"#;

fn env() -> Env {
    let mut e = Env::new();
    e.insert("T".into(), Value::Int(10));
    e.insert("H".into(), Value::Int(64));
    e.insert("eps".into(), Value::Float(1e-6));
    e
}

#[test]
fn parses_and_resolves() {
    let p = parse(SRC).unwrap();
    assert_eq!(p.lines.0, 2);
    assert_eq!(p.defines["BLOCK"], Value::Int(256));
    assert_eq!(p.defines["VEC"], Value::Int(2));
    let env = p.env(&env(), &p.defines);
    let r = p
        .resolve(&env, &|n| n == "out" || n == "x" || n == "tmp")
        .unwrap();
    assert_eq!(r[0].grid, [10, 1, 1]);
    assert_eq!(r[0].block, [256, 1, 1]);
    assert_eq!(r[0].smem, 1024);
    assert_eq!(
        r[0].args,
        vec![
            ResolvedArg::Buffer("out".into()),
            ResolvedArg::Buffer("x".into()),
            ResolvedArg::I32(10),
            ResolvedArg::F32(1e-6),
            ResolvedArg::I64(128)
        ]
    );
    assert_eq!(p.scratch_sizes(&env).unwrap()[0].1, 20);
    assert_eq!(define_options(&p.defines), vec!["-DBLOCK=256", "-DVEC=2"]);
}

#[test]
fn errors_name_the_line() {
    assert_eq!(parse("__global__ void k(){}").unwrap_err().line, 1);
    let bad = SRC.replace("block = \"BLOCK\"", "block = \"BLOCK +\"");
    let e = parse(&bad).unwrap_err();
    assert_eq!(e.line, 6, "{e}");
    assert!(e.msg.contains("bad expression"), "{e}");
    let bad = SRC.replace("\"T:i32\"", "\"T:int7\"");
    let e = parse(&bad).unwrap_err();
    assert_eq!(e.line, 8, "{e}");
    let bad = SRC.replace("kernel = \"k\"", "kernal = \"k\"");
    let e = parse(&bad).unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    let bad = SRC.replace("VEC = 2\n*/", "VEC = 3\n*/");
    let e = parse(&bad).unwrap_err();
    assert_eq!(e.line, 21, "{e}");
    assert!(
        parse("/* atrex:plan\n[[launch]]\n")
            .unwrap_err()
            .msg
            .contains("not closed")
    );
    let bad = SRC.replace("VEC = 2\n*/", "VEC = 2\nW = [1, 2]\n*/");
    let e = parse(&bad).unwrap_err();
    assert_eq!(e.line, 22, "{e}");
    assert!(e.msg.contains("[tune]"), "{e}");
}

#[test]
fn unknown_scalar_without_type_is_rejected_at_resolve() {
    let p = parse(SRC).unwrap();
    let env = p.env(&env(), &p.defines);
    let e = p.resolve(&env, &|n| n == "out").unwrap_err();
    assert!(e.msg.contains("`x`"), "{e}");
    let bigblock = SRC.replace("BLOCK = [256, 128, 512]", "BLOCK = [2048]");
    let p = parse(&bigblock).unwrap();
    let env = p.env(&env, &p.defines);
    assert!(
        p.resolve(&env, &|_| true)
            .unwrap_err()
            .msg
            .contains("threads")
    );
}

const TMA: &str = include_str!("../../../knowledge/templates/silu_and_mul_tma.cu");

fn tma_env(t: i64, d: i64) -> Env {
    let mut e = Env::new();
    e.insert("T".into(), Value::Int(t as i128));
    e.insert("d".into(), Value::Int(d as i128));
    e
}

fn resolve_tma(src: &str, t: i64, d: i64) -> Result<Vec<ResolvedLaunch>, PlanError> {
    let p = parse(src)?;
    let env = p.env(&tma_env(t, d), &p.defines);
    p.resolve(&env, &|n| n == "x" || n == "out")
}

#[test]
fn tensor_maps_and_clusters_resolve_per_shape() {
    let r = resolve_tma(TMA, 1000, 768).unwrap();
    assert_eq!(r[0].grid, [12, 8, 1]);
    assert_eq!(r[0].cluster, Some([2, 1, 1]));
    assert_eq!(r[0].smem, 3 * 64 * 128 * 2 + 64, "above 48 KiB");
    let ResolvedArg::TensorMap(x) = &r[0].args[0] else {
        panic!("{:?}", r[0].args[0])
    };
    assert_eq!(
        (x.dims.clone(), x.strides.clone(), x.boxes.clone()),
        (vec![1536, 1000], vec![3072], vec![64, 128])
    );
    assert_eq!(x.l2_promotion, L2Promotion::B256);
    assert_eq!(x.extent_bytes(), Some(1000 * 1536 * 2));
    assert!(x.check_fits(1000 * 1536 * 2).is_ok());
    let e = x.check_fits(999 * 1536 * 2).unwrap_err();
    assert!(e.msg.contains("reach") && e.msg.contains("`x`"), "{e}");
    assert_eq!(
        e.line,
        TMA.lines().position(|l| l == "[[tensor_map]]").unwrap() + 1
    );
    assert!(matches!(r[0].args[2], ResolvedArg::I32(768)));
}

#[test]
fn tensor_maps_of_every_copy_engine_type_size_their_elements() {
    // Packed strides, extents and box bytes follow the map's own element size (an i32 or u16
    // map is not one byte per element).
    for (dtype, size) in [
        ("u8", 1u64),
        ("fp8_e5m2", 1),
        ("u16", 2),
        ("i16", 2),
        ("bf16", 2),
        ("i32", 4),
        ("u32", 4),
        ("i64", 8),
        ("u64", 8),
        ("fp64", 8),
    ] {
        let src = TMA.replacen("dtype = \"bf16\"", &format!("dtype = \"{dtype}\""), 1);
        let r = resolve_tma(&src, 1000, 768).unwrap();
        let ResolvedArg::TensorMap(x) = &r[0].args[0] else {
            panic!("{:?}", r[0].args[0])
        };
        assert_eq!(x.strides, vec![1536 * size], "{dtype}");
        assert_eq!(x.extent_bytes(), Some(1000 * 1536 * size), "{dtype}");
        assert_eq!(tensor_map_dtype_size(dtype), size);
    }
}

#[test]
fn tensor_map_and_cluster_mistakes_name_the_line() {
    let line_of =
        |src: &str, needle: &str| src.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let cases: Vec<(String, &str)> = vec![
        (
            TMA.replace(
                "dtype = \"bf16\"\ndims = [\"2 * d\"",
                "dtype = \"bf17\"\ndims = [\"2 * d\"",
            ),
            "dtype `bf17`",
        ),
        (
            TMA.replace(
                "box = [\"64\", \"ROWS\"]\nl2",
                "box = [\"4\", \"ROWS\"]\nl2",
            ),
            "multiple of 16",
        ),
        (
            TMA.replace("l2_promotion = \"256B\"", "swizzle = \"64B\""),
            "swizzle span",
        ),
        (
            TMA.replace("l2_promotion = \"256B\"", "l2_promotion = \"512B\""),
            "l2_promotion `512B`",
        ),
        (
            TMA.replace("l2_promotion = \"256B\"", "strides = [\"2 * d * 2 + 2\"]"),
            "multiple of 16 below",
        ),
        (
            TMA.replace("cluster = [\"2\", \"1\", \"1\"]", "cluster = [\"16\"]"),
            "1 to 8",
        ),
        (
            TMA.replace("grid = [\"d / 64\"", "grid = [\"d / 64 + 1\""),
            "whole number of clusters",
        ),
        (
            TMA.replace("tensor = \"x\"", "tensor = \"y\""),
            "not an input, output or scratch",
        ),
        (
            TMA.replace(
                "cluster = [\"2\", \"1\", \"1\"]",
                "cluster = [\"2\", \"1\", \"1\"]\ncooperative = true",
            ),
            "either cooperative or in clusters",
        ),
    ];
    for (src, needle) in cases {
        let e = resolve_tma(&src, 1000, 768).unwrap_err();
        assert!(e.msg.contains(needle), "{needle}: {e}");
        let plan_start = line_of(&src, "/* atrex:plan");
        assert!(
            e.line > plan_start,
            "{needle}: line {} names the plan",
            e.line
        );
    }
}

/// `cooperative = true` reaches the resolved launch (the worker then launches it through
/// `cuLaunchKernelEx` with the cooperative attribute); a plan without it is not cooperative.
#[test]
fn cooperative_launches_resolve_per_shape() {
    let src = TMA.replace("cluster = [\"2\", \"1\", \"1\"]\n", "cooperative = true\n");
    assert_ne!(src, TMA, "the template still has its cluster line");
    let r = resolve_tma(&src, 1000, 768).unwrap();
    assert!(r[0].cooperative);
    assert_eq!(r[0].cluster, None);
    let r = resolve_tma(TMA, 1000, 768).unwrap();
    assert!(!r[0].cooperative);
}

/// `when` keeps a launch on the shapes where it is true and drops it elsewhere; a value that is
/// no condition, or a shape on which no launch runs, is an error naming the plan's line.
#[test]
fn when_runs_a_launch_only_where_it_holds() {
    let with = |w: &str| {
        TMA.replace(
            "cluster = [\"2\", \"1\", \"1\"]\n",
            &format!("cluster = [\"2\", \"1\", \"1\"]\nwhen = \"{w}\"\n"),
        )
    };
    let src = with("T > 512");
    assert_ne!(src, TMA, "the template still has its cluster line");
    let plan_start = src
        .lines()
        .position(|l| l.starts_with("/* atrex:plan"))
        .unwrap()
        + 1;
    let when_line = src.lines().position(|l| l.starts_with("when = ")).unwrap() + 1;
    assert_eq!(resolve_tma(&src, 1000, 768).unwrap().len(), 1);
    let e = resolve_tma(&src, 100, 768).unwrap_err();
    assert!(e.msg.contains("no launch runs on this shape"), "{e}");
    assert!(e.line > plan_start, "{e}");
    // A number is a condition (0 is false).
    assert_eq!(resolve_tma(&with("d % 2 + 1"), 1000, 768).unwrap().len(), 1);
    let e = resolve_tma(&with("d % 2"), 1000, 768).unwrap_err();
    assert!(e.msg.contains("no launch runs on this shape"), "{e}");
    // Floats: 0.0 is false, any other number true; NaN settles nothing and is no condition.
    assert!(resolve_tma(&with("float(T) * 0.0"), 1000, 768).is_err());
    assert_eq!(resolve_tma(&with("0.5"), 1000, 768).unwrap().len(), 1);
    let e = resolve_tma(&with("sqrt(T - 2000)"), 1000, 768).unwrap_err();
    assert!(e.msg.contains("not a condition"), "{e}");
    assert_eq!(e.line, when_line, "{e}");
    // A name the shape does not have is an error on the `when` line.
    let e = resolve_tma(&with("nowhere > 1"), 1000, 768).unwrap_err();
    assert!(e.msg.contains("when `nowhere > 1`"), "{e}");
    assert_eq!(e.line, when_line, "{e}");
    // Where the launch does not run, its other expressions are not evaluated: a grid and a
    // tensor map that would be invalid on such a shape do not fail it.
    let guarded = with("T > 512")
        .replacen("[[launch]]", "[[launch]]\nkernel = \"first\"\ngrid = [\"1\"]\nblock = [\"32\"]\nargs = [\"out\"]\n\n[[launch]]", 1)
        .replace("dims = [\"2 * d\", \"T\"]", "dims = [\"2 * d\", \"T - 512\"]");
    assert!(
        guarded.contains("\"T - 512\""),
        "the template's tensor map still reads dims = [\"2 * d\", \"T\"]"
    );
    assert_eq!(resolve_tma(&guarded, 100, 768).unwrap().len(), 1);
    assert_eq!(resolve_tma(&guarded, 1000, 768).unwrap().len(), 2);
    let unguarded = guarded.replace("when = \"T > 512\"\n", "");
    assert!(
        resolve_tma(&unguarded, 100, 768).is_err(),
        "the map's dims are invalid at T = 100"
    );
    // Beside a launch that always runs, the conditional one is dropped alone.
    let two = src.replacen(
        "[[launch]]",
        "[[launch]]\nkernel = \"first\"\ngrid = [\"1\"]\nblock = [\"32\"]\nargs = [\"out\"]\n\n[[launch]]",
        1,
    );
    let r = resolve_tma(&two, 100, 768).unwrap();
    assert_eq!(
        r.iter().map(|l| l.kernel.as_str()).collect::<Vec<_>>(),
        ["first"]
    );
    assert_eq!(resolve_tma(&two, 1000, 768).unwrap().len(), 2);
    let e = resolve_tma(&with("'yes'"), 1000, 768).unwrap_err();
    assert!(e.msg.contains("not a condition"), "{e}");
    assert_eq!(e.line, when_line, "{e}");
}
