//! The loop: context → proposal → quick measurement → full on promising ones → decision.
//! Backends (`Proposer`), measurement (`Measurer`), decisions (`Gate`) and the session
//! (`Sink`) are traits, so the same loop runs headless, in the TUI and in tests.
//!
//! Here the `Driver` and its run loop; traits.rs the seams, summary.rs the outcome summaries,
//! abba.rs the A B B A timing, decide.rs the decision (the auto rule, the gate) and its
//! bookkeeping, proposers.rs the tuner and LLM proposers, tooling.rs an iteration with tools.

use super::context::{self, Context};
use super::knowledge::Doc;
use super::llm::{Delta, LlmClient, LlmError, Message};
use super::reply::{self, Change};
use super::tools::{Host, ToolSettings};
use super::tuner::{Base, Point, Search, StepKind};
use super::*;
use crate::contract::outcome::Outcome;
use crate::contract::protocol::{Event, JobKind, Mode, ShapeResult, Verdict};
use crate::session::{Author, DecidedBy, Decision, SessionEvent};
use crate::suite::Problem;
use crate::suite::hardware::HardwareProfile;
use std::future::Future;

mod abba;
mod decide;
mod proposers;
mod summary;
mod tooling;
mod traits;

pub use proposers::*;
pub use summary::*;
pub use traits::*;

/// Why a proposal gives no candidate to measure.
#[derive(Debug, thiserror::Error)]
enum NoCandidate {
    #[error(transparent)]
    Patch(super::patch::PatchError),
    #[error("the proposal does not change the incumbent")]
    Unchanged,
}

/// A quick result within this fraction of the incumbent's S_op is worth a full measurement.
pub const PROMISING_MARGIN: f64 = 0.03;

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
        if (self.incumbent_measure.is_none() || self.state.incumbent_s.is_none())
            && let Some(r) = self.measure_incumbent().await
        {
            return r;
        }
        loop {
            if let Some(r) = self.start_iteration() {
                return r;
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
            let proposal = match self.next_proposal(&ctx).await {
                Ok(Some(p)) => p,
                Ok(None) => continue,
                Err(r) => return r,
            };
            self.state.tokens_in += proposal.tokens_in;
            self.state.tokens_out += proposal.tokens_out;
            let tokens = (proposal.tokens_in, proposal.tokens_out);
            let Some(source) = self.candidate_source(&proposal, tokens) else {
                continue;
            };
            let (op, rev, parent, change) = self.record_revision(&proposal, &source, tokens, &ctx);
            let (mut ev, quick) = self.evaluate(rev, &source).await;
            let score = ev.best().and_then(|m| m.s_op);
            let Some(decision) = self.decide(&op, rev, &source, &quick, &mut ev).await else {
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
            };
            self.proposer.observe(&proposal, score);
            self.settle(decision, score, rev, &source, &ev);
            self.push_entry(rev, parent, &proposal, change, ev, score, decision, &ctx);
        }
    }

    /// Measures the incumbent in full (the baseline entry when the history is empty); a stop
    /// when there is no GPU.
    async fn measure_incumbent(&mut self) -> Option<StopReason> {
        let src = self.state.incumbent_source.clone();
        let rev = self.state.incumbent_rev;
        let (_, m) = self.measure(rev, &src, Mode::Full).await;
        if !m.compiled && m.message.as_deref().is_some_and(|x| x.contains("no GPU")) {
            return Some(StopReason::Measurement(m.message.unwrap_or_default()));
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
        None
    }

    /// Between iterations: steering notes and profiles from the gate, a stop (asked or the
    /// budget's), and a dropout when asked or stalled.
    fn start_iteration(&mut self) -> Option<StopReason> {
        let notes = self.gate.steering();
        self.state.steering.extend(notes);
        for n in self.gate.profiles() {
            self.state.add_profile(n);
        }
        if self.gate.stop_requested() {
            return Some(StopReason::Stopped);
        }
        if let Some(r) = self.state.budget_stop(&self.budget) {
            return Some(r);
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
        None
    }

    /// One reply, streamed to the sink.
    async fn propose_single(&mut self, ctx: &Context) -> Result<Proposal, ProposeError> {
        let sink = &mut self.sink;
        let mut on_delta = |d: Delta<'_>| sink.stream(d);
        self.proposer.propose(ctx, &self.state, &mut on_delta).await
    }

    /// The proposer's next proposal (with tools when they are on and the backend has them);
    /// None after a failed (unusable) reply or an iteration without a revision, recorded as
    /// such; Err: the loop stops.
    async fn next_proposal(&mut self, ctx: &Context) -> Result<Option<Proposal>, StopReason> {
        let result = if self.tools_on() {
            match self.propose_with_tools(ctx).await {
                Err(ProposeError::ToolsRefused(why)) => {
                    self.budget.tools.enabled = false;
                    self.agent_state(
                        "running",
                        Some(format!(
                            "no tool calling here ({why}): one reply per iteration from now on"
                        )),
                        vec![],
                    );
                    self.propose_single(ctx).await
                }
                other => other,
            }
        } else {
            self.propose_single(ctx).await
        };
        match result {
            Ok(p) => Ok(Some(p)),
            Err(ProposeError::Exhausted) => Err(StopReason::SearchExhausted),
            Err(ProposeError::Fatal(e) | ProposeError::ToolsRefused(e)) => {
                Err(StopReason::Backend(e))
            }
            Err(ProposeError::NoProposal {
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
                    format!("no revision: {reason}"),
                    (tokens_in, tokens_out),
                    request_id,
                );
                Ok(None)
            }
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
                Ok(None)
            }
        }
    }

    /// The candidate's source (the full source or the patched incumbent, secrets scrubbed);
    /// None when it cannot be built or changes nothing, recorded as a failure.
    fn candidate_source(&mut self, proposal: &Proposal, tokens: (u64, u64)) -> Option<String> {
        let source = match &proposal.change {
            Change::Full(s) => Ok(s.clone()),
            Change::Patch(d) => {
                patch::apply(&self.state.incumbent_source, d).map_err(NoCandidate::Patch)
            }
        };
        let source = match source {
            Ok(s) if s.trim() == self.state.incumbent_source.trim() => Err(NoCandidate::Unchanged),
            other => other,
        };
        // Secrets never travel on: a reply that echoes a key has it redacted.
        let source = source.map(|s| crate::session::scrub(&s));
        match source {
            Ok(s) => Some(s),
            Err(e) => {
                self.proposer.observe(proposal, None);
                self.fail(
                    proposal.hypothesis.clone(),
                    proposal.category.clone(),
                    e.to_string(),
                    tokens,
                    proposal.request_id.clone(),
                );
                None
            }
        }
    }

    /// Records the candidate as a new revision; returns (op, rev, parent, change note).
    fn record_revision(
        &mut self,
        proposal: &Proposal,
        source: &str,
        tokens: (u64, u64),
        ctx: &Context,
    ) -> (String, u32, u32, String) {
        let op = self.state.op.clone();
        let rev = self.sink.alloc_rev(&op);
        let parent = self.state.incumbent_rev;
        let change = if proposal.change_note.is_empty() {
            patch::stat(&self.state.incumbent_source, source)
        } else {
            proposal.change_note.clone()
        };
        self.sink.record(SessionEvent::Revision {
            op: op.clone(),
            rev,
            parent: Some(parent),
            author: self.proposer.author(),
            rationale: crate::session::scrub(&proposal.hypothesis),
            source: source.to_string(),
            via: None,
            request_id: proposal.request_id.clone(),
            tokens_in: Some(tokens.0),
            tokens_out: Some(tokens.1),
            category: Some(proposal.category.clone()),
            knowledge: ctx.knowledge.clone(),
        });
        self.agent_state("running", Some(format!("v{rev}: measuring")), vec![]);
        (op, rev, parent, change)
    }

    /// The quick measurement, and the full one when the quick result is promising.
    async fn evaluate(&mut self, rev: u32, source: &str) -> (Evidence, MeasureSummary) {
        let mut ev = Evidence::default();
        let (_, quick) = self.measure(rev, source, Mode::Quick).await;
        let inc = self.state.incumbent_s;
        let promising = quick.passed()
            && match (quick.s_op, inc) {
                (Some(q), Some(i)) => q >= i * (1.0 - PROMISING_MARGIN),
                _ => true,
            };
        ev.quick = Some(quick.clone());
        ev.profiler = super::knowledge::symptoms_of(&quick, self.hw.sm_count, None);
        if promising {
            let (_, full) = self.measure(rev, source, Mode::Full).await;
            ev.full = Some(full);
        }
        (ev, quick)
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the fields of one history entry, as an iteration gathered them"
    )]
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
