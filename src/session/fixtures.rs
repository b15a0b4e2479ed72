//! Test fixtures: a small suite (tests/fixtures/tui_ws) and recorded revisions. Tests only.

use super::event::*;
use crate::contract::compare::TensorCheck;
use crate::contract::protocol::{ShapeResult, Verdict};
use crate::contract::stats::TimingStats;
use crate::suite::{Suite, SuiteSource};
use std::path::PathBuf;

pub fn fixture_ws() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tui_ws")
}

pub fn fixture_suite() -> Suite {
    Suite::load(SuiteSource::Dir(fixture_ws().join("problems"))).expect("fixture suite loads")
}

/// A shape's T_SOL (ms) on the H200 in the fixture suite, as a run reports it (a made-up
/// figure for an operator or shape the fixture suite does not have).
pub fn fixture_sol_ms(op: &str, shape: u32) -> f64 {
    static SUITE: std::sync::OnceLock<Suite> = std::sync::OnceLock::new();
    let suite = SUITE.get_or_init(fixture_suite);
    let sol = || {
        let p = suite.problem(op)?;
        let w = p.work(p.shape(shape)?).ok()?;
        crate::suite::roofline::sol(&w, suite.hardware("H200").ok()?)
            .ok()
            .map(|s| s.sol_ms())
    };
    sol().unwrap_or(0.01 + shape as f64 * 0.002)
}

pub fn shape_result(shape: u32, s: Option<f64>, verdict: Verdict, sol_ms: f64) -> ShapeResult {
    let median = s.map(|s| sol_ms / s).unwrap_or(0.0);
    ShapeResult {
        shape,
        verdict: verdict.clone(),
        checks: vec![TensorCheck {
            name: "out".into(),
            elements: 4096,
            bench_ok: verdict != Verdict::Incorrect,
            strict_ok: verdict != Verdict::Incorrect,
            max_abs: if verdict == Verdict::Incorrect {
                0.5
            } else {
                1.5e-3
            },
            max_rel: 1e-3,
            rel_l2: 1e-4,
            mismatches: 0,
            first_bad: None,
            first_bad_values: None,
            reason: None,
            shared_nan: 0,
        }],
        bench_ok: verdict != Verdict::Incorrect,
        strict_ok: verdict != Verdict::Incorrect,
        seeds_checked: 1,
        timing: s.map(|_| TimingStats {
            median_ms: median,
            min_ms: median * 0.98,
            mean_ms: median * 1.01,
            p20_ms: median * 0.99,
            p80_ms: median * 1.02,
            rel_iqr: 0.004,
            n: 20,
            quick: true,
            sm_clock_mhz: Some(1980),
            outliers: 0,
            max_ms: None,
            checked: 0,
        }),
        sol_ms,
        s,
        message: None,
        device: None,
        worker: None,
    }
}

pub fn revision(
    op: &str,
    rev: u32,
    parent: Option<u32>,
    author: Author,
    rationale: &str,
    source: &str,
) -> SessionEvent {
    SessionEvent::Revision {
        op: op.into(),
        rev,
        parent,
        author,
        rationale: rationale.into(),
        source: source.into(),
        via: None,
        request_id: None,
        tokens_in: None,
        tokens_out: None,
        category: None,
        knowledge: vec![],
    }
}

/// The events of a completed passing measurement with one S per shape.
pub fn measured(op: &str, rev: u32, mid: u64, shapes: &[(u32, f64)]) -> Vec<SessionEvent> {
    let mut v = vec![
        SessionEvent::MeasureStart {
            op: op.into(),
            rev,
            mid,
            mode: "quick".into(),
        },
        SessionEvent::Compiled {
            op: op.into(),
            rev,
            mid,
            ok: true,
            diagnostics: vec![],
            log: String::new(),
        },
    ];
    for (shape, s) in shapes {
        v.push(SessionEvent::ShapeResult {
            op: op.into(),
            rev,
            mid,
            result: shape_result(*shape, Some(*s), Verdict::Pass, fixture_sol_ms(op, *shape)),
        });
    }
    v.push(SessionEvent::MeasureDone {
        op: op.into(),
        rev,
        mid,
        verdict: Verdict::Pass,
        message: None,
    });
    v
}

/// The same events with every measurement in full mode (5 seeds) instead of quick.
pub fn in_full(events: Vec<SessionEvent>) -> Vec<SessionEvent> {
    events
        .into_iter()
        .map(|mut e| {
            if let SessionEvent::MeasureStart { mode, .. } = &mut e {
                *mode = "full".into();
            }
            e
        })
        .collect()
}

/// Wraps events into records with increasing seq and fixed times.
pub fn records(events: Vec<SessionEvent>) -> Vec<Record> {
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| Record {
            v: FORMAT_VERSION,
            seq: i as u64 + 1,
            t: 1_700_000_000.0 + i as f64,
            event,
        })
        .collect()
}

/// A small recorded session on the fixture suite: rms_norm v0 measured, v1 (model) accepted,
/// v2 (human) with a compile error, v3 incorrect; silu_and_mul v0 measured; a steer.
pub fn demo_events(suite: &Suite) -> Vec<SessionEvent> {
    let base = |op: &str| {
        suite
            .problem(op)
            .and_then(|p| crate::contract::kernels::suite_kernel(suite, p, "baseline.cu").ok())
            .map(|s| s.code)
            .unwrap_or_default()
    };
    let rms = base("rms_norm");
    let shapes: Vec<u32> = suite
        .problem("rms_norm")
        .map(|p| p.shapes.iter().map(|s| s.id).take(6).collect())
        .unwrap_or_default();
    let mut ev = vec![SessionEvent::RunStart {
        tool_version: "0.1.0".into(),
        resumed: false,
        gpu: Some("NVIDIA H200".into()),
        driver: Some("580.00".into()),
        nvrtc: Some("13.0".into()),
        hardware: Some("H200".into()),
        suite: "tui-fixture".into(),
        suite_version: "1".into(),
    }];
    ev.push(revision(
        "rms_norm",
        0,
        None,
        Author::Baseline,
        "suite baseline",
        &rms,
    ));
    let s0: Vec<(u32, f64)> = shapes
        .iter()
        .map(|s| (*s, 0.30 + *s as f64 * 0.01))
        .collect();
    ev.extend(measured("rms_norm", 0, 1, &s0));
    let v1 = rms.replacen("// ", "// vectorised: ", 1) + "\n// v1: 128-bit loads\n";
    ev.push(revision(
        "rms_norm",
        1,
        Some(0),
        Author::Model("claude-x".into()),
        "vectorise loads with 128-bit accesses",
        &v1,
    ));
    let s1: Vec<(u32, f64)> = shapes
        .iter()
        .map(|s| (*s, 0.55 + *s as f64 * 0.01))
        .collect();
    ev.extend(measured("rms_norm", 1, 2, &s1));
    ev.push(SessionEvent::Decision {
        op: "rms_norm".into(),
        rev: 1,
        decision: Decision::Accepted,
        by: DecidedBy::Human,
    });
    let v2 = v1.clone() + "this is not C++\n";
    ev.push(revision(
        "rms_norm",
        2,
        Some(1),
        Author::Human,
        "hand edit (built-in editor)",
        &v2,
    ));
    ev.push(SessionEvent::MeasureStart {
        op: "rms_norm".into(),
        rev: 2,
        mid: 3,
        mode: "quick".into(),
    });
    ev.push(SessionEvent::Compiled {
        op: "rms_norm".into(),
        rev: 2,
        mid: 3,
        ok: false,
        diagnostics: vec![crate::contract::protocol::Diagnostic {
            line: v2.lines().count(),
            severity: "error".into(),
            msg: "this declaration has no storage class or type specifier".into(),
        }],
        log: String::new(),
    });
    ev.push(SessionEvent::MeasureDone {
        op: "rms_norm".into(),
        rev: 2,
        mid: 3,
        verdict: Verdict::CompileError,
        message: Some("compile failed".into()),
    });
    ev.push(SessionEvent::Steer {
        op: Some("rms_norm".into()),
        text: "try warp-per-row for small H".into(),
    });
    let sil = base("silu_and_mul");
    ev.push(revision(
        "silu_and_mul",
        0,
        None,
        Author::Baseline,
        "suite baseline",
        &sil,
    ));
    ev.extend(measured(
        "silu_and_mul",
        0,
        4,
        &[(0, 0.41), (1, 0.62), (2, 0.7)],
    ));
    ev
}

/// A recording (the one recorder, the writer) continuing the given records, for tests that
/// write sessions.
pub fn test_log(w: super::SessionWriter, records: &[super::Record]) -> super::Recording {
    let suite = crate::suite::Suite::load(crate::suite::SuiteSource::Embedded).unwrap();
    super::Recording::new(super::Model::from_records(&suite, records), Some(w))
}
