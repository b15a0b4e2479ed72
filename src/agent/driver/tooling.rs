//! An iteration with tools, from the loop's side: the host through which the model's calls
//! reach the measurer and the knowledge base (`tools::dispatch`), are shown and recorded
//! (`tool_call` events through the sink), and pick up the engineer's steering notes.

use super::*;
use crate::agent::tools::dispatch::Bench;
use crate::agent::tools::{Call, Executed, Host, ToolRecord};

struct DriverHost<'a, M: Measurer, G: Gate, S: Sink> {
    bench: Bench<'a, M>,
    gate: &'a mut G,
    sink: &'a mut S,
    op: &'a str,
    iteration: u32,
    /// Steering notes that reached the model during the iteration.
    notes: Vec<String>,
}

impl<M: Measurer, G: Gate, S: Sink> Host for DriverHost<'_, M, G, S> {
    async fn execute(&mut self, call: &Call) -> Executed {
        self.bench.execute(call).await
    }
    fn shapes(&self) -> Vec<u32> {
        self.bench.problem.shapes.iter().map(|s| s.id).collect()
    }
    fn started(&mut self, name: &str, args: &str) {
        self.sink.tool_started(name, &crate::session::scrub(args));
    }
    fn finished(&mut self, r: ToolRecord) {
        self.sink.record(SessionEvent::ToolCall {
            op: self.op.to_string(),
            iteration: self.iteration,
            call: r.call,
            name: r.name,
            args: crate::session::scrub(&r.args),
            ok: r.ok,
            result: crate::session::scrub(&r.result),
            ms: r.ms,
            gpu_s: r.gpu_s,
            spent: r.spent,
        });
    }
    fn live(&mut self, d: Delta<'_>) {
        self.sink.stream(d);
    }
    fn steering(&mut self) -> Vec<String> {
        let notes = self.gate.steering();
        self.notes.extend(notes.iter().cloned());
        notes
    }
    fn stop_requested(&mut self) -> bool {
        self.gate.stop_requested()
    }
}

impl<P: Proposer, M: Measurer, G: Gate, S: Sink> Driver<P, M, G, S> {
    /// This iteration works with tools: they are on and the backend has them.
    pub(super) fn tools_on(&self) -> bool {
        self.budget.tools.enabled && self.proposer.supports_tools()
    }

    /// The proposal of an iteration with tools. The steering notes that reached the model
    /// during it join the agent's notes (the next contexts show them too).
    pub(super) async fn propose_with_tools(
        &mut self,
        ctx: &Context,
    ) -> Result<Proposal, ProposeError> {
        let limits = self.budget.tools;
        let mut host = DriverHost {
            bench: Bench {
                measurer: &mut self.measurer,
                problem: &self.problem,
                hw: &self.hw,
                docs: &self.docs,
                incumbent: &self.state.incumbent_source,
            },
            gate: &mut self.gate,
            sink: &mut self.sink,
            op: &self.state.op,
            iteration: self.state.iterations as u32,
            notes: Vec::new(),
        };
        let r = self
            .proposer
            .propose_with_tools(ctx, &mut host, &limits)
            .await;
        let notes = host.notes;
        self.state.steering.extend(notes);
        r
    }
}
