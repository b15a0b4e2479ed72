//! The agent family of the reducer: the agent's state (working, idle, dropout...), the
//! steering messages given to it and the tools its model called (one log line each).

use super::{LogLevel, Model};
use crate::session::event::SessionEvent;

impl Model {
    /// Applies an `agent_state`, `steer` or `tool_call` event.
    pub(super) fn apply_agent(&mut self, t: f64, ev: &SessionEvent) {
        match ev {
            SessionEvent::Steer { op, text } => {
                self.steering.push((op.clone(), text.clone()));
                self.log(
                    t,
                    LogLevel::Steer,
                    format!(
                        "steer{}: {text}",
                        op.as_deref().map(|o| format!(" ({o})")).unwrap_or_default()
                    ),
                );
            }
            SessionEvent::AgentState {
                state,
                reason,
                op,
                masked,
            } => {
                self.agent_state = Some(state.clone());
                self.agent_reason = reason.clone();
                if op.is_some() {
                    self.agent_op = op.clone();
                }
                // Older sessions name no operator: the one the agent last worked on.
                if let Some(o) = op.clone().or_else(|| self.agent_op.clone()) {
                    let run = self.agents.entry(o).or_default();
                    run.state = state.clone();
                    run.reason = reason.clone();
                    if state == "dropout" || !masked.is_empty() {
                        run.masked = masked.clone();
                    }
                }
                self.log(
                    t,
                    LogLevel::Info,
                    format!(
                        "agent{} {state}{}",
                        op.as_deref()
                            .map(|o| format!(" on {o}"))
                            .unwrap_or_default(),
                        reason
                            .as_deref()
                            .map(|r| format!(": {r}"))
                            .unwrap_or_default()
                    ),
                );
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
            } => {
                let level = if *ok { LogLevel::Info } else { LogLevel::Warn };
                self.log(
                    t,
                    level,
                    tool_line(*iteration, *call, name, args, *ok, result, *ms, *gpu_s),
                );
            }
            _ => unreachable!("Model::apply routes only agent events to apply_agent"),
        }
    }
}

/// A tool call as the log shows it:
/// `tool 2.3 run(diff +3 −1, shapes 0 3, quick) → pass · S_op 0.612 (2.1 s, GPU 2.0 s)`.
#[allow(
    clippy::too_many_arguments,
    reason = "the fields of one log line, formatted together"
)]
pub fn tool_line(
    iteration: u32,
    call: u32,
    name: &str,
    args: &str,
    ok: bool,
    result: &str,
    ms: f64,
    gpu_s: f64,
) -> String {
    let gpu = if gpu_s > 0.0 {
        format!(", GPU {gpu_s:.1} s")
    } else {
        String::new()
    };
    format!(
        "tool {iteration}.{call} {name}({args}) {} {result} ({:.1} s{gpu})",
        if ok { "→" } else { "✗" },
        ms / 1e3
    )
}
