//! Measurement and profile jobs: starting them from the selection, and their events.

use super::standing::standing_job_done;
use crate::contract::protocol::Event;
use crate::contract::runner::JobEvent;
use crate::session::model::LogLevel;
use crate::session::{RevVerdict, SessionEvent};
use crate::tui::event::{AgentCtl, Effect};
use crate::tui::state::AppState;
use crate::tui::workbench::WorkerState;

/// `p`: profile the selected revision on the selected shape (else the largest) under ncu.
pub(crate) fn profile_selected(state: &mut AppState) -> Vec<Effect> {
    let (Some(op), Some(r)) = (state.selected_op(), state.selected_rev().cloned()) else {
        state.work.log(
            LogLevel::Warn,
            "nothing to profile: this operator has no kernel yet".into(),
        );
        return vec![];
    };
    let rev = r.rev;
    let why_not = if let Err(e) = state.work.can_measure() {
        Some(e)
    } else if let Some(Err(e)) = &state.work.ncu {
        Some(e.clone())
    } else if let Some((o, r, _)) = &state.work.profiling {
        Some(format!(
            "{o} v{r} is being profiled (one profile at a time)"
        ))
    } else if state.work.measuring() {
        Some("a measurement is running (the profiler would disturb its timings)".into())
    } else if r.verdict() == RevVerdict::CompileError {
        Some("it does not compile".into())
    } else {
        None
    };
    if let Some(e) = why_not {
        state
            .work
            .log(LogLevel::Warn, format!("cannot profile {op} v{rev}: {e}"));
        return vec![];
    }
    let WorkerState::Ready { gpu, .. } = &state.work.worker else {
        return vec![];
    };
    let device = gpu.clone();
    let shape = match state.selected_shape().or_else(|| {
        state
            .work
            .suite
            .problem(&op)
            .and_then(crate::profile::largest_shape)
    }) {
        Some(s) => s,
        None => {
            state.work.log(
                LogLevel::Warn,
                format!("cannot profile {op} v{rev}: no shapes"),
            );
            return vec![];
        }
    };
    state.work.profiling = Some((op.clone(), rev, shape));
    state.work.log(
        LogLevel::Info,
        format!(
            "profiling {op} v{rev} on shape #{shape} under Nsight Compute (takes a few seconds)…"
        ),
    );
    vec![Effect::Profile {
        op,
        rev,
        shape,
        source: r.source,
        device,
        ncu: state.work.ncu.clone().and_then(|r| r.ok()),
    }]
}

pub(crate) fn on_profiled(
    state: &mut AppState,
    op: String,
    rev: u32,
    result: Result<Box<crate::profile::Profile>, String>,
) -> Vec<Effect> {
    state.work.profiling = None;
    let p = match result {
        Ok(p) => Box::new(p.without_raw()),
        Err(e) => {
            state
                .work
                .log(LogLevel::Warn, format!("cannot profile {op} v{rev}: {e}"));
            return vec![];
        }
    };
    let Some(r) = state
        .work
        .model
        .ops
        .get(&op)
        .and_then(|o| o.rev(rev))
        .cloned()
    else {
        return vec![];
    };
    // The session must hold the revision before its profile.
    state.work.ensure_recorded(&op, &r);
    let note = crate::agent::ProfileNote::from_profile(rev, &p);
    state.work.record(SessionEvent::Profile {
        op: op.clone(),
        rev,
        profile: p,
    });
    if state.work.running_agent(&op).is_some() {
        return vec![Effect::Agent(op, AgentCtl::Profile(note))];
    }
    vec![]
}

pub(crate) fn on_job(state: &mut AppState, mid: u64, ev: JobEvent) -> Vec<Effect> {
    let Some(job) = state.work.jobs.get(&mid).cloned() else {
        return vec![];
    };
    let (op, rev) = (job.op.clone(), job.rev);
    // What the screen shows besides the session's record of the job.
    match &ev {
        JobEvent::Worker(Event::Progress {
            stage,
            shape,
            done,
            total,
            ..
        }) => {
            if let Some(j) = state.work.jobs.get_mut(&mid) {
                j.stage = stage.clone();
                j.shape = *shape;
                j.done = *done;
                j.total = *total;
            }
        }
        JobEvent::Worker(Event::Compiled {
            which,
            ok,
            ms,
            cached,
            ..
        }) if which == "candidate" => {
            state.work.log(
                LogLevel::Info,
                format!(
                    "{op} v{rev}: compiled {} in {ms:.0} ms{}",
                    if *ok { "ok" } else { "with errors" },
                    if *cached { " (cached)" } else { "" }
                ),
            );
        }
        JobEvent::Worker(Event::Done { .. }) | JobEvent::WorkerLost { .. } => {
            state.work.jobs.remove(&mid);
        }
        _ => {}
    }
    let ended = matches!(
        ev,
        JobEvent::Worker(Event::Done { .. }) | JobEvent::WorkerLost { .. }
    );
    for se in crate::session::translate::job_events(&op, rev, mid, &ev) {
        state.work.record(se);
    }
    if ended && job.standing {
        return standing_job_done(state, &op, rev);
    }
    vec![]
}

pub(crate) fn measure_selected(state: &mut AppState) -> Vec<Effect> {
    let (Some(op), Some(rev)) = (state.selected_op(), state.selected_rev().map(|r| r.rev)) else {
        state.work.log(
            LogLevel::Warn,
            "nothing to measure: this operator has no kernel yet".into(),
        );
        return vec![];
    };
    state.work.measure(&op, rev)
}
