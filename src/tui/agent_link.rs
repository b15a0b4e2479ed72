//! The agent as the TUI runs it: its sink sends session events and streamed text to the app
//! (which records them through the session's one recorder; revision and measurement numbers
//! come from the recorder's shared `Ids`), and its gate takes the engineer's decisions, steering,
//! stop and dropout from the app.

use super::event::{AgentCtl, AgentMsg, AppEvent, Tx, deliver};
use crate::session::{Ids, SessionEvent};
use std::sync::Arc;
use tokio::sync::mpsc;

/// An agent's session sink in the TUI: events go to the app, which records them, tagged with
/// the agent's operator (agents of several operators run at once).
pub struct TuiSink {
    tx: Tx,
    ids: Arc<Ids>,
    op: String,
}

impl TuiSink {
    pub fn new(tx: Tx, ids: Arc<Ids>, op: &str) -> TuiSink {
        TuiSink {
            tx,
            ids,
            op: op.to_string(),
        }
    }

    fn send(&self, m: AgentMsg) {
        deliver(&self.tx, AppEvent::Agent(self.op.clone(), m));
    }
}

impl crate::agent::driver::Sink for TuiSink {
    fn record(&mut self, ev: SessionEvent) {
        self.send(AgentMsg::Record(ev));
    }
    fn alloc_rev(&mut self, op: &str) -> u32 {
        self.ids.next_rev(op)
    }
    fn alloc_mid(&mut self) -> u64 {
        self.ids.next_mid()
    }
    fn stream(&mut self, d: crate::agent::llm::Delta<'_>) {
        let m = match d {
            crate::agent::llm::Delta::Text(t) => AgentMsg::Stream(t.to_string()),
            crate::agent::llm::Delta::Reset(_) => AgentMsg::StreamReset,
        };
        self.send(m);
    }
    fn tool_started(&mut self, name: &str, args: &str) {
        self.send(AgentMsg::ToolStarted {
            name: name.to_string(),
            args: args.to_string(),
        });
    }
}

/// The human gate: decisions, steering, stop and dropout arrive from the app.
pub struct TuiGate {
    rx: mpsc::UnboundedReceiver<AgentCtl>,
    steer: Vec<String>,
    profiles: Vec<crate::agent::ProfileNote>,
    stop: bool,
    dropout: bool,
}

impl TuiGate {
    pub fn new(rx: mpsc::UnboundedReceiver<AgentCtl>) -> TuiGate {
        TuiGate {
            rx,
            steer: vec![],
            profiles: vec![],
            stop: false,
            dropout: false,
        }
    }
    fn absorb(&mut self, c: AgentCtl) -> Option<(u32, crate::session::Decision)> {
        match c {
            AgentCtl::Decided { rev, decision } => return Some((rev, decision)),
            AgentCtl::Steer(t) => self.steer.push(t),
            AgentCtl::Stop => self.stop = true,
            AgentCtl::Dropout => self.dropout = true,
            AgentCtl::Profile(n) => self.profiles.push(n),
        }
        None
    }
    fn drain(&mut self) {
        while let Ok(c) = self.rx.try_recv() {
            self.absorb(c);
        }
    }
}

impl crate::agent::driver::Gate for TuiGate {
    async fn decide(&mut self, rev: u32) -> crate::agent::driver::GateAnswer {
        use crate::agent::driver::GateAnswer;
        loop {
            if self.stop {
                return GateAnswer::Stop;
            }
            match self.rx.recv().await {
                None => return GateAnswer::Stop,
                // Steering while a revision waits moves the loop on with the note.
                Some(AgentCtl::Steer(t)) => return GateAnswer::Steer(t),
                Some(c) => {
                    if let Some((r, d)) = self.absorb(c)
                        && r == rev
                    {
                        return GateAnswer::Decided(d);
                    }
                }
            }
        }
    }
    fn steering(&mut self) -> Vec<String> {
        self.drain();
        std::mem::take(&mut self.steer)
    }
    fn stop_requested(&mut self) -> bool {
        self.drain();
        self.stop
    }
    fn profiles(&mut self) -> Vec<crate::agent::ProfileNote> {
        self.drain();
        std::mem::take(&mut self.profiles)
    }
    fn dropout_requested(&mut self) -> bool {
        self.drain();
        std::mem::take(&mut self.dropout)
    }
}
