//! The headless agent's sink: every event recorded into the session through the one recorder
//! (numbers continue the session's), with a line on stderr per event of interest. Agents run
//! in parallel (`agent OP1,OP2`) share one recording: each sink appends under its lock, so the
//! recorder numbers every writer's events in one sequence.

use super::driver::Sink;
use super::llm::Delta;
use crate::session::{Recording, SessionEvent};
use crate::standing::error::RecordError;
use std::sync::{Arc, Mutex, MutexGuard};

/// A recording shared by the agents of one run.
pub type SharedRecording = Arc<Mutex<Recording>>;

/// Records to a session file; prints a line per event of interest.
pub struct FileSink {
    pub recording: SharedRecording,
    pub verbose: bool,
    /// Put before each stderr line (the operator, when several agents run).
    pub prefix: Option<String>,
    /// Write errors (the events stay in the state; the file stops where it failed).
    pub errors: Vec<String>,
    /// Records accepted revisions in the workspace's standing, when set.
    pub keeper: Option<crate::standing::accept::Keeper>,
    /// Where the standing was written (or why not), per accepted revision.
    pub standing: Vec<(u32, Result<std::path::PathBuf, RecordError>)>,
}

impl FileSink {
    #[cfg(test)]
    pub fn new(recording: Recording, verbose: bool) -> FileSink {
        FileSink::shared(Arc::new(Mutex::new(recording)), verbose)
    }

    /// A sink appending to a recording other sinks share.
    pub fn shared(recording: SharedRecording, verbose: bool) -> FileSink {
        FileSink {
            recording,
            verbose,
            prefix: None,
            errors: Vec::new(),
            keeper: None,
            standing: Vec::new(),
        }
    }

    /// The recording (a writer that panicked leaves it as it was: still usable).
    pub fn recording(&self) -> MutexGuard<'_, Recording> {
        self.recording.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn say(&self, line: String) {
        match &self.prefix {
            Some(p) => eprintln!("{p}: {line}"),
            None => eprintln!("{line}"),
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
                } => self.say(format!(
                    "v{rev} [{}] {}",
                    category.as_deref().unwrap_or("-"),
                    crate::session::scrub(rationale)
                )),
                SessionEvent::MeasureDone {
                    rev,
                    verdict,
                    message,
                    ..
                } => self.say(format!(
                    "  v{rev} measured: {}{}",
                    verdict.name(),
                    message
                        .as_deref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                )),
                SessionEvent::Decision { rev, decision, .. } => {
                    self.say(format!("  v{rev} {decision:?}"))
                }
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
                } => self.say(format!(
                    "  {}",
                    crate::session::model::tool_line(
                        *iteration, *call, name, args, *ok, result, *ms, *gpu_s
                    )
                )),
                SessionEvent::AgentState { state, reason, .. } => self.say(format!(
                    "agent {state}{}",
                    reason
                        .as_deref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                )),
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
        let appended = self.recording().append(ev);
        if let Err(e) = appended {
            self.errors.push(e.to_string());
        }
        if let (Some(rev), Some(k)) = (accepted, &self.keeper) {
            // The record is taken under the session's lock and written after it is released:
            // the write may wait for another process, and the other agents go on meanwhile.
            let u = k.update(&self.recording().model, rev);
            let w = u.and_then(|u| k.write(u));
            self.say(k.report(rev, &w));
            self.standing.push((rev, w.map(|w| w.file)));
        }
    }
    fn alloc_rev(&mut self, op: &str) -> u32 {
        self.recording().recorder.ids().next_rev(op)
    }
    fn alloc_mid(&mut self) -> u64 {
        self.recording().recorder.ids().next_mid()
    }
    fn stream(&mut self, _d: Delta<'_>) {}
}
