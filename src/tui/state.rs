//! The application state: the domain (suite, session model, recorder and journal, jobs,
//! worker, agent) and the view (focus, selections, scrolls, modal, diff view). Rendering is a
//! pure function of it (`view::draw`).

use crate::contract::protocol::ShapeResult;
use crate::session::model::MeasureStatus;
use crate::session::model::{LogLevel, LogLine, Place, Revision};
use crate::session::store::now;
use crate::session::{Author, Model, Record, Recorder, SessionEvent, Timeline};
use crate::standing::{Layer, Standing, Store, Tally};
use crate::suite::hardware::HardwareProfile;
use crate::suite::roofline::{self, Bottleneck, ByRule, Rule};
use crate::suite::{PhaseFilter, Suite};
use crate::tui::event::{Effect, SessionFile};
use crate::tui::highlight::{DiffView, HighlightCache, Highlighter, build_diff};
pub use crate::tui::search::{Origin, Search, SearchPrompt};
use crate::tui::theme::Theme;
use ratatui_textarea::TextArea;
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaneId {
    Operators,
    Revisions,
    Diff,
    Gauges,
    Log,
}

pub const PANES: [PaneId; 5] = [
    PaneId::Operators,
    PaneId::Revisions,
    PaneId::Diff,
    PaneId::Gauges,
    PaneId::Log,
];

impl PaneId {
    pub fn title(self) -> &'static str {
        match self {
            PaneId::Operators => "operators",
            PaneId::Revisions => "revisions",
            PaneId::Diff => "diff",
            PaneId::Gauges => "shapes",
            PaneId::Log => "log",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffMode {
    Parent,
    Incumbent,
}

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

/// The built-in editor.
pub struct EditorState {
    pub op: String,
    /// The revision the text came from (the parent of the next save).
    pub base: Option<u32>,
    pub base_source: String,
    pub textarea: TextArea<'static>,
    /// The last revision saved from this editor (its diagnostics are shown).
    pub saved: Option<u32>,
    pub confirm_discard: bool,
}

impl EditorState {
    pub fn text(&self) -> String {
        let mut s = self.textarea.lines().join("\n");
        s.push('\n');
        s
    }
}

pub enum Modal {
    None,
    Help {
        scroll: u16,
    },
    ConfirmQuit,
    Steer(TextArea<'static>),
    Editor(Box<EditorState>),
    /// No GPU: the recorded sessions, to open one in replay.
    Sessions {
        sel: usize,
    },
    /// The search prompt in the bottom line (`/`).
    Search(Box<SearchPrompt>),
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
    pub warnings: Vec<String>,
    /// The briefs last asked to be read whole (operator, revision, measurement, places).
    pub asked: Option<(String, u32, u64, Vec<Place>)>,
    /// The measurements the file ends (`measure_done`), anywhere in it: any other measurement
    /// was interrupted (a replayed session is not live).
    pub ended: std::collections::BTreeSet<u64>,
    /// Opened from the session picker: what the replay took the place of (`q` goes back).
    pub back: Option<Box<Behind>>,
}

/// The live view a replay opened from the session picker replaced, to go back to.
pub struct Behind {
    pub model: Model,
    pub hw: Option<HardwareProfile>,
    pub focus: PaneId,
    pub phase: PhaseFilter,
    pub op_sel: usize,
    pub rev_sel: usize,
    pub shape_sel: Option<usize>,
    /// The session chosen in the picker (selected again there).
    pub picked: usize,
}

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

/// The inputs of the diff view (see `AppState::refresh`).
#[derive(Debug, Clone, PartialEq)]
struct DiffKey {
    op: Option<String>,
    rev: Option<u32>,
    base: Option<u32>,
    diags: Vec<crate::contract::protocol::Diagnostic>,
    full_source: bool,
    mode: DiffMode,
    highlighter: bool,
    theme: String,
}

pub struct AppState {
    pub suite: Arc<Suite>,
    pub model: Model,
    pub theme: Theme,
    pub hw: Option<HardwareProfile>,
    pub shape_info: BTreeMap<String, Vec<ShapeInfo>>,
    pub focus: PaneId,
    pub phase: PhaseFilter,
    pub op_sel: usize,
    pub rev_sel: usize,
    pub diff_mode: DiffMode,
    pub full_source: bool,
    pub diff_scroll: usize,
    /// Columns of code scrolled past on the left in the code pane (the gutter stays).
    pub diff_hscroll: usize,
    pub gauge_scroll: usize,
    /// The shape selected in the shapes pane (an index into the operator's shapes); `p`
    /// profiles it (else the largest shape).
    pub shape_sel: Option<usize>,
    /// ncu, once looked for.
    pub ncu: Option<Result<PathBuf, String>>,
    /// The profile running: operator, revision, shape.
    pub profiling: Option<(String, u32, u32)>,
    /// Recorded sessions offered when there is no GPU.
    pub recorded_sessions: Vec<SessionFile>,
    /// Rows (wrapped) from the bottom of the log (0: follow the end).
    pub log_scroll: usize,
    /// The search set with `/` (None: none).
    pub search: Option<Search>,
    /// The terminal's size (columns, rows) as last drawn: update lays the panes out as the view
    /// does (sideways scroll limits, the log's wrapped rows, bringing a match into view).
    pub screen: (u16, u16),
    pub modal: Modal,
    pub worker: WorkerState,
    pub restarts: u64,
    /// The workers and the queue, as the pool last said.
    pub pool: crate::pool::PoolStatus,
    pub jobs: BTreeMap<u64, JobProgress>,
    pub ui_log: Vec<LogLine>,
    /// The session file's name, when this run records one.
    pub session_name: Option<String>,
    /// Numbers every recorded event, measurement and revision (shared with the agent task).
    pub recorder: Recorder,
    /// Events recorded during this run, in order; the runtime appends the ones it has not
    /// written yet to the session file (`update` itself does no I/O).
    pub journal: Vec<Record>,
    pub replay: Option<Replay>,
    pub highlighter: Option<Arc<Highlighter>>,
    pub hl_cache: HighlightCache,
    pub diff: DiffView,
    diff_key: Option<DiffKey>,
    /// How many times the diff view was built (it must not be rebuilt per streamed chunk).
    pub diff_builds: u64,
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

impl AppState {
    pub fn new(
        suite: Arc<Suite>,
        model: Model,
        theme: Theme,
        hw: Option<HardwareProfile>,
        kernels_dir: PathBuf,
    ) -> AppState {
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
        let mut s = AppState {
            suite,
            model,
            theme,
            hw,
            shape_info: BTreeMap::new(),
            focus: PaneId::Operators,
            phase: PhaseFilter::All,
            op_sel: 0,
            rev_sel: 0,
            diff_mode: DiffMode::Parent,
            full_source: false,
            diff_scroll: 0,
            diff_hscroll: 0,
            gauge_scroll: 0,
            shape_sel: None,
            ncu: None,
            profiling: None,
            recorded_sessions: Vec::new(),
            log_scroll: 0,
            search: None,
            screen: (80, 24),
            modal: Modal::None,
            worker: WorkerState::Starting,
            restarts: 0,
            pool: Default::default(),
            jobs: BTreeMap::new(),
            ui_log: Vec::new(),
            session_name: None,
            recorder,
            journal: Vec::new(),
            replay: None,
            highlighter: None,
            hl_cache: HighlightCache::default(),
            diff: DiffView::default(),
            diff_key: None,
            diff_builds: 0,
            kernels_dir,
            watches: BTreeMap::new(),
            quit: false,
            exit_status: 0,
            agents: BTreeMap::new(),
            agent_cfg: crate::agent::config::resolve(&Default::default(), None)
                .map_err(String::from),
            standing,
        };
        s.compute_shape_info();
        s.select_latest_rev();
        s.refresh();
        s
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

    /// Opens a recorded session read-only, after its last event: `atrex-tui replay FILE` and the
    /// picker alike. The figures follow the header's one rule — the session's own measurements,
    /// else the standing the app read at start — whichever way the session was opened. `back`:
    /// the live view a replay opened from the session picker replaced (`q` goes back to it).
    pub fn open_replay(
        &mut self,
        name: String,
        records: impl Into<Timeline>,
        loaded: crate::session::Loaded,
        back: Option<Box<Behind>>,
    ) {
        let records = records.into();
        let n = records.len();
        let leave = if back.is_some() {
            ", q back to the sessions"
        } else {
            ""
        };
        self.focus = PaneId::Operators;
        self.start_replay(name.clone(), records, loaded.warnings);
        if let Some(r) = &mut self.replay {
            r.back = back;
        }
        self.log(
            LogLevel::Info,
            format!(
                "replaying {name} ({n} events, read-only): , / . step, space plays, r/R jump to revisions{leave}"
            ),
        );
    }

    /// Opens a replay positioned after its last event.
    pub fn start_replay(
        &mut self,
        file: String,
        records: impl Into<Timeline>,
        warnings: Vec<String>,
    ) {
        let records = records.into();
        for w in &warnings {
            self.log(LogLevel::Warn, w.clone());
        }
        let pos = records.len();
        let ended = records
            .records()
            .filter_map(|r| match r.event {
                SessionEvent::MeasureDone { mid, .. } => Some(mid),
                _ => None,
            })
            .collect();
        self.model = records.model_at(&self.suite, pos);
        self.model.interrupt_unended(&ended);
        self.replay = Some(Replay {
            file,
            records,
            pos,
            playing: false,
            speed: 2,
            warnings,
            asked: None,
            ended,
            back: None,
        });
        self.hw_from_run();
        self.select_session_op();
        self.refresh();
    }

    /// What the revision on screen still lacks to be shown whole: a large replay keeps its shape
    /// results as briefs (`session::timeline`), read from the file when shown. Asks once for
    /// each set of briefs.
    pub fn results_wanted(&mut self) -> Option<Effect> {
        let file = self.replay.as_ref()?.records.file.clone()?;
        let op = self.selected_op()?;
        let (rev, mid, briefs) = {
            let r = self.selected_rev()?;
            (r.rev, r.measurement.mid, r.measurement.results.briefs())
        };
        if briefs.is_empty() {
            return None;
        }
        let key = (
            op.clone(),
            rev,
            mid,
            briefs.iter().map(|b| b.place).collect::<Vec<_>>(),
        );
        let r = self.replay.as_mut()?;
        if r.asked.as_ref() == Some(&key) {
            return None;
        }
        r.asked = Some(key);
        Some(Effect::ReadResults {
            file,
            op,
            rev,
            mid,
            briefs,
        })
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

    /// Selects the operator the session is about (the one of its latest revision) and that
    /// operator's latest revision.
    pub fn select_session_op(&mut self) {
        if let Some(op) = self.model.latest_op.clone() {
            self.select_op_name(&op);
        }
        self.select_latest_rev();
    }

    pub(crate) fn hw_from_run(&mut self) {
        if let Some(h) = self.model.run.hardware.clone()
            && let Ok(p) = self.suite.hardware(&h)
        {
            self.hw = Some(p.clone());
            self.compute_shape_info();
            self.restand();
        }
    }

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

    // ---------- selection ----------

    pub fn visible_ops(&self) -> Vec<String> {
        self.suite
            .by_weight(self.phase)
            .into_iter()
            .map(|p| p.name.clone())
            .collect()
    }

    pub fn selected_op(&self) -> Option<String> {
        self.visible_ops().get(self.op_sel).cloned()
    }

    pub fn selected_rev(&self) -> Option<&Revision> {
        let op = self.selected_op()?;
        self.model.ops.get(&op)?.revisions.get(self.rev_sel)
    }

    /// The shape selected in the shapes pane, if any.
    pub fn selected_shape(&self) -> Option<u32> {
        let op = self.selected_op()?;
        let i = self.shape_sel?;
        self.shape_info.get(&op)?.get(i).map(|s| s.id)
    }

    pub(crate) fn select_latest_rev(&mut self) {
        let n = self
            .selected_op()
            .and_then(|o| self.model.ops.get(&o).map(|o| o.revisions.len()))
            .unwrap_or(0);
        self.rev_sel = n.saturating_sub(1);
    }

    pub fn select_rev_number(&mut self, rev: u32) {
        if let Some(o) = self.selected_op().and_then(|o| self.model.ops.get(&o))
            && let Some(i) = o.revisions.iter().position(|r| r.rev == rev)
        {
            self.rev_sel = i;
        }
    }

    pub(crate) fn select_op_name(&mut self, op: &str) {
        if let Some(i) = self.visible_ops().iter().position(|o| o == op) {
            self.op_sel = i;
        }
    }

    /// The revision the diff compares against.
    pub fn diff_base(&self) -> Option<&Revision> {
        let op = self.selected_op()?;
        let o = self.model.ops.get(&op)?;
        let r = o.revisions.get(self.rev_sel)?;
        match self.diff_mode {
            DiffMode::Parent => r.parent.and_then(|p| o.rev(p)),
            DiffMode::Incumbent => o.incumbent.filter(|i| *i != r.rev).and_then(|i| o.rev(i)),
        }
    }

    /// Keeps selections in range and rebuilds the diff view when its inputs changed. A
    /// revision's source never changes, so the view is keyed by which revisions it shows (and
    /// their diagnostics, the highlighter and the theme): events that change none of these
    /// (streamed agent text, progress, log lines) cost a few comparisons, no hashing of sources.
    pub fn refresh(&mut self) {
        let n_ops = self.visible_ops().len();
        self.op_sel = self.op_sel.min(n_ops.saturating_sub(1));
        let n_revs = self
            .selected_op()
            .and_then(|o| self.model.ops.get(&o).map(|o| o.revisions.len()))
            .unwrap_or(0);
        self.rev_sel = self.rev_sel.min(n_revs.saturating_sub(1));
        let key = self.diff_inputs();
        if self.diff_key.as_ref() == Some(&key) {
            return;
        }
        self.diff_key = Some(key);
        self.rebuild_diff();
    }

    /// What the diff view shows: operator, revision, base, mode, diagnostics, highlighter, theme.
    fn diff_inputs(&self) -> DiffKey {
        let op = self.selected_op();
        let r = self.selected_rev();
        DiffKey {
            rev: r.map(|r| r.rev),
            base: if self.full_source {
                None
            } else {
                self.diff_base().map(|b| b.rev)
            },
            diags: r
                .map(|r| r.measurement.diagnostics.clone())
                .unwrap_or_default(),
            op,
            full_source: self.full_source,
            mode: self.diff_mode,
            highlighter: self.highlighter.is_some(),
            theme: self.theme.name.clone(),
        }
    }

    fn rebuild_diff(&mut self) {
        self.diff_builds += 1;
        let (title, old, new, diags) = match (self.selected_op(), self.selected_rev()) {
            (Some(op), Some(r)) => {
                let base = self.diff_base();
                let title = match (base, self.full_source) {
                    (_, true) | (None, _) => format!("{op} v{} · full source", r.rev),
                    (Some(b), false) => format!(
                        "{op} v{} vs v{} ({})",
                        r.rev,
                        b.rev,
                        match self.diff_mode {
                            DiffMode::Parent => "parent",
                            DiffMode::Incumbent => "incumbent",
                        }
                    ),
                };
                let old = if self.full_source {
                    None
                } else {
                    base.map(|b| b.source.clone())
                };
                (
                    title,
                    old,
                    r.source.clone(),
                    r.measurement.diagnostics.clone(),
                )
            }
            (Some(op), None) => (
                format!("{op}: no kernel yet (e writes one)"),
                None,
                String::new(),
                vec![],
            ),
            _ => ("no operator".into(), None, String::new(), vec![]),
        };
        let hl = self.highlighter.clone();
        let new_hl = self.hl_cache.get(hl.as_deref(), &new);
        let old_hl = old.as_ref().map(|o| self.hl_cache.get(hl.as_deref(), o));
        self.diff = build_diff(
            title,
            old.as_deref(),
            &new,
            old_hl.as_ref(),
            &new_hl,
            self.full_source,
            &diags,
            &self.theme,
        );
        self.diff_scroll = self
            .diff
            .first_diag
            .map(|d| d.saturating_sub(2))
            .unwrap_or(0);
        self.diff_hscroll = 0;
        if let Some(q) = &mut self.search {
            q.code_hit = None;
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

    pub fn measuring(&self) -> bool {
        !self.jobs.is_empty()
    }

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

    /// Records a human revision and measures it at once.
    pub(crate) fn save_human(
        &mut self,
        op: &str,
        parent: Option<u32>,
        source: String,
        via: &str,
    ) -> (u32, Vec<Effect>) {
        let rev = self.recorder.ids().next_rev(op);
        self.record(SessionEvent::Revision {
            op: op.into(),
            rev,
            parent,
            author: Author::Human,
            rationale: match via {
                "editor" => "hand edit (built-in editor)".into(),
                _ => "hand edit ($EDITOR)".into(),
            },
            source,
            via: Some(via.into()),
            request_id: None,
            tokens_in: None,
            tokens_out: None,
            category: None,
            knowledge: vec![],
        });
        if self.selected_op().as_deref() == Some(op) {
            self.select_rev_number(rev);
        }
        let fx = self.measure(op, rev);
        (rev, fx)
    }
}
