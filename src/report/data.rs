//! What the report shows, assembled from the suite, the standing and the sessions before any
//! of it is drawn.
//!
//! Invariants: the figures are those of `suite --json` — the weights of `Suite::weights`, each
//! operator's S_op of `Entry::s_op_under` (a stale record counts 0 and its figure is shown as
//! stale) and S_agg of `Standing::s_agg_by_rule`, each under the strict level and under the
//! benchmark's rule — so that the two never disagree. Nothing is invented: an
//! operator without a record, a shape without a time or a work figure, has `None`; an operator
//! without a peer figure has no `peers`. A peer counts as the best only when it passes the
//! suite's check and its figures are of the suite's shapes as they are; the gap is taken only
//! against an S_op that counts.

use super::history::{HistoryItem, Sessions};
use super::peers::Peers;
use crate::standing::{Entry, Standing, Tally};
use crate::suite::hardware::HardwareProfile;
use crate::suite::roofline::Rule;
use crate::suite::{PhaseFilter, Problem, Suite};
use serde::Serialize;
use std::collections::BTreeMap;

/// S_agg of the three phase views (under one rule).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SAgg {
    pub all: f64,
    pub prefill: f64,
    pub decode: f64,
}

/// Where an operator stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", content = "why", rename_all = "snake_case")]
pub enum State {
    /// Its record stands: its S_op counts.
    Measured,
    /// Its record is stale (the reasons): shown, counted 0.
    Stale(Vec<String>),
    /// No record.
    Missing,
}

impl State {
    pub fn name(&self) -> &'static str {
        match self {
            State::Measured => "measured",
            State::Stale(_) => "stale",
            State::Missing => "not measured",
        }
    }
}

/// The work of a shape as the suite defines it now.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Work {
    /// Σ W over the dtype paths, FLOP.
    pub flops: f64,
    /// Q_read + Q_write, bytes.
    pub bytes: f64,
    /// The compute roof of this shape's dtype mix, FLOP/s (W / Σ_d W[d]/P[d]); None without W.
    pub peak_flops: Option<f64>,
}

/// One shape of a record's measurement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShapePoint {
    pub shape: u32,
    pub verdict: String,
    pub s: Option<f64>,
    pub t_ms: Option<f64>,
    pub sol_ms: f64,
    pub seeds: usize,
    /// None when the shape is no longer in the suite or its work cannot be evaluated.
    pub work: Option<Work>,
}

impl ShapePoint {
    pub fn passed(&self) -> bool {
        self.verdict == "pass"
    }
}

/// An operator's record as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordView {
    /// `workspace` or `shipped`.
    pub layer: String,
    pub kernel: String,
    /// Where the kernel came from: `SESSION vREV` or a file.
    pub origin: String,
    /// The kernel is a session's revision (else a file).
    pub origin_session: bool,
    pub date: String,
    pub gpu: String,
    pub driver: String,
    pub tool_version: String,
    /// The hardware profile of its T_SOL.
    pub hardware: String,
    pub mode: String,
    /// The S_op it measured (counted only when the record stands).
    pub s_op: f64,
    pub s_op_benchmark: Option<f64>,
    pub passed: usize,
    /// The fewest input draws a shape was checked on.
    pub seeds: Option<usize>,
    /// The smallest and largest S of the passing shapes.
    pub s_range: Option<(f64, f64)>,
    pub shapes: Vec<ShapePoint>,
}

/// One operator of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpReport {
    pub name: String,
    pub id: String,
    /// Weight in the all-phases view.
    pub weight: f64,
    pub phase: String,
    pub num_shapes: usize,
    pub state: State,
    /// S_op as counted in S_agg (None: stale or missing).
    pub s_op: Option<f64>,
    /// The same under the benchmark's rule (a shape counting only when it also passed the
    /// benchmark-compatible level), as counted in `s_agg_benchmark`.
    pub s_op_benchmark: Option<f64>,
    pub record: Option<RecordView>,
    /// Shapes of the suite the record has no result for.
    pub unmeasured: Vec<u32>,
    pub history: Vec<HistoryItem>,
    /// The peers recorded for it (None: none recorded).
    pub peers: Option<PeersView>,
}

/// One peer's figure as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeerFigure {
    pub name: String,
    /// Its library and version: `vLLM 0.33.0 (torch 2.11 + cu130)`.
    pub library: String,
    pub s_op: f64,
    pub passes: bool,
    /// Why it fails the check.
    pub check: Option<String>,
    pub s_range: Option<(f64, f64)>,
    pub note: Option<String>,
}

/// An operator's peers beside its S_op.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeersView {
    /// The fastest peer that passes the check (None: none does, or the figures are stale).
    pub best: Option<PeerFigure>,
    /// The peers faster than `best` (all, when there is no best) that fail the check, fastest
    /// first: shown, marked, never the best.
    pub failing: Vec<PeerFigure>,
    /// Every peer, fastest first.
    pub all: Vec<PeerFigure>,
    /// Our S_op − the best peer's, where our S_op counts and there is a best.
    pub gap: Option<f64>,
    /// Our S_op / the best peer's, likewise.
    pub ratio: Option<f64>,
    /// Why the figures do not compare with the suite as it is (then there is no best).
    pub stale: Option<String>,
}

/// Where the peer figures come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeersSource {
    /// The file: a path, or the built-in file's name.
    pub file: String,
    pub gpu: String,
    pub date: String,
    pub method: String,
    /// Each library's label.
    pub libraries: Vec<String>,
}

/// Everything the report shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReportData {
    /// When the report was made (UTC).
    pub generated: String,
    pub tool_version: String,
    /// The suite and where it was read.
    pub suite: String,
    pub hardware: String,
    pub hardware_name: String,
    pub hbm_bytes_per_s: f64,
    pub peak_flops: BTreeMap<String, f64>,
    /// Where the standing's records come from.
    pub standing: String,
    /// Where the peers' figures come from (None: no peers file for this profile and suite).
    pub peers: Option<PeersSource>,
    /// S_agg at the strict level (the problem's tolerance).
    pub s_agg: SAgg,
    /// S_agg under the benchmark's rule.
    pub s_agg_benchmark: SAgg,
    pub measured: usize,
    pub stale: usize,
    pub missing: usize,
    /// Operators in descending weight (all phases).
    pub operators: Vec<OpReport>,
    /// Session files read, skipped, and the folders searched.
    pub sessions_read: Vec<String>,
    pub sessions_skipped: Vec<String>,
    pub session_dirs: Vec<String>,
    /// Files that could not be used, each named with its path.
    pub warnings: Vec<String>,
}

/// The work of shape `id` of `p` on `hw`, when the suite defines it.
fn work(p: &Problem, id: u32, hw: &HardwareProfile) -> Option<Work> {
    let shape = p.shape(id)?;
    let w = p.work(shape).ok()?;
    let flops = w.total_flops();
    let compute_s: Option<f64> = w
        .flops
        .iter()
        .map(|(d, f)| hw.peak_flops.get(d).map(|peak| f / peak))
        .sum();
    Some(Work {
        flops,
        bytes: w.bytes(),
        peak_flops: compute_s
            .filter(|c| *c > 0.0 && flops > 0.0)
            .map(|c| flops / c),
    })
}

fn record_view(p: &Problem, e: &Entry, hw: &HardwareProfile) -> RecordView {
    let r = &e.record;
    let m = &r.measurement;
    let shapes: Vec<ShapePoint> = m
        .shapes
        .iter()
        .map(|s| ShapePoint {
            shape: s.shape,
            verdict: s.verdict.clone(),
            s: s.s,
            t_ms: s.t_ms,
            sol_ms: s.sol_ms,
            seeds: s.seeds,
            work: work(p, s.shape, hw),
        })
        .collect();
    let passing: Vec<f64> = shapes
        .iter()
        .filter(|s| s.passed())
        .filter_map(|s| s.s)
        .collect();
    let s_range = passing
        .iter()
        .copied()
        .fold(None, |acc: Option<(f64, f64)>, s| {
            Some(acc.map_or((s, s), |(lo, hi)| (lo.min(s), hi.max(s))))
        });
    RecordView {
        layer: e.layer.name().to_string(),
        kernel: r.kernel.clone(),
        origin: r.origin.label(),
        origin_session: matches!(r.origin, crate::standing::Origin::Session { .. }),
        date: m.date.clone(),
        gpu: r.fingerprint.gpu.clone(),
        driver: m.driver.clone(),
        tool_version: m.tool_version.clone(),
        hardware: m.hardware.clone(),
        mode: m.mode.clone(),
        s_op: m.s_op,
        s_op_benchmark: m.s_op_benchmark,
        passed: m.passed(),
        seeds: shapes.iter().map(|s| s.seeds).min(),
        s_range,
        shapes,
    }
}

/// The peers of `op` beside our S_op `ours` (where it counts).
pub fn peers_view(peers: &Peers, suite: &Suite, op: &str, ours: Option<f64>) -> Option<PeersView> {
    let o = peers
        .file
        .operators
        .get(op)
        .filter(|o| !o.peers.is_empty())?;
    let mut all: Vec<PeerFigure> = o
        .peers
        .iter()
        .map(|p| PeerFigure {
            name: p.name.clone(),
            library: peers.source(p).map(|s| s.label()).unwrap_or_default(),
            s_op: p.s_op,
            passes: p.passes,
            check: p.check.clone(),
            s_range: p.s_range.map(|[lo, hi]| (lo, hi)),
            note: p.note.clone(),
        })
        .collect();
    all.sort_by(|a, b| b.s_op.total_cmp(&a.s_op));
    let stale = peers.stale(suite, op);
    let best = all
        .iter()
        .find(|p| p.passes)
        .filter(|_| stale.is_none())
        .cloned();
    let floor = best.as_ref().map_or(f64::NEG_INFINITY, |b| b.s_op);
    let failing = all
        .iter()
        .filter(|p| !p.passes && p.s_op > floor)
        .cloned()
        .collect();
    let pair = ours.zip(best.as_ref().map(|b| b.s_op));
    Some(PeersView {
        gap: pair.map(|(o, b)| o - b),
        ratio: pair.filter(|(_, b)| *b > 0.0).map(|(o, b)| o / b),
        best,
        failing,
        all,
        stale,
    })
}

/// Assembles the report of `standing` (judged for the profile `hw`), `sessions` and the
/// `peers` of the profile.
pub fn assemble(
    suite: &Suite,
    hw: &HardwareProfile,
    standing: &Standing,
    sessions: &Sessions,
    peers: Option<&Peers>,
    generated: &str,
) -> ReportData {
    let weights = suite.weights(PhaseFilter::All);
    let mut operators = Vec::new();
    for p in suite.by_weight(PhaseFilter::All) {
        let e = standing.entry(&p.name);
        let state = match e {
            None => State::Missing,
            Some(e) if e.fresh() => State::Measured,
            Some(e) => State::Stale(e.stale.iter().map(|s| s.label()).collect()),
        };
        let record = e.map(|e| record_view(p, e, hw));
        let unmeasured = match &record {
            Some(r) => p
                .shapes
                .iter()
                .map(|s| s.id)
                .filter(|id| !r.shapes.iter().any(|m| m.shape == *id))
                .collect(),
            None => p.shapes.iter().map(|s| s.id).collect(),
        };
        let s_op = e.and_then(|e| e.s_op());
        operators.push(OpReport {
            peers: peers.and_then(|pe| peers_view(pe, suite, &p.name, s_op)),
            name: p.name.clone(),
            id: p.id.clone(),
            weight: weights.get(&p.name).copied().unwrap_or(0.0),
            phase: p.phase_label(),
            num_shapes: p.shapes.len(),
            state,
            s_op,
            s_op_benchmark: e.and_then(|e| e.s_op_under(Rule::Benchmark, p)),
            record,
            unmeasured,
            history: sessions.by_op.get(&p.name).cloned().unwrap_or_default(),
        });
    }
    let Tally {
        measured,
        stale,
        missing,
    } = standing.tally(suite, PhaseFilter::All);
    let agg = |ph| standing.s_agg_by_rule(suite, ph);
    let (all, prefill, decode) = (
        agg(PhaseFilter::All),
        agg(PhaseFilter::Prefill),
        agg(PhaseFilter::Decode),
    );
    let mut warnings = standing.problems.clone();
    warnings.extend(sessions.warnings.iter().cloned());
    ReportData {
        generated: generated.to_string(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        suite: format!("{} ({})", suite.name, suite.source.describe()),
        hardware: hw.key.clone(),
        hardware_name: hw.name.clone(),
        hbm_bytes_per_s: hw.hbm_bytes_per_s,
        peak_flops: hw.peak_flops.clone(),
        standing: standing.describe(),
        peers: peers.map(|p| PeersSource {
            file: p.origin.clone(),
            gpu: p.file.gpu.clone(),
            date: p.file.date.clone(),
            method: p.file.method.clone(),
            libraries: p.file.sources.values().map(|s| s.label()).collect(),
        }),
        s_agg: SAgg {
            all: all.strict,
            prefill: prefill.strict,
            decode: decode.strict,
        },
        s_agg_benchmark: SAgg {
            all: all.benchmark,
            prefill: prefill.benchmark,
            decode: decode.benchmark,
        },
        measured,
        stale,
        missing,
        operators,
        sessions_read: sessions.read.clone(),
        sessions_skipped: sessions.skipped.clone(),
        session_dirs: sessions
            .dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect(),
        warnings,
    }
}
