//! The report's data: histories from a recorded session, figures equal to `suite --json`'s,
//! missing and stale operators shown as such, escaping, unreadable files as warnings.

use super::data::State;
use super::history;
use super::*;
use crate::session::fixtures;
use crate::session::{Record, SessionEvent};
use crate::standing::{Origin, Stale};
use crate::suite::PhaseFilter;
use crate::testing::{suite, tempdir, ws};

/// The fixture session's records, with the fixture suite's name replaced by `suite_name`.
fn fixture_records(suite: &Suite, suite_name: &str) -> Vec<Record> {
    let mut ev = fixtures::demo_events(suite);
    if let SessionEvent::RunStart { suite, .. } = &mut ev[0] {
        *suite = suite_name.to_string();
    }
    fixtures::records(ev)
}

fn write_session(path: &Path, records: &[Record]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let text: String = records
        .iter()
        .map(|r| serde_json::to_string(r).unwrap() + "\n")
        .collect();
    std::fs::write(path, text).unwrap();
}

/// The t of the first record matching `pred`.
fn t_of(records: &[Record], pred: impl Fn(&SessionEvent) -> bool) -> f64 {
    records.iter().find(|r| pred(&r.event)).unwrap().t
}

#[test]
fn history_of_a_fixture_session() {
    let suite = fixtures::fixture_suite();
    let records = fixture_records(&suite, &suite.name);
    let model = crate::session::Model::from_records(&suite, &records);
    let h = history::of_session("sessions/s.jsonl", &records, &model);
    let rms = &h["rms_norm"];
    assert_eq!(
        rms.iter().map(|i| i.rev).collect::<Vec<_>>(),
        [0, 1, 2],
        "v0 and v1 measured, v2 failed to compile: {rms:?}"
    );
    // v0: measured, undecided; S_op the median of its shapes' S.
    let s0 = model.ops["rms_norm"]
        .rev(0)
        .unwrap()
        .verdict()
        .score()
        .unwrap();
    assert_eq!(rms[0].s_op, Some(s0));
    assert_eq!(rms[0].author, "baseline");
    assert_eq!(rms[0].decision, None);
    assert_eq!(
        rms[0].measured_at,
        Some(t_of(&records, |e| matches!(
            e,
            SessionEvent::MeasureDone { rev: 0, op, .. } if op == "rms_norm"
        )))
    );
    // v1: a model's revision, accepted by a human, dated by its measurement and its decision.
    assert_eq!(rms[1].author, "claude-x");
    assert_eq!(rms[1].parent, Some(0));
    assert_eq!(rms[1].decision.as_deref(), Some("accepted (human)"));
    assert_eq!(
        rms[1].decided_at,
        Some(t_of(&records, |e| matches!(
            e,
            SessionEvent::Decision { .. }
        )))
    );
    assert!(rms[1].s_op.unwrap() > s0);
    assert_eq!(rms[1].rationale, "vectorise loads with 128-bit accesses");
    // v2: a compile error, no S_op.
    assert_eq!(rms[2].verdict, "compile error");
    assert_eq!(rms[2].s_op, None);
    assert!(
        rms.iter()
            .all(|i| i.session == "sessions/s.jsonl" && !i.incumbent)
    );
    assert_eq!(h["silu_and_mul"].len(), 1);
    assert!(!h.contains_key("paged_attention_decode"), "never touched");
}

#[test]
fn sessions_are_read_from_the_folders_and_the_incumbent_is_marked() {
    let suite = fixtures::fixture_suite();
    let dir = tempdir("sessions");
    let records = fixture_records(&suite, &suite.name);
    write_session(&dir.join("sessions/a.jsonl"), &records);
    // Another suite's session, a corrupt one, and a file that is not a session.
    write_session(
        &dir.join("sessions/b.jsonl"),
        &fixture_records(&suite, "other-suite"),
    );
    std::fs::write(dir.join("sessions/c.jsonl"), "{ not json\n{\"v\":1}\n").unwrap();
    std::fs::write(dir.join("sessions/notes.txt"), "not a session").unwrap();
    let mut standing = crate::standing::Standing::empty("H200");
    // A standing whose rms_norm incumbent is v1 of a.jsonl.
    let shipped = crate::standing::Store::load(&ws(&dir), self::suite());
    let mut e = shipped
        .view("H200", None)
        .entries
        .remove("rms_norm")
        .unwrap();
    e.record.origin = Origin::Session {
        session: "sessions/a.jsonl".into(),
        rev: 1,
    };
    standing.entries.insert("rms_norm".into(), e);
    let (files, warnings) = history::session_files(&dir, &[dir.join("sessions")], &standing);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(files.len(), 3, "the .jsonl files, once each: {files:?}");
    let s = history::read(&dir, &suite, &files, &standing);
    assert_eq!(s.read, ["sessions/a.jsonl"]);
    assert_eq!(s.skipped.len(), 1);
    assert!(s.skipped[0].contains("sessions/b.jsonl") && s.skipped[0].contains("other-suite"));
    assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
    assert!(
        s.warnings[0].contains(&dir.join("sessions/c.jsonl").display().to_string()),
        "{:?}",
        s.warnings
    );
    let rms = &s.by_op["rms_norm"];
    assert_eq!(
        rms.iter()
            .filter(|i| i.incumbent)
            .map(|i| i.rev)
            .collect::<Vec<_>>(),
        [1]
    );
    // In time order.
    assert!(rms.windows(2).all(|w| w[0].at() <= w[1].at()));
}

#[test]
fn figures_equal_suite_json() {
    let dir = tempdir("figures");
    for hardware in ["H200", "H100_SXM"] {
        let standing = crate::cli::suite::standing(&ws(&dir), suite(), hardware).unwrap();
        let hw = suite().hardware(hardware).unwrap();
        let d = assemble(&dir, suite(), hw, &standing, &[]);
        let j =
            crate::cli::suite::suite_json(suite(), hardware, PhaseFilter::All, false, &standing)
                .unwrap();
        for phase in ["all", "prefill", "decode"] {
            let ours = match phase {
                "all" => d.s_agg.all,
                "prefill" => d.s_agg.prefill,
                _ => d.s_agg.decode,
            };
            assert_eq!(Some(ours), j["s_agg"][phase].as_f64(), "{hardware} {phase}");
        }
        let ops = j["operators"].as_array().unwrap();
        assert_eq!(ops.len(), 30);
        assert_eq!(d.operators.len(), 30);
        for (ours, theirs) in d.operators.iter().zip(ops) {
            assert_eq!(ours.name, theirs["name"].as_str().unwrap());
            assert_eq!(
                Some(ours.weight),
                theirs["weight"].as_f64(),
                "{}",
                ours.name
            );
            assert_eq!(ours.s_op, theirs["s_op"].as_f64(), "{}", ours.name);
            let state = theirs["standing"]["state"].as_str().unwrap();
            assert_eq!(
                ours.state.name(),
                if state == "none" {
                    "not measured"
                } else {
                    state
                }
            );
            assert_eq!(
                ours.record.as_ref().map(|r| r.passed as u64),
                theirs["standing"]["passed"].as_u64()
            );
        }
        let (measured, stale) = (
            j["standing"]["measured"].as_u64().unwrap(),
            j["standing"]["stale"].as_u64().unwrap(),
        );
        assert_eq!((d.measured as u64, d.stale as u64), (measured, stale));
        if hardware == "H100_SXM" {
            // The shipped records are stale on another profile: shown, counted 0.
            assert_eq!((d.measured, d.stale, d.s_agg.all), (0, 30, 0.0));
        }
    }
    // On the H200 the shipped standing stands: every operator measured, S_agg above 0.
    let standing = crate::cli::suite::standing(&ws(&dir), suite(), "H200").unwrap();
    let d = assemble(
        &dir,
        suite(),
        suite().hardware("H200").unwrap(),
        &standing,
        &[],
    );
    assert_eq!(d.measured, 30);
    assert!(d.s_agg.all > 0.1);
}

/// The shipped H200 standing with `rms_norm` removed and `silu_and_mul` made stale.
fn mixed() -> (PathBuf, ReportData) {
    let dir = tempdir("mixed");
    let mut standing = crate::cli::suite::standing(&ws(&dir), suite(), "H200").unwrap();
    standing.entries.remove("rms_norm");
    standing
        .entries
        .get_mut("silu_and_mul")
        .unwrap()
        .stale
        .push(Stale::SourceChanged);
    let d = assemble(
        &dir,
        suite(),
        suite().hardware("H200").unwrap(),
        &standing,
        &[],
    );
    (dir, d)
}

#[test]
fn missing_and_stale_operators_are_shown_as_such() {
    let (_, d) = mixed();
    let op = |n: &str| d.operators.iter().find(|o| o.name == n).unwrap();
    let rms = op("rms_norm");
    assert_eq!(rms.state, State::Missing);
    assert_eq!((rms.s_op, rms.record.is_none()), (None, true));
    assert_eq!(rms.unmeasured.len(), 56);
    let silu = op("silu_and_mul");
    assert_eq!(silu.state, State::Stale(vec!["source changed".into()]));
    assert_eq!(silu.s_op, None, "a stale record counts 0");
    assert!(
        silu.record.as_ref().unwrap().s_op > 0.5,
        "its figure is kept"
    );
    assert_eq!((d.measured, d.stale, d.missing), (28, 1, 1));

    let html = html::render(&d);
    let doc = |id: &str| {
        let i = html.find(&format!("id=\"op-{id}\"")).unwrap();
        let j = html[i..].find("</section>").unwrap();
        html[i..i + j].to_string()
    };
    let rms = doc("rms_norm");
    assert!(
        rms.contains("not measured") && !rms.contains("<svg"),
        "{rms}"
    );
    let silu = doc("silu_and_mul");
    assert!(
        silu.contains("stale (source changed)") && silu.contains("<svg"),
        "{silu}"
    );
    assert!(html.contains("data-op=\"rms_norm\" data-state=\"not measured\""));

    // The roofline draws the records that stand: not the stale one, not the missing one.
    let pts = charts::roofline_points(&d);
    assert_eq!(pts.stale_ops, ["silu_and_mul"]);
    assert!(
        !pts.ops
            .iter()
            .any(|o| o == "silu_and_mul" || o == "rms_norm")
    );
    let shapes: usize = d
        .operators
        .iter()
        .filter(|o| o.state == State::Measured)
        .map(|o| o.record.as_ref().unwrap().passed)
        .sum();
    assert_eq!(pts.points.len() + pts.untimed + pts.no_work, shapes);
    assert_eq!(pts.points.len(), 440 - 56 - 37);
}

#[test]
fn nothing_measured_draws_no_chart() {
    let dir = tempdir("empty");
    let standing = crate::standing::Store::empty(&dir, suite()).view("H200", None);
    let d = assemble(
        &dir,
        suite(),
        suite().hardware("H200").unwrap(),
        &standing,
        &[],
    );
    assert_eq!((d.measured, d.missing, d.s_agg.all), (0, 30, 0.0));
    let html = html::render(&d);
    assert!(!html.contains("<svg"));
    assert!(html.contains("No shape has a measurement that stands"));
    assert_eq!(html.matches("data-state=\"not measured\"").count(), 60);
}

#[test]
fn strings_from_files_are_escaped() {
    let (_, mut d) = mixed();
    let evil = "<script>alert(1)</script><img src=\"https://example.com/x.png\">";
    let op = d.operators.iter_mut().find(|o| o.record.is_some()).unwrap();
    op.record.as_mut().unwrap().kernel = evil.into();
    op.record.as_mut().unwrap().origin = evil.into();
    op.history.push(history::HistoryItem {
        session: evil.into(),
        rev: 1,
        parent: None,
        author: evil.into(),
        rationale: evil.into(),
        verdict: "S 0.1".into(),
        s_op: Some(0.1),
        mode: "full".into(),
        measured_at: Some(1.8e9),
        decision: None,
        decided_at: None,
        incumbent: false,
    });
    d.warnings.push(format!("{evil}: corrupt"));
    let html = html::render(&d);
    assert!(!html.contains("<script"), "raw markup from a file");
    assert!(!html.contains("<img"), "raw markup from a file");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

#[test]
fn writing_is_atomic_and_errors_name_the_file() {
    let dir = tempdir("write");
    let p = dir.join("r.html");
    write(&p, "<p>one</p>").unwrap();
    write(&p, "<p>two</p>").unwrap();
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "<p>two</p>");
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
    let bad = dir.join("no/such/folder/r.html");
    let e = write(&bad, "x").unwrap_err().to_string();
    assert!(e.contains(&bad.display().to_string()), "{e}");
}
