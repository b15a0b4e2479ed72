use super::merge;
use crate::testing::suite;
use serde_json::{Value, json};
use std::path::PathBuf;

/// A passing shape result of rms_norm with S = `s`.
fn shape(id: u32, s: f64) -> Value {
    json!({
        "shape": id, "verdict": "pass", "checks": [], "bench_ok": true, "strict_ok": true,
        "seeds_checked": 5, "timing": null, "sol_ms": 0.01, "s": s, "message": null,
    })
}

fn doc(shapes: Vec<Value>, sha: &str, wall: f64) -> Value {
    json!({
        "operator": "rms_norm", "kernel": "knowledge/templates/rms_norm_warp_per_row.cu",
        "source_sha256": sha, "defines": {}, "gpu": {"name": "NVIDIA H200"},
        "workers": ["vm:0"], "pool": {"workers": []}, "driver": "13.0", "nvrtc": "13.0",
        "hardware": "H200", "mode": "full", "verdict": "pass", "message": null,
        "compile": [], "shapes": shapes, "output": [], "s_op": 0.0, "s_op_benchmark": 0.0,
        "incumbent": {"s_op": 0.1}, "wall_s": wall,
    })
}

fn files(docs: Vec<Value>) -> Vec<(PathBuf, Value)> {
    docs.into_iter()
        .enumerate()
        .map(|(k, d)| (PathBuf::from(format!("part{k}.json")), d))
        .collect()
}

#[test]
fn joins_disjoint_parts_and_computes_s_op_over_the_union() {
    let a = doc(vec![shape(0, 0.1), shape(2, 0.3)], "abc", 10.0);
    let b = doc(vec![shape(1, 0.2)], "abc", 5.0);
    let m = merge(suite(), Some("rms_norm"), &files(vec![a, b])).unwrap();
    let ids: Vec<u64> = m["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["shape"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, vec![0, 1, 2]);
    // The median of 0.1, 0.2, 0.3 (rms_norm has more shapes: S_op is over the parts' shapes).
    assert!(
        (m["s_op"].as_f64().unwrap() - 0.2).abs() < 1e-12,
        "{}",
        m["s_op"]
    );
    assert_eq!(m["wall_s"], json!(15.0));
    assert_eq!(m["verdict"], json!("pass"));
    assert_eq!(m["incumbent"], Value::Null);
    assert_eq!(m["parts"][0]["file"], json!("part0.json"));
    assert_eq!(m["parts"][1]["shapes"], json!([1]));
}

#[test]
fn a_failed_part_makes_the_merge_fail_and_counts_zero() {
    let mut bad = shape(1, 0.9);
    bad["verdict"] = json!("incorrect");
    let mut b = doc(vec![bad], "abc", 1.0);
    b["verdict"] = json!("incorrect");
    b["message"] = json!("output `out` (seed 3): mismatch");
    let a = doc(vec![shape(0, 0.4), shape(2, 0.5)], "abc", 1.0);
    let m = merge(suite(), None, &files(vec![a, b])).unwrap();
    assert_eq!(m["verdict"], json!("incorrect"));
    assert_eq!(m["message"], json!("output `out` (seed 3): mismatch"));
    // 0 (failed), 0.4, 0.5: the median is 0.4.
    assert!((m["s_op"].as_f64().unwrap() - 0.4).abs() < 1e-12);
}

#[test]
fn refuses_a_shape_in_two_parts() {
    let a = doc(vec![shape(0, 0.1)], "abc", 1.0);
    let b = doc(vec![shape(0, 0.2)], "abc", 1.0);
    let e = merge(suite(), None, &files(vec![a, b])).unwrap_err();
    assert!(
        e.contains("shape 0 is in both part0.json and part1.json"),
        "{e}"
    );
}

#[test]
fn refuses_parts_of_different_sources_gpus_or_modes() {
    let a = doc(vec![shape(0, 0.1)], "abc", 1.0);
    let e = merge(
        suite(),
        None,
        &files(vec![a.clone(), doc(vec![shape(1, 0.2)], "def", 1.0)]),
    )
    .unwrap_err();
    assert!(
        e.contains("part1.json: source_sha256 is \"def\", part0.json has \"abc\""),
        "{e}"
    );
    let mut quick = doc(vec![shape(1, 0.2)], "abc", 1.0);
    quick["mode"] = json!("quick");
    let e = merge(suite(), None, &files(vec![a.clone(), quick])).unwrap_err();
    assert!(e.contains("mode is \"quick\""), "{e}");
    let mut h100 = doc(vec![shape(1, 0.2)], "abc", 1.0);
    h100["gpu"]["name"] = json!("NVIDIA H100");
    assert!(
        merge(suite(), None, &files(vec![a.clone(), h100]))
            .unwrap_err()
            .contains("gpu is")
    );
    let mut defined = doc(vec![shape(1, 0.2)], "abc", 1.0);
    defined["defines"] = json!({"BLOCK": 256});
    assert!(
        merge(suite(), None, &files(vec![a, defined]))
            .unwrap_err()
            .contains("defines is")
    );
}

#[test]
fn refuses_documents_without_a_source_fingerprint_or_of_another_operator() {
    let a = doc(vec![shape(0, 0.1)], "abc", 1.0);
    let mut old = doc(vec![shape(1, 0.2)], "abc", 1.0);
    old.as_object_mut().unwrap().remove("source_sha256");
    let e = merge(suite(), None, &files(vec![a.clone(), old])).unwrap_err();
    assert!(e.contains("part1.json: no source_sha256"), "{e}");
    let b = doc(vec![shape(1, 0.2)], "abc", 1.0);
    let e = merge(suite(), Some("silu_and_mul"), &files(vec![a.clone(), b])).unwrap_err();
    assert!(e.contains("are of `rms_norm`, not `silu_and_mul`"), "{e}");
    let e = merge(suite(), None, &files(vec![a.clone(), json!({"hello": 1})])).unwrap_err();
    assert!(e.contains("part1.json: not a bench document"), "{e}");
    let e = merge(suite(), None, &files(vec![a])).unwrap_err();
    assert!(e.contains("at least two"), "{e}");
}

#[test]
fn refuses_a_shape_the_operator_does_not_have() {
    let a = doc(vec![shape(0, 0.1)], "abc", 1.0);
    let b = doc(vec![shape(9999, 0.2)], "abc", 1.0);
    let e = merge(suite(), None, &files(vec![a, b])).unwrap_err();
    assert!(e.contains("rms_norm has no shape 9999"), "{e}");
}
