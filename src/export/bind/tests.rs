//! The binding: inverses of dimension expressions, which names come from where for the suite's
//! operators, refusals with their reasons, and the verification catching a wrong step.

use super::*;
use crate::contract::plan;
use crate::suite::expr::{Env, parse};
use crate::suite::{Suite, SuiteSource};

fn suite() -> Suite {
    Suite::load(SuiteSource::Embedded).expect("the built-in suite loads")
}

fn obs() -> Expr {
    Expr::Var("x.shape[0]".into(), 0)
}

fn solve(src: &str, unknown: &str, observed: i128, known: &[(&str, i128)]) -> Option<Value> {
    let inv = invert(&parse(src).unwrap(), unknown, obs())?;
    let mut env = Env::new();
    env.insert("x.shape[0]".into(), Value::Int(observed));
    for (k, v) in known {
        env.insert(k.to_string(), Value::Int(*v));
    }
    Some(inv.eval(&env).unwrap())
}

#[test]
fn dimensions_are_solved_for_their_one_unknown() {
    assert_eq!(solve("T", "T", 9, &[]), Some(Value::Int(9)));
    assert_eq!(solve("n + 1", "n", 131, &[]), Some(Value::Int(130)));
    assert_eq!(solve("1 + n", "n", 131, &[]), Some(Value::Int(130)));
    assert_eq!(solve("2*d", "d", 3072, &[]), Some(Value::Int(1536)));
    assert_eq!(solve("B*S", "S", 4096, &[("B", 4)]), Some(Value::Int(1024)));
    assert_eq!(
        solve("n * MB + 64", "n", 130 * 18 + 64, &[("MB", 18)]),
        Some(Value::Int(130))
    );
    assert_eq!(solve("W - 1", "W", 3, &[]), Some(Value::Int(4)));
    assert_eq!(solve("10 - W", "W", 3, &[]), Some(Value::Int(7)));
    assert_eq!(solve("H / 128", "H", 56, &[]), Some(Value::Int(7168)));
    assert_eq!(solve("-k", "k", -5, &[]), Some(Value::Int(5)));
    assert_eq!(
        solve("(Hq + 2*Hkv)*D", "Hq", 4096, &[("Hkv", 8), ("D", 128)]),
        Some(Value::Int(16))
    );
    // Not invertible: floor division, two occurrences, a function.
    assert_eq!(solve("T // 2", "T", 9, &[]), None);
    assert_eq!(solve("T * T", "T", 9, &[]), None);
    assert_eq!(solve("ceil(T / 16)", "T", 9, &[]), None);
}

#[test]
fn the_three_operators_recover_their_shapes_from_the_forwards_arguments() {
    let s = suite();
    let names = |b: &Binding| -> Vec<String> {
        b.steps
            .iter()
            .map(|st| match st {
                Step::Init { name } => format!("init {name}"),
                Step::Default { name, .. } => format!("default {name}"),
                Step::Dim {
                    name, tensor, dim, ..
                } => format!("dim {name} {tensor}.{dim}"),
                Step::Dtype { name, .. } => format!("dtype {name}"),
                Step::Holds { name, tensor } => format!("holds {name} {tensor}"),
                Step::Let { name, .. } => format!("let {name}"),
            })
            .collect()
    };
    let rms = s.problem("rms_norm").unwrap();
    let plan = plan::parse(
        &s.source
            .read_checked("rms_norm/baseline.cu")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let b = bind(rms, &plan).unwrap();
    verify(rms, &b).unwrap();
    assert_eq!(
        names(&b),
        [
            "init eps",
            "dim token_count 0.0",
            "let T",
            "dim hidden_size 0.1",
            "let H"
        ]
    );
    assert!(b.holds().is_empty(), "rms_norm reads nothing back");
    // weight [H] is checked against x [T, H].
    assert!(b.checks.iter().any(|c| c.tensor == 1 && c.src == "H"));

    let silu = s.problem("silu_and_mul").unwrap();
    let plan = plan::parse(
        &s.source
            .read_checked("silu_and_mul/baseline.cu")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let b = bind(silu, &plan).unwrap();
    verify(silu, &b).unwrap();
    assert_eq!(
        names(&b),
        ["dim T 0.0", "dim d 0.1"],
        "`shape` itself is never needed"
    );
    assert!(
        b.checks.iter().any(|c| c.dim == 1 && c.src == "2*d"),
        "the lossy `// 2` is checked"
    );

    let ua = s.problem("unified_attention").unwrap();
    let src =
        crate::standing::store::template_source("knowledge/templates/unified_attention_wgmma.cu")
            .unwrap();
    let b = bind(ua, &plan::parse(&src).unwrap()).unwrap();
    verify(ua, &b).unwrap();
    assert_eq!(b.holds(), [4], "seq_lens is read back from seqused_k");
    let n = names(&b);
    assert!(n.contains(&"dim num_seqs 4.0".to_string()), "{n:?}");
    assert!(
        n.contains(&"let MB".to_string()) && n.contains(&"let NB".to_string()),
        "{n:?}"
    );
    // The caches' block count and the block table's width are checked against seq_lens.
    assert!(
        b.checks
            .iter()
            .any(|c| c.tensor == 1 && c.dim == 0 && c.src == "NB")
    );
    assert!(
        b.checks
            .iter()
            .any(|c| c.tensor == 5 && c.dim == 1 && c.src == "MB")
    );
}

#[test]
fn a_name_the_forward_cannot_know_is_refused_with_the_reason() {
    let s = suite();
    // attention_forward's list of sequence lengths is held by no input (cu_seqlens are sums).
    let af = s.problem("attention_forward").unwrap();
    let src =
        crate::standing::store::template_source("knowledge/templates/attention_forward_wgmma.cu")
            .unwrap();
    let e = bind(af, &plan::parse(&src).unwrap()).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("`seq_lens`") && msg.contains("holds"), "{msg}");

    // A plan that reads a recorded parameter.
    let fm = s.problem("fused_moe").unwrap();
    let src = "/* atrex:plan\n[[launch]]\nkernel = \"k\"\ngrid = [\"A\"]\nblock = [\"32\"]\nargs = [\"out\"]\n*/\n";
    let msg = bind(fm, &plan::parse(src).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("distinct_experts") && msg.contains("recorded"),
        "{msg}"
    );
}

#[test]
fn verification_catches_a_step_that_gives_the_wrong_value() {
    let s = suite();
    let rms = s.problem("rms_norm").unwrap();
    let plan = plan::parse(
        &s.source
            .read_checked("rms_norm/baseline.cu")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let mut b = bind(rms, &plan).unwrap();
    for st in &mut b.steps {
        if let Step::Dim { name, inverse, .. } = st
            && name == "token_count"
        {
            *inverse = Expr::Bin(
                "+",
                Box::new(Expr::Var("x.shape[0]".into(), 0)),
                Box::new(Expr::Lit(Value::Int(1))),
                0,
            );
        }
    }
    let msg = verify(rms, &b).unwrap_err().to_string();
    assert!(msg.contains("`T` comes out as"), "{msg}");
}

#[test]
fn constructor_arguments_and_dtypes_bind_where_the_tensors_cannot() {
    let s = suite();
    // fused_qkv_rope: heads and head size are constructor arguments; its dtype (a string
    // parameter) is the dtype of the qkv tensor.
    let p = s.problem("fused_qkv_rope").unwrap();
    let src = "/* atrex:plan\n[[launch]]\nkernel = \"k\"\ngrid = [\"T\"]\nblock = [\"32\"]\nargs = [\"q\", \"if(dtype == 'fp16', 1, 0):i32\", \"H:i32\", \"R:i32\"]\n*/\n";
    let b = bind(p, &plan::parse(src).unwrap()).unwrap();
    verify(p, &b).unwrap();
    assert!(
        b.steps
            .iter()
            .any(|st| matches!(st, Step::Dtype { name, tensor: 0 } if name == "dtype"))
    );
    assert!(
        b.steps
            .iter()
            .any(|st| matches!(st, Step::Init { name } if name == "rope_dim"))
    );
    assert!(
        b.steps
            .iter()
            .any(|st| matches!(st, Step::Init { name } if name == "num_heads"))
    );
    // paged_attention_decode's context length is only in the values of a tensor (const(L)).
    let pa = s.problem("paged_attention_decode").unwrap();
    let plan = plan::parse(
        &s.source
            .read_checked("paged_attention_decode/baseline.cu")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let msg = bind(pa, &plan).unwrap_err().to_string();
    assert!(msg.contains("ctx_len"), "{msg}");
}
