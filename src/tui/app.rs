//! The application: one event type, one state, one update function. Data flows one way:
//! worker / watchers / input → `AppEvent` → `update` (which records session events through the
//! reducer) → `AppState` → `view::draw`. Side effects leave `update` as `Effect`s.

use super::highlight::{DiffView, HighlightCache, Highlighter, build_diff};
use super::keymap::Action;
use super::theme::Theme;
use crate::engine::client::JobEvent;
use crate::engine::protocol::{DeviceInfo, Event, Verdict};
use crate::session::model::{LogLevel, LogLine, Revision};
use crate::session::store::now;
use crate::session::{
    Author, DecidedBy, Decision, Model, Record, Recorder, RevVerdict, SessionEvent,
};
use crate::suite::hardware::HardwareProfile;
use crate::suite::roofline::{self, Bottleneck};
use crate::suite::{PhaseFilter, Suite};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui_textarea::{CursorMove, TextArea};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Everything that can happen to the app.
#[derive(Debug)]
pub enum AppEvent {
    Key(KeyEvent),
    Resize(u16, u16),
    /// The worker's answer to hello: a device, or why there is none.
    Hello(Result<HelloInfo, String>),
    /// An event of a measurement job.
    Job {
        mid: u64,
        event: JobEvent,
    },
    /// The syntax highlighter finished loading.
    HighlighterReady(Result<Arc<Highlighter>, String>),
    /// A watched kernel file was saved.
    FileChanged {
        path: PathBuf,
        content: Result<String, String>,
    },
    /// $EDITOR returned.
    EditorExited {
        path: PathBuf,
        status: String,
    },
    /// Replay playback step.
    Tick,
    /// SIGTERM / SIGHUP / SIGINT.
    Signal(&'static str),
    /// A message for the log from the runtime.
    Log(LogLevel, String),
    /// News from the running agent.
    Agent(AgentMsg),
    /// Where ncu (Nsight Compute) is, or why it cannot be used (looked up once at start).
    NcuFound(Result<PathBuf, String>),
    /// A deep profile finished (or could not run).
    Profiled {
        op: String,
        rev: u32,
        result: Result<Box<crate::profile::Profile>, String>,
    },
    /// A recorded session asked for in the picker was read.
    ReplayLoaded {
        name: String,
        result: Result<crate::session::Loaded, String>,
    },
}

/// What the agent task sends to the app.
#[derive(Debug, Clone)]
pub enum AgentMsg {
    /// A session event to record (revisions, measurements, decisions, state changes).
    Record(SessionEvent),
    /// Live text of a streaming LLM reply.
    Stream(String),
    /// A retry or a corrective message: the streamed text so far is void.
    StreamReset,
    /// The loop ended (the stop reason was recorded already).
    Finished(String),
}

/// What the app tells the running agent.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentCtl {
    Decided {
        rev: u32,
        decision: Decision,
    },
    Steer(String),
    Stop,
    Dropout,
    /// A deep profile of the agent's operator: its findings enter the next context.
    Profile(crate::agent::ProfileNote),
}

/// The agent as the UI shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentView {
    pub op: String,
    pub backend: String,
    pub running: bool,
    pub stopping: bool,
    /// The reply being streamed (tail).
    pub stream: String,
}

#[derive(Debug, Clone)]
pub struct HelloInfo {
    pub device: Option<DeviceInfo>,
    pub driver: String,
    pub nvrtc: Option<String>,
}

/// Side effects requested by `update`, carried out by the runtime.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Compile, check and time a revision (JobKind::All, Mode::Quick) on every shape.
    Measure {
        op: String,
        rev: u32,
        mid: u64,
        source: String,
    },
    Cancel {
        mid: u64,
    },
    /// Write the kernel to `path`, watch it, suspend the TUI and run the editor on it.
    ExternalEdit {
        op: String,
        path: PathBuf,
        content: String,
    },
    /// Start (Some: period) or stop replay playback.
    Playback(Option<Duration>),
    /// Start the agent on an operator with its restored memory.
    StartAgent {
        op: String,
        state: Box<crate::agent::AgentState>,
        /// Sources measured earlier with their S_op (the tuner's memory).
        sources: Vec<(String, Option<f64>)>,
        seed: u64,
    },
    /// A message for the running agent.
    Agent(AgentCtl),
    /// Profile a revision on one shape under Nsight Compute, on a blocking task; the result
    /// comes back as `AppEvent::Profiled`.
    Profile {
        op: String,
        rev: u32,
        shape: u32,
        source: String,
        /// The GPU's name (for the hardware profile of the findings).
        device: String,
        /// ncu when already found (else the task looks for it).
        ncu: Option<PathBuf>,
    },
    /// Read a recorded session and open it in replay (`AppEvent::ReplayLoaded`).
    OpenReplay(SessionFile),
    Quit,
}

/// A recorded session the picker offers: a file of the workspace or a built-in demo.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionFile {
    pub name: String,
    /// None: the built-in copy (`session::demos`).
    pub path: Option<PathBuf>,
    pub bytes: u64,
    /// Events (lines), when cheap to count.
    pub events: Option<usize>,
}

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
}

/// Replay: the recorded events and the position in them.
pub struct Replay {
    pub file: String,
    pub records: Vec<Record>,
    /// Events applied so far (0..=records.len()).
    pub pos: usize,
    pub playing: bool,
    pub speed: usize,
    pub warnings: Vec<String>,
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
    diags: Vec<crate::engine::protocol::Diagnostic>,
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
    /// Lines from the bottom of the log (0: follow the end).
    pub log_scroll: usize,
    pub modal: Modal,
    pub worker: WorkerState,
    pub restarts: u64,
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
    /// The agent, once started.
    pub agent: Option<AgentView>,
    /// The agent's configuration (settings + environment), or why it cannot start.
    pub agent_cfg: Result<crate::agent::config::AgentConfig, String>,
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
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
            gauge_scroll: 0,
            shape_sel: None,
            ncu: None,
            profiling: None,
            recorded_sessions: Vec::new(),
            log_scroll: 0,
            modal: Modal::None,
            worker: WorkerState::Starting,
            restarts: 0,
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
            agent: None,
            agent_cfg: crate::agent::config::resolve(&Default::default(), None),
        };
        s.compute_shape_info();
        s.select_latest_rev();
        s.refresh();
        s
    }

    /// Names the session file this run records into (the runtime writes it).
    pub fn attach_session(&mut self, path: &std::path::Path) {
        self.session_name = path.file_name().map(|n| n.to_string_lossy().to_string());
    }

    /// Opens a replay positioned after its last event.
    pub fn start_replay(&mut self, file: String, records: Vec<Record>, warnings: Vec<String>) {
        for w in &warnings {
            self.log(LogLevel::Warn, w.clone());
        }
        let pos = records.len();
        self.model = Model::from_records(&self.suite, &records);
        self.replay = Some(Replay {
            file,
            records,
            pos,
            playing: false,
            speed: 2,
            warnings,
        });
        self.hw_from_run();
        self.select_session_op();
        self.refresh();
    }

    /// Selects the operator the session is about (the one of its latest revision) and that
    /// operator's latest revision.
    pub fn select_session_op(&mut self) {
        if let Some(op) = self.model.latest_op.clone() {
            self.select_op_name(&op);
        }
        self.select_latest_rev();
    }

    fn hw_from_run(&mut self) {
        if let Some(h) = self.model.run.hardware.clone()
            && let Ok(p) = self.suite.hardware(&h)
        {
            self.hw = Some(p.clone());
            self.compute_shape_info();
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
    /// only change the state shown.
    pub fn record(&mut self, event: SessionEvent) {
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

    fn select_latest_rev(&mut self) {
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

    fn select_op_name(&mut self, op: &str) {
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

    /// Records the revision (if the session lacks it) and a measurement start; returns the job.
    fn measure(&mut self, op: &str, rev: u32) -> Vec<Effect> {
        if let Err(e) = self.can_measure() {
            self.log(LogLevel::Warn, format!("cannot measure {op} v{rev}: {e}"));
            return vec![];
        }
        let Some(r) = self.model.ops.get(op).and_then(|o| o.rev(rev)).cloned() else {
            return vec![];
        };
        if !r.recorded {
            self.record(SessionEvent::Revision {
                op: op.into(),
                rev,
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
        let mid = self.recorder.ids().next_mid();
        self.record(SessionEvent::MeasureStart {
            op: op.into(),
            rev,
            mid,
            mode: "quick".into(),
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
            },
        );
        vec![Effect::Measure {
            op: op.into(),
            rev,
            mid,
            source: r.source,
        }]
    }

    /// Records a human revision and measures it at once.
    fn save_human(
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

/// The update function: applies one event to the state and returns the side effects.
pub fn update(state: &mut AppState, ev: AppEvent) -> Vec<Effect> {
    let fx = match ev {
        AppEvent::Key(k) if k.kind == KeyEventKind::Press || k.kind == KeyEventKind::Repeat => {
            on_key(state, k)
        }
        AppEvent::Key(_) => vec![],
        AppEvent::Resize(..) => vec![],
        AppEvent::Hello(r) => {
            on_hello(state, r);
            vec![]
        }
        AppEvent::Job { mid, event } => on_job(state, mid, event),
        AppEvent::HighlighterReady(Ok(h)) => {
            state.highlighter = Some(h);
            state.hl_cache.clear();
            vec![]
        }
        AppEvent::HighlighterReady(Err(e)) => {
            state.log(LogLevel::Warn, format!("syntax highlighting off: {e}"));
            vec![]
        }
        AppEvent::FileChanged { path, content } => on_file(state, path, content),
        AppEvent::EditorExited { path, status } => {
            state.log(
                LogLevel::Info,
                format!(
                    "editor closed ({status}); still watching {}",
                    path.file_name()
                        .map(|n| n.to_string_lossy().to_string())
                        .unwrap_or_default()
                ),
            );
            vec![]
        }
        AppEvent::Tick => {
            let fx = replay_step(state, 1);
            if state
                .replay
                .as_ref()
                .map(|r| r.pos >= r.records.len())
                .unwrap_or(true)
            {
                if let Some(r) = &mut state.replay {
                    r.playing = false;
                }
                let mut v = fx;
                v.push(Effect::Playback(None));
                v
            } else {
                fx
            }
        }
        AppEvent::Signal(name) => {
            state.log(LogLevel::Warn, format!("{name}: quitting"));
            quit_now(state)
        }
        AppEvent::Log(l, s) => {
            state.log(l, s);
            vec![]
        }
        AppEvent::Agent(m) => on_agent(state, m),
        AppEvent::NcuFound(r) => {
            state.ncu = Some(r);
            vec![]
        }
        AppEvent::Profiled { op, rev, result } => on_profiled(state, op, rev, result),
        AppEvent::ReplayLoaded { name, result } => {
            match result {
                Ok(loaded) => {
                    let n = loaded.records.len();
                    state.focus = PaneId::Operators;
                    state.start_replay(name.clone(), loaded.records, loaded.warnings);
                    state.log(
                        LogLevel::Info,
                        format!(
                            "replaying {name} ({n} events, read-only): , / . step, space plays, r/R jump to revisions"
                        ),
                    );
                }
                Err(e) => state.log(LogLevel::Error, format!("cannot open {name}: {e}")),
            }
            vec![]
        }
    };
    state.refresh();
    fx
}

fn on_agent(state: &mut AppState, m: AgentMsg) -> Vec<Effect> {
    match m {
        AgentMsg::Record(ev) => {
            let select = match &ev {
                SessionEvent::Revision { op, rev, .. } => {
                    if let Some(a) = state.agent.as_mut() {
                        a.stream.clear();
                    }
                    (state.selected_op().as_deref() == Some(op.as_str())).then_some(*rev)
                }
                _ => None,
            };
            state.record(ev);
            if let Some(r) = select {
                state.select_rev_number(r);
            }
        }
        AgentMsg::Stream(t) => {
            if let Some(a) = state.agent.as_mut() {
                a.stream.push_str(&t);
                if a.stream.len() > 8000 {
                    let cut = a.stream.len() - 4000;
                    let cut = (cut..a.stream.len())
                        .find(|i| a.stream.is_char_boundary(*i))
                        .unwrap_or(0);
                    a.stream.drain(..cut);
                }
            }
        }
        AgentMsg::StreamReset => {
            if let Some(a) = state.agent.as_mut() {
                a.stream.clear();
            }
        }
        AgentMsg::Finished(reason) => {
            if let Some(a) = state.agent.as_mut() {
                a.running = false;
                a.stopping = false;
                a.stream.clear();
            }
            state.log(LogLevel::Info, format!("agent finished: {reason}"));
        }
    }
    vec![]
}

/// `a`: start the agent on the selected operator, or stop the running one.
fn toggle_agent(state: &mut AppState) -> Vec<Effect> {
    if let Some(a) = state.agent.as_mut()
        && a.running
    {
        a.stopping = true;
        let op = a.op.clone();
        state.log(
            LogLevel::Info,
            format!("agent on {op}: stopping after the current step"),
        );
        return vec![Effect::Agent(AgentCtl::Stop)];
    }
    let Some(op) = state.selected_op() else {
        return vec![];
    };
    if let Err(e) = state.can_measure() {
        state.log(LogLevel::Warn, format!("agent: cannot start on {op}: {e}"));
        return vec![];
    }
    let cfg = match &state.agent_cfg {
        Ok(c) => c.clone(),
        Err(e) => {
            state.log(LogLevel::Error, format!("agent: {e}"));
            return vec![];
        }
    };
    let Some((st, sources)) = crate::agent::setup::restore(&state.model, &op) else {
        state.log(
            LogLevel::Warn,
            format!("agent: {op} has no kernel yet (no baseline.cu)"),
        );
        return vec![];
    };
    // The incumbent must be in the session before the agent measures it.
    if let Some(r) = state
        .model
        .ops
        .get(&op)
        .and_then(|o| o.rev(st.incumbent_rev))
        .cloned()
        && !r.recorded
    {
        state.record(SessionEvent::Revision {
            op: op.clone(),
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
    let backend = match &cfg.endpoint {
        Some(e) => format!("{} ({})", e.model, e.kind.name()),
        None => "tuner".to_string(),
    };
    let masked = st.history.iter().filter(|h| h.masked).count();
    state.log(
        LogLevel::Info,
        format!(
            "agent: {backend} on {op} from v{} ({} revisions remembered{}); y/n decide, s steers, x drops out, a stops",
            st.incumbent_rev,
            st.history.len(),
            if masked > 0 {
                format!(", {masked} masked")
            } else {
                String::new()
            }
        ),
    );
    state.agent = Some(AgentView {
        op: op.clone(),
        backend,
        running: true,
        stopping: false,
        stream: String::new(),
    });
    vec![Effect::StartAgent {
        op,
        state: Box::new(st),
        sources,
        seed: crate::engine::fresh_seeds(1)[0],
    }]
}

fn quit_now(state: &mut AppState) -> Vec<Effect> {
    state.quit = true;
    let mut fx: Vec<Effect> = state
        .jobs
        .keys()
        .map(|m| Effect::Cancel { mid: *m })
        .collect();
    if state.agent.as_ref().is_some_and(|a| a.running) {
        fx.push(Effect::Agent(AgentCtl::Stop));
    }
    let running: Vec<(u64, String, u32)> = state
        .jobs
        .iter()
        .map(|(m, j)| (*m, j.op.clone(), j.rev))
        .collect();
    for (mid, op, rev) in running {
        state.record(SessionEvent::MeasureDone {
            op,
            rev,
            mid,
            verdict: Verdict::Cancelled,
            message: Some("cancelled at quit".into()),
        });
    }
    state.jobs.clear();
    fx.push(Effect::Quit);
    fx
}

fn on_hello(state: &mut AppState, r: Result<HelloInfo, String>) {
    match r {
        Ok(HelloInfo {
            device: Some(d),
            driver,
            nvrtc,
        }) => {
            state.worker = WorkerState::Ready {
                gpu: d.name.clone(),
                sm_clock_mhz: d.sm_clock_mhz,
            };
            let prof = crate::engine::profile_for_device(&state.suite.hardware, &d.name).cloned();
            if state.replay.is_none() {
                if let Some(p) = prof {
                    state.hw = Some(p);
                    state.compute_shape_info();
                }
                let hardware = state.hw.as_ref().map(|h| h.key.clone());
                state.record(SessionEvent::Device {
                    gpu: Some(d.name.clone()),
                    driver: Some(driver),
                    nvrtc,
                    hardware,
                });
            } else {
                state.log(
                    LogLevel::Info,
                    format!(
                        "GPU available: {} (m re-measures the selected revision)",
                        d.name
                    ),
                );
            }
        }
        Ok(HelloInfo { device: None, .. }) => {
            state.worker = WorkerState::NoGpu("the worker found no GPU".into());
            state.log(LogLevel::Info, "no GPU: browse and replay only".into());
            offer_sessions(state);
        }
        Err(e) => {
            state.worker = WorkerState::NoGpu(e.clone());
            state.log(
                LogLevel::Info,
                format!("no GPU: browse and replay only ({e})"),
            );
            offer_sessions(state);
        }
    }
}

/// Without a GPU, a new session can only browse: offer the recorded ones.
fn offer_sessions(state: &mut AppState) {
    if state.replay.is_none()
        && !state.recorded_sessions.is_empty()
        && matches!(state.modal, Modal::None)
    {
        state.modal = Modal::Sessions { sel: 0 };
    }
}

/// `p`: profile the selected revision on the selected shape (else the largest) under ncu.
fn profile_selected(state: &mut AppState) -> Vec<Effect> {
    let (Some(op), Some(r)) = (state.selected_op(), state.selected_rev().cloned()) else {
        state.log(
            LogLevel::Warn,
            "nothing to profile: this operator has no kernel yet".into(),
        );
        return vec![];
    };
    let rev = r.rev;
    let why_not = if let Err(e) = state.can_measure() {
        Some(e)
    } else if let Some(Err(e)) = &state.ncu {
        Some(e.clone())
    } else if let Some((o, r, _)) = &state.profiling {
        Some(format!(
            "{o} v{r} is being profiled (one profile at a time)"
        ))
    } else if state.measuring() {
        Some("a measurement is running (the profiler would disturb its timings)".into())
    } else if r.verdict() == RevVerdict::CompileError {
        Some("it does not compile".into())
    } else {
        None
    };
    if let Some(e) = why_not {
        state.log(LogLevel::Warn, format!("cannot profile {op} v{rev}: {e}"));
        return vec![];
    }
    let WorkerState::Ready { gpu, .. } = &state.worker else {
        return vec![];
    };
    let device = gpu.clone();
    let shape = match state.selected_shape().or_else(|| {
        state
            .suite
            .problem(&op)
            .and_then(crate::profile::largest_shape)
    }) {
        Some(s) => s,
        None => {
            state.log(
                LogLevel::Warn,
                format!("cannot profile {op} v{rev}: no shapes"),
            );
            return vec![];
        }
    };
    state.profiling = Some((op.clone(), rev, shape));
    state.log(
        LogLevel::Info,
        format!(
            "profiling {op} v{rev} on shape #{shape} under Nsight Compute (takes a few seconds)…"
        ),
    );
    vec![Effect::Profile {
        op,
        rev,
        shape,
        source: r.source,
        device,
        ncu: state.ncu.clone().and_then(|r| r.ok()),
    }]
}

fn on_profiled(
    state: &mut AppState,
    op: String,
    rev: u32,
    result: Result<Box<crate::profile::Profile>, String>,
) -> Vec<Effect> {
    state.profiling = None;
    let p = match result {
        Ok(p) => Box::new(p.without_raw()),
        Err(e) => {
            state.log(LogLevel::Warn, format!("cannot profile {op} v{rev}: {e}"));
            return vec![];
        }
    };
    let Some(r) = state.model.ops.get(&op).and_then(|o| o.rev(rev)).cloned() else {
        return vec![];
    };
    // The session must hold the revision before its profile.
    if !r.recorded {
        state.record(SessionEvent::Revision {
            op: op.clone(),
            rev,
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
    let note = crate::agent::ProfileNote::from_profile(rev, &p);
    state.record(SessionEvent::Profile {
        op: op.clone(),
        rev,
        profile: p,
    });
    if state
        .agent
        .as_ref()
        .is_some_and(|a| a.running && a.op == op)
    {
        return vec![Effect::Agent(AgentCtl::Profile(note))];
    }
    vec![]
}

fn on_job(state: &mut AppState, mid: u64, ev: JobEvent) -> Vec<Effect> {
    let Some(job) = state.jobs.get(&mid).cloned() else {
        return vec![];
    };
    let (op, rev) = (job.op.clone(), job.rev);
    // What the screen shows besides the session's record of the job.
    match &ev {
        JobEvent::Worker(Event::Progress {
            stage,
            shape,
            done,
            total,
            ..
        }) => {
            if let Some(j) = state.jobs.get_mut(&mid) {
                j.stage = stage.clone();
                j.shape = *shape;
                j.done = *done;
                j.total = *total;
            }
        }
        JobEvent::Worker(Event::Compiled {
            which,
            ok,
            ms,
            cached,
            ..
        }) if which == "candidate" => {
            state.log(
                LogLevel::Info,
                format!(
                    "{op} v{rev}: compiled {} in {ms:.0} ms{}",
                    if *ok { "ok" } else { "with errors" },
                    if *cached { " (cached)" } else { "" }
                ),
            );
        }
        JobEvent::Worker(Event::Done { .. }) | JobEvent::WorkerLost { .. } => {
            state.jobs.remove(&mid);
        }
        _ => {}
    }
    for se in crate::session::translate::job_events(&op, rev, mid, &ev) {
        state.record(se);
    }
    vec![]
}

fn on_file(state: &mut AppState, path: PathBuf, content: Result<String, String>) -> Vec<Effect> {
    let Some(w) = state.watches.get(&path).cloned() else {
        return vec![];
    };
    let content = match content {
        Ok(c) => c,
        Err(e) => {
            state.log(LogLevel::Warn, format!("{}: {e}", path.display()));
            return vec![];
        }
    };
    if content == w.last_content || content.trim().is_empty() {
        return vec![];
    }
    let (rev, fx) = state.save_human(&w.op, w.last_rev, content.clone(), "external");
    state.watches.insert(
        path,
        Watch {
            op: w.op.clone(),
            last_rev: Some(rev),
            last_content: content,
        },
    );
    fx
}

/// Moves the replay to `pos` events (rebuilding from the start when going back).
pub fn replay_seek(state: &mut AppState, pos: usize) {
    let Some(r) = &mut state.replay else { return };
    let pos = pos.min(r.records.len());
    if pos >= r.pos {
        for rec in &r.records[r.pos..pos] {
            state.model.apply(rec);
        }
    } else {
        state.model = Model::from_records(&state.suite, &r.records[..pos]);
    }
    r.pos = pos;
    // follow the operator and revision the last event touched
    let touched = r.records[..pos].last().and_then(|rec| match &rec.event {
        SessionEvent::Revision { op, rev, .. }
        | SessionEvent::MeasureStart { op, rev, .. }
        | SessionEvent::Compiled { op, rev, .. }
        | SessionEvent::ShapeResult { op, rev, .. }
        | SessionEvent::MeasureDone { op, rev, .. }
        | SessionEvent::Decision { op, rev, .. } => Some((op.clone(), *rev)),
        _ => None,
    });
    if let Some((op, rev)) = touched {
        state.select_op_name(&op);
        state.select_rev_number(rev);
    }
}

fn replay_step(state: &mut AppState, delta: isize) -> Vec<Effect> {
    let Some(r) = &state.replay else {
        return vec![];
    };
    let pos = (r.pos as isize + delta).clamp(0, r.records.len() as isize) as usize;
    replay_seek(state, pos);
    vec![]
}

fn replay_jump_revision(state: &mut AppState, forward: bool) {
    let Some(r) = &state.replay else { return };
    let is_rev = |rec: &Record| matches!(rec.event, SessionEvent::Revision { .. });
    let target = if forward {
        r.records
            .iter()
            .enumerate()
            .skip(r.pos)
            .find(|(_, x)| is_rev(x))
            .map(|(i, _)| i + 1)
    } else {
        r.records[..r.pos.saturating_sub(1)]
            .iter()
            .rposition(is_rev)
            .map(|i| i + 1)
    };
    if let Some(t) = target {
        replay_seek(state, t);
    }
}

fn playback_period(r: &Replay) -> Duration {
    Duration::from_secs_f64(1.0 / (BASE_RATE * SPEEDS[r.speed.min(SPEEDS.len() - 1)]))
}

fn on_key(state: &mut AppState, k: KeyEvent) -> Vec<Effect> {
    // modal first
    match &mut state.modal {
        Modal::Help { scroll } => {
            match k.code {
                KeyCode::Char('j') | KeyCode::Down => *scroll = scroll.saturating_add(1),
                KeyCode::Char('k') | KeyCode::Up => *scroll = scroll.saturating_sub(1),
                _ => state.modal = Modal::None,
            }
            return vec![];
        }
        Modal::ConfirmQuit => {
            return match k.code {
                KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter => {
                    state.modal = Modal::None;
                    quit_now(state)
                }
                _ => {
                    state.modal = Modal::None;
                    vec![]
                }
            };
        }
        Modal::Steer(ta) => {
            match k.code {
                KeyCode::Esc => state.modal = Modal::None,
                KeyCode::Enter => {
                    let text = ta.lines().join(" ").trim().to_string();
                    state.modal = Modal::None;
                    if !text.is_empty() {
                        let op = state.selected_op();
                        state.record(SessionEvent::Steer {
                            op,
                            text: text.clone(),
                        });
                        if state.agent.as_ref().is_some_and(|a| a.running) {
                            return vec![Effect::Agent(AgentCtl::Steer(text))];
                        }
                    }
                }
                _ => {
                    ta.input(k);
                }
            }
            return vec![];
        }
        Modal::Editor(_) => return editor_key(state, k),
        Modal::Sessions { sel } => {
            let n = state.recorded_sessions.len();
            match k.code {
                KeyCode::Char('j') | KeyCode::Down => *sel = (*sel + 1).min(n.saturating_sub(1)),
                KeyCode::Char('k') | KeyCode::Up => *sel = sel.saturating_sub(1),
                KeyCode::Enter => {
                    let f = state.recorded_sessions.get(*sel).cloned();
                    state.modal = Modal::None;
                    if let Some(f) = f {
                        state.log(LogLevel::Info, format!("opening {} in replay…", f.name));
                        return vec![Effect::OpenReplay(f)];
                    }
                }
                KeyCode::Esc | KeyCode::Char('q') => {
                    state.modal = Modal::None;
                    state.log(
                        LogLevel::Info,
                        "recorded sessions: atrex-tui replay FILE opens one later".into(),
                    );
                }
                _ => {}
            }
            return vec![];
        }
        Modal::None => {}
    }
    let replaying = state.replay.is_some();
    match super::keymap::action(&k, replaying, false) {
        Some(a) => on_action(state, a),
        None => vec![],
    }
}

/// Refuses a change in replay (read-only), with a line in the log.
fn read_only(state: &mut AppState) -> bool {
    if state.replay.is_some() {
        state.log(
            LogLevel::Warn,
            "replay is read-only (use --resume FILE to continue the session)".into(),
        );
        true
    } else {
        false
    }
}

/// What a key of the main view does (the keymap says which key is which action).
fn on_action(state: &mut AppState, a: Action) -> Vec<Effect> {
    const PAGE: isize = 10;
    let live_only = matches!(
        a,
        Action::Agent
            | Action::Dropout
            | Action::Accept
            | Action::Reject
            | Action::Steer
            | Action::Edit
            | Action::ExternalEdit
    );
    if live_only && read_only(state) {
        return vec![];
    }
    match a {
        Action::Quit => {
            if state.measuring() {
                state.modal = Modal::ConfirmQuit;
                return vec![];
            }
            return quit_now(state);
        }
        Action::Help => state.modal = Modal::Help { scroll: 0 },
        Action::NextPane => {
            let i = PANES.iter().position(|p| *p == state.focus).unwrap_or(0);
            state.focus = PANES[(i + 1) % PANES.len()];
        }
        Action::PrevPane => {
            let i = PANES.iter().position(|p| *p == state.focus).unwrap_or(0);
            state.focus = PANES[(i + PANES.len() - 1) % PANES.len()];
        }
        Action::Phase => next_phase(state),
        Action::Profile => return profile_selected(state),
        Action::DiffMode => {
            state.diff_mode = match state.diff_mode {
                DiffMode::Parent => DiffMode::Incumbent,
                DiffMode::Incumbent => DiffMode::Parent,
            };
            state.full_source = false;
        }
        Action::FullSource => state.full_source = !state.full_source,
        Action::Agent => return toggle_agent(state),
        Action::Dropout => return dropout(state),
        Action::Accept | Action::Reject => return decide_selected(state, a == Action::Accept),
        Action::Steer => {
            let mut ta = TextArea::default();
            ta.set_placeholder_text(
                "a hint for the agent's next iteration, e.g. \"use one warp per row\"",
            );
            state.modal = Modal::Steer(ta);
        }
        Action::Measure => return measure_selected(state),
        Action::Edit => open_editor(state),
        Action::ExternalEdit => return external_edit(state),
        Action::StepForward => return replay_step(state, 1),
        Action::StepBack => return replay_step(state, -1),
        Action::Forward10 => return replay_step(state, 10),
        Action::Back10 => return replay_step(state, -10),
        Action::Start => replay_seek(state, 0),
        Action::End => replay_seek(state, usize::MAX),
        Action::NextRevision => replay_jump_revision(state, true),
        Action::PrevRevision => replay_jump_revision(state, false),
        Action::PlayPause => return play_pause(state),
        Action::Faster | Action::Slower => return replay_speed(state, a == Action::Faster),
        Action::Down => navigate(state, 1),
        Action::Up => navigate(state, -1),
        Action::PageDown => navigate(state, PAGE),
        Action::PageUp => navigate(state, -PAGE),
        Action::First => navigate(state, isize::MIN / 2),
        Action::Last => navigate(state, isize::MAX / 2),
        Action::EditorSave | Action::EditorUndo | Action::EditorRedo | Action::EditorClose => {}
    }
    vec![]
}

fn next_phase(state: &mut AppState) {
    let cur = state.selected_op();
    state.phase = state.phase.next();
    state.op_sel = 0;
    if let Some(c) = &cur {
        state.select_op_name(c);
    }
    if state.selected_op() != cur {
        state.shape_sel = None;
    }
    state.select_latest_rev();
}

fn dropout(state: &mut AppState) -> Vec<Effect> {
    match &state.agent {
        Some(a) if a.running => {
            state.log(
                LogLevel::Steer,
                "agent: dropout asked: the next context masks about half of the history".into(),
            );
            vec![Effect::Agent(AgentCtl::Dropout)]
        }
        _ => {
            state.log(LogLevel::Warn, "agent: not running (a starts it)".into());
            vec![]
        }
    }
}

/// y / n on the selected revision; a running agent hears of decisions on its operator.
fn decide_selected(state: &mut AppState, accept: bool) -> Vec<Effect> {
    let before = state.journal.len();
    decide(state, accept);
    if state.journal.len() > before
        && let Some(SessionEvent::Decision {
            op, rev, decision, ..
        }) = state.journal.last().map(|r| r.event.clone())
        && state
            .agent
            .as_ref()
            .is_some_and(|a| a.running && a.op == op)
    {
        return vec![Effect::Agent(AgentCtl::Decided { rev, decision })];
    }
    vec![]
}

fn measure_selected(state: &mut AppState) -> Vec<Effect> {
    let (Some(op), Some(rev)) = (state.selected_op(), state.selected_rev().map(|r| r.rev)) else {
        state.log(
            LogLevel::Warn,
            "nothing to measure: this operator has no kernel yet".into(),
        );
        return vec![];
    };
    state.measure(&op, rev)
}

fn play_pause(state: &mut AppState) -> Vec<Effect> {
    if let Some(r) = &mut state.replay
        && r.pos >= r.records.len()
        && !r.playing
    {
        r.pos = 0;
        state.model = Model::from_records(&state.suite, &[]);
    }
    let Some(r) = &mut state.replay else {
        return vec![];
    };
    r.playing = !r.playing;
    vec![Effect::Playback(r.playing.then(|| playback_period(r)))]
}

fn replay_speed(state: &mut AppState, faster: bool) -> Vec<Effect> {
    let Some(r) = &mut state.replay else {
        return vec![];
    };
    r.speed = if faster {
        (r.speed + 1).min(SPEEDS.len() - 1)
    } else {
        r.speed.saturating_sub(1)
    };
    if r.playing {
        return vec![Effect::Playback(Some(playback_period(r)))];
    }
    vec![]
}

fn bump(v: usize, d: isize, len: usize) -> usize {
    let n = (v as isize).saturating_add(d);
    n.clamp(0, len.saturating_sub(1) as isize) as usize
}

fn navigate(state: &mut AppState, d: isize) {
    match state.focus {
        PaneId::Operators => {
            let n = state.visible_ops().len();
            let before = state.op_sel;
            state.op_sel = bump(state.op_sel, d, n);
            if before != state.op_sel {
                state.select_latest_rev();
                state.gauge_scroll = 0;
                state.shape_sel = None;
            }
        }
        PaneId::Revisions => {
            let n = state
                .selected_op()
                .and_then(|o| state.model.ops.get(&o).map(|o| o.revisions.len()))
                .unwrap_or(0);
            state.rev_sel = bump(state.rev_sel, d, n);
        }
        PaneId::Diff => state.diff_scroll = bump(state.diff_scroll, d, state.diff.lines.len()),
        PaneId::Gauges => {
            // j/k select a shape (the first press selects the first one); `p` profiles it.
            let n = state
                .selected_op()
                .and_then(|o| state.shape_info.get(&o).map(|v| v.len()))
                .unwrap_or(0);
            if n > 0 {
                let cur = state.shape_sel.map(|x| x as isize).unwrap_or(-1);
                let i = cur.saturating_add(d).clamp(0, n as isize - 1) as usize;
                state.shape_sel = Some(i);
                state.gauge_scroll = i;
            }
        }
        PaneId::Log => {
            let n = state.model.log.len() + state.ui_log.len();
            // the log scrolls from the bottom: j goes towards newer lines
            state.log_scroll = bump(state.log_scroll, -d, n);
        }
    }
}

/// The revision a waiting agent offers for a decision (its header says `waiting (vN: …)`).
pub fn offered_rev(state: &AppState) -> Option<(String, u32)> {
    let m = &state.model;
    if m.agent_state.as_deref() != Some("waiting")
        || !state.agent.as_ref().is_some_and(|a| a.running)
    {
        return None;
    }
    let op = m.agent_op.clone()?;
    let r = m.agent_reason.as_deref()?.strip_prefix('v')?;
    let n: String = r.chars().take_while(|c| c.is_ascii_digit()).collect();
    Some((op, n.parse().ok()?))
}

fn decide(state: &mut AppState, accept: bool) {
    // While the agent waits on a revision, y / n answer it, whatever is selected.
    if let Some((op, rev)) = offered_rev(state)
        && state.selected_op().as_deref() == Some(op.as_str())
        && state.selected_rev().map(|r| r.rev) != Some(rev)
    {
        state.select_rev_number(rev);
        state.log(
            LogLevel::Info,
            format!(
                "{} {op} v{rev}: the revision the agent waits on",
                if accept { "accepting" } else { "rejecting" }
            ),
        );
    }
    let (Some(op), Some(r)) = (state.selected_op(), state.selected_rev().cloned()) else {
        return;
    };
    if accept {
        match r.verdict() {
            RevVerdict::Score(_) => {}
            RevVerdict::Unmeasured => {
                state.log(
                    LogLevel::Warn,
                    format!(
                        "cannot accept {op} v{}: not measured yet (m measures it)",
                        r.rev
                    ),
                );
                return;
            }
            RevVerdict::Measuring => {
                state.log(
                    LogLevel::Warn,
                    format!("cannot accept {op} v{}: still measuring", r.rev),
                );
                return;
            }
            v => {
                state.log(
                    LogLevel::Warn,
                    format!("cannot accept {op} v{}: {}", r.rev, v.label()),
                );
                return;
            }
        }
        if state.model.ops.get(&op).and_then(|o| o.incumbent) == Some(r.rev)
            && r.decision == Some(Decision::Accepted)
        {
            state.log(
                LogLevel::Info,
                format!("{op} v{} is already the incumbent", r.rev),
            );
            return;
        }
    } else if r.author == Author::Baseline {
        state.log(
            LogLevel::Warn,
            format!("{op} v0 is the suite baseline; it cannot be rejected"),
        );
        return;
    }
    if !r.recorded {
        state.record(SessionEvent::Revision {
            op: op.clone(),
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
    state.record(SessionEvent::Decision {
        op,
        rev: r.rev,
        decision: if accept {
            Decision::Accepted
        } else {
            Decision::Rejected
        },
        by: DecidedBy::Human,
    });
}

fn open_editor(state: &mut AppState) {
    let Some(op) = state.selected_op() else {
        return;
    };
    let r = state.selected_rev().cloned();
    let source = r.as_ref().map(|r| r.source.clone()).unwrap_or_default();
    let lines: Vec<String> = source.lines().map(|l| l.to_string()).collect();
    let mut ta = TextArea::new(if lines.is_empty() {
        vec![String::new()]
    } else {
        lines
    });
    ta.set_line_number_style(ratatui::style::Style::default().fg(state.theme.gutter));
    ta.set_cursor_line_style(ratatui::style::Style::default().bg(state.theme.selection_bg));
    if let Some(d) = r.as_ref().and_then(|r| r.measurement.diagnostics.first()) {
        ta.move_cursor(CursorMove::Jump(
            d.line.saturating_sub(1).min(u16::MAX as usize) as u16,
            0,
        ));
    }
    state.modal = Modal::Editor(Box::new(EditorState {
        op,
        base: r.as_ref().map(|r| r.rev),
        base_source: source,
        saved: r
            .as_ref()
            .filter(|r| !r.measurement.diagnostics.is_empty())
            .map(|r| r.rev),
        textarea: ta,
        confirm_discard: false,
    }));
}

fn editor_key(state: &mut AppState, k: KeyEvent) -> Vec<Effect> {
    let action = super::keymap::action(&k, false, true);
    let Modal::Editor(ed) = &mut state.modal else {
        return vec![];
    };
    if action == Some(Action::EditorSave) {
        let text = ed.text();
        if text == ed.base_source {
            state.log(
                LogLevel::Info,
                "nothing to save: the text is unchanged".into(),
            );
            return vec![];
        }
        let (op, base) = (ed.op.clone(), ed.base);
        let (rev, fx) = state.save_human(&op, base, text.clone(), "editor");
        if let Modal::Editor(ed) = &mut state.modal {
            ed.base = Some(rev);
            ed.base_source = text;
            ed.saved = Some(rev);
            ed.confirm_discard = false;
        }
        return fx;
    }
    if action == Some(Action::EditorClose) {
        if ed.text() != ed.base_source && !ed.confirm_discard {
            ed.confirm_discard = true;
            return vec![];
        }
        state.modal = Modal::None;
        return vec![];
    }
    ed.confirm_discard = false;
    match action {
        Some(Action::EditorUndo) => {
            ed.textarea.undo();
        }
        Some(Action::EditorRedo) => {
            ed.textarea.redo();
        }
        _ => {
            ed.textarea.input(k);
        }
    }
    vec![]
}

fn external_edit(state: &mut AppState) -> Vec<Effect> {
    let Some(op) = state.selected_op() else {
        return vec![];
    };
    let r = state.selected_rev().cloned();
    let n = r.as_ref().map(|r| r.rev).unwrap_or(0);
    let path = state.kernels_dir.join(&op).join(format!("v{n}.cu"));
    let content = r.as_ref().map(|r| r.source.clone()).unwrap_or_default();
    state.watches.insert(
        path.clone(),
        Watch {
            op: op.clone(),
            last_rev: r.as_ref().map(|r| r.rev),
            last_content: content.clone(),
        },
    );
    state.log(
        LogLevel::Info,
        format!("editing {op} v{n} in $EDITOR; every save is measured"),
    );
    vec![Effect::ExternalEdit { op, path, content }]
}

/// A key press, for tests and the runtime.
pub fn press(code: KeyCode) -> AppEvent {
    AppEvent::Key(key(code))
}

pub fn press_ctrl(c: char) -> AppEvent {
    AppEvent::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
}
