//! The agents in the app, one per operator and running at once: their news (recorded events,
//! streamed text, tool calls) and starting / stopping the selected operator's.

use super::standing::standing_after_accept;
use crate::session::SessionEvent;
use crate::session::model::LogLevel;
use crate::tui::event::{AgentCtl, AgentMsg, Effect};
use crate::tui::state::AppState;
use crate::tui::workbench::{AgentView, TOOL_LINES, ToolLine};

pub(crate) fn on_agent(state: &mut AppState, op: &str, m: AgentMsg) -> Vec<Effect> {
    match m {
        AgentMsg::Record(ev) => {
            let select = match &ev {
                SessionEvent::Revision { op: rop, rev, .. } => {
                    if let Some(a) = state.work.agents.get_mut(op) {
                        a.new_iteration();
                    }
                    (state.selected_op().as_deref() == Some(rop.as_str())).then_some(*rev)
                }
                SessionEvent::AgentState { state: st, .. } if st == "failed" || st == "stopped" => {
                    if let Some(a) = state.work.agents.get_mut(op) {
                        a.new_iteration();
                    }
                    None
                }
                SessionEvent::ToolCall { .. } => {
                    if let Some(a) = state.work.agents.get_mut(op) {
                        a.tool_ended(&ev);
                    }
                    None
                }
                _ => None,
            };
            let accepted = match &ev {
                SessionEvent::Decision {
                    op,
                    rev,
                    decision: crate::session::Decision::Accepted,
                    ..
                } => Some((op.clone(), *rev)),
                _ => None,
            };
            state.work.record(ev);
            if let Some(r) = select {
                state.select_rev_number(r);
            }
            // What the agent accepts becomes the standing's incumbent.
            if let Some((op, rev)) = accepted {
                return standing_after_accept(state, &op, rev);
            }
        }
        AgentMsg::Stream(t) => {
            if let Some(a) = state.work.agents.get_mut(op) {
                a.stream.push_str(&t);
                if a.stream.len() > 8000 {
                    let cut = a.stream.len() - 4000;
                    let cut = (cut..a.stream.len())
                        .find(|i| a.stream.is_char_boundary(*i))
                        .unwrap_or(0);
                    a.stream.drain(..cut);
                }
            }
        }
        AgentMsg::ToolStarted { name, args } => {
            if let Some(a) = state.work.agents.get_mut(op) {
                a.tools.push(ToolLine {
                    text: format!("{name}({args}) …"),
                    ok: None,
                });
                if a.tools.len() > TOOL_LINES {
                    a.tools.remove(0);
                }
            }
        }
        AgentMsg::StreamReset => {
            if let Some(a) = state.work.agents.get_mut(op) {
                a.stream.clear();
            }
        }
        AgentMsg::Finished(reason) => {
            if let Some(a) = state.work.agents.get_mut(op) {
                a.running = false;
                a.stopping = false;
                a.stream.clear();
            }
            state
                .work
                .log(LogLevel::Info, format!("agent on {op} finished: {reason}"));
        }
    }
    vec![]
}

/// `a`: start an agent on the selected operator, or stop the one running there. Agents on
/// other operators go on: each operator can have its own, all at once on the workers.
pub(crate) fn toggle_agent(state: &mut AppState) -> Vec<Effect> {
    let Some(op) = state.selected_op() else {
        return vec![];
    };
    if let Some(a) = state.work.agents.get_mut(&op)
        && a.running
    {
        a.stopping = true;
        state.work.log(
            LogLevel::Info,
            format!("agent on {op}: stopping after the current step"),
        );
        return vec![Effect::Agent(op, AgentCtl::Stop)];
    }
    if let Err(e) = state.work.can_measure() {
        state
            .work
            .log(LogLevel::Warn, format!("agent: cannot start on {op}: {e}"));
        return vec![];
    }
    let cfg = match &state.work.agent_cfg {
        Ok(c) => c.clone(),
        Err(e) => {
            state.work.log(LogLevel::Error, format!("agent: {e}"));
            return vec![];
        }
    };
    let Some((st, sources)) = crate::agent::setup::restore(&state.work.model, &op) else {
        state.work.log(
            LogLevel::Warn,
            format!("agent: {op} has no kernel yet (no baseline.cu)"),
        );
        return vec![];
    };
    // The incumbent must be in the session before the agent measures it.
    if let Some(r) = state
        .work
        .model
        .ops
        .get(&op)
        .and_then(|o| o.rev(st.incumbent_rev))
        .cloned()
    {
        state.work.ensure_recorded(&op, &r);
    }
    let backend = match &cfg.endpoint {
        Some(e) => format!("{} ({})", e.model, e.kind.name()),
        None => "tuner".to_string(),
    };
    let masked = st.history.iter().filter(|h| h.masked).count();
    let others = state.work.running_agents().len();
    state.work.log(
        LogLevel::Info,
        format!(
            "agent: {backend} on {op} from v{} ({} revisions remembered{}); y/n decide, s steers, x drops out, a stops{}",
            st.incumbent_rev,
            st.history.len(),
            if masked > 0 {
                format!(", {masked} masked")
            } else {
                String::new()
            },
            if others > 0 {
                format!(" · {} agents now run at once", others + 1)
            } else {
                String::new()
            }
        ),
    );
    state.work.agents.insert(
        op.clone(),
        AgentView {
            op: op.clone(),
            backend,
            running: true,
            stopping: false,
            stream: String::new(),
            ..Default::default()
        },
    );
    vec![Effect::StartAgent {
        op,
        state: Box::new(st),
        sources,
        seed: crate::contract::job::fresh_seeds(1)[0],
    }]
}

impl AgentView {
    /// A revision arrived or the iteration ended without one: the pane starts over.
    fn new_iteration(&mut self) {
        self.stream.clear();
        self.tools.clear();
        self.spent = Default::default();
    }

    /// A `tool_call` event: the running line of that call gets its result.
    fn tool_ended(&mut self, ev: &SessionEvent) {
        let SessionEvent::ToolCall {
            name,
            args,
            ok,
            result,
            ms,
            gpu_s,
            spent,
            ..
        } = ev
        else {
            return;
        };
        let gpu = if *gpu_s > 0.0 {
            format!(", GPU {gpu_s:.1} s")
        } else {
            String::new()
        };
        let line = ToolLine {
            text: format!(
                "{name}({args}) {} {result} ({:.1} s{gpu})",
                if *ok { "→" } else { "✗" },
                ms / 1e3
            ),
            ok: Some(*ok),
        };
        match self.tools.iter_mut().rev().find(|l| l.ok.is_none()) {
            Some(l) => *l = line,
            None => self.tools.push(line),
        }
        self.spent = *spent;
    }
}
