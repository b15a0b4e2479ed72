//! The loop's seams: backends (`Proposer`), measurement (`Measurer`), decisions (`Gate`), the
//! session (`Sink`), with the proposal and gate answer types and the decision mode.

use super::*;

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
