//! The state of a session, built from its events alone by one reducer (`Model::apply`), used
//! live and in replay.

use super::event::{Author, DecidedBy, Decision, Record, SessionEvent};
use crate::engine::protocol::{Diagnostic, ShapeResult, Verdict};
use crate::suite::roofline;
use crate::suite::{PhaseFilter, Suite};
use std::collections::BTreeMap;

/// Lines of a kernel's output shown in the log per shape.
const OUTPUT_LOG_LINES: usize = 5;

/// Where a revision's measurement stands.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum MeasureStatus {
    #[default]
    Unmeasured,
    Running,
    Done(Verdict),
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
    pub results: BTreeMap<u32, ShapeResult>,
    pub message: Option<String>,
    /// What the kernels printed, per shape (None: outside a shape), in arrival order.
    pub output: Vec<(Option<u32>, String)>,
}

/// A revision's verdict as shown.
#[derive(Debug, Clone, PartialEq)]
pub enum RevVerdict {
    Unmeasured,
    Measuring,
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
    pub fn verdict(&self) -> RevVerdict {
        let m = &self.measurement;
        if m.compiled == Some(false) {
            return RevVerdict::CompileError;
        }
        match &m.status {
            MeasureStatus::Unmeasured => RevVerdict::Unmeasured,
            MeasureStatus::Running => RevVerdict::Measuring,
            MeasureStatus::Done(v) => {
                if m.results.values().any(|r| r.verdict == Verdict::Incorrect) {
                    return RevVerdict::Incorrect;
                }
                if let Some(r) = m.results.values().find(|r| r.verdict != Verdict::Pass) {
                    return RevVerdict::Failed(r.verdict.name().to_string());
                }
                if m.results.is_empty() || *v != Verdict::Pass {
                    return match v {
                        Verdict::CompileError => RevVerdict::CompileError,
                        Verdict::Incorrect => RevVerdict::Incorrect,
                        Verdict::Pass => RevVerdict::Failed("no results".into()),
                        other => RevVerdict::Failed(other.name().to_string()),
                    };
                }
                RevVerdict::Score(crate::engine::outcome::s_op_of(m.results.values()))
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
    pub fn rev(&self, rev: u32) -> Option<&Revision> {
        self.revisions.iter().find(|r| r.rev == rev)
    }
    fn rev_mut(&mut self, rev: u32) -> Option<&mut Revision> {
        self.revisions.iter_mut().find(|r| r.rev == rev)
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

/// The state of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    pub ops: BTreeMap<String, OpState>,
    pub run: RunInfo,
    pub steering: Vec<(Option<String>, String)>,
    pub agent_state: Option<String>,
    /// The operator the agent last worked on, and the revisions its latest dropout masked.
    pub agent_op: Option<String>,
    pub agent_masked: Vec<u32>,
    pub agent_reason: Option<String>,
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
            if let Ok(src) = crate::suite::kernels::suite_kernel(suite, p, "baseline.cu") {
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
            agent_masked: Vec::new(),
            agent_reason: None,
            log: Vec::new(),
            unknown_events: 0,
            latest_op: None,
            applied: 0,
            last_mid: 0,
            last_seq: 0,
        }
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
        self.ops.entry(op.to_string()).or_insert_with(|| OpState {
            name: op.to_string(),
            revisions: Vec::new(),
            incumbent: None,
        })
    }

    /// The reducer: applies one event. Never fails: events naming unknown revisions are logged.
    pub fn apply(&mut self, rec: &Record) {
        self.applied += 1;
        self.last_seq = self.last_seq.max(rec.seq);
        let t = rec.t;
        match &rec.event {
            SessionEvent::RunStart {
                tool_version,
                resumed,
                gpu,
                driver,
                nvrtc,
                hardware,
                suite,
                suite_version,
            } => {
                self.run.tool_version = Some(tool_version.clone());
                self.run.gpu = gpu.clone();
                self.run.driver = driver.clone();
                self.run.nvrtc = nvrtc.clone();
                self.run.hardware = hardware.clone();
                self.run.suite = Some(format!("{suite} v{suite_version}"));
                self.run.runs += 1;
                self.log(
                    t,
                    LogLevel::Info,
                    format!(
                        "{} atrex-tui {tool_version}{}",
                        if *resumed {
                            "resumed with"
                        } else {
                            "started with"
                        },
                        // The GPU, when known at the start; otherwise a `device` event follows
                        // once the worker has answered.
                        gpu.as_deref()
                            .map(|g| format!(" · {g}"))
                            .unwrap_or_default()
                    ),
                );
            }
            SessionEvent::Device {
                gpu,
                driver,
                nvrtc,
                hardware,
            } => {
                self.run.gpu = gpu.clone();
                self.run.driver = driver.clone();
                self.run.nvrtc = nvrtc.clone();
                if hardware.is_some() {
                    self.run.hardware = hardware.clone();
                }
                self.log(
                    t,
                    LogLevel::Info,
                    format!(
                        "device: {} · driver {} · T_SOL on {}",
                        gpu.as_deref().unwrap_or("none"),
                        driver.as_deref().unwrap_or("-"),
                        hardware.as_deref().unwrap_or("-")
                    ),
                );
            }
            SessionEvent::Revision {
                op,
                rev,
                parent,
                author,
                rationale,
                source,
                via,
                request_id,
                tokens_in,
                tokens_out,
                category,
                knowledge,
            } => {
                self.latest_op = Some(op.clone());
                let o = self.op_mut(op);
                let new = Revision {
                    rev: *rev,
                    parent: *parent,
                    author: author.clone(),
                    rationale: rationale.clone(),
                    source: source.clone(),
                    via: via.clone(),
                    decision: None,
                    decided_by: None,
                    measurement: Measurement::default(),
                    recorded: true,
                    category: category.clone(),
                    knowledge: knowledge.clone(),
                    request_id: request_id.clone(),
                    tokens: match (tokens_in, tokens_out) {
                        (None, None) => None,
                        (a, b) => Some((a.unwrap_or(0), b.unwrap_or(0))),
                    },
                    profile: None,
                };
                if let Some(existing) = o.rev_mut(*rev) {
                    let m = std::mem::take(&mut existing.measurement);
                    let d = (existing.decision, existing.decided_by);
                    let prof = existing.profile.take();
                    *existing = new;
                    existing.profile = prof;
                    existing.measurement = m;
                    existing.decision = d.0;
                    existing.decided_by = d.1;
                } else {
                    let pos = o.revisions.partition_point(|r| r.rev < *rev);
                    o.revisions.insert(pos, new);
                }
                if *rev == 0 && o.incumbent.is_none() {
                    o.incumbent = Some(0);
                }
                if *rev > 0 {
                    let text = format!(
                        "{op} v{rev} by {}{}: {}",
                        author.label(),
                        parent.map(|p| format!(" (from v{p})")).unwrap_or_default(),
                        rationale
                    );
                    self.log(t, LogLevel::Info, text);
                }
            }
            SessionEvent::MeasureStart { op, rev, mid, mode } => {
                self.last_mid = self.last_mid.max(*mid);
                match self.op_mut(op).rev_mut(*rev) {
                    Some(r) => {
                        r.measurement = Measurement {
                            status: MeasureStatus::Running,
                            mid: *mid,
                            mode: mode.clone(),
                            ..Default::default()
                        };
                        self.log(
                            t,
                            LogLevel::Info,
                            format!("{op} v{rev}: measuring ({mode})"),
                        );
                    }
                    None => self.unknown(t, op, *rev, "measure_start"),
                }
            }
            SessionEvent::Compiled {
                op,
                rev,
                mid,
                ok,
                diagnostics,
                log,
            } => {
                let mut line = None;
                match self.op_mut(op).rev_mut(*rev) {
                    Some(r) if r.measurement.mid == *mid => {
                        r.measurement.compiled = Some(*ok);
                        r.measurement.diagnostics = diagnostics.clone();
                        r.measurement.compile_log = log.clone();
                        if !ok {
                            line = Some(match diagnostics.first() {
                                Some(d) => format!(
                                    "{op} v{rev}: compile error at line {}: {}",
                                    d.line, d.msg
                                ),
                                None => format!("{op} v{rev}: compile error"),
                            });
                        }
                    }
                    Some(_) => {}
                    None => self.unknown(t, op, *rev, "compiled"),
                }
                if let Some(l) = line {
                    self.log(t, LogLevel::Error, l);
                }
            }
            SessionEvent::ShapeResult {
                op,
                rev,
                mid,
                result,
            } => match self.op_mut(op).rev_mut(*rev) {
                Some(r) if r.measurement.mid == *mid => {
                    r.measurement.results.insert(result.shape, result.clone());
                }
                Some(_) => {}
                None => self.unknown(t, op, *rev, "shape_result"),
            },
            SessionEvent::KernelOutput {
                op,
                rev,
                mid,
                shape,
                text,
                dropped,
            } => {
                let mut lines = Vec::new();
                match self.op_mut(op).rev_mut(*rev) {
                    Some(r) if r.measurement.mid == *mid => {
                        r.measurement.output.push((*shape, text.clone()));
                        let origin = shape.map(|s| format!(" shape {s}")).unwrap_or_default();
                        let all: Vec<&str> = text.lines().collect();
                        for l in all.iter().take(OUTPUT_LOG_LINES) {
                            lines.push(format!("{op} v{rev}{origin} printed: {l}"));
                        }
                        if all.len() > OUTPUT_LOG_LINES || *dropped > 0 {
                            lines.push(format!(
                                "{op} v{rev}{origin}: {} more lines{} (all kept lines are in the session)",
                                all.len().saturating_sub(OUTPUT_LOG_LINES),
                                if *dropped > 0 {
                                    format!(", {dropped} bytes over the 64 KiB limit not kept")
                                } else {
                                    String::new()
                                }
                            ));
                        }
                    }
                    Some(_) => {}
                    None => self.unknown(t, op, *rev, "kernel_output"),
                }
                for l in lines {
                    self.log(t, LogLevel::Info, l);
                }
            }
            SessionEvent::MeasureDone {
                op,
                rev,
                mid,
                verdict,
                message,
            } => {
                let mut line = None;
                match self.op_mut(op).rev_mut(*rev) {
                    Some(r) if r.measurement.mid == *mid => {
                        r.measurement.status = MeasureStatus::Done(verdict.clone());
                        r.measurement.message = message.clone();
                        let v = r.verdict();
                        let lvl = if v.failed() {
                            LogLevel::Warn
                        } else {
                            LogLevel::Good
                        };
                        line = Some((
                            lvl,
                            format!(
                                "{op} v{rev}: {}{}",
                                v.label(),
                                message
                                    .as_deref()
                                    .map(|m| format!(" · {m}"))
                                    .unwrap_or_default()
                            ),
                        ));
                    }
                    Some(_) => {}
                    None => self.unknown(t, op, *rev, "measure_done"),
                }
                if let Some((l, s)) = line {
                    self.log(t, l, s);
                }
            }
            SessionEvent::Decision {
                op,
                rev,
                decision,
                by,
            } => {
                let o = self.op_mut(op);
                match o.rev_mut(*rev) {
                    Some(r) => {
                        r.decision = Some(*decision);
                        r.decided_by = Some(*by);
                        if *decision == Decision::Accepted {
                            o.incumbent = Some(*rev);
                        } else if o.incumbent == Some(*rev) {
                            // Rejecting the incumbent falls back to the latest accepted revision
                            // before it, else the baseline.
                            o.incumbent = o
                                .revisions
                                .iter()
                                .filter(|r| r.rev != *rev && r.decision == Some(Decision::Accepted))
                                .map(|r| r.rev)
                                .max()
                                .or(o.rev(0).map(|_| 0).filter(|z| z != rev));
                        }
                        let text = format!(
                            "{op} v{rev} {} by {}",
                            match decision {
                                Decision::Accepted => "accepted",
                                Decision::Rejected => "rejected",
                            },
                            match by {
                                DecidedBy::Human => "human",
                                DecidedBy::Auto => "auto",
                            }
                        );
                        self.log(t, LogLevel::Good, text);
                    }
                    None => self.unknown(t, op, *rev, "decision"),
                }
            }
            SessionEvent::Steer { op, text } => {
                self.steering.push((op.clone(), text.clone()));
                self.log(
                    t,
                    LogLevel::Steer,
                    format!(
                        "steer{}: {text}",
                        op.as_deref().map(|o| format!(" ({o})")).unwrap_or_default()
                    ),
                );
            }
            SessionEvent::AgentState {
                state,
                reason,
                op,
                masked,
            } => {
                self.agent_state = Some(state.clone());
                self.agent_reason = reason.clone();
                if op.is_some() {
                    self.agent_op = op.clone();
                }
                if state == "dropout" || !masked.is_empty() {
                    self.agent_masked = masked.clone();
                }
                self.log(
                    t,
                    LogLevel::Info,
                    format!(
                        "agent {state}{}",
                        reason
                            .as_deref()
                            .map(|r| format!(": {r}"))
                            .unwrap_or_default()
                    ),
                );
            }
            SessionEvent::Profile { op, rev, profile } => {
                let mut lines = Vec::new();
                match self.op_mut(op).rev_mut(*rev) {
                    Some(r) => {
                        r.profile = Some(profile.clone());
                        let k = profile.main_kernel();
                        let pct = |v: Option<f64>| {
                            v.map(|x| format!("{x:.0}%")).unwrap_or_else(|| "-".into())
                        };
                        lines.push((
                            LogLevel::Good,
                            format!(
                                "{op} v{rev}: profiled shape {} ({} kernel{}, {:.1} s): DRAM {} · SM {} · occupancy {}{}",
                                profile.shape,
                                profile.kernels.len(),
                                if profile.kernels.len() == 1 { "" } else { "s" },
                                profile.wall_s,
                                pct(k.and_then(|k| k.dram_throughput_pct)),
                                pct(k.and_then(|k| k.sm_throughput_pct)),
                                pct(k.and_then(|k| k.achieved_occupancy_pct)),
                                profile
                                    .redundant_traffic_ratio
                                    .map(|q| format!(" · DRAM bytes / Q {q:.2}"))
                                    .unwrap_or_default()
                            ),
                        ));
                        for f in &profile.findings {
                            lines.push((LogLevel::Warn, f.line()));
                        }
                    }
                    None => self.unknown(t, op, *rev, "profile"),
                }
                for (l, s) in lines {
                    self.log(t, l, s);
                }
            }
            SessionEvent::Unknown => self.unknown_events += 1,
            SessionEvent::Error { op, message } => {
                self.log(
                    t,
                    LogLevel::Error,
                    format!(
                        "{}{message}",
                        op.as_deref().map(|o| format!("{o}: ")).unwrap_or_default()
                    ),
                );
            }
        }
    }

    fn unknown(&mut self, t: f64, op: &str, rev: u32, what: &str) {
        self.log(
            t,
            LogLevel::Warn,
            format!("session: `{what}` names {op} v{rev}, which has no revision event; ignored"),
        );
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
}
