//! What the TUI and the headless `agent` command share to start the agent: the worker
//! measurer, the backend (`AnyProposer`), the agent's memory restored from a session, and
//! `build`, which assembles a `Driver` from them with the caller's gate and sink.

use super::config::{AgentConfig, BackendKind};
use super::driver::*;
use super::llm::{Delta, LlmClient};
use super::*;
use crate::contract::outcome::{Outcome, collect};
use crate::contract::protocol::{JobKind, Mode, Source};
use crate::contract::runner::Runner;
use crate::pool::{Lease, Pool};
use crate::session::{Author, Model};
use crate::suite::hardware::HardwareProfile;
use crate::suite::{Problem, Suite};

/// Measures through the pool (a job's shapes spread over its workers of the agent's GPU model;
/// held on one worker for A B B A); deep profiles under Nsight Compute as the TUI's `p` takes
/// them.
pub struct WorkerMeasurer {
    /// The pool, bound to the GPU model the agent's T_SOL is for.
    pub pool: Pool,
    /// The worker held between `hold` and `release`.
    pub held: Option<Lease>,
    pub problem: Problem,
    pub reference: Source,
    pub hw: HardwareProfile,
    pub shape_ids: Vec<u32>,
    pub progress: bool,
    /// Where deep profiles run: the suite (hardware profiles), the GPU's index and name.
    pub profiler: Option<ProfilerSeat>,
}

/// What a deep profile needs beyond the measurer's job.
#[derive(Clone)]
pub struct ProfilerSeat {
    pub suite: std::sync::Arc<Suite>,
    pub device: u32,
    pub device_name: Option<String>,
}

impl WorkerMeasurer {
    fn candidate(&self, source: &str) -> Source {
        Source {
            name: format!("{} agent candidate", self.problem.name),
            code: source.to_string(),
            defines: Default::default(),
        }
    }
}

impl Measurer for WorkerMeasurer {
    async fn run(&mut self, source: &str, kind: JobKind, mode: Mode) -> Outcome {
        let ids = self.shape_ids.clone();
        self.run_shapes(source, kind, mode, &ids).await
    }

    async fn run_shapes(
        &mut self,
        source: &str,
        kind: JobKind,
        mode: Mode,
        shapes: &[u32],
    ) -> Outcome {
        match crate::contract::job::build_job(
            &self.problem,
            self.candidate(source),
            Some(self.reference.clone()),
            shapes,
            kind,
            mode,
            Some(&self.hw),
        ) {
            Ok(job) => {
                let runner: &dyn Runner = match &self.held {
                    Some(l) => l,
                    None => &self.pool,
                };
                collect(runner, job, self.progress).await
            }
            Err(e) => Outcome::failed(e.to_string()),
        }
    }

    async fn hold(&mut self) -> Result<String, crate::pool::PoolError> {
        let lease = self.pool.lease().await?;
        let name = lease.name.clone();
        self.held = Some(lease);
        Ok(name)
    }

    fn release(&mut self) {
        self.held = None;
    }

    async fn profile(
        &mut self,
        source: &str,
        shape: u32,
    ) -> Result<crate::profile::Profile, ProfileFailure> {
        let seat = self.profiler.clone().ok_or(ProfileFailure::Unavailable)?;
        let cand = self.candidate(source);
        let p = self.problem.clone();
        let resources =
            crate::contract::outcome::compile_resources(&self.pool, &p, &cand, shape).await?;
        tokio::task::spawn_blocking(move || {
            let opts = crate::profile::NcuOptions::find()?;
            crate::profile::profile(
                &seat.suite,
                &p,
                cand,
                shape,
                crate::profile::Gpu {
                    index: seat.device,
                    name: seat.device_name.as_deref(),
                },
                &opts,
                resources.as_ref(),
            )
            .map(|p| p.without_raw())
        })
        .await?
        .map_err(ProfileFailure::from)
    }
}

/// A gate that never asks (auto and suggest modes).
pub struct NoGate;

impl Gate for NoGate {
    async fn decide(&mut self, _rev: u32) -> GateAnswer {
        GateAnswer::Stop
    }
}

/// The proposer of a configuration.
pub enum AnyProposer {
    Tuner(Box<TunerProposer>),
    Llm(Box<LlmProposer>),
}

impl Proposer for AnyProposer {
    fn author(&self) -> Author {
        match self {
            AnyProposer::Tuner(t) => t.author(),
            AnyProposer::Llm(l) => l.author(),
        }
    }
    fn name(&self) -> String {
        match self {
            AnyProposer::Tuner(t) => t.name(),
            AnyProposer::Llm(l) => l.name(),
        }
    }
    async fn propose(
        &mut self,
        ctx: &context::Context,
        state: &AgentState,
        stream: &mut (dyn FnMut(Delta<'_>) + Send),
    ) -> Result<Proposal, ProposeError> {
        match self {
            AnyProposer::Tuner(t) => t.propose(ctx, state, stream).await,
            AnyProposer::Llm(l) => l.propose(ctx, state, stream).await,
        }
    }
    fn supports_tools(&self) -> bool {
        match self {
            AnyProposer::Tuner(t) => t.supports_tools(),
            AnyProposer::Llm(l) => l.supports_tools(),
        }
    }
    async fn propose_with_tools<H: crate::agent::tools::Host>(
        &mut self,
        ctx: &context::Context,
        host: &mut H,
        limits: &crate::agent::tools::ToolSettings,
    ) -> Result<Proposal, ProposeError> {
        match self {
            AnyProposer::Tuner(t) => t.propose_with_tools(ctx, host, limits).await,
            AnyProposer::Llm(l) => l.propose_with_tools(ctx, host, limits).await,
        }
    }
    fn observe(&mut self, p: &Proposal, s: Option<f64>) {
        match self {
            AnyProposer::Tuner(t) => t.observe(p, s),
            AnyProposer::Llm(l) => l.observe(p, s),
        }
    }
    fn dropout(&mut self) {
        match self {
            AnyProposer::Tuner(t) => t.dropout(),
            AnyProposer::Llm(l) => l.dropout(),
        }
    }
}

/// Why an agent could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The operator's reference.cu.
    #[error(transparent)]
    Reference(#[from] crate::contract::kernels::KernelError),
    /// The incumbent's launch plan, which the tuner steps through.
    #[error(transparent)]
    Tuner(#[from] super::tuner::BaseError),
    #[error(transparent)]
    Http(#[from] super::llm::HttpClientError),
}

crate::error::text_at_the_edge!(SetupError);

/// Builds the backend of a configuration.
pub fn make_proposer(
    cfg: &AgentConfig,
    state: &AgentState,
    seed: u64,
) -> Result<AnyProposer, SetupError> {
    match (cfg.backend, &cfg.endpoint) {
        (BackendKind::Tuner, _) | (_, None) => {
            let mut t =
                TunerProposer::new(&state.op, &state.incumbent_source, state.incumbent_s, seed)?;
            Ok({
                t.search.restarts = 0;
                AnyProposer::Tuner(Box::new(t))
            })
        }
        (_, Some(ep)) => Ok(AnyProposer::Llm(Box::new(LlmProposer {
            client: LlmClient::new(ep.clone(), cfg.timeout, cfg.retries, cfg.max_reply_tokens)?,
        }))),
    }
}

/// Sources measured earlier with their S_op, None where it was not measured (the tuner's
/// memory).
pub type MeasuredSources = Vec<(String, Option<f64>)>;

/// Restores the agent's memory for an operator from a session's state: incumbent, history
/// (agent revisions with their hypotheses, categories, results and decisions), the latest
/// dropout mask and the steering notes. Returns the state and the sources of the history
/// (for the tuner's search).
pub fn restore(model: &Model, op: &str) -> Option<(AgentState, MeasuredSources)> {
    let o = model.ops.get(op)?;
    let inc = o.incumbent_rev().or_else(|| o.rev(0))?;
    let mut st = AgentState::new(op, inc.rev, inc.source.clone(), inc.verdict().score());
    let mut sources = Vec::new();
    for r in &o.revisions {
        let agent = matches!(r.author, Author::Tuner | Author::Model(_));
        if !(r.rev == 0 || (agent && r.recorded)) {
            continue;
        }
        let score = r.verdict().score();
        let decision = match r.decision {
            Some(crate::session::Decision::Accepted) => AgentDecision::Accepted,
            Some(crate::session::Decision::Rejected) => AgentDecision::Rejected,
            None if r.rev == 0 => AgentDecision::Accepted,
            None => AgentDecision::Pending,
        };
        let mode = r.measurement.mode.clone();
        st.history.push(HistoryEntry {
            rev: Some(r.rev),
            parent: r.parent,
            hypothesis: r.rationale.clone(),
            category: r.category.clone().unwrap_or_else(|| "baseline".into()),
            change: String::new(),
            evidence: Evidence {
                full: Some(MeasureSummary {
                    mode,
                    compiled: r.measurement.compiled != Some(false),
                    verdict: r.verdict().label(),
                    s_op: score,
                    ..Default::default()
                }),
                ..Default::default()
            },
            result: r.verdict().label(),
            decision,
            masked: false,
            tokens_in: r.tokens.map(|t| t.0).unwrap_or(0),
            tokens_out: r.tokens.map(|t| t.1).unwrap_or(0),
            request_id: r.request_id.clone(),
            knowledge: r.knowledge.clone(),
        });
        if agent {
            st.iterations += 1;
            if let Some((a, b)) = r.tokens {
                st.tokens_in += a;
                st.tokens_out += b;
            }
            sources.push((r.source.clone(), score));
        }
    }
    // Revisions since the last accepted one.
    st.since_improvement = st
        .history
        .iter()
        .rev()
        .take_while(|h| h.decision != AgentDecision::Accepted)
        .count();
    if let Some(run) = model.agents.get(op) {
        st.apply_mask(&run.masked);
    }
    // Deep profiles of the operator's revisions (any author), for the context's findings.
    for r in &o.revisions {
        if let Some(p) = &r.profile {
            st.add_profile(ProfileNote::from_profile(r.rev, p));
        }
    }
    st.steering = model
        .steering
        .iter()
        .filter(|(o, _)| o.as_deref().is_none_or(|x| x == op))
        .map(|(_, t)| t.clone())
        .collect();
    Some((st, sources))
}

/// What an agent run is about: the operator, where it measures, how it decides.
pub struct Setup<'a> {
    pub suite: &'a Suite,
    pub problem: Problem,
    pub hw: HardwareProfile,
    pub cfg: &'a AgentConfig,
    /// The agent's memory (restored from a session, or fresh from the baseline).
    pub state: AgentState,
    /// Sources measured earlier with their S_op (the tuner's memory).
    pub sources: MeasuredSources,
    pub seed: u64,
    pub mode: DecisionMode,
    /// The pool, bound to the GPU model of `hw` (`Pool::for_model`).
    pub pool: Pool,
    /// The GPU's index and name (deep profiles of the `profile` tool).
    pub device: u32,
    pub device_name: Option<String>,
}

/// Assembles the driver: the configured backend, the worker measurer on every shape of the
/// operator, the knowledge base; the gate and the sink are the caller's.
pub fn build<G: Gate, S: Sink>(
    s: Setup<'_>,
    gate: G,
    sink: S,
) -> Result<Driver<AnyProposer, WorkerMeasurer, G, S>, SetupError> {
    let reference = crate::contract::kernels::suite_kernel(s.suite, &s.problem, "reference.cu")?;
    let mut proposer = make_proposer(s.cfg, &s.state, s.seed)?;
    if let AnyProposer::Tuner(t) = &mut proposer {
        t.seed_history(&s.sources);
    }
    let measurer = WorkerMeasurer {
        pool: s.pool,
        held: None,
        problem: s.problem.clone(),
        reference,
        hw: s.hw.clone(),
        shape_ids: s.problem.shapes.iter().map(|x| x.id).collect(),
        progress: false,
        profiler: Some(ProfilerSeat {
            suite: std::sync::Arc::new(s.suite.clone()),
            device: s.device,
            device_name: s.device_name.clone(),
        }),
    };
    Ok(Driver {
        state: s.state,
        budget: s.cfg.budget.clone(),
        proposer,
        measurer,
        gate,
        sink,
        problem: s.problem,
        hw: s.hw,
        docs: knowledge::docs(),
        incumbent_measure: None,
        mode: s.mode,
        seed: s.seed,
        k_docs: s.cfg.knowledge_docs,
        best_seen: None,
    })
}
