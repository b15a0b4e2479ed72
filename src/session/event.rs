//! The events of a session file (docs/session-format.md).

use crate::contract::protocol::{Diagnostic, ShapeResult, Verdict};
use serde::{Deserialize, Serialize};

/// The format version written by this build. Files with a higher version are refused.
pub const FORMAT_VERSION: u32 = 1;

/// One line of a session file: the envelope and its event.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Record {
    /// Format version.
    pub v: u32,
    /// 1-based sequence number, strictly increasing within a file.
    pub seq: u64,
    /// Wall-clock time of the event, seconds since the Unix epoch.
    pub t: f64,
    #[serde(flatten)]
    pub event: SessionEvent,
}

/// Who wrote a revision.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "type", content = "name", rename_all = "snake_case")]
pub enum Author {
    /// The suite's baseline.cu.
    Baseline,
    /// Revision 0 taken from the workspace's standing: the operator's incumbent when the
    /// session started (an accepted kernel of an earlier session, or a built-in template).
    Incumbent,
    /// A person (built-in editor or $EDITOR).
    Human,
    /// The built-in tuner.
    Tuner,
    /// A language model, by model name.
    Model(String),
}

impl Author {
    /// Revision 0: where a session starts (the suite's baseline or the standing's incumbent).
    pub fn is_start(&self) -> bool {
        matches!(self, Author::Baseline | Author::Incumbent)
    }

    pub fn label(&self) -> String {
        match self {
            Author::Baseline => "baseline".into(),
            Author::Incumbent => "incumbent".into(),
            Author::Human => "human".into(),
            Author::Tuner => "tuner".into(),
            Author::Model(m) => m.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Accepted,
    Rejected,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    Human,
    Auto,
}

/// What an agent iteration has spent of its tool budgets (docs/agent.md).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ToolSpent {
    /// Tool calls made (a successful `propose` excluded).
    pub calls: u32,
    pub gpu_s: f64,
    /// Tokens in + out of the iteration's requests.
    pub tokens: u64,
}

/// What happened. Serialized with a `kind` tag beside the envelope's fields.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SessionEvent {
    /// The start (or resumption) of a run.
    RunStart {
        tool_version: String,
        #[serde(default)]
        resumed: bool,
        #[serde(default)]
        gpu: Option<String>,
        #[serde(default)]
        driver: Option<String>,
        #[serde(default)]
        nvrtc: Option<String>,
        /// Hardware profile key used for T_SOL.
        #[serde(default)]
        hardware: Option<String>,
        suite: String,
        suite_version: String,
    },
    /// The worker answered hello after the run started.
    Device {
        #[serde(default)]
        gpu: Option<String>,
        #[serde(default)]
        driver: Option<String>,
        #[serde(default)]
        nvrtc: Option<String>,
        #[serde(default)]
        hardware: Option<String>,
    },
    /// A kernel revision with its full source.
    Revision {
        op: String,
        rev: u32,
        #[serde(default)]
        parent: Option<u32>,
        author: Author,
        #[serde(default)]
        rationale: String,
        source: String,
        /// How a human revision was made: "editor" (built-in) or "external" ($EDITOR / file).
        #[serde(default)]
        via: Option<String>,
        #[serde(default)]
        request_id: Option<String>,
        #[serde(default)]
        tokens_in: Option<u64>,
        #[serde(default)]
        tokens_out: Option<u64>,
        /// The one optimization category an agent revision applies (docs/agent.md).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        category: Option<String>,
        /// Knowledge documents given to the agent for this revision.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        knowledge: Vec<String>,
    },
    /// A measurement of a revision begins; earlier results of that revision are superseded.
    MeasureStart {
        op: String,
        rev: u32,
        mid: u64,
        mode: String,
    },
    /// The candidate compiled (or did not).
    Compiled {
        op: String,
        rev: u32,
        mid: u64,
        ok: bool,
        #[serde(default)]
        diagnostics: Vec<Diagnostic>,
        #[serde(default)]
        log: String,
    },
    /// One shape's result.
    ShapeResult {
        op: String,
        rev: u32,
        mid: u64,
        result: ShapeResult,
    },
    /// A measurement ended.
    MeasureDone {
        op: String,
        rev: u32,
        mid: u64,
        verdict: Verdict,
        #[serde(default)]
        message: Option<String>,
    },
    /// What a measurement's kernels printed (device `printf`), per shape; at most 64 KiB per
    /// measurement, `dropped` counting the bytes beyond.
    KernelOutput {
        op: String,
        rev: u32,
        mid: u64,
        #[serde(default)]
        shape: Option<u32>,
        text: String,
        #[serde(default)]
        dropped: u64,
    },
    /// Accept or reject. An accepted revision becomes the operator's incumbent.
    Decision {
        op: String,
        rev: u32,
        decision: Decision,
        by: DecidedBy,
    },
    /// A steering message for the agent.
    Steer {
        #[serde(default)]
        op: Option<String>,
        text: String,
    },
    /// Agent state changes (running, stalled, dropped out, stopped and why).
    AgentState {
        state: String,
        #[serde(default)]
        reason: Option<String>,
        /// The operator the agent works on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        op: Option<String>,
        /// Dropout: the revisions masked from the agent's context from now on.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        masked: Vec<u32>,
    },
    /// A deep profile of a revision on one shape under Nsight Compute (docs/profiler.md): the
    /// per-kernel figures and the findings. The latest one of a revision is shown.
    Profile {
        op: String,
        rev: u32,
        profile: Box<crate::profile::Profile>,
    },
    /// A tool the model called inside an agent iteration (docs/agent.md, "Tools"): what it
    /// asked, what the tool reported, and what the iteration has spent so far.
    ToolCall {
        op: String,
        /// The agent's iteration (1-based).
        iteration: u32,
        /// The call's number within the iteration (1-based).
        call: u32,
        /// `compile`, `run`, `profile`, `lookup`, `read` or `propose` (or the unknown name the
        /// model used).
        name: String,
        /// The arguments in one line (sources and diffs by their size, never whole).
        #[serde(default)]
        args: String,
        /// False when the tool failed, its arguments were refused or a budget refused it.
        ok: bool,
        /// What the tool reported, in one line.
        #[serde(default)]
        result: String,
        /// Wall time of the call, milliseconds.
        #[serde(default)]
        ms: f64,
        /// GPU seconds the call used (compile, run, profile).
        #[serde(default)]
        gpu_s: f64,
        /// Spent in the iteration so far, this call included.
        #[serde(default)]
        spent: ToolSpent,
    },
    /// An error worth keeping (worker lost, write failure, bad file).
    Error {
        #[serde(default)]
        op: Option<String>,
        message: String,
    },
    /// An event of a kind this build does not know (written by a newer one): kept in the file,
    /// counted on load, never written.
    #[serde(other)]
    Unknown,
}

impl SessionEvent {
    pub fn kind(&self) -> &'static str {
        match self {
            SessionEvent::RunStart { .. } => "run_start",
            SessionEvent::Device { .. } => "device",
            SessionEvent::Revision { .. } => "revision",
            SessionEvent::MeasureStart { .. } => "measure_start",
            SessionEvent::Compiled { .. } => "compiled",
            SessionEvent::ShapeResult { .. } => "shape_result",
            SessionEvent::MeasureDone { .. } => "measure_done",
            SessionEvent::KernelOutput { .. } => "kernel_output",
            SessionEvent::Decision { .. } => "decision",
            SessionEvent::Steer { .. } => "steer",
            SessionEvent::AgentState { .. } => "agent_state",
            SessionEvent::Profile { .. } => "profile",
            SessionEvent::ToolCall { .. } => "tool_call",
            SessionEvent::Error { .. } => "error",
            SessionEvent::Unknown => "unknown",
        }
    }

    /// The revision this event refers to and needs in the session before it: a revision's
    /// parent; the revision a measurement, decision or profile is about.
    pub fn refers_to(&self) -> Option<(&str, u32)> {
        match self {
            SessionEvent::Revision {
                op,
                parent: Some(p),
                ..
            } => Some((op, *p)),
            SessionEvent::MeasureStart { op, rev, .. }
            | SessionEvent::Compiled { op, rev, .. }
            | SessionEvent::ShapeResult { op, rev, .. }
            | SessionEvent::MeasureDone { op, rev, .. }
            | SessionEvent::KernelOutput { op, rev, .. }
            | SessionEvent::Decision { op, rev, .. }
            | SessionEvent::Profile { op, rev, .. } => Some((op, *rev)),
            _ => None,
        }
    }

    /// Decisions and accepted kernels are fsync'd.
    pub fn durable(&self) -> bool {
        matches!(self, SessionEvent::Decision { .. })
    }
}
