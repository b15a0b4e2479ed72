//! The state of a session, built from its events alone by one reducer (`Model::apply`).
//!
//! Invariants of the reducer:
//! - There is one reducer, used alike for live use, for resuming a session and for replay:
//!   the state shown is always the fold of `Model::apply` over the session's records, from
//!   `Model::new`.
//! - It is deterministic: applying the same records in the same order always gives the same
//!   state, log lines included; it reads nothing but the record and the state.
//! - It never fails: an event naming a revision without a `revision` event is logged and
//!   ignored, an event of a kind this build does not know is counted, and a measurement event
//!   of an older measurement (another `mid`) leaves the revision as it is.
//! - A replay of a large file folds its shape results in as briefs (`Model::apply_brief`:
//!   shape, verdict, S and the line's place in the file; `results`): the state differs from the
//!   whole fold only in the per-shape figures not yet read, and equals it once they are
//!   (`Model::fill_results`).
//! - A measurement still running at a `run_start` is interrupted: the run that started it is
//!   over. A replay (a session that is not live) also marks as interrupted the measurements its
//!   file never ends (`interrupt_unended`), the one step beyond the fold; its events decide it.
//!
//! `apply` only routes each event to its family, each in its own module: `run` (run start,
//! device, errors, unknown kinds), `revisions` (revisions, decisions, profiles),
//! `measurements` (a measurement from start to verdict) and `agent` (agent state, steering,
//! tool calls).

mod agent;
mod measurements;
pub mod results;
mod revisions;
mod run;

pub use agent::tool_line;
pub use results::{Brief, Place, Results};

use super::event::{Author, DecidedBy, Decision, Record, SessionEvent};
use crate::contract::protocol::{Diagnostic, ShapeResult, Verdict};
use crate::suite::roofline;
use crate::suite::{PhaseFilter, Suite};
use std::collections::BTreeMap;

/// Where a revision's measurement stands.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum MeasureStatus {
    #[default]
    Unmeasured,
    Running,
    Done(Verdict),
    /// Started, but neither finished nor failed, in a run that is over: a later run of the
    /// session started (the reducer, at its `run_start`), or the session is replayed and its
    /// file never ends the measurement (`Model::interrupt_unended`).
    Interrupted,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measurement {
    pub status: MeasureStatus,
    pub mid: u64,
    pub mode: String,
    /// None until the compile result arrives.
    pub compiled: Option<bool>,
    pub diagnostics: Vec<Diagnostic>,
    pub compile_log: String,
    /// Per-shape results (whole, or briefs of a session read lazily: `results`).
    pub results: Results,
    pub message: Option<String>,
    /// What the kernels printed, per shape (None: outside a shape), in arrival order.
    pub output: Vec<(Option<u32>, String)>,
    /// Where and when it was made (None before its start event).
    pub made: Option<MadeOn>,
}

/// Where and when a measurement was made: its run's device as the session knew it when the
/// measurement started (or, where the device was not yet known then, when it ended), and the
/// start's time. A resumed session's revision keeps what its own run measured it on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MadeOn {
    /// The run (1-based: the count of `run_start` events up to it).
    pub run: usize,
    /// Wall-clock time of the start, seconds since the Unix epoch.
    pub t: f64,
    pub gpu: Option<String>,
    pub driver: Option<String>,
    pub nvrtc: Option<String>,
    pub hardware: Option<String>,
    pub tool_version: Option<String>,
}

/// A revision's verdict as shown.
#[derive(Debug, Clone, PartialEq)]
pub enum RevVerdict {
    Unmeasured,
    Measuring,
    /// Its measurement started and never ended (its run is over).
    Interrupted,
    CompileError,
    Incorrect,
    Failed(String),
    Score(f64),
}

impl RevVerdict {
    pub fn label(&self) -> String {
        match self {
            RevVerdict::Unmeasured => "—".into(),
            RevVerdict::Measuring => "measuring".into(),
            RevVerdict::Interrupted => "interrupted".into(),
            RevVerdict::CompileError => "compile error".into(),
            RevVerdict::Incorrect => "incorrect".into(),
            RevVerdict::Failed(s) => s.clone(),
            RevVerdict::Score(s) => format!("S {s:.3}"),
        }
    }
    pub fn score(&self) -> Option<f64> {
        match self {
            RevVerdict::Score(s) => Some(*s),
            _ => None,
        }
    }
    pub fn failed(&self) -> bool {
        matches!(
            self,
            RevVerdict::CompileError | RevVerdict::Incorrect | RevVerdict::Failed(_)
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    pub rev: u32,
    pub parent: Option<u32>,
    pub author: Author,
    pub rationale: String,
    pub source: String,
    pub via: Option<String>,
    pub decision: Option<Decision>,
    pub decided_by: Option<DecidedBy>,
    pub measurement: Measurement,
    /// Recorded in the session (false for a baseline taken from the suite and not yet used).
    pub recorded: bool,
    /// The optimization category of an agent revision.
    pub category: Option<String>,
    /// Knowledge documents given to the agent for this revision.
    pub knowledge: Vec<String>,
    /// Request id and token counts of a model revision.
    pub request_id: Option<String>,
    pub tokens: Option<(u64, u64)>,
    /// The latest deep profile (Nsight Compute) of this revision.
    pub profile: Option<Box<crate::profile::Profile>>,
}

impl Revision {
    /// Where the revision came from: `baseline` (the suite's baseline.cu), `standing` (the
    /// standing's incumbent the session started from; older sessions recorded it as a baseline
    /// taken `via` the standing), `hand edit` (the built-in editor or $EDITOR), `file` (a kernel
    /// file given to `measure`), `tuner`, or the agent's model by name.
    pub fn origin(&self) -> String {
        match &self.author {
            Author::Incumbent => "standing".into(),
            Author::Baseline if self.via.as_deref() == Some("standing") => "standing".into(),
            Author::Baseline => "baseline".into(),
            Author::Human if self.via.as_deref() == Some("file") => "file".into(),
            Author::Human => "hand edit".into(),
            Author::Tuner => "tuner".into(),
            Author::Model(m) => m.clone(),
        }
    }

    pub fn verdict(&self) -> RevVerdict {
        let m = &self.measurement;
        if m.compiled == Some(false) {
            return RevVerdict::CompileError;
        }
        match &m.status {
            MeasureStatus::Unmeasured => RevVerdict::Unmeasured,
            MeasureStatus::Running => RevVerdict::Measuring,
            MeasureStatus::Interrupted => RevVerdict::Interrupted,
            MeasureStatus::Done(v) => {
                if m.results.verdicts().any(|v| *v == Verdict::Incorrect) {
                    return RevVerdict::Incorrect;
                }
                if let Some(v) = m.results.verdicts().find(|v| **v != Verdict::Pass) {
                    return RevVerdict::Failed(v.name().to_string());
                }
                if m.results.is_empty() || *v != Verdict::Pass {
                    return match v {
                        Verdict::CompileError => RevVerdict::CompileError,
                        Verdict::Incorrect => RevVerdict::Incorrect,
                        Verdict::Pass => RevVerdict::Failed("no results".into()),
                        other => RevVerdict::Failed(other.name().to_string()),
                    };
                }
                RevVerdict::Score(m.results.s_op())
            }
        }
    }
}

/// One operator's revisions.
#[derive(Debug, Clone, PartialEq)]
pub struct OpState {
    pub name: String,
    pub revisions: Vec<Revision>,
    pub incumbent: Option<u32>,
}

impl OpState {
    // `revisions` is sorted by revision number, each number once (a revision is inserted at
    // its place, or replaces the one of its number).
    pub fn rev(&self, rev: u32) -> Option<&Revision> {
        let i = self.revisions.binary_search_by_key(&rev, |r| r.rev).ok()?;
        Some(&self.revisions[i])
    }
    fn rev_mut(&mut self, rev: u32) -> Option<&mut Revision> {
        let i = self.revisions.binary_search_by_key(&rev, |r| r.rev).ok()?;
        Some(&mut self.revisions[i])
    }
    pub fn next_rev(&self) -> u32 {
        self.revisions
            .iter()
            .map(|r| r.rev + 1)
            .max()
            .unwrap_or(1)
            .max(1)
    }
    pub fn incumbent_rev(&self) -> Option<&Revision> {
        self.incumbent.and_then(|r| self.rev(r))
    }
    /// S_op of the incumbent, when measured and passing.
    pub fn incumbent_s(&self) -> Option<f64> {
        self.incumbent_rev().and_then(|r| r.verdict().score())
    }
    /// Best S_op over the revisions not rejected.
    pub fn best_s(&self) -> Option<f64> {
        self.revisions
            .iter()
            .filter(|r| r.decision != Some(Decision::Rejected))
            .filter_map(|r| r.verdict().score())
            .fold(None, |a: Option<f64>, s| Some(a.map_or(s, |a| a.max(s))))
    }
    /// S_op of the measured revisions, in revision order.
    pub fn history(&self) -> Vec<f64> {
        self.revisions
            .iter()
            .filter_map(|r| r.verdict().score())
            .collect()
    }
    pub fn status(&self) -> OpStatus {
        if self
            .revisions
            .iter()
            .any(|r| r.measurement.status == MeasureStatus::Running)
        {
            return OpStatus::Measuring;
        }
        let latest = self
            .revisions
            .iter()
            .filter(|r| r.measurement.status != MeasureStatus::Unmeasured)
            .max_by_key(|r| r.measurement.mid);
        if let Some(l) = latest
            && l.verdict().failed()
        {
            return OpStatus::Failing;
        }
        if latest.is_some_and(|l| l.measurement.status == MeasureStatus::Interrupted) {
            return OpStatus::Interrupted;
        }
        let base = self.rev(0).and_then(|r| r.verdict().score());
        match (self.incumbent, self.incumbent_s(), base) {
            (Some(i), Some(s), Some(b)) if i > 0 && s > b => return OpStatus::Improved,
            (Some(i), Some(_), None) if i > 0 => return OpStatus::Improved,
            _ => {}
        }
        // A revision beyond the baseline that nobody decided on yet (a hand edit, a proposal).
        if self
            .revisions
            .iter()
            .any(|r| r.rev > 0 && r.recorded && r.decision.is_none())
        {
            return OpStatus::Pending;
        }
        if self.revisions.iter().any(|r| r.recorded && r.rev > 0) {
            return OpStatus::Tried;
        }
        if self
            .revisions
            .iter()
            .any(|r| r.measurement.status != MeasureStatus::Unmeasured)
        {
            return OpStatus::Measured;
        }
        OpStatus::Untouched
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpStatus {
    Untouched,
    /// The baseline measured, no other revision.
    Measured,
    /// Revised, nothing better than the baseline accepted.
    Tried,
    /// A revision waits for a decision.
    Pending,
    Measuring,
    /// The latest measurement started and never ended (its run is over).
    Interrupted,
    Improved,
    Failing,
}

impl OpStatus {
    pub fn label(self) -> &'static str {
        match self {
            OpStatus::Untouched => "untouched",
            OpStatus::Measured => "measured",
            OpStatus::Tried => "tried",
            OpStatus::Pending => "pending",
            OpStatus::Measuring => "measuring",
            OpStatus::Interrupted => "interrupted",
            OpStatus::Improved => "improved",
            OpStatus::Failing => "failing",
        }
    }
}

/// A line of the session's log, derived from events.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    pub t: f64,
    pub level: LogLevel,
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Info,
    Good,
    Warn,
    Error,
    Steer,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunInfo {
    pub tool_version: Option<String>,
    pub gpu: Option<String>,
    pub driver: Option<String>,
    pub nvrtc: Option<String>,
    pub hardware: Option<String>,
    pub suite: Option<String>,
    pub runs: usize,
}

impl RunInfo {
    /// A measurement started now in this run, at `t`.
    pub fn made_on(&self, t: f64) -> MadeOn {
        MadeOn {
            run: self.runs,
            t,
            gpu: self.gpu.clone(),
            driver: self.driver.clone(),
            nvrtc: self.nvrtc.clone(),
            hardware: self.hardware.clone(),
            tool_version: self.tool_version.clone(),
        }
    }
}

/// One operator's agent, as its latest `agent_state` event left it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentRun {
    pub state: String,
    pub reason: Option<String>,
    /// The revisions its latest dropout masked.
    pub masked: Vec<u32>,
}

impl AgentRun {
    /// Whether the agent is at work (not stopped).
    pub fn active(&self) -> bool {
        self.state != "stopped"
    }
}

/// The state of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    pub ops: BTreeMap<String, OpState>,
    pub run: RunInfo,
    pub steering: Vec<(Option<String>, String)>,
    /// The latest agent state of any agent (the header's), its operator and reason.
    pub agent_state: Option<String>,
    pub agent_op: Option<String>,
    pub agent_reason: Option<String>,
    /// Each operator's agent as its latest `agent_state` left it (agents run in parallel, one
    /// per operator): state, reason and the revisions its latest dropout masked.
    pub agents: BTreeMap<String, AgentRun>,
    pub log: Vec<LogLine>,
    /// Events of kinds this build does not know (kept in the file, not shown).
    pub unknown_events: usize,
    /// The operator of the latest revision: the one the session is about.
    pub latest_op: Option<String>,
    pub applied: usize,
    pub last_mid: u64,
    /// The sequence number of the last record applied.
    pub last_seq: u64,
}

impl Model {
    /// The state before any event: every operator with its suite baseline as v0 (incumbent).
    pub fn new(suite: &Suite) -> Model {
        let mut ops = BTreeMap::new();
        for p in &suite.problems {
            let mut revisions = Vec::new();
            let mut incumbent = None;
            if let Ok(src) = crate::contract::kernels::suite_kernel(suite, p, "baseline.cu") {
                revisions.push(Revision {
                    rev: 0,
                    parent: None,
                    author: Author::Baseline,
                    rationale: "suite baseline".into(),
                    source: src.code,
                    via: None,
                    decision: None,
                    decided_by: None,
                    measurement: Measurement::default(),
                    recorded: false,
                    category: None,
                    knowledge: Vec::new(),
                    request_id: None,
                    tokens: None,
                    profile: None,
                });
                incumbent = Some(0);
            }
            ops.insert(
                p.name.clone(),
                OpState {
                    name: p.name.clone(),
                    revisions,
                    incumbent,
                },
            );
        }
        Model {
            ops,
            run: RunInfo::default(),
            steering: Vec::new(),
            agent_state: None,
            agent_op: None,
            agent_reason: None,
            agents: BTreeMap::new(),
            log: Vec::new(),
            unknown_events: 0,
            latest_op: None,
            applied: 0,
            last_mid: 0,
            last_seq: 0,
        }
    }

    /// Starts an operator from another kernel than the suite's baseline (the standing's
    /// incumbent): the unrecorded revision 0 takes its source, its author becomes `incumbent`
    /// and it says where it comes from. Recorded sessions are never changed, nor an operator
    /// with recorded revisions (its start is the session's, whatever the standing holds now).
    pub fn start_from(&mut self, op: &str, source: &str, rationale: &str) {
        let Some(o) = self.ops.get_mut(op) else {
            return;
        };
        if o.revisions.iter().any(|r| r.recorded) {
            return;
        }
        if let Some(r) = o.rev_mut(0)
            && r.source != source
        {
            r.author = Author::Incumbent;
            r.source = source.to_string();
            r.rationale = rationale.to_string();
            r.via = Some("standing".into());
        }
    }

    /// The `revision` event of the revision `ev` refers to (`SessionEvent::refers_to`) when
    /// the state shows it but the session does not hold it yet (an operator's starting
    /// kernel, revision 0, before anything used it): whoever records `ev` records this first,
    /// so that every revision a session refers to is in it before its first child.
    pub fn unrecorded_referent(&self, ev: &SessionEvent) -> Option<SessionEvent> {
        let (op, rev) = ev.refers_to()?;
        let r = self.ops.get(op)?.rev(rev)?;
        (!r.recorded).then(|| SessionEvent::Revision {
            op: op.to_string(),
            rev: r.rev,
            parent: r.parent,
            author: r.author.clone(),
            rationale: r.rationale.clone(),
            source: r.source.clone(),
            via: r.via.clone(),
            request_id: r.request_id.clone(),
            tokens_in: r.tokens.map(|t| t.0),
            tokens_out: r.tokens.map(|t| t.1),
            category: r.category.clone(),
            knowledge: r.knowledge.clone(),
        })
    }

    /// Builds the state of a sequence of records.
    pub fn from_records(suite: &Suite, records: &[Record]) -> Model {
        let mut m = Model::new(suite);
        for r in records {
            m.apply(r);
        }
        m
    }

    fn log(&mut self, t: f64, level: LogLevel, text: String) {
        self.log.push(LogLine { t, level, text });
    }

    /// Operator state, created on first mention (an operator that left the suite keeps its
    /// history).
    fn op_mut(&mut self, op: &str) -> &mut OpState {
        if !self.ops.contains_key(op) {
            self.ops.insert(
                op.to_string(),
                OpState {
                    name: op.to_string(),
                    revisions: Vec::new(),
                    incumbent: None,
                },
            );
        }
        self.ops.get_mut(op).expect("inserted above")
    }

    /// The reducer: applies one event. Never fails: events naming unknown revisions are logged.
    pub fn apply(&mut self, rec: &Record) {
        self.applied(rec.seq);
        let t = rec.t;
        let ev = &rec.event;
        match ev {
            SessionEvent::RunStart { .. }
            | SessionEvent::Device { .. }
            | SessionEvent::Error { .. }
            | SessionEvent::Unknown => self.apply_run(t, ev),
            SessionEvent::Revision { .. }
            | SessionEvent::Decision { .. }
            | SessionEvent::Profile { .. } => self.apply_revisions(t, ev),
            SessionEvent::MeasureStart { .. }
            | SessionEvent::Compiled { .. }
            | SessionEvent::ShapeResult { .. }
            | SessionEvent::KernelOutput { .. }
            | SessionEvent::MeasureDone { .. } => self.apply_measurements(t, ev),
            SessionEvent::AgentState { .. }
            | SessionEvent::Steer { .. }
            | SessionEvent::ToolCall { .. } => self.apply_agent(t, ev),
        }
    }

    /// Counts a record applied.
    fn applied(&mut self, seq: u64) {
        self.applied += 1;
        self.last_seq = self.last_seq.max(seq);
    }

    /// `apply` for a `shape_result` record whose result stays in the session file: the same
    /// change, with the result's brief for the whole result.
    pub fn apply_brief(&mut self, seq: u64, t: f64, op: &str, rev: u32, mid: u64, brief: Brief) {
        self.applied(seq);
        self.shape_result(t, op, rev, mid, |r| r.insert_brief(brief));
    }

    /// Fills the briefs of a revision's current measurement (`mid`) with their whole results,
    /// read from the places the briefs name; anything else is left as it is.
    pub fn fill_results(&mut self, op: &str, rev: u32, mid: u64, read: Vec<(Place, ShapeResult)>) {
        if let Some(r) = self.ops.get_mut(op).and_then(|o| o.rev_mut(rev))
            && r.measurement.mid == mid
        {
            r.measurement.results.fill(read);
        }
    }

    /// Turns every result filled from a brief back into its brief, but those of `op` `rev`
    /// (what is not shown is not held).
    pub fn shed_results_except(&mut self, op: &str, rev: u32) {
        for o in self.ops.values_mut() {
            for r in &mut o.revisions {
                if !(o.name == op && r.rev == rev) {
                    r.measurement.results.shed();
                }
            }
        }
    }

    /// Logs an event that names a revision without a `revision` event (it is ignored).
    fn unknown(&mut self, t: f64, op: &str, rev: u32, what: &str) {
        self.log(
            t,
            LogLevel::Warn,
            format!("session: `{what}` names {op} v{rev}, which has no revision event; ignored"),
        );
    }

    /// The session is not live (a replay): every measurement still running whose mid is not in
    /// `ended` — the measurements its file ends, anywhere in it — was interrupted. (The reducer
    /// itself interrupts the measurements of earlier runs at a `run_start`.)
    pub fn interrupt_unended(&mut self, ended: &std::collections::BTreeSet<u64>) {
        for o in self.ops.values_mut() {
            for r in &mut o.revisions {
                if r.measurement.status == MeasureStatus::Running
                    && !ended.contains(&r.measurement.mid)
                {
                    r.measurement.status = MeasureStatus::Interrupted;
                }
            }
        }
    }

    /// Ends as interrupted every measurement still running when a new run starts (its own run
    /// is over: the app or command that started it ended without a verdict).
    pub(super) fn interrupt_running(&mut self, t: f64) {
        let mut cut = Vec::new();
        for (name, o) in self.ops.iter_mut() {
            for r in &mut o.revisions {
                if r.measurement.status == MeasureStatus::Running {
                    r.measurement.status = MeasureStatus::Interrupted;
                    cut.push(format!(
                        "{name} v{}: its measurement was interrupted (its run ended before it did; m measures it again)",
                        r.rev
                    ));
                }
            }
        }
        for line in cut {
            self.log(t, LogLevel::Warn, line);
        }
    }

    /// S_op of each operator's incumbent (measured and passing).
    pub fn s_ops(&self) -> BTreeMap<String, f64> {
        self.ops
            .iter()
            .filter_map(|(n, o)| o.incumbent_s().map(|s| (n.clone(), s)))
            .collect()
    }

    /// S_agg over a phase view, from the incumbents.
    pub fn s_agg(&self, suite: &Suite, phase: PhaseFilter) -> f64 {
        roofline::s_agg(suite, phase, &self.s_ops())
    }

    /// S_agg over a phase view from the incumbents, under the strict level and under the
    /// benchmark's rule (a shape counting only when it also passed the benchmark-compatible
    /// level).
    pub fn s_agg_by_rule(&self, suite: &Suite, phase: PhaseFilter) -> roofline::ByRule {
        let bench: BTreeMap<String, f64> = self
            .ops
            .iter()
            .filter_map(|(n, o)| {
                let r = o.incumbent_rev()?;
                r.verdict().score()?;
                Some((n.clone(), r.measurement.results.s_op_bench()))
            })
            .collect();
        roofline::s_agg_by_rule(suite, phase, &self.s_ops(), &bench)
    }
}
