//! The headless agent's sink: every event recorded into the session through the one recorder
//! (numbers continue the session's), with a line on stderr per event of interest.

use super::driver::Sink;
use super::llm::Delta;
use crate::session::{Recording, SessionEvent};

/// Records to a session file; prints a line per event of interest.
pub struct FileSink {
    pub recording: Recording,
    pub verbose: bool,
    /// Write errors (the events stay in the state; the file stops where it failed).
    pub errors: Vec<String>,
    /// Records accepted revisions in the workspace's standing, when set.
    pub keeper: Option<crate::standing::accept::Keeper>,
    /// Where the standing was written (or why not), per accepted revision.
    pub standing: Vec<(u32, Result<std::path::PathBuf, String>)>,
}

impl FileSink {
    pub fn new(recording: Recording, verbose: bool) -> FileSink {
        FileSink {
            recording,
            verbose,
            errors: Vec::new(),
            keeper: None,
            standing: Vec::new(),
        }
    }
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
                SessionEvent::ToolCall {
                    iteration,
                    call,
                    name,
                    args,
                    ok,
                    result,
                    ms,
                    gpu_s,
                    ..
                } => eprintln!(
                    "  {}",
                    crate::session::model::tool_line(
                        *iteration, *call, name, args, *ok, result, *ms, *gpu_s
                    )
                ),
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
        let accepted = match &ev {
            SessionEvent::Decision {
                rev,
                decision: crate::session::Decision::Accepted,
                ..
            } => Some(*rev),
            _ => None,
        };
        if let Err(e) = self.recording.append(ev) {
            self.errors.push(e);
        }
        if let (Some(rev), Some(k)) = (accepted, &self.keeper) {
            let w = k.accept(&self.recording.model, rev);
            eprintln!("{}", k.report(rev, &w));
            self.standing.push((rev, w.map(|w| w.file)));
        }
    }
    fn alloc_rev(&mut self, op: &str) -> u32 {
        self.recording.recorder.ids().next_rev(op)
    }
    fn alloc_mid(&mut self) -> u64 {
        self.recording.recorder.ids().next_mid()
    }
    fn stream(&mut self, _d: Delta<'_>) {}
}
