use super::*;
use serde_json::json;
use std::path::Path;

/// A GPU as a worker describes it, by name.
pub(crate) fn gpu(name: &str) -> Value {
    json!({
        "index": 0, "name": name, "cc_major": 9, "cc_minor": 0, "sm_count": 132,
        "l2_bytes": 62914560u64, "memory_bytes": 150109880320u64, "sm_clock_mhz": 1980,
        "mem_clock_mhz": 3201, "arch": "sm_90a",
    })
}

/// Every bench document in docs/measurements, by file name, as JSON.
fn committed() -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/measurements");
    let mut docs: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("bench-") && n.ends_with(".json")
        })
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, serde_json::from_str(&text).unwrap())
        })
        .collect();
    docs.sort_by(|a, b| a.0.cmp(&b.0));
    docs
}

/// Where two JSON values first differ (a path and both sides), if they do.
fn difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.keys()
                .chain(y.keys())
                .find_map(|k| match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => difference(p, q, &format!("{at}/{k}")),
                    (p, q) => Some(format!("{at}/{k}: {p:?} against {q:?}")),
                })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| difference(p, q, &format!("{at}/{i}"))),
        _ => (a != b).then(|| format!("{at}: {a} against {b}")),
    }
}

/// Every committed document reads as a bench document and as a run, and is written back as it
/// was, field for field (older ones without `source_sha256`, `date`, `shapes_asked`, … and with
/// fields no longer written, like `devices`, included).
#[test]
fn every_committed_document_reads_and_writes_back_as_it_was() {
    let docs = committed();
    assert!(docs.len() >= 44, "{} documents", docs.len());
    let mut older = 0;
    for (name, v) in docs {
        let doc = BenchDoc::from_value(v.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Some(d) = difference(&doc.to_value(), &v, "") {
            panic!("{name}: written back, {d}");
        }
        let run = Run::from_value(v.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(run, doc.run, "{name}");
        assert_eq!(run.shapes.len(), v["shapes"].as_array().unwrap().len());
        if doc.run.source_sha256.is_none() {
            older += 1;
            assert!(
                doc.shapes_asked.is_none() && doc.run.date.is_none(),
                "{name}"
            );
        }
    }
    assert!(older > 0, "the older documents are among them");
}

/// The document as `bench --json` prints it: keys in alphabetical order at every depth, the
/// verdict by its name, absent figures null: a committed document as printed (the later ones
/// had `tool_version` written in by hand, out of order) comes back byte for byte.
#[test]
fn a_document_is_written_in_the_committed_form() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/measurements/bench-rms_norm.json"),
    )
    .unwrap();
    let doc = BenchDoc::from_json(&text).unwrap();
    assert_eq!(doc.to_json_pretty(), text.trim_end());
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/measurements/bench-best-rms_norm.json"),
    )
    .unwrap();
    let mut failed = BenchDoc::from_json(&text).unwrap();
    failed.verdict = Some(Verdict::CompileError);
    failed.s_op = f64::NAN;
    failed.s_op_benchmark = Some(f64::NAN);
    failed.incumbent = Some(None);
    failed.run.shapes[0].checks[0].max_abs = f64::NAN;
    let v = failed.to_value();
    assert_eq!(v["verdict"], "compile error");
    assert_eq!(v["s_op"], Value::Null);
    assert_eq!(v.get("s_op_benchmark"), Some(&Value::Null));
    assert_eq!(v["shapes"][0]["checks"][0]["max_abs"], Value::Null);
    assert_eq!(v.get("incumbent"), Some(&Value::Null));
    let back = BenchDoc::from_value(v).unwrap();
    assert_eq!(back.verdict, Some(Verdict::CompileError));
    assert!(back.s_op.is_nan(), "a null figure reads back as NaN");
    assert!(back.s_op_benchmark.unwrap().is_nan());
    assert!(back.run.shapes[0].checks[0].max_abs.is_nan());
    assert_eq!(back.incumbent, Some(None), "null, not absent");
}

/// Every verdict is written by its name and read back from it; another word is refused.
#[test]
fn verdicts_go_by_their_names() {
    use Verdict::*;
    let all = [
        Pass,
        CompileError,
        PlanError,
        Incorrect,
        Fault,
        Timeout,
        Impossible,
        Unchecked,
        Cancelled,
        Error,
    ];
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/measurements/bench-mrope.json"),
    )
    .unwrap();
    let base: Value = serde_json::from_str(&text).unwrap();
    for v in all {
        let mut d = base.clone();
        d["verdict"] = json!(v.name());
        let doc = BenchDoc::from_value(d).unwrap();
        assert_eq!(doc.verdict, Some(v.clone()));
        assert_eq!(doc.to_value()["verdict"], v.name());
    }
    for bad in ["compile_error", "passed", "Pass"] {
        let mut d = base.clone();
        d["verdict"] = json!(bad);
        let e = BenchDoc::from_value(d).unwrap_err();
        assert!(matches!(e, DocError::Fields(_)), "{e:?}");
        assert!(
            e.to_string().contains(&format!("unknown verdict `{bad}`")),
            "{e}"
        );
    }
}

/// What is not a bench document is refused in words that name the shape or the field.
#[test]
fn a_bad_document_is_refused_naming_what_is_wrong() {
    let doc = |shapes: Value| {
        json!({
            "operator": "rms_norm", "kernel": "k.cu", "gpu": gpu("NVIDIA H200"),
            "driver": "13.0", "nvrtc": null, "hardware": "H200", "mode": "full",
            "shapes": shapes, "s_op": 0.0,
        })
    };
    assert!(BenchDoc::from_value(doc(json!([]))).is_ok());
    let refused = |v: Value| BenchDoc::from_value(v).unwrap_err().to_string();
    for v in [json!({"hello": 1}), json!([1]), json!({"operator": "x"})] {
        assert_eq!(refused(v), "not a bench document (`bench OP --json`)");
    }
    assert_eq!(
        refused(doc(json!([{"verdict": "pass"}]))),
        "a shape result without its shape id"
    );
    assert_eq!(
        refused(doc(json!([{"shape": 4294967296u64}]))),
        "shape 4294967296 is no shape id"
    );
    assert!(
        refused(doc(json!([{"shape": 3, "verdict": 17}])))
            .starts_with("shape 3: not a shape result (")
    );
    let mut no_driver = doc(json!([]));
    no_driver.as_object_mut().unwrap().remove("driver");
    let e = refused(no_driver);
    assert!(
        e.starts_with("not a bench document (`bench OP --json`): missing field `driver`"),
        "{e}"
    );
    let e = BenchDoc::from_json("{\"operator\":").unwrap_err();
    assert!(matches!(e, DocError::Json(_)), "{e:?}");
    assert!(e.to_string().starts_with("not a JSON document ("));
    assert!(matches!(
        BenchDoc::from_value(doc(json!([{"shape": 3, "verdict": 17}]))),
        Err(DocError::ShapeResult { id: 3, .. })
    ));
}

/// A `measure --json` document reads as a run (its session's fields aside).
#[test]
fn a_measure_document_reads_as_a_run() {
    let v = json!({
        "session": "sessions/x.jsonl", "operator": "rms_norm", "kernel": "k.cu",
        "source_sha256": "ab", "code_sha256": "cd", "gpu": gpu("NVIDIA H200"), "driver": "13.0",
        "nvrtc": "13.0", "hardware": null, "mode": "quick", "date": "2026-12-03 10:00:00",
        "tool_version": "0.1.0", "shapes": [], "rev": 2, "parent": 1, "verdict": "S 0.301",
        "s_op": null, "incumbent_s_op_before": 0.3, "decision": null, "standing": null,
    });
    let run = Run::from_value(v).unwrap();
    assert_eq!(run.hardware, None);
    assert_eq!(run.mode_name(), "quick");
    assert_eq!(run.date.as_deref(), Some("2026-12-03 10:00:00"));
}
