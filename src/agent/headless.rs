//! `atrex-tui agent OP`: the loop without the TUI, recording a session; and the pieces the TUI
//! shares (the worker measurer, backend construction, restoring the agent's memory).

use super::config::{self, AgentConfig, BackendKind};
use super::driver::*;
use super::llm::{Delta, LlmClient};
use super::*;
use crate::engine::client::{WorkerClient, WorkerConfig};
use crate::engine::outcome::{Outcome, collect};
use crate::engine::protocol::{JobKind, Mode, Source};
use crate::session::{Author, Model, SessionEvent, SessionWriter};
use crate::suite::hardware::HardwareProfile;
use crate::suite::{Problem, Suite, Workspace};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

/// Measures through the worker (one session for the whole run).
pub struct WorkerMeasurer {
    pub client: WorkerClient,
    pub problem: Problem,
    pub reference: Source,
    pub hw: HardwareProfile,
    pub shape_ids: Vec<u32>,
    pub progress: bool,
}

impl Measurer for WorkerMeasurer {
    async fn run(&mut self, source: &str, kind: JobKind, mode: Mode) -> Outcome {
        let cand = Source {
            name: format!("{} agent candidate", self.problem.name),
            code: source.to_string(),
            defines: Default::default(),
        };
        match crate::engine::build_job(
            &self.problem,
            cand,
            Some(self.reference.clone()),
            &self.shape_ids,
            kind,
            mode,
            Some(&self.hw),
        ) {
            Ok(job) => collect(&self.client, job, self.progress).await,
            Err(e) => Outcome {
                verdict: Some(crate::engine::protocol::Verdict::Error),
                message: Some(e),
                ..Default::default()
            },
        }
    }
}

/// Records to a session file; prints a line per event of interest.
pub struct FileSink {
    pub writer: Option<SessionWriter>,
    pub next_mid: u64,
    pub next_rev: BTreeMap<String, u32>,
    pub verbose: bool,
    pub errors: Vec<String>,
}

impl Sink for FileSink {
    fn record(&mut self, ev: SessionEvent) {
        if self.verbose {
            match &ev {
                SessionEvent::Revision {
                    rev,
                    rationale,
                    category,
                    ..
                } => eprintln!(
                    "v{rev} [{}] {}",
                    category.as_deref().unwrap_or("-"),
                    crate::session::scrub(rationale)
                ),
                SessionEvent::MeasureDone {
                    rev,
                    verdict,
                    message,
                    ..
                } => eprintln!(
                    "  v{rev} measured: {}{}",
                    verdict.name(),
                    message
                        .as_deref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ),
                SessionEvent::Decision { rev, decision, .. } => eprintln!("  v{rev} {decision:?}"),
                SessionEvent::AgentState { state, reason, .. } => eprintln!(
                    "agent {state}{}",
                    reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ),
                _ => {}
            }
        }
        if let Some(w) = self.writer.as_mut()
            && let Err(e) = w.append(ev)
        {
            self.errors.push(e);
        }
    }
    fn alloc_rev(&mut self, op: &str) -> u32 {
        let r = self.next_rev.entry(op.to_string()).or_insert(1);
        let v = *r;
        *r += 1;
        v
    }
    fn alloc_mid(&mut self) -> u64 {
        self.next_mid += 1;
        self.next_mid
    }
    fn stream(&mut self, _d: Delta<'_>) {}
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

/// Builds the backend of a configuration.
pub fn make_proposer(
    cfg: &AgentConfig,
    state: &AgentState,
    seed: u64,
) -> Result<AnyProposer, String> {
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

/// Restores the agent's memory for an operator from a session's state: incumbent, history
/// (agent revisions with their hypotheses, categories, results and decisions), the latest
/// dropout mask and the steering notes. Returns the state and the sources of the history
/// (for the tuner's search).
pub fn restore(model: &Model, op: &str) -> Option<(AgentState, Vec<(String, Option<f64>)>)> {
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
    if model.agent_op.as_deref() == Some(op) {
        st.apply_mask(&model.agent_masked);
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

pub struct HeadlessArgs<'a> {
    pub op: &'a str,
    pub backend: Option<BackendKind>,
    pub max_iters: Option<usize>,
    pub auto: bool,
    pub json: bool,
    pub device: u32,
    pub hardware: Option<&'a str>,
    pub config: Option<&'a Path>,
    pub seed: Option<u64>,
}

pub fn run(ws: &Workspace, suite: &Suite, a: HeadlessArgs<'_>) -> Result<i32, String> {
    let p = suite
        .problem(a.op)
        .ok_or_else(|| format!("unknown operator `{}` (see `atrex-tui suite`)", a.op))?
        .clone();
    let baseline = crate::suite::kernels::suite_kernel(suite, &p, "baseline.cu")?;
    let reference = crate::suite::kernels::suite_kernel(suite, &p, "reference.cu")?;
    let cfg_file = a
        .config
        .map(|p| p.to_path_buf())
        .or_else(crate::config::Settings::default_path);
    let settings = crate::config::Settings::load(cfg_file.as_deref()).map_err(|e| e.to_string())?;
    let mut cfg = config::resolve(&settings.agent, a.backend)?;
    if let Some(n) = a.max_iters {
        cfg.budget.max_iters = n;
    }
    let rt = crate::engine::runtime()?;
    rt.block_on(async move {
        let client = WorkerClient::spawn(WorkerConfig::new(a.device));
        let (dev, probe) = match client.device().await {
            Ok(x) => x,
            Err(e) => {
                eprintln!(
                    "atrex-tui: no GPU {}: {e}; the agent needs one to measure",
                    a.device
                );
                return Ok(crate::cli::EXIT_NO_GPU);
            }
        };
        let (driver, nvrtc) = (probe.driver_version, probe.nvrtc_version);
        let hw = match a.hardware {
            Some(h) => suite.hardware(h)?.clone(),
            None => crate::engine::profile_for_device(&suite.hardware, &dev.name)
                .ok_or_else(|| {
                    format!(
                        "no hardware profile matches `{}`; pass --hardware",
                        dev.name
                    )
                })?
                .clone(),
        };
        let path = crate::session::store::new_session_path(&ws.sessions_dir());
        let writer = SessionWriter::create(&path)?;
        let mut sink = FileSink {
            writer: Some(writer),
            next_mid: 0,
            next_rev: BTreeMap::new(),
            verbose: !a.json,
            errors: vec![],
        };
        sink.record(SessionEvent::RunStart {
            tool_version: env!("CARGO_PKG_VERSION").into(),
            resumed: false,
            gpu: Some(dev.name.clone()),
            driver: Some(driver),
            nvrtc,
            hardware: Some(hw.key.clone()),
            suite: suite.name.clone(),
            suite_version: suite.version.clone(),
        });
        sink.record(SessionEvent::Revision {
            op: p.name.clone(),
            rev: 0,
            parent: None,
            author: Author::Baseline,
            rationale: "suite baseline".into(),
            source: baseline.code.clone(),
            via: None,
            request_id: None,
            tokens_in: None,
            tokens_out: None,
            category: None,
            knowledge: vec![],
        });
        let seed = a.seed.unwrap_or_else(|| crate::engine::fresh_seeds(1)[0]);
        let state = AgentState::new(&p.name, 0, baseline.code.clone(), None);
        let proposer = make_proposer(&cfg, &state, seed)?;
        let measurer = WorkerMeasurer {
            client,
            problem: p.clone(),
            reference,
            hw: hw.clone(),
            shape_ids: p.shapes.iter().map(|s| s.id).collect(),
            progress: false,
        };
        let mut d = Driver {
            state,
            budget: cfg.budget.clone(),
            proposer,
            measurer,
            gate: NoGate,
            sink,
            problem: p.clone(),
            hw: hw.clone(),
            docs: knowledge::docs(),
            incumbent_measure: None,
            mode: if a.auto {
                DecisionMode::Auto
            } else {
                DecisionMode::Suggest
            },
            seed,
            k_docs: cfg.knowledge_docs,
            best_seen: None,
        };
        let stop = d.run().await;
        let st = &d.state;
        let baseline_s = st.history.first().and_then(|h| h.s_op());
        let best = st
            .history
            .iter()
            .filter(|h| h.rev.is_some())
            .filter_map(|h| h.s_op().map(|s| (h.rev.unwrap_or(0), s)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if a.json {
            let doc = json!({
                "operator": p.name,
                "backend": d.proposer.name(),
                "gpu": dev.name,
                "hardware": hw.key,
                "mode": if a.auto { "auto" } else { "suggest" },
                "session": path.display().to_string(),
                "stop_reason": stop.to_string(),
                "iterations": st.iterations,
                "dropouts": st.dropouts,
                "tokens_in": st.tokens_in,
                "tokens_out": st.tokens_out,
                "baseline_s_op": baseline_s,
                "incumbent": st.incumbent_rev,
                "incumbent_s_op": st.incumbent_s,
                "best": best.map(|(r, s)| json!({"rev": r, "s_op": s})),
                "history": st.history,
                "write_errors": d.sink.errors,
            });
            println!(
                "{}",
                serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
            );
        } else {
            println!(
                "{}: {} iterations, stop: {stop}; S_op v0 {} → incumbent v{} {}{}; session {}",
                p.name,
                st.iterations,
                baseline_s.map(|s| format!("{s:.4}")).unwrap_or("-".into()),
                st.incumbent_rev,
                st.incumbent_s
                    .map(|s| format!("{s:.4}"))
                    .unwrap_or("-".into()),
                best.map(|(r, s)| format!(" (best measured v{r} {s:.4})"))
                    .unwrap_or_default(),
                path.display()
            );
        }
        Ok(match stop {
            StopReason::Backend(_) | StopReason::Measurement(_) => 1,
            _ => 0,
        })
    })
}
