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
    /// An iteration with tools ended without a revision (a budget, a model that never called
    /// `propose`): recorded as a failed iteration, with its tokens.
    NoProposal {
        reason: String,
        tokens_in: u64,
        tokens_out: u64,
        request_id: Option<String>,
    },
    /// The server refused the tools (no tool calling for this model or server): the loop goes
    /// on in single-reply mode.
    ToolsRefused(String),
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
    /// Whether this backend can work with tools inside an iteration.
    fn supports_tools(&self) -> bool {
        false
    }
    /// One iteration with tools (tools::conversation): the model's calls are carried out by
    /// `host`; it ends with a proposal or why there is none.
    fn propose_with_tools<H: Host>(
        &mut self,
        _ctx: &Context,
        _host: &mut H,
        _limits: &ToolSettings,
    ) -> impl Future<Output = Result<Proposal, ProposeError>> + Send {
        async { Err(ProposeError::Fatal("this backend has no tools".into())) }
    }
    /// The score the proposal measured (None: it failed).
    fn observe(&mut self, _p: &Proposal, _score: Option<f64>) {}
    /// The loop dropped out of its context.
    fn dropout(&mut self) {}
}

pub trait Measurer: Send {
    /// A job on every shape of the operator.
    fn run(
        &mut self,
        source: &str,
        kind: JobKind,
        mode: Mode,
    ) -> impl Future<Output = Outcome> + Send;
    /// A job on some shapes (the `run` tool); by default on every shape.
    fn run_shapes(
        &mut self,
        source: &str,
        kind: JobKind,
        mode: Mode,
        _shapes: &[u32],
    ) -> impl Future<Output = Outcome> + Send {
        self.run(source, kind, mode)
    }
    /// Keeps the following runs on one worker until `release` (A B B A: every run timed on the
    /// same GPU). Returns the worker's name, or why none could be held (the runs then go where
    /// the measurer sends them).
    fn hold(&mut self) -> impl Future<Output = Result<String, crate::pool::PoolError>> + Send {
        async { Ok("this measurer's worker".to_string()) }
    }
    /// Ends `hold`.
    fn release(&mut self) {}
    /// A deep profile of one shape (the `profile` tool).
    fn profile(
        &mut self,
        _source: &str,
        _shape: u32,
    ) -> impl Future<Output = Result<crate::profile::Profile, ProfileFailure>> + Send {
        async { Err(ProfileFailure::Unavailable) }
    }
}

/// Why the `profile` tool got no deep profile.
#[derive(Debug, thiserror::Error)]
pub enum ProfileFailure {
    #[error("deep profiles are not available here")]
    Unavailable,
    /// The candidate does not compile, or no job could be built for it.
    #[error(transparent)]
    Compile(#[from] crate::contract::outcome::ResourcesError),
    #[error(transparent)]
    Profile(#[from] crate::profile::ProfileError),
    #[error("the profiler task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
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
    /// A tool call starts (its `tool_call` event is recorded when it ends).
    fn tool_started(&mut self, _name: &str, _args: &str) {}
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
