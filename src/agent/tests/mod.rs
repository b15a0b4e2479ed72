//! The loop against fake measurements and a real HTTP server on loopback: the shared
//! fixtures (kernel sources, the suite, a driver over the fakes); one submodule per concern
//! (tool_loops and tool_budgets: iterations with tools, scripted by tool_sse; boundary: what
//! crosses between the model and the tools).

mod auto_loop;
mod backends;
mod boundary;
mod fakes;
mod gates;
mod llm_streams;
mod profiles;
mod restore;
mod tool_budgets;
mod tool_loops;
mod tool_sse;

use super::config::{BackendKind, Endpoint, Secret};
use super::driver::*;
use super::file_sink::FileSink;
use super::llm::{Delta, LlmClient};
use super::tools::ToolSettings;
use super::tuner::{Base, Search};
use super::*;
use crate::contract::outcome::Outcome;
use crate::contract::protocol::{Event, JobKind, Mode, ShapeResult, Verdict};
use crate::contract::stats::TimingStats;
use crate::session::{Author, SessionEvent};
use crate::suite::{Suite, SuiteSource};
use fakes::{
    FakeMeasurer, HUGE_ERROR, MemSink, NO_NCU, Resp, WORKER_LOST, anthropic_sse, client,
    openai_sse, serve,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const FIXTURE: &str = "/* atrex:plan\n[[launch]]\nkernel = \"k\"\ngrid = [\"T\"]\nblock = [\"BLOCK\"]\nargs = [\"out\", \"x\", \"weight\", \"H:i32\", \"eps:f32\"]\n\n[tune]\nBLOCK = [128, 256, 512, 1024]\nVEC = [1, 2, 4, 8]\n*/\nextern \"C\" __global__ void k() {}\n";

fn suite() -> Suite {
    Suite::load(SuiteSource::Embedded).unwrap()
}

fn driver<P: Proposer>(
    proposer: P,
    measurer: FakeMeasurer,
    sink: MemSink,
    source: &str,
    budget: Budget,
    mode: DecisionMode,
) -> Driver<P, FakeMeasurer, super::setup::NoGate, MemSink> {
    let s = suite();
    let p = s.problem("rms_norm").unwrap().clone();
    let hw = s.hardware("H200").unwrap().clone();
    Driver {
        state: AgentState::new("rms_norm", 0, source.to_string(), None),
        budget,
        proposer,
        measurer,
        gate: super::setup::NoGate,
        sink,
        problem: p,
        hw,
        docs: knowledge::docs(),
        incumbent_measure: None,
        mode,
        seed: 42,
        k_docs: 6,
        best_seen: None,
    }
}

fn tuner_for(source: &str, seed: u64) -> TunerProposer {
    TunerProposer::with_bases(
        vec![Base::from_source("incumbent", source).unwrap()],
        None,
        seed,
    )
}

const KEY: &str = "sk-test-NEVERLOGME0123456789abcdef";

/// A valid reply: a diff against the fixture that changes a comment line and sets S.
fn good_reply() -> String {
    "Hypothesis: a marker line changes the measured S\nCategory: instruction-level\n```diff\n--- a/kernel.cu\n+++ b/kernel.cu\n@@ -12,1 +12,2 @@\n extern \"C\" __global__ void k() {}\n+// S=0.8\n```\n".into()
}

const PLAIN: &str = "/* atrex:plan\n[[launch]]\nkernel = \"k\"\ngrid = [\"T\"]\nblock = [\"256\"]\nargs = [\"out\", \"x\", \"weight\", \"H:i32\", \"eps:f32\"]\n*/\n// S=0.5\n// a\n// b\n// c\nextern \"C\" __global__ void k() {}\n";
