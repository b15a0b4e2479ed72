//! The workbench: what the session is about. The suite and the hardware profile, the session's
//! model with its recorder and journal, the standing, the workers and the jobs on them, the
//! agents, the log, replay's timeline, and whether the app is to quit. The view state
//! (`view_state`) says how it is looked at; `state::AppState` holds the two.
//!
//! Invariants:
//! - Every session event goes through `record`: numbered by the recorder (one numbering for
//!   the app and its agents, continuing what the session holds), applied to `model` by the
//!   reducer and, live, appended to `journal`, which only grows (the runtime writes what it has
//!   not written yet). In replay nothing is journalled: events only move what is shown.
//! - `jobs` holds exactly the measurements started and not yet ended (`measure_done`
//!   recorded), by measurement number.
//! - `shape_info` is the suite's shapes on `hw`, and `standing.view` the standing judged for
//!   `hw` and the worker's GPU: whatever changes `hw` or `worker` calls `compute_shape_info` /
//!   `restand` (`hw_from_run` does both).
//! - An operator's figure has one rule (`figure`): the session's incumbent measured here, else
//!   the standing's record; a stale record and an unmeasured operator count 0.
//! - Nothing here knows the screen: no selection, focus or scroll (`view_state`).

use crate::contract::protocol::ShapeResult;
use crate::session::model::{LogLevel, LogLine, MeasureStatus, Place, Revision};
use crate::session::store::now;
use crate::session::{Model, Record, Recorder, SessionEvent, Timeline};
use crate::standing::{Layer, Standing, Store, Tally};
use crate::suite::hardware::HardwareProfile;
use crate::suite::roofline::{self, Bottleneck, ByRule, Rule};
use crate::suite::{PhaseFilter, Suite};
use crate::tui::event::{Effect, SessionFile};
use crate::tui::state::Behind;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// The agent as the UI shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentView {
    pub op: String,
    pub backend: String,
    pub running: bool,
    pub stopping: bool,
    /// The reply being streamed (tail).
    pub stream: String,
    /// The current iteration's tool calls, oldest first.
    pub tools: Vec<ToolLine>,
    /// What the current iteration has spent of its tool budgets.
    pub spent: crate::session::ToolSpent,
}

/// A tool call in the agent pane.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolLine {
    /// `run(diff +3 −1, shapes 0 3, quick) → pass · S_op 0.612 (2.1 s)`.
    pub text: String,
    /// None while it runs.
    pub ok: Option<bool>,
}

/// The most tool lines the pane keeps.
pub const TOOL_LINES: usize = 40;

/// The workers as the session knows them: starting, up on a GPU, or none up (why).
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerState {
    Starting,
    Ready { gpu: String, sm_clock_mhz: u32 },
    NoGpu(String),
}

/// A running measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct JobProgress {
    pub op: String,
    pub rev: u32,
    pub stage: String,
    pub shape: Option<u32>,
    pub done: usize,
    pub total: usize,
    /// 5 seeds and full timing (else quick).
    pub full: bool,
    /// A re-measure of the standing: its result is recorded there.
    pub standing: bool,
}

/// The workspace's standing as the app shows it: what was read at start (`store`), the view of
/// the hardware profile and GPU in use, and a re-measure in progress.
pub struct StandingState {
    pub store: Store,
    pub view: Standing,
    /// The workspace (records are written under it).
    pub ws: PathBuf,
    /// The session as records name it.
    pub session: String,
    /// A re-measure in progress: operators finished and asked for.
    pub run: Option<(usize, usize)>,
}

/// An operator's S_op as the app counts it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Figure {
    /// Measured in this session: the session's incumbent (a failure counts 0).
    Live(f64),
    /// The standing's record, standing.
    Standing(f64, Layer),
    /// The standing's record is stale: counts 0.
    Stale(f64),
    /// Nothing measured.
    None,
}

impl Figure {
    /// What the figure counts in S_agg.
    pub fn counted(self) -> Option<f64> {
        match self {
            Figure::Live(s) | Figure::Standing(s, _) => Some(s),
            Figure::Stale(_) | Figure::None => None,
        }
    }
}

/// Replay: the recorded events and the position in them.
pub struct Replay {
    pub file: String,
    /// The recorded events (a large file's shape results kept as briefs: `session::timeline`).
    pub records: Timeline,
    /// Events applied so far (0..=records.len()).
    pub pos: usize,
    pub playing: bool,
    pub speed: usize,
    /// The briefs last asked to be read whole (operator, revision, measurement, places).
    pub asked: Option<(String, u32, u64, Vec<Place>)>,
    /// The measurements the file ends (`measure_done`), anywhere in it: any other measurement
    /// was interrupted (a replayed session is not live).
    pub ended: std::collections::BTreeSet<u64>,
    /// Opened from the session picker: what the replay took the place of (`q` goes back).
    pub back: Option<Box<Behind>>,
}

/// Replay's playback speeds (`Replay::speed` indexes them).
pub const SPEEDS: [f64; 7] = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 32.0];

/// Events per second at speed 1×.
pub const BASE_RATE: f64 = 4.0;

/// A shape's static facts on the current hardware profile.
#[derive(Debug, Clone, PartialEq)]
pub struct ShapeInfo {
    pub id: u32,
    pub label: String,
    pub flops: f64,
    pub bytes: f64,
    pub sol_ms: f64,
    pub bottleneck: Option<Bottleneck>,
}

/// A watched kernel file ($EDITOR hand edits).
#[derive(Debug, Clone, PartialEq)]
pub struct Watch {
    pub op: String,
    pub last_rev: Option<u32>,
    pub last_content: String,
}

/// What the session is about (see the module's invariants).
pub struct Workbench {
    pub suite: Arc<Suite>,
    pub model: Model,
    /// The hardware profile T_SOL is computed for.
    pub hw: Option<HardwareProfile>,
    /// Each operator's shapes on `hw`.
    pub shape_info: BTreeMap<String, Vec<ShapeInfo>>,
    /// ncu, once looked for.
    pub ncu: Option<Result<PathBuf, String>>,
    /// The profile running: operator, revision, shape.
    pub profiling: Option<(String, u32, u32)>,
    /// Recorded sessions offered when there is no GPU.
    pub recorded_sessions: Vec<SessionFile>,
    pub worker: WorkerState,
    pub restarts: u64,
    /// The workers and the queue, as the pool last said.
    pub pool: crate::pool::PoolStatus,
    /// The measurements running, by measurement number.
    pub jobs: BTreeMap<u64, JobProgress>,
    /// The app's log (the session's own lines are the model's).
    pub ui_log: Vec<LogLine>,
    /// The session file's name, when this run records one.
    pub session_name: Option<String>,
    /// Numbers every recorded event, measurement and revision (shared with the agent task).
    pub recorder: Recorder,
    /// Events recorded during this run, in order; the runtime appends the ones it has not
    /// written yet to the session file (`update` itself does no I/O).
    pub journal: Vec<Record>,
    pub replay: Option<Replay>,
    /// Where kernels handed to `$EDITOR` are written.
    pub kernels_dir: PathBuf,
    pub watches: BTreeMap<PathBuf, Watch>,
    pub quit: bool,
    /// The process's exit status when it quits: 0, or 128 + the signal that ended it.
    pub exit_status: i32,
    /// The agents started in this run, one per operator (they run at once on the pool).
    pub agents: BTreeMap<String, AgentView>,
    /// The agent's configuration (settings + environment), or why it cannot start.
    pub agent_cfg: Result<crate::agent::config::AgentConfig, String>,
    /// Where the suite stands.
    pub standing: StandingState,
}

impl Workbench {
    /// The workbench of a session on `model`: nothing measured, no worker yet, the standing
    /// empty until `attach_standing`.
    pub fn new(
        suite: Arc<Suite>,
        model: Model,
        hw: Option<HardwareProfile>,
        kernels_dir: PathBuf,
    ) -> Workbench {
        let recorder = Recorder::for_model(&model);
        let ws = kernels_dir
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_default();
        let standing = StandingState {
            store: Store::later(&ws, suite.clone()),
            view: Standing::empty(hw.as_ref().map(|h| h.key.as_str()).unwrap_or("-")),
            ws,
            session: "unrecorded session".into(),
            run: None,
        };
        let mut w = Workbench {
            suite,
            model,
            hw,
            shape_info: BTreeMap::new(),
            ncu: None,
            profiling: None,
            recorded_sessions: Vec::new(),
            worker: WorkerState::Starting,
            restarts: 0,
            pool: Default::default(),
            jobs: BTreeMap::new(),
            ui_log: Vec::new(),
            session_name: None,
            recorder,
            journal: Vec::new(),
            replay: None,
            kernels_dir,
            watches: BTreeMap::new(),
            quit: false,
            exit_status: 0,
            agents: BTreeMap::new(),
            agent_cfg: crate::agent::config::resolve(&Default::default(), None)
                .map_err(String::from),
            standing,
        };
        w.compute_shape_info();
        w
    }

    /// Names the session file this run records into (the runtime writes it).
    pub fn attach_session(&mut self, path: &std::path::Path) {
        self.session_name = path.file_name().map(|n| n.to_string_lossy().to_string());
        self.standing.session = crate::standing::accept::session_label(&self.standing.ws, path);
    }

    /// Takes the standing read at start (the workspace's files and the shipped one).
    pub fn attach_standing(&mut self, store: Store, ws: PathBuf) {
        self.standing.store = store;
        self.standing.ws = ws;
        self.restand();
    }

    /// Judges the standing again for the hardware profile and GPU in use (no I/O).
    pub fn restand(&mut self) {
        let key = self
            .hw
            .as_ref()
            .map(|h| h.key.clone())
            .unwrap_or_else(|| "-".into());
        let gpu = match &self.worker {
            WorkerState::Ready { gpu, .. } => Some(gpu.as_str()),
            _ => None,
        };
        self.standing.view = self.standing.store.view(&key, gpu);
    }

    /// Whether a measurement counts here: made on this GPU (when one is up) and hardware
    /// profile, as far as the session knows where it was made.
    pub fn measured_here(&self, m: &crate::session::model::Measurement) -> bool {
        let Some(made) = &m.made else {
            return true;
        };
        let gpu_ok = match (&self.worker, &made.gpu) {
            (WorkerState::Ready { gpu, .. }, Some(g)) => g == gpu,
            _ => true,
        };
        let hw_ok = match (&self.hw, &made.hardware) {
            (Some(h), Some(k)) => &h.key == k,
            _ => true,
        };
        gpu_ok && hw_ok
    }

    /// An operator's S_op as counted: a measurement of the session's incumbent in this session
    /// supersedes the standing's record, unless it was made on another GPU or profile (an
    /// earlier run of a resumed session).
    pub fn figure(&self, op: &str) -> Figure {
        if let Some(r) = self.model.ops.get(op).and_then(|o| o.incumbent_rev())
            && matches!(r.measurement.status, MeasureStatus::Done(_))
            && self.measured_here(&r.measurement)
        {
            return Figure::Live(r.verdict().score().unwrap_or(0.0));
        }
        match self.standing.view.entry(op) {
            Some(e) if e.fresh() => Figure::Standing(e.record.measurement.s_op, e.layer),
            Some(e) => Figure::Stale(e.record.measurement.s_op),
            None => Figure::None,
        }
    }

    /// An operator's S_op as counted under `rule` (None: it counts 0): the figure `figure`
    /// shows, under the strict level or under the benchmark's rule (a shape counting only when
    /// it also passed the benchmark-compatible level).
    pub fn counted(&self, op: &str, rule: Rule) -> Option<f64> {
        match (self.figure(op), rule) {
            (f, Rule::Strict) => f.counted(),
            (Figure::Live(_), Rule::Benchmark) => {
                let r = self.model.ops.get(op)?.incumbent_rev()?;
                Some(match r.verdict() {
                    crate::session::RevVerdict::Score(_) => r.measurement.results.s_op_bench(),
                    _ => 0.0,
                })
            }
            (Figure::Standing(..), Rule::Benchmark) => {
                let p = self.suite.problem(op)?;
                self.standing.view.entry(op)?.s_op_under(rule, p)
            }
            (Figure::Stale(_) | Figure::None, Rule::Benchmark) => None,
        }
    }

    /// S_agg over a phase view under the strict level and under the benchmark's rule: each
    /// operator's figure as `counted`, stale and unmeasured operators counting 0.
    pub fn s_agg_by_rule(&self, phase: PhaseFilter) -> ByRule {
        let under = |rule| -> BTreeMap<String, f64> {
            self.suite
                .problems
                .iter()
                .filter_map(|p| self.counted(&p.name, rule).map(|s| (p.name.clone(), s)))
                .collect()
        };
        roofline::s_agg_by_rule(
            &self.suite,
            phase,
            &under(Rule::Strict),
            &under(Rule::Benchmark),
        )
    }

    /// The standing's record of a revision the session has not measured, where the record
    /// measured that very source (its source fingerprint is the revision's text): its
    /// measurement is then the revision's — in the revisions pane, the shapes pane and the
    /// roofline, and for `y`. Stale or not: the caller says which counts.
    pub fn standing_measurement(&self, op: &str, r: &Revision) -> Option<&crate::standing::Entry> {
        if r.measurement.status != MeasureStatus::Unmeasured {
            return None;
        }
        self.standing
            .view
            .entry(op)
            .filter(|e| e.measured(&r.source))
    }

    /// S_agg over a phase view: stale and unmeasured operators count 0.
    #[cfg(test)]
    pub fn s_agg(&self, phase: PhaseFilter) -> f64 {
        let s_ops: BTreeMap<String, f64> = self
            .suite
            .problems
            .iter()
            .filter_map(|p| self.figure(&p.name).counted().map(|s| (p.name.clone(), s)))
            .collect();
        roofline::s_agg(&self.suite, phase, &s_ops)
    }

    /// Measured, stale and unmeasured operators of a phase view.
    pub fn tally(&self, phase: PhaseFilter) -> Tally {
        let mut t = Tally::default();
        for p in self.suite.by_weight(phase) {
            match self.figure(&p.name) {
                Figure::Live(_) | Figure::Standing(..) => t.measured += 1,
                Figure::Stale(_) => t.stale += 1,
                Figure::None => t.missing += 1,
            }
        }
        t
    }

    /// Takes the whole results read for a revision's briefs; the results read for other
    /// revisions go back to briefs (only what is shown is held).
    pub fn take_results(
        &mut self,
        op: &str,
        rev: u32,
        mid: u64,
        result: Result<Vec<(Place, ShapeResult)>, String>,
    ) {
        match result {
            Ok(read) => {
                self.model.shed_results_except(op, rev);
                self.model.fill_results(op, rev, mid, read);
            }
            Err(e) => self.log(LogLevel::Error, format!("replay: {e}")),
        }
    }

    /// Takes the hardware profile the session's run names (replay), with the shapes and the
    /// standing judged for it.
    pub(crate) fn hw_from_run(&mut self) {
        if let Some(h) = self.model.run.hardware.clone()
            && let Ok(p) = self.suite.hardware(&h)
        {
            self.hw = Some(p.clone());
            self.compute_shape_info();
            self.restand();
        }
    }

    /// Each operator's shapes on the hardware profile: label, work, T_SOL and bottleneck.
    pub fn compute_shape_info(&mut self) {
        let mut out = BTreeMap::new();
        for p in &self.suite.problems {
            let mut v = Vec::new();
            for s in &p.shapes {
                let label: Vec<String> = s
                    .params
                    .iter()
                    .filter(|(_, v)| !matches!(v, crate::suite::expr::Value::List(_)))
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                let (flops, bytes, sol_ms, bn) = match p.work(s) {
                    Ok(w) => {
                        let sol = self.hw.as_ref().and_then(|h| roofline::sol(&w, h).ok());
                        (
                            w.total_flops(),
                            w.bytes(),
                            sol.map(|s| s.sol_ms()).unwrap_or(0.0),
                            sol.map(|s| s.bottleneck),
                        )
                    }
                    Err(_) => (0.0, 0.0, 0.0, None),
                };
                v.push(ShapeInfo {
                    id: s.id,
                    label: label.join(" "),
                    flops,
                    bytes,
                    sol_ms,
                    bottleneck: bn,
                });
            }
            out.insert(p.name.clone(), v);
        }
        self.shape_info = out;
    }

    /// A line in the app's log (the oldest thousand go when it passes two thousand).
    pub fn log(&mut self, level: LogLevel, text: String) {
        self.ui_log.push(LogLine {
            t: now(),
            level,
            text,
        });
        if self.ui_log.len() > 2000 {
            self.ui_log.drain(..1000);
        }
    }

    /// Records a session event: numbered by the recorder, applied through the reducer and
    /// kept in the journal (which the runtime writes to the session file). In replay, events
    /// only change the state shown. A revision the event refers to that the session does not
    /// hold yet (the starting kernel, v0) is recorded just before it.
    pub fn record(&mut self, event: SessionEvent) {
        if let Some(first) = self.model.unrecorded_referent(&event) {
            self.record(first);
        }
        let rec = self.recorder.stamp(event);
        self.model.apply(&rec);
        if self.replay.is_none() {
            self.journal.push(rec);
        }
    }

    /// The agent of an operator while it runs.
    pub fn running_agent(&self, op: &str) -> Option<&AgentView> {
        self.agents.get(op).filter(|a| a.running)
    }

    /// The operators whose agents run, in the operators' order of the suite.
    pub fn running_agents(&self) -> Vec<&AgentView> {
        self.agents.values().filter(|a| a.running).collect()
    }

    /// The GPU model measurements are for: the first worker up's (S is per GPU model).
    pub fn gpu_model(&self) -> Option<String> {
        match &self.worker {
            WorkerState::Ready { gpu, .. } => Some(gpu.clone()),
            _ => None,
        }
    }

    /// Whether a measurement runs.
    pub fn measuring(&self) -> bool {
        !self.jobs.is_empty()
    }

    /// Whether a measurement can start: a worker is up, else why not.
    pub fn can_measure(&self) -> Result<(), String> {
        match &self.worker {
            WorkerState::Ready { .. } => Ok(()),
            WorkerState::Starting => Err("the worker is still starting".into()),
            WorkerState::NoGpu(why) => Err(format!("no GPU: browse and replay only ({why})")),
        }
    }

    /// Records a revision the state shows but the session does not hold yet (the suite
    /// baseline, an unrecorded incumbent) before an event refers to it.
    pub(crate) fn ensure_recorded(&mut self, op: &str, r: &Revision) {
        if r.recorded {
            return;
        }
        self.record(SessionEvent::Revision {
            op: op.into(),
            rev: r.rev,
            parent: r.parent,
            author: r.author.clone(),
            rationale: r.rationale.clone(),
            source: r.source.clone(),
            via: r.via.clone(),
            request_id: None,
            tokens_in: None,
            tokens_out: None,
            category: None,
            knowledge: vec![],
        });
    }

    /// Records the revision (if the session lacks it) and a quick measurement start; returns
    /// the job.
    pub(crate) fn measure(&mut self, op: &str, rev: u32) -> Vec<Effect> {
        self.measure_as(op, rev, false, false)
    }

    /// Records the revision (if the session lacks it) and a measurement start, quick or full
    /// (`full`), for the standing or not; returns the job.
    pub(crate) fn measure_as(
        &mut self,
        op: &str,
        rev: u32,
        full: bool,
        standing: bool,
    ) -> Vec<Effect> {
        if let Err(e) = self.can_measure() {
            self.log(LogLevel::Warn, format!("cannot measure {op} v{rev}: {e}"));
            return vec![];
        }
        let Some(r) = self.model.ops.get(op).and_then(|o| o.rev(rev)).cloned() else {
            return vec![];
        };
        self.ensure_recorded(op, &r);
        let mid = self.recorder.ids().next_mid();
        self.record(SessionEvent::MeasureStart {
            op: op.into(),
            rev,
            mid,
            mode: if full { "full" } else { "quick" }.into(),
        });
        self.jobs.insert(
            mid,
            JobProgress {
                op: op.into(),
                rev,
                stage: "queued".into(),
                shape: None,
                done: 0,
                total: self.shape_info.get(op).map(|v| v.len()).unwrap_or(0),
                full,
                standing,
            },
        );
        vec![Effect::Measure {
            op: op.into(),
            rev,
            mid,
            source: r.source,
            full,
        }]
    }
}
