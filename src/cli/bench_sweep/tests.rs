use super::*;
use crate::bench_doc::tests::gpu;
use crate::testing::suite;
use serde_json::json;

const KERNEL: &str = "knowledge/templates/rms_norm_regcache.cu";

fn plan(defines: &[&str], sweep: &[&str]) -> Result<Plan, String> {
    let p = suite().problem("rms_norm").unwrap();
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Plan::of(
        suite(),
        p,
        Some(Path::new(KERNEL)),
        &strings(defines),
        &strings(sweep),
    )
}

/// A run of rms_norm: per shape, S (None: failed).
fn run(s_op: f64, shapes: &[(u32, Option<f64>)]) -> BenchDoc {
    let shapes: Vec<serde_json::Value> = shapes
        .iter()
        .map(|(id, s)| {
            json!({"shape": id, "verdict": if s.is_some() { "pass" } else { "incorrect" },
                   "bench_ok": s.is_some(), "strict_ok": s.is_some(), "seeds_checked": 1,
                   "sol_ms": 0.00125, "s": s,
                   "message": if s.is_some() { None } else { Some("out: 3 of 4096 elements differ") }})
        })
        .collect();
    BenchDoc::from_value(json!({
        "operator": "rms_norm", "kernel": KERNEL, "gpu": gpu("NVIDIA H200"), "driver": "13.0",
        "nvrtc": "13.0", "hardware": "H200", "mode": "quick", "verdict": "pass",
        "shapes": shapes, "s_op": s_op,
    }))
    .unwrap()
}

#[test]
fn each_combination_is_its_own_kernel_with_every_define() {
    let plan = plan(&["MAXV=8"], &["THREADS=256,128", "UNROLL_ROWS=1,2"]).unwrap_err();
    assert!(plan.contains("UNROLL_ROWS"), "{plan}");
    let plan = self::plan(&["MAXV=8"], &["THREADS=256,128"]).unwrap();
    assert!(plan.is_sweep());
    assert_eq!(plan.kernel, KERNEL);
    assert_eq!(plan.candidates.len(), 2);
    for (c, threads) in plan.candidates.iter().zip(["256", "128"]) {
        assert!(c.name.contains(&format!("THREADS={threads}")), "{}", c.name);
        assert!(c.name.contains("MAXV=8"), "{}", c.name);
    }
    assert_ne!(plan.candidates[0].code, plan.candidates[1].code);
    let one = self::plan(&[], &[]).unwrap();
    assert!(!one.is_sweep());
    assert_eq!(one.candidates.len(), 1);
}

#[test]
fn a_sweep_is_refused_before_anything_runs() {
    let e = plan(&["THREADS=256"], &["THREADS=256,128"]).unwrap_err();
    assert_eq!(e, "`THREADS` is both swept and set by --define: drop one");
    let e = plan(&[], &["THREADS=256"]).unwrap_err();
    assert!(
        e.starts_with("--sweep `THREADS=256`: expected KEY=V1,V2,…"),
        "{e}"
    );
    let e = plan(&[], &["BLOCKS=1,2"]).unwrap_err();
    assert!(e.contains("`BLOCKS` is not a tunable parameter"), "{e}");
}

#[test]
fn the_table_shows_each_combination_and_the_best_per_shape() {
    let plan = plan(&[], &["THREADS=256,128"]).unwrap();
    let runs = vec![
        run(0.35, &[(0, Some(0.30)), (1, Some(0.40)), (2, Some(0.35))]),
        run(0.30, &[(0, Some(0.32)), (1, None), (2, Some(0.30))]),
    ];
    let asked = [0, 1, 2];
    let results: Vec<&[_]> = runs.iter().map(|d| d.run.shapes.as_slice()).collect();
    let best = sweep::best_per_shape(&results, &asked);
    let t = plan.table(&runs, &asked, &best);
    let want = "\
rms_norm · knowledge/templates/rms_norm_regcache.cu · NVIDIA H200 · quick · sweep of THREADS (2 combinations)
shape   T_SOL ms     256     128  best (THREADS)
    0    0.00125   0.300   0.320  128
    1    0.00125   0.400       ✗  256
    2    0.00125   0.350   0.300  256
 S_op             0.3500  0.3000
best per shape: S_op 0.3500 (each shape at its best combination; the best single one 0.3500)
✗ 128 shape 1: incorrect: out: 3 of 4096 elements differ
";
    assert_eq!(t, want, "\n{t}");
}
