//! The standing: its format, atomic writes, staleness, bad files and the shipped H200 standing;
//! `baselines`: the shipped standing against docs/baselines.md.

use super::format::{Defect, FORMAT_VERSION};
use super::*;
use crate::bench_doc::Run;
use crate::bench_doc::tests::gpu;
use crate::contract::protocol::{ShapeResult, Verdict};
use crate::contract::stats::TimingStats;
use crate::suite::SuiteSource;
use crate::testing::{suite, tempdir, ws};

mod baselines;

/// A passing rms_norm shape at S = `s`, against its T_SOL on the H200 (as a run reports it).
fn result(shape: u32, s: f64) -> ShapeResult {
    let p = suite().problem("rms_norm").unwrap();
    let w = p.work(p.shape(shape).unwrap()).unwrap();
    let sol = crate::suite::roofline::sol(&w, suite().hardware("H200").unwrap())
        .unwrap()
        .sol_ms();
    ShapeResult {
        shape,
        verdict: Verdict::Pass,
        checks: vec![],
        bench_ok: true,
        strict_ok: true,
        seeds_checked: 5,
        timing: Some(TimingStats {
            median_ms: sol / s,
            min_ms: sol / s,
            mean_ms: sol / s,
            p20_ms: sol / s,
            p80_ms: sol / s,
            rel_iqr: 0.01,
            n: 100,
            quick: false,
            sm_clock_mhz: Some(1980),
            outliers: 0,
            max_ms: None,
            checked: 0,
        }),
        sol_ms: sol,
        s: Some(s),
        message: None,
        device: Some(0),
        worker: None,
    }
}

fn ctx(gpu: &str) -> build::Context {
    build::Context {
        gpu: gpu.into(),
        driver: "13.0".into(),
        nvrtc: Some("13.0".into()),
        tool_version: "0.1.0".into(),
        hardware: "H200".into(),
        date: "2026-12-01 10:00:00".into(),
    }
}

/// An rms_norm record of `source`, every shape at S 0.3.
fn rms_record(source: &str) -> Update {
    let p = suite().problem("rms_norm").unwrap();
    let results: Vec<ShapeResult> = p.shapes.iter().map(|s| result(s.id, 0.3)).collect();
    let kernel = store::kernel_path("rms_norm", source);
    Update {
        op: "rms_norm".into(),
        record: build::record(
            p,
            &OpPrint::of(suite(), p),
            source,
            kernel,
            Origin::Session {
                session: "sessions/session-1.jsonl".into(),
                rev: 3,
            },
            "full",
            &results,
            &ctx("NVIDIA H200"),
        ),
        source: source.into(),
    }
}

/// A writer in another process holds the standing's lock (here this test, through its own
/// handle on the lock file): a record waits for it instead of reading the file meanwhile, and
/// lands once it is released.
#[test]
fn a_record_waits_for_another_writers_lock() {
    let d = tempdir("lock");
    let w = ws(&d);
    let file = store::file_for(&w.dir, "H200");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let held = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(store::lock_path(&file))
        .unwrap();
    held.lock().unwrap();
    let u = rms_record("// v3\n");
    let t = {
        let (w, u) = (w.clone(), u.clone());
        std::thread::spawn(move || store::record(&w, "atrex-bench", "H200", &[u]))
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        !t.is_finished(),
        "recorded while another writer held the lock"
    );
    assert!(!file.exists());
    held.unlock().unwrap();
    let written = t.join().unwrap().unwrap();
    assert_eq!(written.file, file);
    let s = Store::load(&w, suite());
    assert_eq!(s.own("H200").unwrap().operators["rms_norm"], u.record);
    std::fs::remove_dir_all(&d).ok();
}

/// A record of a quick measurement (an accepted revision's, before its full one ends) names the
/// incumbent but its figure does not count: stale, `measured quick, not in full`.
#[test]
fn a_quick_record_is_stale_until_measured_in_full() {
    let mut u = rms_record("// v3\n");
    let op = OpPrint::of(suite(), suite().problem("rms_norm").unwrap());
    let now = |src| stale::Now {
        source: Ok(src),
        op: Some(&op),
        gpu: Some("NVIDIA H200"),
        hardware: "H200",
        sol_ms: None,
    };
    assert_eq!(stale::staleness(&u.record, &now("// v3\n")), vec![]);
    u.record.measurement.mode = "quick".into();
    let v = stale::staleness(&u.record, &now("// v3\n"));
    assert_eq!(
        v,
        vec![Stale::NotFull {
            mode: "quick".into()
        }]
    );
    assert_eq!(v[0].label(), "measured quick, not in full");
    assert_eq!(v[0].key(), "not_full");
}

#[test]
fn a_record_round_trips_through_its_file() {
    let u = rms_record("// v3\n");
    assert!((u.record.measurement.s_op - 0.3).abs() < 1e-12);
    assert_eq!(u.record.measurement.passed(), 56);
    let mut f = StandingFile::new("atrex-bench", "H200");
    f.operators.insert(u.op.clone(), u.record.clone());
    let text = f.to_text();
    let back = format::parse(Path::new("x.json"), &text, "atrex-bench", Some("H200")).unwrap();
    assert_eq!(back, f);
    // A later build of the same format may add fields: they are ignored.
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["added_later"] = serde_json::json!(1);
    v["operators"]["rms_norm"]["measurement"]["added_later"] = serde_json::json!("x");
    let back = format::parse(
        Path::new("x.json"),
        &v.to_string(),
        "atrex-bench",
        Some("H200"),
    )
    .unwrap();
    assert_eq!(back, f);
}

#[test]
fn a_missing_shape_counts_zero_in_the_records_s_op() {
    let p = suite().problem("mla_decode_attention").unwrap();
    assert_eq!(p.shapes.len(), 3);
    let results = vec![result(p.shapes[0].id, 0.5), result(p.shapes[1].id, 0.4)];
    let r = build::record(
        p,
        &OpPrint::of(suite(), p),
        "x",
        "k".into(),
        Origin::File { path: "k".into() },
        "full",
        &results,
        &ctx("NVIDIA H200"),
    );
    assert_eq!(r.measurement.s_op, 0.4, "median of 0.5, 0.4 and 0");
}

#[test]
fn corrupt_newer_and_foreign_files_are_named_and_refused() {
    let p = Path::new("/w/standing/H200.json");
    let parse = |t: &str| format::parse(p, t, "atrex-bench", Some("H200")).unwrap_err();
    let e = parse("{ not json");
    assert!(matches!(e.defect, Defect::Corrupt(_)), "{e:?}");
    assert!(e.to_string().starts_with("/w/standing/H200.json: "), "{e}");
    assert!(matches!(
        parse(r#"{"suite":"atrex-bench"}"#).defect,
        Defect::Corrupt(_)
    ));
    let newer = FORMAT_VERSION + 1;
    let e = parse(&format!(
        r#"{{"format":{newer},"suite":"atrex-bench","hardware":"H200","operators":{{}}}}"#
    ));
    assert_eq!(e.defect, Defect::Newer(newer));
    assert!(e.to_string().contains("newer"), "{e}");
    let e = parse(r#"{"format":1,"suite":"other-suite","hardware":"H200","operators":{}}"#);
    assert_eq!(e.defect, Defect::OtherSuite("other-suite".into()));
    let e = parse(r#"{"format":1,"suite":"atrex-bench","hardware":"B200","operators":{}}"#);
    assert_eq!(e.defect, Defect::OtherHardware("B200".into()));
    let e = parse(r#"{"format":1,"suite":"atrex-bench","hardware":"H200","operators":{"x":1}}"#);
    assert!(matches!(e.defect, Defect::Corrupt(_)), "{e:?}");
    // A record that does not read as one: the message names its line.
    let e = parse(
        "{\n\"format\": 1,\n\"suite\": \"atrex-bench\",\n\"hardware\": \"H200\",\n\"operators\": {\"x\": 1}\n}",
    );
    assert!(e.to_string().contains("line 5"), "{e}");
}

#[test]
fn a_crash_mid_write_loses_nothing() {
    let d = tempdir("atomic");
    let f = d.join("standing").join("H200.json");
    store::write_atomic(&f, b"first").unwrap();
    // A crash between writing the temporary file and renaming it leaves the temporary file
    // behind, half written: the file itself is the previous one, whole.
    let leftover = d.join("standing").join(".H200.json.4242.tmp");
    std::fs::write(&leftover, b"{\"format\":1, \"sui").unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"first");
    // The next write replaces the file whole; the recent leftover is left alone.
    store::write_atomic(&f, b"second").unwrap();
    assert_eq!(std::fs::read(&f).unwrap(), b"second");
    assert!(leftover.exists());
    // Nothing of ours but the file and that leftover is in the folder.
    let names: Vec<String> = std::fs::read_dir(d.join("standing"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // A standing whose write was cut short reads as its previous content.
    let w = ws(&d);
    let u = rms_record("// v3\n");
    store::record(&w, "atrex-bench", "H200", std::slice::from_ref(&u)).unwrap();
    let before = std::fs::read_to_string(&f).unwrap();
    std::fs::write(&leftover, &before[..before.len() / 2]).unwrap();
    let s = Store::load(&w, suite());
    assert!(s.problems().is_empty(), "{:?}", s.problems());
    assert_eq!(s.own("H200").unwrap().operators["rms_norm"], u.record);
    std::fs::remove_dir_all(&d).ok();
}

/// A standing written by format version 1 (a source fingerprinted with a NUL after its text)
/// is converted when read: a record of its kernel's text stands, one of another text stays
/// stale, and the next record writes version 2.
#[test]
fn a_version_1_standing_is_converted_when_read() {
    let d = tempdir("v1");
    let w = ws(&d);
    let a = rms_record("// v1\n");
    let mut b = rms_record("// other\n");
    b.op = "silu_and_mul".into();
    store::record(&w, "atrex-bench", "H200", &[a.clone(), b.clone()]).unwrap();
    let path = store::file_for(&w.dir, "H200");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["format"] = 1.into();
    v["operators"]["rms_norm"]["fingerprint"]["source"] =
        crate::fingerprint::of_parts(&["// v1\n"]).into();
    v["operators"]["silu_and_mul"]["fingerprint"]["source"] =
        crate::fingerprint::of_parts(&["// not its text\n"]).into();
    std::fs::write(&path, v.to_string()).unwrap();
    let file = store::load(&w.dir, &w.suite_source(), "atrex-bench", "H200")
        .unwrap()
        .unwrap();
    assert_eq!(file.format, FORMAT_VERSION);
    assert_eq!(
        file.operators["rms_norm"].fingerprint.source,
        crate::fingerprint::of_source("// v1\n")
    );
    assert_eq!(
        file.operators["silu_and_mul"].fingerprint.source,
        crate::fingerprint::of_parts(&["// not its text\n"])
    );
    let view = Store::load(&w, suite()).view("H200", Some("NVIDIA H200"));
    assert!(
        !view.entries["rms_norm"]
            .stale
            .iter()
            .any(|s| matches!(s, Stale::SourceChanged)),
        "{:?}",
        view.entries["rms_norm"].stale
    );
    assert!(
        view.entries["silu_and_mul"]
            .stale
            .iter()
            .any(|s| matches!(s, Stale::SourceChanged))
    );
    // The next record writes the whole file as version 2, the converted record kept.
    let mut c = rms_record("// third\n");
    c.op = "layer_norm".into();
    store::record(&w, "atrex-bench", "H200", &[c]).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(v["format"], FORMAT_VERSION);
    assert_eq!(
        v["operators"]["rms_norm"]["fingerprint"]["source"],
        crate::fingerprint::of_source("// v1\n")
    );
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn recording_writes_the_kernel_and_keeps_other_records() {
    let d = tempdir("record");
    let w = ws(&d);
    let a = rms_record("// v3\n");
    let written = store::record(&w, "atrex-bench", "H200", std::slice::from_ref(&a)).unwrap();
    assert_eq!(written.file, d.join("standing/H200.json"));
    assert!(written.backup.is_none());
    assert_eq!(
        std::fs::read_to_string(d.join(&a.record.kernel)).unwrap(),
        "// v3\n"
    );
    assert!(a.record.kernel.starts_with("kernels/rms_norm/incumbent-"));
    // Another operator's record later: the first one stays.
    let mut b = rms_record("// other\n");
    b.op = "silu_and_mul".into();
    store::record(&w, "atrex-bench", "H200@calibrated", &[b]).unwrap();
    let s = Store::load(&w, suite());
    let own = s.own("H200").unwrap();
    assert_eq!(own.operators.len(), 2);
    assert_eq!(own.format, FORMAT_VERSION);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn a_bad_file_is_reported_ignored_and_backed_up_before_it_is_replaced() {
    for (tag, text) in [
        (
            "corrupt",
            "{\"format\": 1, \"suite\": \"atrex-b".to_string(),
        ),
        (
            "newer",
            r#"{"format":9,"suite":"atrex-bench","hardware":"H200","operators":{}}"#.into(),
        ),
        (
            "foreign",
            r#"{"format":1,"suite":"another","hardware":"H200","operators":{}}"#.into(),
        ),
    ] {
        let d = tempdir(tag);
        let w = ws(&d);
        let f = d.join("standing/H200.json");
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, &text).unwrap();
        // Reading: reported with its path, ignored (the shipped standing shows), untouched.
        let s = Store::load(&w, suite());
        assert_eq!(s.problems().len(), 1, "{tag}");
        assert!(s.problems()[0].contains(&f.display().to_string()), "{tag}");
        let v = s.view("H200", None);
        assert_eq!(v.problems.len(), 1);
        assert!(v.entries.values().all(|e| e.layer == Layer::Shipped));
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            text,
            "{tag}: untouched"
        );
        // Writing: the bad file goes to a backup first, whole.
        let written = store::record(&w, "atrex-bench", "H200", &[rms_record("// v3\n")]).unwrap();
        let (to, why) = written.backup.expect("a backup");
        assert_eq!(std::fs::read_to_string(&to).unwrap(), text, "{tag}");
        assert!(
            to.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("H200.json.bad-"),
            "{to:?}"
        );
        assert!(why.contains("H200.json"), "{why}");
        let s = Store::load(&w, suite());
        assert!(s.problems().is_empty(), "{tag}: {:?}", s.problems());
        assert!(s.own("H200").unwrap().operators.contains_key("rms_norm"));
        std::fs::remove_dir_all(&d).ok();
    }
}

#[test]
fn paths_outside_the_workspace_are_not_read() {
    let d = tempdir("paths");
    for bad in ["/etc/passwd", "../x.cu", "kernels/../../x.cu"] {
        let e = store::read_kernel(&d, &SuiteSource::Embedded, bad).unwrap_err();
        assert!(
            matches!(
                e,
                crate::standing::error::KernelReadError::NotInWorkspace(_)
            ),
            "{bad}: {e}"
        );
        assert!(e.to_string().contains("not a path inside"), "{bad}: {e}");
    }
    let t = store::read_kernel(&d, &SuiteSource::Embedded, "problems/rms_norm/baseline.cu");
    assert!(t.unwrap().contains("rms_norm_kernel"));
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn staleness_source_reference_shapes_gpu_and_hardware() {
    let u = rms_record("// v3\n");
    let p = suite().problem("rms_norm").unwrap();
    let print = OpPrint::of(suite(), p);
    let now = |source, op, gpu, hardware| stale::Now {
        source,
        op,
        gpu,
        hardware,
        sol_ms: None,
    };
    let judge = |n: stale::Now<'_>| -> Vec<&'static str> {
        stale::staleness(&u.record, &n)
            .iter()
            .map(|s| s.key())
            .collect()
    };
    let none: Vec<&str> = vec![];
    assert_eq!(
        judge(now(
            Ok("// v3\n"),
            Some(&print),
            Some("NVIDIA H200"),
            "H200"
        )),
        none
    );
    // Without a GPU the GPU is not judged.
    assert_eq!(judge(now(Ok("// v3\n"), Some(&print), None, "H200")), none);
    assert_eq!(
        judge(now(Ok("// v3 edited\n"), Some(&print), None, "H200")),
        ["source_changed"]
    );
    assert_eq!(
        judge(now(Err("gone"), Some(&print), None, "H200")),
        ["source_missing"]
    );
    let changed_ref = OpPrint::with_reference(p, "// another reference\n");
    assert_eq!(
        judge(now(Ok("// v3\n"), Some(&changed_ref), None, "H200")),
        ["reference_changed"]
    );
    let mut q = p.clone();
    q.shapes.pop();
    let fewer = OpPrint::of(suite(), &q);
    assert_eq!(
        judge(now(Ok("// v3\n"), Some(&fewer), None, "H200")),
        ["shapes_changed"]
    );
    let mut q = p.clone();
    q.shapes[0]
        .params
        .insert("T".into(), crate::suite::expr::Value::Int(7));
    let other_params = OpPrint::of(suite(), &q);
    assert_eq!(
        judge(now(Ok("// v3\n"), Some(&other_params), None, "H200")),
        ["shapes_changed"]
    );
    let mut q = p.clone();
    q.tolerance.atol *= 2.0;
    let looser = OpPrint::of(suite(), &q);
    assert_eq!(
        judge(now(Ok("// v3\n"), Some(&looser), None, "H200")),
        ["reference_changed"]
    );
    assert_eq!(
        judge(now(
            Ok("// v3\n"),
            Some(&print),
            Some("NVIDIA H100 80GB HBM3"),
            "H200"
        )),
        ["gpu_differs"]
    );
    assert_eq!(
        judge(now(Ok("// v3\n"), Some(&print), None, "H200@calibrated")),
        ["hardware_differs"]
    );
    assert_eq!(
        judge(now(Ok("// v3\n"), None, None, "H200")),
        ["not_in_suite"]
    );
    let s = stale::staleness(
        &u.record,
        &now(Ok("// v3\n"), Some(&print), Some("NVIDIA B200"), "H200"),
    );
    assert_eq!(s[0].label(), "measured on NVIDIA H200, not NVIDIA B200");
    // S rests on T_SOL: the suite's T_SOL of every shape as measured stands; one that moved
    // (the problem's work or the profile changed) makes the record stale.
    let h200 = suite().hardware("H200").unwrap();
    let mut sols = stale::sols(suite(), h200).remove("rms_norm").unwrap();
    let judge_sols = |sols: &BTreeMap<u32, f64>| -> Vec<stale::Stale> {
        let mut n = now(Ok("// v3\n"), Some(&print), None, "H200");
        n.sol_ms = Some(sols);
        stale::staleness(&u.record, &n)
    };
    assert_eq!(judge_sols(&sols), vec![]);
    let first = p.shapes[0].id;
    *sols.get_mut(&first).unwrap() *= 1.25;
    let s = judge_sols(&sols);
    assert_eq!(
        s.iter().map(|s| s.key()).collect::<Vec<_>>(),
        ["sol_changed"]
    );
    assert!(
        s[0].label()
            .starts_with(&format!("shape {first}'s T_SOL is")),
        "{}",
        s[0].label()
    );
}

#[test]
fn a_stale_record_counts_zero_and_is_tallied() {
    let d = tempdir("tally");
    let w = ws(&d);
    let s = Store::load(&w, suite());
    let fresh = s.view("H200", Some("NVIDIA H200"));
    let all = crate::suite::PhaseFilter::All;
    assert_eq!(
        fresh.tally(suite(), all),
        Tally {
            measured: 30,
            stale: 0,
            missing: 0
        }
    );
    // The workspace records rms_norm; then its kernel file is edited by hand.
    let u = rms_record("// v3\n");
    store::record(&w, "atrex-bench", "H200", std::slice::from_ref(&u)).unwrap();
    std::fs::write(d.join(&u.record.kernel), "// v3, edited\n").unwrap();
    let s = Store::load(&w, suite());
    let v = s.view("H200", Some("NVIDIA H200"));
    let e = v.entry("rms_norm").unwrap();
    assert_eq!(e.layer, Layer::Workspace);
    assert_eq!(e.stale_label(), "source changed");
    assert_eq!(e.s_op(), None);
    assert_eq!(
        v.tally(suite(), all),
        Tally {
            measured: 29,
            stale: 1,
            missing: 0
        }
    );
    let w_rms = suite().weights(all)["rms_norm"];
    let diff = fresh.s_agg(suite(), all) - v.s_agg(suite(), all);
    let shipped_rms = fresh.entry("rms_norm").unwrap().record.measurement.s_op;
    assert!((diff - w_rms * shipped_rms).abs() < 1e-12, "{diff}");
    assert!(
        v.describe()
            .contains("standing/H200.json over the shipped standing")
    );
    // A new session starts from the incumbent's kernel as it is now.
    assert_eq!(v.start("rms_norm").unwrap().0, "// v3, edited\n");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn applying_a_record_in_memory_matches_what_is_written() {
    let d = tempdir("apply");
    let w = ws(&d);
    let mut s = Store::load(&w, suite());
    let u = rms_record("// v3\n");
    s.apply("H200", &u);
    store::record(&w, "atrex-bench", "H200", std::slice::from_ref(&u)).unwrap();
    let read = Store::load(&w, suite());
    assert_eq!(
        s.view("H200", Some("NVIDIA H200")),
        read.view("H200", Some("NVIDIA H200"))
    );
    let e = read.view("H200", Some("NVIDIA H200"));
    assert_eq!(e.entry("rms_norm").unwrap().s_op(), Some(0.3));
    std::fs::remove_dir_all(&d).ok();
}

/// docs/measurements: the raw `--json` results the shipped standing is built from.
fn measurements() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/measurements")
}

fn bench_docs() -> Vec<(String, crate::bench_doc::Run)> {
    let dir = measurements();
    let mut docs = Vec::new();
    for p in &suite().problems {
        // The best kernel's results where a template beat the baseline (docs/baselines.md).
        let best = dir.join(format!("bench-best-{}.json", p.name));
        let f = if best.exists() {
            best
        } else {
            dir.join(format!("bench-{}.json", p.name))
        };
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let v = serde_json::from_str(&text).unwrap();
        let run = crate::bench_doc::Run::from_value(v).unwrap_or_else(|e| panic!("{name}: {e}"));
        docs.push((name, run));
    }
    docs
}

/// The shipped standing is what the raw results in docs/measurements give on the suite as it
/// is: every operator's baseline, fingerprints of today's suite. (With
/// ATREX_TUI_WRITE_SHIPPED_STANDING=1 this writes the file instead.)
#[test]
fn the_shipped_standing_is_built_from_the_measurements() {
    let built = shipped::from_bench_docs(suite(), &bench_docs()).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/measurements/standing-H200.json");
    if std::env::var_os("ATREX_TUI_WRITE_SHIPPED_STANDING").is_some() {
        std::fs::write(&path, built.to_text()).unwrap();
        return;
    }
    let shipped = shipped::load(&suite().name)
        .unwrap()
        .expect("for this suite");
    assert_eq!(
        shipped.to_text(),
        built.to_text(),
        "docs/measurements/standing-H200.json is not what docs/measurements/bench-*.json give on \
         the suite as it is (a changed reference, shape or baseline makes the shipped standing \
         stale: re-measure on an H200)"
    );
    assert_eq!(shipped.operators.len(), 30);
    assert_eq!(shipped.hardware, "H200");
    // Measured on the shapes as they are: every shape's T_SOL is today's on the H200.
    let hw = suite().hardware("H200").unwrap();
    for p in &suite().problems {
        let m = &shipped.operators[&p.name].measurement;
        assert_eq!(m.shapes.len(), p.shapes.len(), "{}", p.name);
        for (s, r) in p.shapes.iter().zip(&m.shapes) {
            let sol = crate::suite::roofline::sol(&p.work(s).unwrap(), hw).unwrap();
            assert_eq!(s.id, r.shape);
            assert!(
                (sol.sol_ms() / r.sol_ms - 1.0).abs() < 1e-9,
                "{} shape {}",
                p.name,
                s.id
            );
        }
    }
    // Each record is dated by the run that measured it, as docs/baselines.md says, and the
    // file's note spans them.
    let day = |op: &str| shipped.operators[op].measurement.date[..10].to_string();
    assert_eq!(day("unified_attention"), "2026-12-03");
    assert_eq!(day("block_scaled_mm"), "2026-12-03");
    assert_eq!(day("fused_moe"), "2026-12-03");
    assert_eq!(day("layer_norm"), "2026-12-03");
    assert_eq!(
        shipped.shipped.as_deref(),
        Some("measured 2026-12-03 on NVIDIA H200 (driver 13.0, atrex-tui 0.1.0)")
    );
}

/// A record's date and version come from its document; provenance.toml dates only documents
/// that do not say, and a document that says neither is refused, naming what to do.
#[test]
fn a_records_date_comes_from_its_document() {
    let p = suite().problem("rms_norm").unwrap();
    let print = OpPrint::of(suite(), p);
    let source = "__global__ void k() {}\n";
    let mut doc = serde_json::json!({
        "operator": "rms_norm", "kernel": "k.cu", "gpu": gpu("NVIDIA H100 80GB HBM3"),
        "driver": "13.1", "hardware": "H100_SXM", "mode": "full", "shapes": [],
    });
    let run = |d: &serde_json::Value| Run::from_value(d.clone()).unwrap();
    let none = Default::default();
    let older = build::Dated {
        date: "2026-11-30".into(),
        tool_version: "0.1.0".into(),
    };
    let e = build::from_bench_doc(p, &print, source, "k.cu", &run(&doc), &none, None).unwrap_err();
    assert!(e.contains("provenance.toml"), "{e}");
    let r =
        build::from_bench_doc(p, &print, source, "k.cu", &run(&doc), &none, Some(&older)).unwrap();
    assert_eq!(r.measurement.date, "2026-11-30");
    assert_eq!(r.measurement.tool_version, "0.1.0");
    assert_eq!(r.fingerprint.gpu, "NVIDIA H100 80GB HBM3");
    doc["date"] = "2027-01-05 10:11:12".into();
    doc["tool_version"] = "0.2.0".into();
    let r =
        build::from_bench_doc(p, &print, source, "k.cu", &run(&doc), &none, Some(&older)).unwrap();
    assert_eq!(r.measurement.date, "2027-01-05 10:11:12");
    assert_eq!(r.measurement.tool_version, "0.2.0");
    assert_eq!(r.measurement.driver, "13.1");
    // A standing of records of several days and GPUs says so.
    let mut other = r.clone();
    other.measurement.date = "2026-12-02".into();
    other.fingerprint.gpu = "NVIDIA H200".into();
    other.measurement.tool_version = "0.1.0".into();
    let m = MeasuredOn::of([&r, &other]).unwrap();
    assert_eq!(
        m.note(),
        "measured 2026-12-02 – 2027-01-05 on NVIDIA H100 80GB HBM3, NVIDIA H200 (driver 13.1, atrex-tui 0.1.0, 0.2.0)"
    );
    assert_eq!(
        MeasuredOn::of([&r]).unwrap().short(),
        "measured 2027-01-05 on NVIDIA H100 80GB HBM3"
    );
    assert_eq!(MeasuredOn::of(std::iter::empty()), None);
}

/// Every raw result in docs/measurements says when and by which atrex-tui it was measured:
/// itself (`date`, `tool_version`), or, written before those fields, provenance.toml's
/// `[dated]` — never both, and provenance.toml dates no document that is not there.
#[test]
fn every_raw_result_is_dated_once() {
    let dated = shipped::dated(shipped::PROVENANCE).unwrap();
    let mut seen = 0;
    for e in std::fs::read_dir(measurements()).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("bench-") && name.ends_with(".json")) {
            continue;
        }
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        let own = doc.get("date").is_some() || doc.get("tool_version").is_some();
        match (own, dated.get(&name)) {
            (true, Some(_)) => panic!(
                "{name} says when it was measured: remove its entry from provenance.toml's [dated]"
            ),
            (false, None) => panic!(
                "{name} says neither when nor by which atrex-tui it was measured: date it in provenance.toml's [dated]"
            ),
            (true, None) => {
                assert!(
                    doc["date"].is_string() && doc["tool_version"].is_string(),
                    "{name}"
                );
            }
            (false, Some(d)) => {
                assert!(
                    d.date.len() >= 10 && d.date.as_bytes()[4] == b'-',
                    "{name}: {}",
                    d.date
                );
            }
        }
        seen += 1;
    }
    assert!(seen >= 30, "{seen}");
    for name in dated.keys() {
        assert!(
            measurements().join(name).exists(),
            "provenance.toml dates {name}, which is not in docs/measurements"
        );
    }
}

/// A fresh clone opens at the figure of docs/baselines.md: S_agg 0.310 (the best kernels), nothing stale, on an
/// H200 and without a GPU alike; another GPU finds every record stale.
#[test]
fn the_shipped_standing_gives_the_baselines_s_agg() {
    let d = tempdir("shipped");
    let s = Store::load(&ws(&d), suite());
    assert!(s.problems().is_empty(), "{:?}", s.problems());
    let all = crate::suite::PhaseFilter::All;
    for gpu in [None, Some("NVIDIA H200")] {
        let v = s.view("H200", gpu);
        assert_eq!(format!("{:.3}", v.s_agg(suite(), all)), "0.310");
        assert_eq!(v.tally(suite(), all).measured, 30);
        assert!(
            v.shipped
                .as_deref()
                .unwrap()
                .starts_with("measured 2026-12-03 on NVIDIA H200 ")
        );
        assert_eq!(v.short(), "shipped, measured 2026-12-03 on NVIDIA H200");
        let rms = v.entry("rms_norm").unwrap();
        assert_eq!(format!("{:.3}", rms.s_op().unwrap()), "0.272");
        assert_eq!(rms.record.measurement.shapes.len(), 56);
        assert_eq!(rms.record.measurement.mode, "full");
    }
    let fp8 = s.view("H200", None);
    let fp8 = &fp8
        .entry("fp8_blockscale_fused_moe")
        .unwrap()
        .record
        .measurement;
    assert_eq!(format!("{:.3}", fp8.s_op), "0.184");
    assert_eq!(fp8.s_op_benchmark, Some(0.0));
    let h100 = s.view("H100_SXM", Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(h100.s_agg(suite(), all), 0.0);
    assert_eq!(h100.tally(suite(), all).stale, 30);
    assert_eq!(
        h100.entry("rms_norm").unwrap().stale_label(),
        "measured on NVIDIA H200, not NVIDIA H100 80GB HBM3, T_SOL on H200, not H100_SXM"
    );
    // The shipped standing is of the built-in suite only.
    assert_eq!(shipped::load("another-suite"), Ok(None));
    std::fs::remove_dir_all(&d).ok();
}

/// What the headless agent accepts becomes the standing's incumbent as it accepts it (the
/// `measure --decide accept|auto` path goes through the same `Keeper`).
#[test]
fn an_accepted_revision_is_recorded_by_the_headless_sink() {
    use crate::agent::driver::Sink;
    use crate::session::fixtures::{fixture_suite, in_full, measured, revision};
    use crate::session::{Author, DecidedBy, Decision, Model, Recording, SessionEvent};
    let d = tempdir("keeper");
    let suite = fixture_suite();
    let p = suite.problem("rms_norm").unwrap().clone();
    let mut sink =
        crate::agent::file_sink::FileSink::new(Recording::new(Model::new(&suite), None), false);
    sink.keeper = Some(accept::Keeper {
        ws: ws(&d),
        suite: suite.name.clone(),
        problem: p.clone(),
        print: OpPrint::of(&suite, &p),
        bench: accept::Bench {
            gpu: "NVIDIA H200".into(),
            driver: "13.0".into(),
            nvrtc: Some("13.0".into()),
            hardware: "H200".into(),
        },
        session: accept::session_label(&d, &d.join("sessions/session-7.jsonl")),
    });
    sink.record(revision(
        "rms_norm",
        1,
        Some(0),
        Author::Tuner,
        "ROWS 8",
        "// tuned\n",
    ));
    let shapes: Vec<(u32, f64)> = p.shapes.iter().map(|s| (s.id, 0.4)).collect();
    // The agent accepts after a full measurement (a quick one only says it is promising).
    for ev in in_full(measured("rms_norm", 1, 1, &shapes)) {
        sink.record(ev);
    }
    assert!(
        sink.standing.is_empty(),
        "nothing recorded before a decision"
    );
    sink.record(SessionEvent::Decision {
        op: "rms_norm".into(),
        rev: 1,
        decision: Decision::Accepted,
        by: DecidedBy::Auto,
    });
    let [(1, Ok(file))] = &sink.standing[..] else {
        panic!("{:?}", sink.standing)
    };
    assert_eq!(file, &d.join("standing/H200.json"));
    let s = Store::load(&ws(&d), &suite);
    let v = s.view("H200", Some("NVIDIA H200"));
    let e = v.entry("rms_norm").unwrap();
    assert_eq!(e.layer, Layer::Workspace);
    assert!(e.fresh(), "{:?}", e.stale);
    assert_eq!(e.s_op(), Some(0.4));
    assert_eq!(e.source.as_deref(), Some("// tuned\n"));
    assert_eq!(
        e.record.origin,
        Origin::Session {
            session: "sessions/session-7.jsonl".into(),
            rev: 1
        }
    );
    // A rejection records nothing.
    sink.record(SessionEvent::Decision {
        op: "rms_norm".into(),
        rev: 1,
        decision: Decision::Rejected,
        by: DecidedBy::Auto,
    });
    assert_eq!(sink.standing.len(), 1);
    std::fs::remove_dir_all(&d).ok();
}

/// Every best kernel's header states what its raw results say: a template named by
/// docs/measurements/bench-best-OP.json carries, in its `[measured]` table, that document's
/// S_op (full mode, the same GPU) and the S_op of the operator's baseline in
/// docs/measurements/bench-OP.json — so that a figure edited by hand cannot drift from the
/// measurement the shipped standing is built from.
#[test]
fn the_best_kernels_headers_state_their_raw_results() {
    let dir = measurements();
    let docs = crate::agent::knowledge::docs();
    let mut checked = 0;
    for p in &suite().problems {
        let best = dir.join(format!("bench-best-{}.json", p.name));
        let Ok(text) = std::fs::read_to_string(&best) else {
            continue;
        };
        let best: serde_json::Value = serde_json::from_str(&text).unwrap();
        let kernel = best["kernel"].as_str().unwrap();
        let Some(path) = kernel.strip_prefix("knowledge/") else {
            continue;
        };
        let doc = docs
            .iter()
            .find(|d| d.path == path)
            .unwrap_or_else(|| panic!("{}: names {kernel}, not in the knowledge base", p.name));
        let m = doc.meta.measured.as_ref().unwrap();
        let base_text =
            std::fs::read_to_string(dir.join(format!("bench-{}.json", p.name))).unwrap();
        let base: serde_json::Value = serde_json::from_str(&base_text).unwrap();
        assert_eq!(best["mode"], "full", "{}", p.name);
        assert_eq!(m.mode, "full", "{kernel}");
        assert_eq!(m.gpu, best["gpu"]["name"].as_str().unwrap(), "{kernel}");
        let near =
            |a: Option<f64>, b: &serde_json::Value| (a.unwrap() - b.as_f64().unwrap()).abs() < 5e-4;
        assert!(
            near(m.s_op, &best["s_op"]),
            "{kernel}: header S_op {:?}, measured {}",
            m.s_op,
            best["s_op"]
        );
        assert!(
            near(m.baseline_s_op, &base["s_op"]),
            "{kernel}: header baseline S_op {:?}, the baseline measured {}",
            m.baseline_s_op,
            base["s_op"]
        );
        checked += 1;
    }
    assert!(checked >= 11, "{checked}");
}

/// The raw results in docs/measurements speak of the tool, not of the machine that measured:
/// no absolute paths (a worker's command is recorded as `atrex-tui worker --device N`).
#[test]
fn the_raw_results_hold_no_machine_paths() {
    let dir = measurements();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        for bad in ["\"command\": \"/", "/home/", "/root/", "/tmp/"] {
            assert!(!text.contains(bad), "{}: contains `{bad}`", p.display());
        }
    }
}

/// docs/measurements/provenance.toml vouches only where a hash cannot: each entry names a
/// document whose source_sha256 is its own and is not the committed file's text, and gives the
/// committed file's code as it is now; a document's own code_sha256, where it has one, must be
/// the file's.
#[test]
fn provenance_vouches_only_for_documents_that_need_it() {
    let text = shipped::PROVENANCE;
    let entries: toml::Value = toml::from_str(text).unwrap();
    let list = entries
        .get("comments_only")
        .and_then(|l| l.as_array())
        .cloned()
        .unwrap_or_default();
    for e in &list {
        let name = e["document"].as_str().unwrap();
        let f = measurements().join(name);
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        assert_eq!(
            doc["source_sha256"].as_str(),
            e["source_sha256"].as_str(),
            "{name}"
        );
        assert!(
            doc.get("code_sha256").is_none(),
            "{name} has its own code_sha256"
        );
        let kernel = doc["kernel"].as_str().unwrap();
        let source = store::template_source(kernel).unwrap();
        assert_ne!(
            doc["source_sha256"].as_str().unwrap(),
            crate::fingerprint::of_source(&source),
            "{name}: the text is the file's, no entry is needed"
        );
        assert_eq!(
            e["code_sha256"].as_str().unwrap(),
            crate::fingerprint::of_code(&source),
            "{name}: {kernel}'s code is not the one vouched for"
        );
    }
    assert_eq!(shipped::attested(text).unwrap().len(), list.len());
}

/// A bench document whose code is not the file's is refused, with the file and what to do.
#[test]
fn a_document_of_other_code_is_refused() {
    let p = suite().problem("rms_norm").unwrap();
    let print = OpPrint::of(suite(), p);
    let source = "__global__ void k() {}\n";
    let doc = |extra: serde_json::Value| {
        let mut d = serde_json::json!({
            "operator": "rms_norm", "kernel": "k.cu", "gpu": gpu("NVIDIA H200"),
            "driver": "13.0", "hardware": "H200", "mode": "full", "shapes": [],
        });
        d.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        d
    };
    let none = Default::default();
    let rec = |d: &serde_json::Value, a: &BTreeMap<String, String>| {
        let dated = build::Dated {
            date: "2026-12-02".into(),
            tool_version: "0.1.0".into(),
        };
        let d = Run::from_value(d.clone()).unwrap();
        build::from_bench_doc(p, &print, source, "k.cu", &d, a, Some(&dated))
    };
    let code = crate::fingerprint::of_code(source);
    // Its own code, with other comments: taken.
    assert!(
        rec(
            &doc(serde_json::json!({"code_sha256": code, "source_sha256": "0"})),
            &none
        )
        .is_ok()
    );
    // Other code: refused.
    let e = rec(&doc(serde_json::json!({"code_sha256": "ab"})), &none).unwrap_err();
    assert!(
        e.contains("measured other code than k.cu") && e.contains("measure it again"),
        "{e}"
    );
    // An older document of another text: refused unless vouched for, and then only for this code.
    let older = doc(serde_json::json!({"source_sha256": "feed"}));
    let e = rec(&older, &none).unwrap_err();
    assert!(e.contains("provenance.toml"), "{e}");
    let vouched: BTreeMap<String, String> = [("feed".to_string(), code.clone())].into();
    assert!(rec(&older, &vouched).is_ok());
    let wrong: BTreeMap<String, String> = [("feed".to_string(), "ab".to_string())].into();
    assert!(
        rec(&older, &wrong)
            .unwrap_err()
            .contains("provenance.toml ab")
    );
    // Of this very text, or without any hash (the earliest documents): taken.
    let same = doc(serde_json::json!({"source_sha256": crate::fingerprint::of_source(source)}));
    assert!(rec(&same, &none).is_ok());
    assert!(rec(&doc(serde_json::json!({})), &none).is_ok());
}

/// A resumed session's revision measured in an earlier run keeps that run's device and date in
/// its record: accepted on an H200, a measurement made on an H100 is recorded as the H100's and
/// judged stale here; one made in this run is stamped with this run's GPU.
#[test]
fn an_accepted_revision_keeps_the_device_it_was_measured_on() {
    use crate::session::event::Record as Ev;
    use crate::session::fixtures::{fixture_suite, measured, revision};
    use crate::session::{Author, Model, SessionEvent};
    let suite = fixture_suite();
    let p = suite.problem("rms_norm").unwrap().clone();
    let print = OpPrint::of(&suite, &p);
    let run = |gpu: &str, hardware: &str, resumed| SessionEvent::RunStart {
        tool_version: "0.0.9".into(),
        resumed,
        gpu: Some(gpu.into()),
        driver: Some("12.8".into()),
        nvrtc: Some("12.8".into()),
        hardware: Some(hardware.into()),
        suite: suite.name.clone(),
        suite_version: suite.version.clone(),
    };
    let shapes: Vec<(u32, f64)> = p.shapes.iter().map(|s| (s.id, 0.4)).collect();
    let mut events = vec![
        run("NVIDIA H100 80GB HBM3", "H100", false),
        revision("rms_norm", 1, Some(0), Author::Human, "edit", "// one\n"),
    ];
    events.extend(measured("rms_norm", 1, 1, &shapes));
    events.push(run("NVIDIA H200", "H200", true));
    events.push(revision(
        "rms_norm",
        2,
        Some(0),
        Author::Human,
        "edit",
        "// two\n",
    ));
    events.extend(measured("rms_norm", 2, 2, &shapes));
    let mut m = Model::new(&suite);
    // 2025-12-02 10:00:00 UTC for the first run's events, a day later for the second's.
    let first_run_len = 2 + measured("rms_norm", 1, 1, &shapes).len();
    for (i, ev) in events.into_iter().enumerate() {
        let t = if i < first_run_len {
            1_764_669_600.0
        } else {
            1_764_756_000.0
        };
        m.apply(&Ev {
            v: 1,
            seq: i as u64 + 1,
            t,
            event: ev,
        });
    }
    let bench = accept::Bench {
        gpu: "NVIDIA H200".into(),
        driver: "13.0".into(),
        nvrtc: Some("13.0".into()),
        hardware: "H200".into(),
    };
    let old = accept::update_for_revision(&p, &print, &m, 1, "s.jsonl", &bench).unwrap();
    assert_eq!(old.record.fingerprint.gpu, "NVIDIA H100 80GB HBM3");
    assert_eq!(old.record.measurement.hardware, "H100");
    assert!(
        old.record.measurement.date.starts_with("2025-12-02"),
        "{}",
        old.record.measurement.date
    );
    let now = stale::Now {
        source: Ok("// one\n"),
        op: Some(&print),
        gpu: Some("NVIDIA H200"),
        hardware: "H200",
        sol_ms: None,
    };
    let keys: Vec<&str> = stale::staleness(&old.record, &now)
        .iter()
        .map(|s| s.key())
        .collect();
    assert!(
        keys.contains(&"gpu_differs") && keys.contains(&"hardware_differs"),
        "{keys:?}"
    );
    let new = accept::update_for_revision(&p, &print, &m, 2, "s.jsonl", &bench).unwrap();
    assert_eq!(new.record.fingerprint.gpu, "NVIDIA H200");
    assert_eq!(new.record.measurement.hardware, "H200");
    assert!(
        new.record.measurement.date.starts_with("2025-12-03"),
        "{}",
        new.record.measurement.date
    );
}

/// A store computes the suite's fingerprints and works once, at once (`load`, `bare`, `empty`)
/// or when it first judges a record (`later`, the app's placeholder): the same judgement either
/// way, and every profile's T_SOL as `stale::sols` gives it.
#[test]
fn a_store_judges_the_same_whenever_it_computes_the_suites_facts() {
    let d = tempdir("later");
    let w = ws(&d);
    // A workspace file without records is read and judges nothing.
    let file = store::file_for(&w.dir, "H200");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, StandingFile::new("atrex-bench", "H200").to_text()).unwrap();
    let loaded = Store::load(&w, suite());
    assert!(loaded.problems().is_empty(), "{:?}", loaded.problems());
    let mut shipped = Store::bare(&w.dir, suite(), shipped::load(&suite().name));
    shipped.read_kernels(&w.dir, &suite().source);
    assert_eq!(
        loaded.view("H200", None).entries,
        shipped.view("H200", None).entries
    );
    let u = rms_record("// v3\n");
    let mut now = Store::empty(&w.dir, suite());
    let mut later = Store::later(&w.dir, std::sync::Arc::new(suite().clone()));
    assert_eq!(later.view("H200", None), now.view("H200", None));
    now.apply("H200", &u);
    later.apply("H200", &u);
    for h in &suite().hardware {
        assert_eq!(
            later.view(&h.key, Some("NVIDIA H200")),
            now.view(&h.key, Some("NVIDIA H200"))
        );
        let sols = stale::sols(suite(), h);
        for p in &suite().problems {
            assert_eq!(
                now.judge.facts().sols(&h.key, &p.name).as_ref(),
                sols.get(&p.name),
                "{} on {}",
                p.name,
                h.key
            );
        }
    }
    assert_eq!(now.print("rms_norm"), later.print("rms_norm"));
    assert!(
        now.judge
            .facts()
            .sols("no such profile", "rms_norm")
            .is_none()
    );
    std::fs::remove_dir_all(&d).ok();
}
