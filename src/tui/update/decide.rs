//! Accepting and rejecting revisions (by the engineer; a running agent hears of it).

use super::standing::standing_after_accept;
use crate::session::model::LogLevel;
use crate::session::{DecidedBy, Decision, RevVerdict, SessionEvent};
use crate::tui::event::{AgentCtl, Effect};
use crate::tui::state::AppState;

/// y / n on the selected revision; a running agent hears of decisions on its operator.
/// An accepted revision becomes the operator's record in the standing.
pub(crate) fn decide_selected(state: &mut AppState, accept: bool) -> Vec<Effect> {
    let before = state.work.journal.len();
    decide(state, accept);
    let mut fx = vec![];
    if state.work.journal.len() > before
        && let Some(SessionEvent::Decision {
            op, rev, decision, ..
        }) = state.work.journal.last().map(|r| r.event.clone())
    {
        if state.work.running_agent(&op).is_some() {
            fx.push(Effect::Agent(
                op.clone(),
                AgentCtl::Decided { rev, decision },
            ));
        }
        if decision == Decision::Accepted {
            fx.extend(standing_after_accept(state, &op, rev));
        }
    }
    fx
}

/// The revision the selected operator's agent waits on for a decision (its state says
/// `waiting (vN: …)`).
pub fn offered_rev(state: &AppState) -> Option<(String, u32)> {
    let op = state.selected_op()?;
    state.work.running_agent(&op)?;
    let run = state.work.model.agents.get(&op)?;
    if run.state != "waiting" {
        return None;
    }
    let r = run.reason.as_deref()?.strip_prefix('v')?;
    let n: String = r.chars().take_while(|c| c.is_ascii_digit()).collect();
    Some((op, n.parse().ok()?))
}

pub(crate) fn decide(state: &mut AppState, accept: bool) {
    // While the agent waits on a revision, y / n answer it, whatever is selected.
    if let Some((op, rev)) = offered_rev(state)
        && state.selected_op().as_deref() == Some(op.as_str())
        && state.selected_rev().map(|r| r.rev) != Some(rev)
    {
        state.select_rev_number(rev);
        state.work.log(
            LogLevel::Info,
            format!(
                "{} {op} v{rev}: the revision the agent waits on",
                if accept { "accepting" } else { "rejecting" }
            ),
        );
    }
    let (Some(op), Some(r)) = (state.selected_op(), state.selected_rev().cloned()) else {
        return;
    };
    if accept {
        match r.verdict() {
            RevVerdict::Score(_) => {}
            RevVerdict::Unmeasured => {
                // The standing's measurement of this very source is the revision's.
                let standing = state.work.standing_measurement(&op, &r).map(|e| {
                    let m = &e.record.measurement;
                    (
                        e.fresh(),
                        e.stale_label(),
                        format!(
                            "S_op {:.3}, {}, {} on {}",
                            m.s_op,
                            m.mode,
                            m.day(),
                            e.record.fingerprint.gpu
                        ),
                    )
                });
                match standing {
                    Some((true, _, figure)) => {
                        if state.work.model.ops.get(&op).and_then(|o| o.incumbent) == Some(r.rev) {
                            state.work.log(
                                LogLevel::Info,
                                format!(
                                    "{op} v{} is already the incumbent (the standing measured it: {figure})",
                                    r.rev
                                ),
                            );
                            return;
                        }
                    }
                    Some((false, why, figure)) => {
                        state.work.log(
                            LogLevel::Warn,
                            format!(
                                "cannot accept {op} v{}: the standing's measurement of it ({figure}) is stale here ({why}); m measures it",
                                r.rev
                            ),
                        );
                        return;
                    }
                    None => {
                        state.work.log(
                            LogLevel::Warn,
                            format!(
                                "cannot accept {op} v{}: not measured yet (m measures it)",
                                r.rev
                            ),
                        );
                        return;
                    }
                }
            }
            RevVerdict::Measuring => {
                state.work.log(
                    LogLevel::Warn,
                    format!("cannot accept {op} v{}: still measuring", r.rev),
                );
                return;
            }
            RevVerdict::Interrupted => {
                state.work.log(
                    LogLevel::Warn,
                    format!(
                        "cannot accept {op} v{}: its measurement was interrupted (m measures it again)",
                        r.rev
                    ),
                );
                return;
            }
            v => {
                state.work.log(
                    LogLevel::Warn,
                    format!("cannot accept {op} v{}: {}", r.rev, v.label()),
                );
                return;
            }
        }
        if state.work.model.ops.get(&op).and_then(|o| o.incumbent) == Some(r.rev)
            && r.decision == Some(Decision::Accepted)
        {
            state.work.log(
                LogLevel::Info,
                format!("{op} v{} is already the incumbent", r.rev),
            );
            return;
        }
    } else if r.author.is_start() {
        state.work.log(
            LogLevel::Warn,
            format!(
                "{op} v0 is where the session started ({}); it cannot be rejected",
                r.author.label()
            ),
        );
        return;
    }
    state.work.ensure_recorded(&op, &r);
    state.work.record(SessionEvent::Decision {
        op,
        rev: r.rev,
        decision: if accept {
            Decision::Accepted
        } else {
            Decision::Rejected
        },
        by: DecidedBy::Human,
    });
}
