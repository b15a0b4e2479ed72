//! Tools for the model inside an iteration (docs/agent.md, "Tools"): instead of one request
//! and one reply, the model works like a kernel engineer — it compiles, runs and profiles
//! candidates, looks things up in the knowledge base, and ends the iteration with `propose`.
//! Every call runs through the loop's `Measurer` (the worker and its harness, never the host),
//! is shown as it happens and recorded (`tool_call` events), within per-iteration budgets of
//! tool calls, GPU seconds and tokens.
//!
//! `schema` the definitions, `bound` the bounds of results, arguments and records, `args`
//! checking a call's arguments, `dispatch` carrying a call out, `render` and `lookup` what the
//! tools report, `budget` the budgets, `wire` the conversation in each protocol, `stream` tool
//! calls assembled from a streamed reply, `prompt` what the model is told, `conversation` the
//! loop of one iteration.

pub mod args;
pub mod bound;
pub mod budget;
pub mod conversation;
pub mod dispatch;
pub mod lookup;
pub mod prompt;
pub mod render;
pub mod schema;
pub mod stream;
pub mod wire;

pub use args::Call;
pub use budget::ToolSettings;

use super::llm::Delta;
use super::reply::Change;
use crate::session::ToolSpent;
use std::future::Future;

/// A tool call as the model made it: its id, the tool's name and the arguments' JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUse {
    pub id: String,
    pub name: String,
    pub input: String,
}

/// A revision `propose` accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposed {
    pub hypothesis: String,
    pub category: &'static str,
    pub change: Change,
}

/// What a tool did.
#[derive(Debug, Clone, PartialEq)]
pub struct Executed {
    /// False when the tool could not do its work (bad arguments, a refusal, the worker or the
    /// profiler failed). A kernel that fails to compile or its check is a result: true.
    pub ok: bool,
    /// For the model (cut to its bound where every result reaches the conversation:
    /// `conversation`, `bound::result`).
    pub text: String,
    /// One line for the session and the agent pane (cut to `bound::MAX_SUMMARY` there too).
    pub summary: String,
    /// GPU seconds used.
    pub gpu_s: f64,
    /// Set by a `propose` that ends the iteration.
    pub proposal: Option<Proposed>,
}

impl Executed {
    pub fn ok(text: String, summary: String) -> Executed {
        Executed {
            ok: true,
            text,
            summary,
            gpu_s: 0.0,
            proposal: None,
        }
    }
    pub fn failed(text: String, summary: String) -> Executed {
        Executed {
            ok: false,
            ..Executed::ok(text, summary)
        }
    }
}

/// A finished call, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRecord {
    /// 1-based within the iteration.
    pub call: u32,
    pub name: String,
    pub args: String,
    pub ok: bool,
    pub result: String,
    pub ms: f64,
    pub gpu_s: f64,
    /// Spent in the iteration so far, this call included.
    pub spent: ToolSpent,
}

/// What the conversation of an iteration needs from the loop that runs it.
pub trait Host: Send {
    /// Carries out a checked call (the measurer, the knowledge base).
    fn execute(&mut self, call: &Call) -> impl Future<Output = Executed> + Send;
    /// The operator's shape ids, for checking arguments.
    fn shapes(&self) -> Vec<u32>;
    /// A call starts (shown at once).
    fn started(&mut self, name: &str, args: &str);
    /// A call ended (recorded in the session).
    fn finished(&mut self, rec: ToolRecord);
    /// Streamed text of the model's replies.
    fn live(&mut self, d: Delta<'_>);
    /// The engineer's steering notes that arrived since the last call.
    fn steering(&mut self) -> Vec<String>;
    /// The engineer asked the agent to stop (checked before each call and each request).
    fn stop_requested(&mut self) -> bool {
        false
    }
}
