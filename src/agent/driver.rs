//! The loop: context → proposal → quick measurement → full on promising ones → decision.
//! Backends (`Proposer`), measurement (`Measurer`), decisions (`Gate`) and the session
//! (`Sink`) are traits, so the same loop runs headless, in the TUI and in tests.

use super::context::{self, Context};
use super::knowledge::Doc;
use super::llm::{Delta, LlmClient, LlmError, Message};
use super::reply::{self, Change};
use super::tuner::{Base, Point, Search, StepKind};
use super::*;
use crate::engine::outcome::Outcome;
use crate::engine::protocol::{Event, JobKind, Mode, ShapeResult, Verdict};
use crate::session::{Author, DecidedBy, Decision, SessionEvent};
use crate::suite::Problem;
use crate::suite::hardware::HardwareProfile;
use std::future::Future;

/// A quick result within this fraction of the incumbent's S_op is worth a full measurement.
pub const PROMISING_MARGIN: f64 = 0.03;

/// One proposal of a backend.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub hypothesis: String,
    pub category: String,
    pub change: Change,
    pub request_id: Option<String>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// The tuner's configuration.
    pub point: Option<Point>,
    /// A short description of the change (define changes) when the backend knows it.
    pub change_note: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ProposeError {
    /// The reply could not be used (after the corrective retry): a failed revision.
    Failed {
        reason: String,
        tokens_in: u64,
        tokens_out: u64,
        request_id: Option<String>,
    },
    /// Nothing left to try.
    Exhausted,
    /// The backend cannot go on.
    Fatal(String),
}

pub trait Proposer: Send {
    fn author(&self) -> Author;
    fn name(&self) -> String;
    fn propose(
        &mut self,
        ctx: &Context,
        state: &AgentState,
        stream: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> impl Future<Output = Result<Proposal, ProposeError>> + Send;
    /// The score the proposal measured (None: it failed).
    fn observe(&mut self, _p: &Proposal, _score: Option<f64>) {}
    /// The loop dropped out of its context.
    fn dropout(&mut self) {}
}

pub trait Measurer: Send {
    fn run(
        &mut self,
        source: &str,
        kind: JobKind,
        mode: Mode,
    ) -> impl Future<Output = Outcome> + Send;
}

/// The answer of a human gate.
#[derive(Debug, Clone, PartialEq)]
pub enum GateAnswer {
    /// Decided (and recorded) by the engineer.
    Decided(Decision),
    /// The engineer steered instead of deciding: the revision stays pending and the next
    /// iteration starts with the note.
    Steer(String),
    Stop,
}

pub trait Gate: Send {
    /// Waits for the engineer's decision on a measured, passing revision.
    fn decide(&mut self, rev: u32) -> impl Future<Output = GateAnswer> + Send;
    /// Steering notes that arrived since the last call.
    fn steering(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// Deep profiles that arrived since the last call (their findings enter the next context).
    fn profiles(&mut self) -> Vec<ProfileNote> {
        Vec::new()
    }
    /// The engineer asked for a stop (checked between iterations).
    fn stop_requested(&mut self) -> bool {
        false
    }
    /// The engineer asked for a dropout.
    fn dropout_requested(&mut self) -> bool {
        false
    }
}

pub trait Sink: Send {
    fn record(&mut self, ev: SessionEvent);
    fn alloc_rev(&mut self, op: &str) -> u32;
    fn alloc_mid(&mut self) -> u64;
    /// Live text of a streaming reply.
    fn stream(&mut self, _d: Delta<'_>) {}
}

/// How revisions are decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionMode {
    /// The engineer decides through the gate.
    Human,
    /// The auto rule (5-seed strict correctness, A B B A gain above the noise).
    Auto,
    /// Nothing is decided (headless without --auto): revisions stay pending.
    Suggest,
}

/// The most of a kernel's printed output given to the agent per measurement.
const OUTPUT_FOR_AGENT: usize = 2048;

/// Summarises a job's outcome.
pub fn summarize(o: &Outcome, mode: Mode) -> MeasureSummary {
    let mut m = MeasureSummary {
        mode: if mode == Mode::Quick { "quick" } else { "full" }.into(),
        compiled: true,
        ..Default::default()
    };
    for ev in &o.compiled {
        if let Event::Compiled {
            which,
            ok,
            diagnostics,
            resources,
            ..
        } = ev
        {
            if which != "candidate" {
                continue;
            }
            m.compiled = *ok;
            if !ok {
                let d: Vec<String> = diagnostics
                    .iter()
                    .take(5)
                    .map(|d| format!("line {}: {}: {}", d.line, d.severity, d.msg))
                    .collect();
                m.message = Some(d.join("\n"));
            }
            m.registers = resources.values().map(|r| r.registers).max();
            m.spill_bytes = resources.values().map(|r| r.local_bytes).max();
        }
    }
    if !o.output.is_empty() {
        let mut text = String::new();
        for k in &o.output {
            text.push_str(&format!("[{}] {}\n", k.origin(), k.text.trim_end()));
        }
        m.output = Some(crate::agent::context::bounded(&text, OUTPUT_FOR_AGENT));
    }
    let verdict = o.verdict.clone().unwrap_or(Verdict::Error);
    let failing = o.shapes.iter().find(|r| r.verdict != Verdict::Pass);
    m.verdict = if !m.compiled {
        "compile error".into()
    } else if o.shapes.iter().any(|r| r.verdict == Verdict::Incorrect) {
        "incorrect".into()
    } else if let Some(f) = failing {
        f.verdict.name().into()
    } else {
        verdict.name().into()
    };
    if m.message.is_none() {
        m.message = o
            .message
            .clone()
            .or_else(|| failing.and_then(|f| f.message.clone()));
    }
    m.strict_ok = !o.shapes.is_empty() && o.shapes.iter().all(|r| r.strict_ok);
    m.seeds = o.shapes.iter().map(|r| r.seeds_checked).min().unwrap_or(0);
    m.shapes = o
        .shapes
        .iter()
        .map(|r| ShapeBrief {
            id: r.shape,
            verdict: r.verdict.name().into(),
            s: r.s,
            median_ms: r.timing.as_ref().map(|t| t.median_ms),
            sol_ms: r.sol_ms,
        })
        .collect();
    if m.verdict == "pass" && !o.shapes.is_empty() {
        m.s_op = Some(crate::engine::outcome::s_op_of(&o.shapes));
    }
    m.noise = timing_noise(&o.shapes);
    m
}

/// Median over shapes of the relative noise of the median (1.2533 · IQR/1.349 / √n / median).
pub fn timing_noise(shapes: &[ShapeResult]) -> f64 {
    let v: Vec<f64> = shapes
        .iter()
        .filter_map(|r| r.timing.as_ref())
        .filter(|t| t.n > 0)
        .map(|t| 1.2533 * t.rel_iqr / 1.349 / (t.n as f64).sqrt())
        .collect();
    crate::suite::roofline::median(&v)
}

/// S_op of timing-only results (verdict pass or unchecked).
pub fn timed_s_op(shapes: &[ShapeResult]) -> f64 {
    let scores: Vec<crate::suite::roofline::ShapeScore> = shapes
        .iter()
        .map(|r| match (&r.verdict, r.s) {
            (Verdict::Pass | Verdict::Unchecked, Some(s)) => {
                crate::suite::roofline::ShapeScore::Passed(s)
            }
            _ => crate::suite::roofline::ShapeScore::Failed,
        })
        .collect();
    crate::suite::roofline::s_op(&scores)
}

pub struct Driver<P: Proposer, M: Measurer, G: Gate, S: Sink> {
    pub state: AgentState,
    pub budget: Budget,
    pub proposer: P,
    pub measurer: M,
    pub gate: G,
    pub sink: S,
    pub problem: Problem,
    pub hw: HardwareProfile,
    pub docs: Vec<Doc>,
    pub incumbent_measure: Option<MeasureSummary>,
    pub mode: DecisionMode,
    pub seed: u64,
    pub k_docs: usize,
    /// The best S_op measured in this run (suggest mode's notion of improvement).
    pub best_seen: Option<f64>,
}

impl<P: Proposer, M: Measurer, G: Gate, S: Sink> Driver<P, M, G, S> {
    fn agent_state(&mut self, state: &str, reason: Option<String>, masked: Vec<u32>) {
        self.sink.record(SessionEvent::AgentState {
            state: state.into(),
            reason: reason.map(|r| crate::session::scrub(&r)),
            op: Some(self.state.op.clone()),
            masked,
        });
    }

    /// Measures a source as revision `rev` and records the events.
    async fn measure(&mut self, rev: u32, source: &str, mode: Mode) -> (Outcome, MeasureSummary) {
        let op = self.state.op.clone();
        let mid = self.sink.alloc_mid();
        self.sink.record(SessionEvent::MeasureStart {
            op: op.clone(),
            rev,
            mid,
            mode: if mode == Mode::Quick { "quick" } else { "full" }.into(),
        });
        let o = self.measurer.run(source, JobKind::All, mode).await;
        // The one translation every writer uses (compile logs and output scrubbed there).
        let mut ended = false;
        for ev in &o.events {
            for se in crate::session::translate::job_events(&op, rev, mid, ev) {
                ended |= matches!(se, SessionEvent::MeasureDone { .. });
                self.sink.record(se);
            }
        }
        if !ended {
            self.sink.record(SessionEvent::MeasureDone {
                op,
                rev,
                mid,
                verdict: Verdict::Error,
                message: Some(
                    o.message
                        .clone()
                        .unwrap_or_else(|| "the job ended without a verdict".into()),
                ),
            });
        }
        let s = summarize(&o, mode);
        (o, s)
    }

    /// A B B A timing of incumbent (A) and candidate (B) in one worker session.
    pub async fn abba(&mut self, a: &str, b: &str, timing_noise: f64) -> Abba {
        let mut runs = [0.0; 4];
        let mut noise = timing_noise;
        let mut refused = None;
        for (i, src) in [a, b, b, a].iter().enumerate() {
            let o = self.measurer.run(src, JobKind::Time, Mode::Full).await;
            runs[i] = timed_s_op(&o.shapes);
            noise = noise.max(super::driver::timing_noise(&o.shapes));
            // A timed run that the harness caught (outputs differ from the check, inputs
            // modified, faults) proves nothing: the comparison is refused.
            if let Some(r) = o
                .shapes
                .iter()
                .find(|r| !matches!(r.verdict, Verdict::Pass | Verdict::Unchecked))
            {
                runs[i] = 0.0;
                refused.get_or_insert(format!(
                    "{} run {}: shape {} {}: {}",
                    if i == 1 || i == 2 {
                        "candidate"
                    } else {
                        "incumbent"
                    },
                    "ABBA".chars().nth(i).unwrap_or('?'),
                    r.shape,
                    r.verdict.name(),
                    r.message.clone().unwrap_or_default()
                ));
            }
        }
        let mut a = Abba::from_runs(runs, noise);
        a.refused = refused;
        a
    }

    fn fail(
        &mut self,
        hypothesis: String,
        category: String,
        reason: String,
        tokens: (u64, u64),
        request_id: Option<String>,
    ) {
        self.state.history.push(HistoryEntry {
            rev: None,
            parent: Some(self.state.incumbent_rev),
            hypothesis,
            category,
            change: String::new(),
            evidence: Evidence::default(),
            result: reason.clone(),
            decision: AgentDecision::Rejected,
            masked: false,
            tokens_in: tokens.0,
            tokens_out: tokens.1,
            request_id,
            knowledge: Vec::new(),
        });
        self.agent_state("failed", Some(reason), vec![]);
        self.bump_stall();
    }

    /// One more revision without an accepted improvement; the stall is logged when it reaches K.
    fn bump_stall(&mut self) {
        self.state.since_improvement += 1;
        if self.budget.dropout_k > 0 && self.state.since_improvement == self.budget.dropout_k {
            self.agent_state(
                "stall",
                Some(format!(
                    "{} revisions without an accepted improvement",
                    self.budget.dropout_k
                )),
                vec![],
            );
        }
    }

    /// Runs until a stop; returns the stop reason (also recorded).
    pub async fn run(&mut self) -> StopReason {
        let reason = self.run_inner().await;
        self.state.stop = Some(reason.clone());
        self.agent_state("stopped", Some(reason.to_string()), vec![]);
        reason
    }

    async fn run_inner(&mut self) -> StopReason {
        let name = self.proposer.name();
        self.agent_state(
            "running",
            Some(format!(
                "{name} on {}: {:?} mode, up to {} iterations",
                self.state.op, self.mode, self.budget.max_iters
            )),
            vec![],
        );
        if self.incumbent_measure.is_none() || self.state.incumbent_s.is_none() {
            let src = self.state.incumbent_source.clone();
            let rev = self.state.incumbent_rev;
            let (_, m) = self.measure(rev, &src, Mode::Full).await;
            if !m.compiled && m.message.as_deref().is_some_and(|x| x.contains("no GPU")) {
                return StopReason::Measurement(m.message.unwrap_or_default());
            }
            self.state.incumbent_s = m.s_op;
            self.best_seen = m.s_op;
            if self.state.history.is_empty() {
                self.state.history.push(HistoryEntry {
                    rev: Some(rev),
                    parent: None,
                    hypothesis: "the incumbent".into(),
                    category: "baseline".into(),
                    change: String::new(),
                    evidence: Evidence {
                        full: Some(m.clone()),
                        ..Default::default()
                    },
                    result: m
                        .s_op
                        .map(|s| format!("S {s:.4}"))
                        .unwrap_or(m.verdict.clone()),
                    decision: AgentDecision::Accepted,
                    masked: false,
                    tokens_in: 0,
                    tokens_out: 0,
                    request_id: None,
                    knowledge: vec![],
                });
            }
            self.incumbent_measure = Some(m);
        }
        loop {
            let notes = self.gate.steering();
            self.state.steering.extend(notes);
            for n in self.gate.profiles() {
                self.state.add_profile(n);
            }
            if self.gate.stop_requested() {
                return StopReason::Stopped;
            }
            if let Some(r) = self.state.budget_stop(&self.budget) {
                return r;
            }
            let asked = self.gate.dropout_requested();
            if asked || self.state.stalled(&self.budget) {
                let seed = self.seed.wrapping_add(self.state.dropouts as u64 * 7919);
                let masked = self.state.dropout(seed);
                self.proposer.dropout();
                let n = self.state.history.iter().filter(|h| h.masked).count();
                let why = if asked {
                    "asked by the engineer".to_string()
                } else {
                    format!(
                        "{} revisions without an accepted improvement",
                        self.budget.dropout_k
                    )
                };
                let list: Vec<String> = masked.iter().map(|r| format!("v{r}")).collect();
                self.agent_state(
                    "dropout",
                    Some(format!(
                        "{why}: fresh context, {n} of {} history entries masked ({})",
                        self.state.history.len(),
                        if list.is_empty() {
                            "failed proposals".into()
                        } else {
                            list.join(" ")
                        }
                    )),
                    masked,
                );
            }
            let ctx = context::build(
                &self.problem,
                &self.hw,
                &self.state,
                &self.docs,
                self.incumbent_measure.as_ref(),
                self.k_docs,
            );
            self.state.iterations += 1;
            let sink = &mut self.sink;
            let mut on_delta = |d: Delta<'_>| sink.stream(d);
            let proposal = match self
                .proposer
                .propose(&ctx, &self.state, &mut on_delta)
                .await
            {
                Ok(p) => p,
                Err(ProposeError::Exhausted) => return StopReason::SearchExhausted,
                Err(ProposeError::Fatal(e)) => return StopReason::Backend(e),
                Err(ProposeError::Failed {
                    reason,
                    tokens_in,
                    tokens_out,
                    request_id,
                }) => {
                    self.state.tokens_in += tokens_in;
                    self.state.tokens_out += tokens_out;
                    self.fail(
                        String::new(),
                        String::new(),
                        format!("unparseable reply: {reason}"),
                        (tokens_in, tokens_out),
                        request_id,
                    );
                    continue;
                }
            };
            self.state.tokens_in += proposal.tokens_in;
            self.state.tokens_out += proposal.tokens_out;
            let tokens = (proposal.tokens_in, proposal.tokens_out);
            let source = match &proposal.change {
                Change::Full(s) => Ok(s.clone()),
                Change::Patch(d) => patch::apply(&self.state.incumbent_source, d),
            };
            let source = match source {
                Ok(s) if s.trim() == self.state.incumbent_source.trim() => {
                    Err("the proposal does not change the incumbent".to_string())
                }
                other => other,
            };
            // Secrets never travel on: a reply that echoes a key has it redacted.
            let source = source.map(|s| crate::session::scrub(&s));
            let source = match source {
                Ok(s) => s,
                Err(e) => {
                    self.proposer.observe(&proposal, None);
                    self.fail(
                        proposal.hypothesis.clone(),
                        proposal.category.clone(),
                        e,
                        tokens,
                        proposal.request_id.clone(),
                    );
                    continue;
                }
            };
            let op = self.state.op.clone();
            let rev = self.sink.alloc_rev(&op);
            let parent = self.state.incumbent_rev;
            let change = if proposal.change_note.is_empty() {
                patch::stat(&self.state.incumbent_source, &source)
            } else {
                proposal.change_note.clone()
            };
            self.sink.record(SessionEvent::Revision {
                op: op.clone(),
                rev,
                parent: Some(parent),
                author: self.proposer.author(),
                rationale: crate::session::scrub(&proposal.hypothesis),
                source: source.clone(),
                via: None,
                request_id: proposal.request_id.clone(),
                tokens_in: Some(tokens.0),
                tokens_out: Some(tokens.1),
                category: Some(proposal.category.clone()),
                knowledge: ctx.knowledge.clone(),
            });
            self.agent_state("running", Some(format!("v{rev}: measuring")), vec![]);
            let mut ev = Evidence::default();
            let (_, quick) = self.measure(rev, &source, Mode::Quick).await;
            let inc = self.state.incumbent_s;
            let promising = quick.passed()
                && match (quick.s_op, inc) {
                    (Some(q), Some(i)) => q >= i * (1.0 - PROMISING_MARGIN),
                    _ => true,
                };
            ev.quick = Some(quick.clone());
            ev.profiler = super::knowledge::symptoms_of(&quick, self.hw.sm_count, None);
            if promising {
                let (_, full) = self.measure(rev, &source, Mode::Full).await;
                ev.full = Some(full);
            }
            let score = ev.best().and_then(|m| m.s_op);
            let decision = match self.mode {
                DecisionMode::Suggest => AgentDecision::Pending,
                DecisionMode::Auto => {
                    let full_ok = ev
                        .full
                        .as_ref()
                        .is_some_and(|f| f.passed() && f.strict_ok && f.seeds >= 5);
                    let accept = if full_ok && self.state.incumbent_s.is_none() {
                        // The incumbent does not pass: any passing candidate is better.
                        true
                    } else if full_ok {
                        let noise = ev.full.as_ref().map(|f| f.noise).unwrap_or(0.0);
                        let inc_src = self.state.incumbent_source.clone();
                        let a = self.abba(&inc_src, &source, noise).await;
                        let ok = a.significant();
                        ev.abba = Some(a);
                        ok
                    } else {
                        false
                    };
                    let d = if accept {
                        Decision::Accepted
                    } else {
                        Decision::Rejected
                    };
                    self.sink.record(SessionEvent::Decision {
                        op: op.clone(),
                        rev,
                        decision: d,
                        by: DecidedBy::Auto,
                    });
                    if accept {
                        AgentDecision::Accepted
                    } else {
                        AgentDecision::Rejected
                    }
                }
                DecisionMode::Human => {
                    if quick.passed() {
                        self.agent_state(
                            "waiting",
                            Some(format!("v{rev}: accept (y), reject (n) or steer (s)")),
                            vec![],
                        );
                        match self.gate.decide(rev).await {
                            GateAnswer::Decided(Decision::Accepted) => AgentDecision::Accepted,
                            GateAnswer::Decided(Decision::Rejected) => AgentDecision::Rejected,
                            GateAnswer::Steer(note) => {
                                self.state.steering.push(note);
                                self.agent_state(
                                    "running",
                                    Some(format!(
                                        "v{rev} left pending; steered, working on the next revision"
                                    )),
                                    vec![],
                                );
                                AgentDecision::Pending
                            }
                            GateAnswer::Stop => {
                                self.push_entry(
                                    rev,
                                    parent,
                                    &proposal,
                                    change,
                                    ev,
                                    score,
                                    AgentDecision::Pending,
                                    &ctx,
                                );
                                return StopReason::Stopped;
                            }
                        }
                    } else {
                        AgentDecision::Rejected
                    }
                }
            };
            self.proposer.observe(&proposal, score);
            let best_before = self.best_seen;
            if let Some(s) = score {
                self.best_seen = Some(best_before.map_or(s, |b| b.max(s)));
            }
            if decision == AgentDecision::Accepted {
                let improved = match (score, self.state.incumbent_s) {
                    (Some(s), Some(i)) => s > i,
                    (Some(_), None) => true,
                    _ => false,
                };
                self.state.incumbent_rev = rev;
                self.state.incumbent_source = source.clone();
                self.state.incumbent_s = score;
                self.incumbent_measure = ev.full.clone().or(ev.quick.clone());
                if improved || self.mode == DecisionMode::Auto {
                    self.state.since_improvement = 0;
                } else {
                    self.bump_stall();
                }
            } else if self.mode == DecisionMode::Suggest
                && matches!((score, best_before), (Some(s), Some(b)) if s > b)
            {
                // Nothing is accepted without a decision: a new best measurement counts.
                self.state.since_improvement = 0;
            } else {
                self.bump_stall();
            }
            self.push_entry(rev, parent, &proposal, change, ev, score, decision, &ctx);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn push_entry(
        &mut self,
        rev: u32,
        parent: u32,
        p: &Proposal,
        change: String,
        ev: Evidence,
        score: Option<f64>,
        decision: AgentDecision,
        ctx: &Context,
    ) {
        let result = match (score, ev.best()) {
            (Some(s), _) => format!("S {s:.4}"),
            (None, Some(m)) => match &m.message {
                Some(msg) => format!("{}: {}", m.verdict, msg.lines().next().unwrap_or("")),
                None => m.verdict.clone(),
            },
            (None, None) => "not measured".into(),
        };
        self.state.history.push(HistoryEntry {
            rev: Some(rev),
            parent: Some(parent),
            hypothesis: p.hypothesis.clone(),
            category: p.category.clone(),
            change,
            evidence: ev,
            result,
            decision,
            masked: false,
            tokens_in: p.tokens_in,
            tokens_out: p.tokens_out,
            request_id: p.request_id.clone(),
            knowledge: ctx.knowledge.clone(),
        });
    }
}

/// The built-in tuner as a proposer.
pub struct TunerProposer {
    pub search: Search,
    outstanding: Option<Point>,
}

impl TunerProposer {
    /// A tuner over given bases (the first one is the incumbent).
    pub fn with_bases(bases: Vec<Base>, incumbent_s: Option<f64>, seed: u64) -> TunerProposer {
        TunerProposer {
            search: Search::new(bases, incumbent_s, seed),
            outstanding: None,
        }
    }

    /// The incumbent first, then the knowledge base's templates for the operator.
    pub fn new(
        op: &str,
        incumbent: &str,
        incumbent_s: Option<f64>,
        seed: u64,
    ) -> Result<TunerProposer, String> {
        let mut bases = vec![Base::from_source("incumbent", incumbent)?];
        for d in super::knowledge::templates_for(op) {
            if let Ok(b) = Base::from_source(&d.meta.id, &d.body) {
                bases.push(b);
            }
        }
        Ok(TunerProposer {
            search: Search::new(bases, incumbent_s, seed),
            outstanding: None,
        })
    }

    /// Seeds the search with configurations measured earlier (resume).
    pub fn seed_history(&mut self, measured: &[(String, Option<f64>)]) {
        for (src, s) in measured {
            if let Some(p) = self.point_of(src) {
                self.search.seed_measured(p, *s);
            }
        }
    }

    /// The configuration of a source: the base whose code matches outside the plan, and its defines.
    fn point_of(&self, src: &str) -> Option<Point> {
        let plan = crate::engine::plan::parse(src).ok()?;
        let strip = |s: &str| s.split("*/").skip(1).collect::<Vec<_>>().join("*/");
        for (i, b) in self.search.bases.iter().enumerate() {
            if strip(&b.source) != strip(src) {
                continue;
            }
            let mut values = Vec::new();
            for (k, vs) in &b.tune {
                let v = plan.defines.get(k)?;
                values.push(vs.iter().position(|x| x.num_eq(v))?);
            }
            return Some(Point { base: i, values });
        }
        None
    }
}

impl Proposer for TunerProposer {
    fn author(&self) -> Author {
        Author::Tuner
    }
    fn name(&self) -> String {
        "tuner".into()
    }
    async fn propose(
        &mut self,
        _ctx: &Context,
        _state: &AgentState,
        _stream: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> Result<Proposal, ProposeError> {
        loop {
            let Some((p, kind)) = self.search.next() else {
                return Err(ProposeError::Exhausted);
            };
            let base = &self.search.bases[p.base];
            let defines = base.defines(&p.values);
            let source = match tuner::set_defines(&base.source, &defines) {
                Ok(s) => s,
                Err(_) if defines.is_empty() => base.source.clone(),
                Err(e) => {
                    // An unusable configuration counts as a failed one.
                    self.search.report(&p, None);
                    let _ = e;
                    continue;
                }
            };
            let dtext: Vec<String> = defines.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let (hypothesis, category) = match &kind {
                StepKind::Coordinate(k) => (
                    format!(
                        "coordinate descent on {k}: {} = {} ({})",
                        k,
                        defines.get(k).map(|v| v.to_string()).unwrap_or_default(),
                        dtext.join(" ")
                    ),
                    "launch-config",
                ),
                StepKind::Variant => (
                    format!("template variant {} ({})", base.name, dtext.join(" ")),
                    "template",
                ),
                StepKind::Restart => (
                    format!(
                        "random restart (tuner dropout) at {} ({})",
                        base.name,
                        dtext.join(" ")
                    ),
                    if p.base == 0 {
                        "launch-config"
                    } else {
                        "template"
                    },
                ),
            };
            self.outstanding = Some(p.clone());
            return Ok(Proposal {
                hypothesis,
                category: category.into(),
                change: Change::Full(source),
                request_id: None,
                tokens_in: 0,
                tokens_out: 0,
                point: Some(p),
                change_note: format!("{}: {}", base.name, dtext.join(" ")),
            });
        }
    }
    fn observe(&mut self, p: &Proposal, score: Option<f64>) {
        if let Some(pt) = &p.point {
            self.search.report(pt, score);
        }
        self.outstanding = None;
    }
    fn dropout(&mut self) {
        self.search.force_restart();
    }
}

/// An LLM as a proposer.
pub struct LlmProposer {
    pub client: LlmClient,
}

impl Proposer for LlmProposer {
    fn author(&self) -> Author {
        Author::Model(self.client.endpoint.model.clone())
    }
    fn name(&self) -> String {
        format!(
            "{} ({})",
            self.client.endpoint.model,
            self.client.endpoint.kind.name()
        )
    }
    async fn propose(
        &mut self,
        ctx: &Context,
        _state: &AgentState,
        stream: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> Result<Proposal, ProposeError> {
        let mut messages = vec![Message {
            role: "user",
            content: ctx.user.clone(),
        }];
        let (mut tin, mut tout) = (0, 0);
        let mut request_id = None;
        for attempt in 0..2 {
            let c = match self.client.complete(&ctx.system, &messages, stream).await {
                Ok(c) => c,
                Err(LlmError::Fatal(e)) => return Err(ProposeError::Fatal(e)),
                Err(e @ LlmError::Exhausted(_)) => return Err(ProposeError::Fatal(e.to_string())),
            };
            tin += c.tokens_in;
            tout += c.tokens_out;
            request_id = c.request_id.clone().or(request_id);
            match reply::parse(&c.text) {
                Ok(r) => {
                    return Ok(Proposal {
                        hypothesis: r.hypothesis,
                        category: r.category.into(),
                        change: r.change,
                        request_id,
                        tokens_in: tin,
                        tokens_out: tout,
                        point: None,
                        change_note: String::new(),
                    });
                }
                Err(e) if attempt == 0 => {
                    stream(Delta::Reset(&e));
                    messages.push(Message {
                        role: "assistant",
                        content: c.text,
                    });
                    messages.push(Message {
                        role: "user",
                        content: reply::corrective(&e),
                    });
                }
                Err(e) => {
                    return Err(ProposeError::Failed {
                        reason: e,
                        tokens_in: tin,
                        tokens_out: tout,
                        request_id,
                    });
                }
            }
        }
        unreachable!()
    }
}
