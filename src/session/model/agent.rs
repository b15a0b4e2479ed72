//! The agent family of the reducer: the agent's state (working, idle, dropout...) and the
//! steering messages given to it.

use super::{LogLevel, Model};
use crate::session::event::SessionEvent;

impl Model {
    /// Applies an `agent_state` or `steer` event.
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
                if state == "dropout" || !masked.is_empty() {
                    self.agent_masked = masked.clone();
                }
                self.log(
                    t,
                    LogLevel::Info,
                    format!(
                        "agent {state}{}",
                        reason
                            .as_deref()
                            .map(|r| format!(": {r}"))
                            .unwrap_or_default()
                    ),
                );
            }
            _ => unreachable!("Model::apply routes only agent events to apply_agent"),
        }
    }
}
