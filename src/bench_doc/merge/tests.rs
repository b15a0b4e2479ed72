use super::merge;
use crate::bench_doc::BenchDoc;
use crate::bench_doc::tests::gpu;
use crate::testing::suite;
use serde_json::{Value, json};
use std::path::PathBuf;

/// rms_norm's T_SOL of a shape on the H200, in ms (what a run would have written).
fn sol_ms(id: u32) -> f64 {
    let p = suite().problem("rms_norm").unwrap();
    let Some(sh) = p.shape(id) else {
        return 0.01; // a shape rms_norm does not have
    };
    let w = p.work(sh).unwrap();
    crate::suite::roofline::sol(&w, suite().hardware("H200").unwrap())
        .unwrap()
        .sol_ms()
}

/// A passing shape result of rms_norm with S = `s`.
fn shape(id: u32, s: f64) -> Value {
    json!({
        "shape": id, "verdict": "pass", "checks": [], "bench_ok": true, "strict_ok": true,
        "seeds_checked": 5, "timing": null, "sol_ms": sol_ms(id), "s": s, "message": null,
    })
}

fn doc(shapes: Vec<Value>, sha: &str, wall: f64) -> Value {
    json!({
        "operator": "rms_norm", "kernel": "knowledge/templates/rms_norm_warp_per_row.cu",
        "source_sha256": sha, "defines": {}, "gpu": gpu("NVIDIA H200"),
        "workers": ["vm:0"], "pool": {"workers": []}, "driver": "13.0", "nvrtc": "13.0",
        "hardware": "H200", "mode": "full", "verdict": "pass", "message": null,
        "compile": [], "shapes": shapes, "output": [], "s_op": 0.0, "s_op_benchmark": 0.0,
        "incumbent": {"kernel": "problems/rms_norm/baseline.cu", "layer": "shipped", "mode": "full",
                      "date": "2026-12-03", "s_op": 0.1},
        "wall_s": wall,
    })
}

/// Why the merge of `a` and `b` is refused (reading them, or joining them).
fn refusal(a: &Value, b: Value) -> String {
    joined(None, vec![a.clone(), b]).unwrap_err()
}

/// The documents read as `bench --merge` reads its files `part0.json`, `part1.json`, …
fn files(docs: Vec<Value>) -> Result<Vec<(PathBuf, BenchDoc)>, String> {
    docs.into_iter()
        .enumerate()
        .map(|(k, d)| {
            let f = PathBuf::from(format!("part{k}.json"));
            let doc = BenchDoc::from_value(d).map_err(|e| format!("{}: {e}", f.display()))?;
            Ok((f, doc))
        })
        .collect()
}

/// The joined document of `docs`, as JSON.
fn joined(op: Option<&str>, docs: Vec<Value>) -> Result<Value, String> {
    merge(suite(), op, &files(docs)?)
        .map(|d| d.to_value())
        .map_err(String::from)
}

#[test]
fn joins_disjoint_parts_and_computes_s_op_over_the_union() {
    let a = doc(vec![shape(0, 0.1), shape(2, 0.3)], "abc", 10.0);
    let b = doc(vec![shape(1, 0.2)], "abc", 5.0);
    let m = joined(Some("rms_norm"), vec![a, b]).unwrap();
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
    assert_eq!(m.get("incumbent"), Some(&Value::Null));
    assert_eq!(m["parts"][0]["file"], json!("part0.json"));
    assert_eq!(m["parts"][1]["shapes"], json!([1]));
    assert_eq!(m["date"], Value::Null, "parts without a date give none");
}

#[test]
fn the_merged_run_is_dated_by_its_last_part() {
    let mut a = doc(vec![shape(0, 0.1)], "abc", 1.0);
    let mut b = doc(vec![shape(1, 0.2)], "abc", 1.0);
    a["date"] = json!("2026-12-03 14:05:09");
    b["date"] = json!("2026-12-02 23:59:59");
    let m = joined(Some("rms_norm"), vec![a, b]).unwrap();
    assert_eq!(m["date"], json!("2026-12-03 14:05:09"));
}

#[test]
fn a_failed_part_makes_the_merge_fail_and_counts_zero() {
    let mut bad = shape(1, 0.9);
    bad["verdict"] = json!("incorrect");
    let mut b = doc(vec![bad], "abc", 1.0);
    b["verdict"] = json!("incorrect");
    b["message"] = json!("output `out` (seed 3): mismatch");
    let a = doc(vec![shape(0, 0.4), shape(2, 0.5)], "abc", 1.0);
    let m = joined(None, vec![a, b]).unwrap();
    assert_eq!(m["verdict"], json!("incorrect"));
    assert_eq!(m["message"], json!("output `out` (seed 3): mismatch"));
    // 0 (failed), 0.4, 0.5: the median is 0.4.
    assert!((m["s_op"].as_f64().unwrap() - 0.4).abs() < 1e-12);
}

#[test]
fn refuses_a_shape_in_two_parts() {
    let a = doc(vec![shape(0, 0.1)], "abc", 1.0);
    let b = doc(vec![shape(0, 0.2)], "abc", 1.0);
    let e = joined(None, vec![a, b]).unwrap_err();
    assert!(
        e.contains("shape 0 is in both part0.json and part1.json"),
        "{e}"
    );
}

#[test]
fn refuses_parts_of_different_sources_gpus_or_modes() {
    let a = doc(vec![shape(0, 0.1)], "abc", 1.0);
    let e = refusal(&a, doc(vec![shape(1, 0.2)], "def", 1.0));
    assert!(
        e.contains("part1.json: source_sha256 is \"def\", part0.json has \"abc\""),
        "{e}"
    );
    let mut quick = doc(vec![shape(1, 0.2)], "abc", 1.0);
    quick["mode"] = json!("quick");
    let e = joined(None, vec![a.clone(), quick]).unwrap_err();
    assert!(e.contains("mode is \"quick\""), "{e}");
    let mut h100 = doc(vec![shape(1, 0.2)], "abc", 1.0);
    h100["gpu"]["name"] = json!("NVIDIA H100");
    assert!(
        joined(None, vec![a.clone(), h100])
            .unwrap_err()
            .contains("gpu is")
    );
    let mut defined = doc(vec![shape(1, 0.2)], "abc", 1.0);
    defined["defines"] = json!({"BLOCK": 256});
    assert!(
        joined(None, vec![a, defined])
            .unwrap_err()
            .contains("defines is")
    );
}

#[test]
fn refuses_documents_without_a_source_fingerprint_or_of_another_operator() {
    let a = doc(vec![shape(0, 0.1)], "abc", 1.0);
    let mut old = doc(vec![shape(1, 0.2)], "abc", 1.0);
    old.as_object_mut().unwrap().remove("source_sha256");
    let e = joined(None, vec![a.clone(), old]).unwrap_err();
    assert!(e.contains("part1.json: no source_sha256"), "{e}");
    let b = doc(vec![shape(1, 0.2)], "abc", 1.0);
    let e = joined(Some("silu_and_mul"), vec![a.clone(), b]).unwrap_err();
    assert!(e.contains("are of `rms_norm`, not `silu_and_mul`"), "{e}");
    let e = joined(None, vec![a.clone(), json!({"hello": 1})]).unwrap_err();
    assert!(e.contains("part1.json: not a bench document"), "{e}");
    let e = joined(None, vec![a]).unwrap_err();
    assert!(e.contains("at least two"), "{e}");
}

#[test]
fn refuses_a_shape_the_operator_does_not_have() {
    let a = doc(vec![shape(0, 0.1)], "abc", 1.0);
    let b = doc(vec![shape(9999, 0.2)], "abc", 1.0);
    let e = joined(None, vec![a, b]).unwrap_err();
    assert!(e.contains("rms_norm has no shape 9999"), "{e}");
}

#[test]
fn a_shape_asked_for_without_a_result_counts_zero_and_fails_the_merge() {
    // Part b was asked for shapes 1 and 3 and lost 3 (its worker, say): 0.1, 0.2, 0.3 and a 0.
    let a = doc(vec![shape(0, 0.1), shape(2, 0.3)], "abc", 10.0);
    let mut b = doc(vec![shape(1, 0.2)], "abc", 5.0);
    b["shapes_asked"] = json!([1, 3]);
    let m = joined(None, vec![a, b]).unwrap();
    assert_eq!(m["shapes_asked"], json!([0, 1, 2, 3]));
    assert!(
        (m["s_op"].as_f64().unwrap() - 0.15).abs() < 1e-12,
        "the median of 0, 0.1, 0.2, 0.3: {}",
        m["s_op"]
    );
    assert_eq!(m["parts"][1]["missing"], json!([3]));
    assert_eq!(m.get("pool"), Some(&Value::Null));
    // A result for a shape the part was not asked for, or a shape asked for twice: refused.
    let mut c = doc(vec![shape(1, 0.2)], "abc", 5.0);
    c["shapes_asked"] = json!([3]);
    let e = refusal(&doc(vec![shape(0, 0.1)], "abc", 1.0), c);
    assert!(
        e.contains("part1.json: shape 1 has a result but is not in shapes_asked"),
        "{e}"
    );
    let mut d = doc(vec![shape(1, 0.2)], "abc", 5.0);
    d["shapes_asked"] = json!([1, 0]);
    let e = refusal(&doc(vec![shape(0, 0.1)], "abc", 1.0), d);
    assert!(
        e.contains("shape 0 is in both part0.json and part1.json"),
        "{e}"
    );
}

#[test]
fn the_benchmark_compatible_s_op_is_computed_again() {
    let mut strict_only = shape(1, 0.6);
    strict_only["bench_ok"] = json!(false);
    let mut a = doc(vec![shape(0, 0.4), shape(2, 0.5)], "abc", 1.0);
    a["s_op_benchmark"] = json!(0.99);
    let b = doc(vec![strict_only], "abc", 1.0);
    let m = joined(None, vec![a, b]).unwrap();
    // Strict: 0.4, 0.5, 0.6; benchmark-compatible: 0.4, 0.5 and a 0.
    assert!(
        (m["s_op"].as_f64().unwrap() - 0.5).abs() < 1e-12,
        "{}",
        m["s_op"]
    );
    assert!(
        (m["s_op_benchmark"].as_f64().unwrap() - 0.4).abs() < 1e-12,
        "{}",
        m["s_op_benchmark"]
    );
}

#[test]
fn refuses_a_part_scored_against_another_t_sol_or_with_a_bad_id() {
    let a = doc(vec![shape(0, 0.1)], "abc", 1.0);
    let mut other = shape(1, 0.2);
    other["sol_ms"] = json!(sol_ms(1) * 1.1);
    let e = refusal(&a, doc(vec![other], "abc", 1.0));
    assert!(
        e.contains("part1.json: shape 1 was scored against T_SOL"),
        "{e}"
    );
    let m = joined(None, vec![a.clone(), doc(vec![shape(1, 0.2)], "abc", 1.0)]).unwrap();
    assert_eq!(m["sol_checked"], json!(true));
    // 2^32 is no shape id (it must not wrap to shape 0).
    let mut wrapped = shape(1, 0.2);
    wrapped["shape"] = json!(4294967296u64);
    let e = refusal(&a, doc(vec![wrapped], "abc", 1.0));
    assert!(
        e.contains("part1.json: shape 4294967296 is no shape id"),
        "{e}"
    );
    let mut malformed = shape(1, 0.2);
    malformed["verdict"] = json!(17);
    let e = refusal(&a, doc(vec![malformed], "abc", 1.0));
    assert!(e.contains("part1.json: shape 1: not a shape result"), "{e}");
}

#[test]
fn refuses_parts_of_another_kernel_driver_nvrtc_or_hardware() {
    let a = doc(vec![shape(0, 0.1)], "abc", 1.0);
    for (ptr, value, field) in [
        ("/kernel", json!("other.cu"), "kernel is"),
        ("/driver", json!("12.8"), "driver is"),
        ("/nvrtc", json!("12.8"), "nvrtc is"),
        ("/hardware", json!("H100"), "hardware is"),
    ] {
        let mut b = doc(vec![shape(1, 0.2)], "abc", 1.0);
        *b.pointer_mut(ptr).unwrap() = value;
        let e = refusal(&a, b);
        assert!(e.contains(&format!("part1.json: {field}")), "{e}");
    }
}

/// The joined document is dated by its last part and each part keeps its own date; parts of
/// different versions of atrex-tui do not merge, and a part that does not say when it ran
/// leaves the joined document undated (the shipped standing then refuses it unless
/// provenance.toml dates it).
#[test]
fn the_joined_run_is_dated_by_its_last_part() {
    let dated = |shapes, when: &str| {
        let mut d = doc(shapes, "abc", 1.0);
        d["date"] = json!(when);
        d["tool_version"] = json!("0.1.0");
        d
    };
    let a = dated(vec![shape(0, 0.1)], "2026-12-03 09:00:00");
    let b = dated(vec![shape(1, 0.2)], "2026-12-04 01:30:00");
    let m = joined(None, vec![b.clone(), a.clone()]).unwrap();
    assert_eq!(m["date"], json!("2026-12-04 01:30:00"));
    assert_eq!(m["tool_version"], json!("0.1.0"));
    assert_eq!(m["parts"][1]["date"], json!("2026-12-03 09:00:00"));
    let mut newer = b.clone();
    newer["tool_version"] = json!("0.2.0");
    assert!(refusal(&a, newer).contains("part1.json: tool_version is"));
    let mut undated = doc(vec![shape(1, 0.2)], "abc", 1.0);
    undated["tool_version"] = json!("0.1.0");
    let m = joined(None, vec![a, undated]).unwrap();
    assert!(m.get("date").is_none(), "{}", m["date"]);
}
