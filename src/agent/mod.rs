//! The optimization agent (docs/agent.md): the measure–revise loop as a state machine that
//! knows nothing of the TUI. Each iteration builds a context, gets one proposal from a backend
//! (the built-in tuner, or an LLM: in one reply, or at the end of a conversation in which it
//! compiles, runs and profiles candidates with tools — `tools`), measures it (quick, then full
//! on promising ones) and decides (a human gate, or the auto rule: strict 5-seed correctness
//! and a gain above the measured noise in an A B B A re-measurement).

pub(crate) mod config;
pub(crate) mod context;
pub(crate) mod driver;
pub(crate) mod file_sink;
pub mod knowledge;
pub(crate) mod llm;
pub(crate) mod patch;
pub(crate) mod reply;
pub(crate) mod setup;
pub(crate) mod tool_refusal;
pub(crate) mod tools;
pub(crate) mod tuner;

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The optimization categories a revision may apply (exactly one per revision).
pub const CATEGORIES: &[&str] = &[
    "launch-config",
    "vectorization",
    "memory-coalescing",
    "caching",
    "shared-memory",
    "register-blocking",
    "occupancy",
    "parallelism",
    "reduction",
    "fusion",
    "tensor-cores",
    "async-copy",
    "pipelining",
    "instruction-level",
    "precision",
    "algorithm",
    "template",
];

/// Normalises a category name (case, spaces, underscores); None when it is not one of
/// `CATEGORIES`.
pub fn normalize_category(s: &str) -> Option<&'static str> {
    let k: String = s
        .trim()
        .trim_matches(|c: char| c == '*' || c == '`' || c == '.')
        .to_lowercase()
        .replace([' ', '_'], "-");
    CATEGORIES.iter().copied().find(|c| *c == k)
}

/// A measurement as the agent sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MeasureSummary {
    /// "quick" or "full".
    pub mode: String,
    /// False on a compile or plan error.
    pub compiled: bool,
    /// The job's verdict name ("pass", "compile error", "incorrect", …).
    pub verdict: String,
    /// S_op (median of S, failed shapes 0) when every shape passed.
    pub s_op: Option<f64>,
    /// Every shape passed the strict level.
    pub strict_ok: bool,
    /// Seeds checked on every shape (the minimum over shapes).
    pub seeds: usize,
    /// Per shape: id, verdict, S.
    pub shapes: Vec<ShapeBrief>,
    /// Median relative IQR of the timings (a noise estimate).
    pub noise: f64,
    /// Compiler diagnostics (first few) or the failure message.
    pub message: Option<String>,
    /// Registers per thread and spill bytes of the candidate's kernels.
    pub registers: Option<i32>,
    pub spill_bytes: Option<i32>,
    /// ptxas's notes on the compiled candidate as a whole (spills, wgmma serialised), when the
    /// compile succeeded: code that passes can still have lost its Hopper pipeline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compile_notes: Vec<String>,
    /// What the kernel printed (bounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShapeBrief {
    pub id: u32,
    pub verdict: String,
    pub s: Option<f64>,
    pub median_ms: Option<f64>,
    pub sol_ms: f64,
}

impl MeasureSummary {
    /// Everything passed: compiled and every shape pass.
    pub fn passed(&self) -> bool {
        self.compiled && self.verdict == "pass" && self.s_op.is_some()
    }
}

/// The A B B A re-measurement of incumbent (A) and candidate (B) in one worker session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Abba {
    /// S_op of the four runs in order A, B, B, A.
    pub runs: [f64; 4],
    /// mean(B) / mean(A) − 1.
    pub gain: f64,
    /// The noise the gain must exceed.
    pub noise: f64,
    /// Why the comparison proves nothing (a timed run the harness caught), when it does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl Abba {
    /// From the four S_op values and the timings' own noise estimate.
    pub fn from_runs(runs: [f64; 4], timing_noise: f64) -> Abba {
        let a = (runs[0] + runs[3]) / 2.0;
        let b = (runs[1] + runs[2]) / 2.0;
        let gain = if a > 0.0 { b / a - 1.0 } else { f64::INFINITY };
        let spread_a = if a > 0.0 {
            (runs[0] - runs[3]).abs() / a
        } else {
            0.0
        };
        let spread_b = if b > 0.0 {
            (runs[1] - runs[2]).abs() / b
        } else {
            0.0
        };
        let mut noise = spread_a.max(spread_b).max(timing_noise);
        // A run that failed to time proves nothing.
        if runs.iter().any(|r| !r.is_finite() || *r <= 0.0) {
            noise = f64::INFINITY;
        }
        Abba {
            runs,
            gain,
            noise,
            refused: None,
        }
    }
    pub fn significant(&self) -> bool {
        self.refused.is_none() && self.gain > self.noise
    }
}

/// What a revision's measurements showed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub quick: Option<MeasureSummary>,
    pub full: Option<MeasureSummary>,
    pub abba: Option<Abba>,
    /// Profiler findings, when a profiler ran (and derived symptoms).
    pub profiler: Vec<String>,
}

impl Evidence {
    /// The most thorough measurement.
    pub fn best(&self) -> Option<&MeasureSummary> {
        self.full.as_ref().or(self.quick.as_ref())
    }
}

/// A deep profile (Nsight Compute, docs/profiler.md) of one revision, as the agent sees it: its
/// findings become retrieval symptoms and part of the context.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileNote {
    pub rev: u32,
    pub shape: u32,
    /// The rules that fired (`low_occupancy`, `latency_bound`, …).
    pub rules: Vec<String>,
    /// One line per finding: `finding [rule] kernel: summary — evidence`.
    pub findings: Vec<String>,
    /// The main kernel's figures in one line.
    pub figures: String,
}

impl ProfileNote {
    pub fn from_profile(rev: u32, p: &crate::profile::Profile) -> ProfileNote {
        let pct = |v: Option<f64>| v.map(|x| format!("{x:.0}%")).unwrap_or_else(|| "-".into());
        let figures = match p.main_kernel() {
            Some(k) => {
                let stalls: Vec<String> = k
                    .stalls
                    .iter()
                    .take(3)
                    .map(|(r, v)| format!("{r} {v:.1}"))
                    .collect();
                format!(
                    "kernel {}: {:.1} µs, DRAM throughput {}, SM throughput {}, achieved occupancy {} (theoretical {}), {} registers/thread, grid {} × block {}, top stalls (cycles/instruction): {}{}",
                    k.name,
                    k.duration_ns.unwrap_or(0.0) / 1e3,
                    pct(k.dram_throughput_pct),
                    pct(k.sm_throughput_pct),
                    pct(k.achieved_occupancy_pct),
                    pct(k.theoretical_occupancy_pct),
                    k.registers_per_thread
                        .map(|r| format!("{r:.0}"))
                        .unwrap_or_else(|| "?".into()),
                    k.grid_size.unwrap_or(0.0),
                    k.block_size.unwrap_or(0.0),
                    if stalls.is_empty() {
                        "-".into()
                    } else {
                        stalls.join(", ")
                    },
                    p.redundant_traffic_ratio
                        .map(|q| format!("; DRAM bytes / Q = {q:.2}"))
                        .unwrap_or_default()
                )
            }
            None => String::new(),
        };
        ProfileNote {
            rev,
            shape: p.shape,
            rules: p.findings.iter().map(|f| f.rule.clone()).collect(),
            findings: p.findings.iter().map(|f| f.line()).collect(),
            figures,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentDecision {
    Accepted,
    Rejected,
    /// Not decided (headless without --auto, or the proposal never became a revision).
    Pending,
}

/// One revision of the agent's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// The session revision (None for a failed proposal that never became a revision).
    pub rev: Option<u32>,
    pub parent: Option<u32>,
    pub hypothesis: String,
    pub category: String,
    /// A short description of the change (define changes, diff stat).
    pub change: String,
    pub evidence: Evidence,
    /// "S 0.812", "compile error: …", "incorrect", "unparseable reply: …".
    pub result: String,
    pub decision: AgentDecision,
    /// Masked from the context by the latest dropout.
    pub masked: bool,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub request_id: Option<String>,
    pub knowledge: Vec<String>,
}

impl HistoryEntry {
    pub fn s_op(&self) -> Option<f64> {
        self.evidence.best().and_then(|m| m.s_op)
    }
}

/// Why the loop stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StopReason {
    MaxIterations(usize),
    MaxTokens(u64),
    TargetReached(f64),
    /// The tuner measured every configuration of its search space.
    SearchExhausted,
    /// The engineer stopped it.
    Stopped,
    /// The backend failed for good (authentication, unknown model, retries spent).
    Backend(String),
    /// Measurement is impossible (no GPU, worker lost for good).
    Measurement(String),
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::MaxIterations(n) => write!(f, "max iterations ({n}) reached"),
            StopReason::MaxTokens(n) => write!(f, "token budget ({n}) spent"),
            StopReason::TargetReached(s) => write!(f, "target S_op reached ({s:.3})"),
            StopReason::SearchExhausted => write!(f, "search space exhausted"),
            StopReason::Stopped => write!(f, "stopped by the engineer"),
            StopReason::Backend(e) => write!(f, "backend error: {e}"),
            StopReason::Measurement(e) => write!(f, "measurement unavailable: {e}"),
        }
    }
}

/// Budgets and the dropout period.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    pub max_iters: usize,
    pub max_tokens: Option<u64>,
    pub target_s: Option<f64>,
    /// Revisions without an accepted improvement before a dropout.
    pub dropout_k: usize,
    /// Tools inside an iteration, and their per-iteration budgets.
    #[serde(default)]
    pub tools: tools::ToolSettings,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_iters: 20,
            max_tokens: None,
            target_s: None,
            dropout_k: 3,
            tools: tools::ToolSettings::default(),
        }
    }
}

/// The agent's memory: incumbent and history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentState {
    pub op: String,
    pub incumbent_rev: u32,
    pub incumbent_source: String,
    pub incumbent_s: Option<f64>,
    /// The history: v0 first (the baseline's measurement), then every proposal.
    pub history: Vec<HistoryEntry>,
    pub steering: Vec<String>,
    /// Revisions since the last accepted improvement (or the last dropout).
    pub since_improvement: usize,
    pub iterations: usize,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub dropouts: usize,
    pub stop: Option<StopReason>,
    /// Deep profiles of this operator's revisions (at most one per revision, oldest first).
    #[serde(default)]
    pub profiles: Vec<ProfileNote>,
}

impl AgentState {
    pub fn new(op: &str, incumbent_rev: u32, source: String, s: Option<f64>) -> AgentState {
        AgentState {
            op: op.to_string(),
            incumbent_rev,
            incumbent_source: source,
            incumbent_s: s,
            history: Vec::new(),
            steering: Vec::new(),
            since_improvement: 0,
            iterations: 0,
            tokens_in: 0,
            tokens_out: 0,
            dropouts: 0,
            stop: None,
            profiles: Vec::new(),
        }
    }

    /// Records a deep profile (replacing an earlier one of the same revision).
    pub fn add_profile(&mut self, note: ProfileNote) {
        self.profiles.retain(|p| p.rev != note.rev);
        self.profiles.push(note);
        if self.profiles.len() > 8 {
            self.profiles.remove(0);
        }
    }

    /// The profiles the next context uses: the incumbent's and the latest other one.
    pub fn relevant_profiles(&self) -> Vec<&ProfileNote> {
        let mut v: Vec<&ProfileNote> = self
            .profiles
            .iter()
            .filter(|p| p.rev == self.incumbent_rev)
            .collect();
        if let Some(l) = self
            .profiles
            .iter()
            .rev()
            .find(|p| p.rev != self.incumbent_rev)
        {
            v.push(l);
        }
        v
    }

    /// The revision with the best S_op (accepted or the incumbent; v0 counts).
    pub fn best_rev(&self) -> Option<u32> {
        let mut best: Option<(u32, f64)> = None;
        for h in &self.history {
            let (Some(r), Some(s)) = (h.rev, h.s_op()) else {
                continue;
            };
            if h.decision == AgentDecision::Rejected {
                continue;
            }
            if best.is_none_or(|(_, b)| s > b) {
                best = Some((r, s));
            }
        }
        best.map(|b| b.0).or(Some(self.incumbent_rev))
    }

    pub fn tokens(&self) -> u64 {
        self.tokens_in + self.tokens_out
    }

    /// The stop reason when a budget is spent (checked before each iteration).
    pub fn budget_stop(&self, b: &Budget) -> Option<StopReason> {
        if self.iterations >= b.max_iters {
            return Some(StopReason::MaxIterations(b.max_iters));
        }
        if let Some(t) = b.max_tokens
            && self.tokens() >= t
        {
            return Some(StopReason::MaxTokens(t));
        }
        if let (Some(t), Some(s)) = (b.target_s, self.incumbent_s)
            && s >= t
        {
            return Some(StopReason::TargetReached(s));
        }
        None
    }

    /// True when K revisions went by without an accepted improvement.
    pub fn stalled(&self, b: &Budget) -> bool {
        b.dropout_k > 0 && self.since_improvement >= b.dropout_k
    }

    /// Optimization dropout: a fresh context in which about half of the history entries are
    /// masked, never v0 and never the best. Returns the masked revisions (failed proposals
    /// without a revision may be masked too and are not listed).
    pub fn dropout(&mut self, seed: u64) -> Vec<u32> {
        let masked = dropout_mask(&self.history, self.best_rev(), seed);
        for (i, h) in self.history.iter_mut().enumerate() {
            h.masked = masked.contains(&i);
        }
        self.since_improvement = 0;
        self.dropouts += 1;
        let mut revs: Vec<u32> = masked.iter().filter_map(|i| self.history[*i].rev).collect();
        revs.sort();
        revs
    }

    /// Applies a recorded mask (resume).
    pub fn apply_mask(&mut self, revs: &[u32]) {
        for h in &mut self.history {
            h.masked = h.rev.is_some_and(|r| revs.contains(&r));
        }
    }

    /// The entries visible to the next context (not masked), most recent last.
    pub fn visible(&self) -> impl DoubleEndedIterator<Item = &HistoryEntry> {
        self.history.iter().filter(|h| !h.masked)
    }
}

/// The indices of history entries to mask: about half (rounded up) of the eligible ones, chosen
/// by a seeded shuffle; v0 (rev 0) and the best revision are never eligible.
pub fn dropout_mask(history: &[HistoryEntry], best: Option<u32>, seed: u64) -> BTreeSet<usize> {
    let eligible: Vec<usize> = history
        .iter()
        .enumerate()
        .filter(|(_, h)| h.rev != Some(0) && (h.rev.is_none() || h.rev != best))
        .map(|(i, _)| i)
        .collect();
    let n = eligible.len().div_ceil(2);
    let mut rng = SplitMix(seed);
    let mut pool = eligible;
    // Fisher–Yates with the seeded generator.
    for i in (1..pool.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        pool.swap(i, j);
    }
    pool.into_iter().take(n).collect()
}

/// A small seeded generator (SplitMix64), so that runs are reproducible from their seed.
#[derive(Debug, Clone)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

#[cfg(test)]
mod tests;
