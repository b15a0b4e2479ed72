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

/// The built-in peers with our S_op of each operator fixed (docs/baselines.md's second-harness
/// figures), so that the fragment does not move when the standing does.
fn peer_views() -> Vec<data::OpReport> {
    let p = peers::Peers {
        file: peers::Peers::built_in().unwrap(),
        origin: peers::NAME.into(),
    };
    let (_, d) = mixed();
    let ours = [
        ("unified_attention", Some(0.4305)),
        ("fused_moe", Some(0.4014)),
        ("block_scaled_mm", Some(0.3087)),
        ("fp8_blockscale_fused_moe", Some(0.1839)),
        ("paged_attention_decode", Some(0.0602)),
        // Stale or missing: no gap.
        ("attention_forward", None),
        ("topk_filter", Some(0.154)),
    ];
    ours.iter()
        .map(|(name, s)| {
            let mut op = d
                .operators
                .iter()
                .find(|o| o.name == *name)
                .unwrap()
                .clone();
            op.s_op = *s;
            op.peers = data::peers_view(&p, suite(), name, *s);
            op
        })
        .collect()
}

/// Per operator the best peer that passes the check and the gap to ours; faster peers that fail
/// the check marked, never the best; no gap where our S_op does not count or no peer passes.
#[test]
fn the_best_peer_passes_the_check_and_the_gap_is_to_ours() {
    let ops = peer_views();
    let v = |n: &str| ops.iter().find(|o| o.name == n).unwrap().peers.clone();
    let fm = v("fused_moe").unwrap();
    assert_eq!(fm.best.as_ref().unwrap().s_op, 0.439);
    assert_eq!(format!("{:+.4}", fm.gap.unwrap()), "-0.0376");
    assert_eq!(format!("{:.3}", fm.ratio.unwrap()), "0.914");
    let ua = v("unified_attention").unwrap();
    assert!(ua.gap.unwrap() > 0.37, "ahead of vLLM's: {ua:?}");
    // block_scaled_mm: neither peer passes — no best, no gap, both shown, fastest first.
    let bs = v("block_scaled_mm").unwrap();
    assert_eq!((bs.best.is_none(), bs.gap), (true, None));
    assert_eq!(
        bs.failing.iter().map(|f| f.s_op).collect::<Vec<_>>(),
        [0.623, 0.259]
    );
    // fp8 MoE: the faster peer fails the check.
    let fp8 = v("fp8_blockscale_fused_moe").unwrap();
    assert_eq!((fp8.best.is_none(), fp8.failing.len()), (true, 1));
    // attention_forward: cuDNN is the best of two; our S_op does not count here, so no gap.
    let af = v("attention_forward").unwrap();
    assert_eq!(af.best.as_ref().unwrap().name, "torch SDPA, cuDNN backend");
    assert_eq!((af.all.len(), af.gap, af.ratio), (2, None, None));
    assert_eq!(v("topk_filter"), None, "no peer recorded");

    // In the page: marked, signed, coloured.
    let cells = |n: &str| {
        let op = ops.iter().find(|o| o.name == n).unwrap();
        format!(
            "{} | {}",
            table::peer_cell(op).into_string(),
            table::gap_cell(op).into_string()
        )
    };
    let fp8 = cells("fp8_blockscale_fused_moe");
    assert!(fp8.contains("0.441 ✗ check"), "{fp8}");
    assert!(
        fp8.contains("2.3 %"),
        "the check's note in its title: {fp8}"
    );
    let fm = cells("fused_moe");
    assert!(
        fm.contains("class=\"behind\"") && fm.contains("−0.038 (0.91×)"),
        "{fm}"
    );
    assert!(fm.contains("data-peer-s-op=\"0.439\""), "{fm}");
    assert!(cells("unified_attention").contains("class=\"ahead\""));

    // Figures of other shapes than the suite's: shown stale, no best, no gap.
    let mut file = peers::Peers::built_in().unwrap();
    file.operators
        .get_mut("paged_attention_decode")
        .unwrap()
        .shapes = 7;
    let p = peers::Peers {
        file,
        origin: "peers.json".into(),
    };
    let mut op = ops
        .iter()
        .find(|o| o.name == "paged_attention_decode")
        .unwrap()
        .clone();
    op.peers = data::peers_view(&p, suite(), &op.name, op.s_op);
    let v = op.peers.as_ref().unwrap();
    assert_eq!((v.best.is_none(), v.gap), (true, None));
    let cell = table::peer_cell(&op).into_string();
    assert!(
        cell.contains("0.036~") && cell.contains("stale: measured on 7 shapes; the suite has 8"),
        "{cell}"
    );
}

/// The peer and gap cells of the table, one operator a line.
#[test]
fn peer_cells_snapshot() {
    let rows: String = peer_views()
        .iter()
        .map(|op| {
            format!(
                "{}: <td class=\"peer\">{}</td><td class=\"num\">{}</td>\n",
                op.name,
                table::peer_cell(op).into_string(),
                table::gap_cell(op).into_string()
            )
        })
        .collect();
    insta::assert_snapshot!("peer_cells", rows);
}

/// The report of the shipped standing shows the built-in peers: in the table, in the peers
/// section with every figure and its source, and in the header.
#[test]
fn the_report_shows_the_built_in_peers() {
    let dir = tempdir("peers-report");
    let standing = crate::cli::suite::standing(&ws(&dir), suite(), "H200").unwrap();
    let d = assemble(
        &dir,
        suite(),
        suite().hardware("H200").unwrap(),
        &standing,
        &[],
    );
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    let src = d.peers.as_ref().unwrap();
    assert_eq!(
        (src.file.as_str(), src.date.as_str()),
        (peers::NAME, "2026-12-03")
    );
    let with_peers = d.operators.iter().filter(|o| o.peers.is_some()).count();
    assert_eq!(with_peers, 6);
    let fm = d.operators.iter().find(|o| o.name == "fused_moe").unwrap();
    let v = fm.peers.as_ref().unwrap();
    assert_eq!(
        v.gap,
        Some(fm.s_op.unwrap() - 0.439),
        "against the standing's S_op"
    );
    let html = html::render(&d);
    assert_eq!(
        html.matches("data-peer-s-op=").count(),
        4,
        "the four with a passing peer"
    );
    let section = &html[html.find("id=\"peers\"").unwrap()..html.find("id=\"roofline\"").unwrap()];
    assert_eq!(
        section.matches("<tr data-op=").count(),
        8,
        "every peer figure"
    );
    for s in [
        "vLLM 0.33.0 (torch 2.11 + cu130)",
        "cold L2",
        "✗ relative RMS error 1.3e-4",
    ] {
        assert!(section.contains(s), "{s}: {section}");
    }
    assert!(html.contains(
        "Peers: cuBLAS CUDA 13.0 (torch 2.11 + cu130), PyTorch 2.11 (cu130), vLLM 0.33.0"
    ));
    // Another profile: no peers file, said so.
    let h100 = crate::cli::suite::standing(&ws(&dir), suite(), "H100_SXM").unwrap();
    let d = assemble(
        &dir,
        suite(),
        suite().hardware("H100_SXM").unwrap(),
        &h100,
        &[],
    );
    assert!(d.peers.is_none() && d.operators.iter().all(|o| o.peers.is_none()));
    assert!(html::render(&d).contains("No peer figures for the H100_SXM profile"));
    std::fs::remove_dir_all(&dir).ok();
}
