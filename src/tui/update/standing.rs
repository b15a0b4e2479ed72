//! The standing in the app: re-measuring incumbents in full in the background (M: the selected
//! operator's, U: every stale one's), recording what they give, and recording accepted revisions
//! (one accepted on the standing's own measurement of its source leaves the record as it is).

use crate::contract::protocol::Verdict;
use crate::session::model::LogLevel;
use crate::standing::accept::{Bench, update_for_revision};
use crate::suite::PhaseFilter;
use crate::tui::event::Effect;
use crate::tui::state::AppState;
use crate::tui::workbench::WorkerState;

/// Where this run measures, for the standing's records (None without a GPU).
fn bench(state: &AppState) -> Option<Bench> {
    let WorkerState::Ready { gpu, .. } = &state.work.worker else {
        return None;
    };
    Some(Bench {
        gpu: gpu.clone(),
        driver: state.work.model.run.driver.clone().unwrap_or_default(),
        nvrtc: state.work.model.run.nvrtc.clone(),
        hardware: state.work.hw.as_ref()?.key.clone(),
    })
}

/// After the worker's hello: says how the standing stands on this GPU.
pub(crate) fn standing_at_hello(state: &mut AppState) {
    let t = state.work.tally(PhaseFilter::All);
    if t.stale > 0 {
        state.work.log(
            LogLevel::Info,
            format!(
                "standing: {} operators stale on this GPU (they count 0 in S_agg): U re-measures them, M the selected one",
                t.stale
            ),
        );
    }
}

/// M: re-measure the selected operator's incumbent in full.
pub(crate) fn remeasure_selected(state: &mut AppState) -> Vec<Effect> {
    let Some(op) = state.selected_op() else {
        return vec![];
    };
    remeasure(state, vec![op])
}

/// U: re-measure every operator whose standing is stale or missing, by weight.
pub(crate) fn remeasure_stale(state: &mut AppState) -> Vec<Effect> {
    let ops: Vec<String> = state
        .work
        .suite
        .by_weight(PhaseFilter::All)
        .into_iter()
        .map(|p| p.name.clone())
        .filter(|op| {
            !state
                .work
                .standing
                .view
                .entry(op)
                .is_some_and(|e| e.fresh())
        })
        .filter(|op| !state.work.jobs.values().any(|j| j.standing && &j.op == op))
        .collect();
    if ops.is_empty() {
        state.work.log(
            LogLevel::Info,
            "standing: nothing is stale (M re-measures the selected operator)".into(),
        );
        return vec![];
    }
    remeasure(state, ops)
}

/// Queues a full measurement of each operator's incumbent; each one is recorded in the standing
/// when it ends.
fn remeasure(state: &mut AppState, ops: Vec<String>) -> Vec<Effect> {
    if let Err(e) = state.work.can_measure() {
        state.work.log(
            LogLevel::Warn,
            format!("cannot re-measure the standing: {e}"),
        );
        return vec![];
    }
    let mut fx = Vec::new();
    let mut queued = 0;
    for op in &ops {
        let Some(rev) = state.work.model.ops.get(op).and_then(|o| o.incumbent) else {
            state.work.log(
                LogLevel::Warn,
                format!("standing: {op} has no kernel to measure"),
            );
            continue;
        };
        let f = state.work.measure_as(op, rev, true, true);
        if !f.is_empty() {
            queued += 1;
        }
        fx.extend(f);
    }
    if queued > 0 {
        let (done, total) = state.work.standing.run.unwrap_or((0, 0));
        state.work.standing.run = Some((done, total + queued));
        state.work.log(
            LogLevel::Info,
            format!(
                "standing: re-measuring {queued} incumbent{} in full (5 seeds) in the background",
                if queued == 1 { "" } else { "s" }
            ),
        );
    }
    fx
}

/// A standing job ended: its measurement becomes the operator's record (unless it ended
/// without results: cancelled, or the worker lost).
pub(crate) fn standing_job_done(state: &mut AppState, op: &str, rev: u32) -> Vec<Effect> {
    if let Some((done, total)) = state.work.standing.run {
        state.work.standing.run = (done + 1 < total).then_some((done + 1, total));
    }
    let cancelled = state
        .work
        .model
        .ops
        .get(op)
        .and_then(|o| o.rev(rev))
        .is_some_and(|r| {
            r.measurement.status == crate::session::model::MeasureStatus::Done(Verdict::Cancelled)
        });
    if cancelled {
        return vec![];
    }
    // A run that lost shapes (its worker, say) does not replace the record.
    let got = state
        .work
        .model
        .ops
        .get(op)
        .and_then(|o| o.rev(rev))
        .map(|r| r.measurement.results.len())
        .unwrap_or(0);
    let all = state
        .work
        .suite
        .problem(op)
        .map(|p| p.shapes.len())
        .unwrap_or(0);
    if got < all {
        state.work.log(
            LogLevel::Warn,
            format!("standing: {op} v{rev} not recorded: {got} of its {all} shapes have a result"),
        );
        return vec![];
    }
    let still_incumbent = state.work.model.ops.get(op).and_then(|o| o.incumbent) == Some(rev);
    if !still_incumbent {
        state.work.log(
            LogLevel::Info,
            format!("standing: {op} v{rev} is no longer the incumbent; not recorded"),
        );
        return vec![];
    }
    record_revision(state, op, rev)
}

/// An accepted revision becomes the operator's record; a measurement of it that does not count
/// here — quick, or made on another GPU or profile in an earlier run of a resumed session (the
/// record says so and is stale: it names the new incumbent rather than leave the previous
/// one's figure standing for it) — is followed by a full one in the background, which replaces
/// the record when it ends.
pub(crate) fn standing_after_accept(state: &mut AppState, op: &str, rev: u32) -> Vec<Effect> {
    // A revision the session did not measure, accepted on the standing's measurement of its
    // very source: the record already holds it.
    let held = state
        .work
        .model
        .ops
        .get(op)
        .and_then(|o| o.rev(rev))
        .and_then(|r| state.work.standing_measurement(op, r))
        .is_some_and(|e| e.fresh());
    if held {
        state.work.log(
            LogLevel::Info,
            format!("standing: {op} v{rev} is the kernel its record measured; the record stays"),
        );
        return vec![];
    }
    let mut fx = record_revision(state, op, rev);
    let again = state
        .work
        .model
        .ops
        .get(op)
        .and_then(|o| o.rev(rev))
        .is_some_and(|r| r.measurement.mode != "full" || !state.work.measured_here(&r.measurement));
    if again && !fx.is_empty() && state.work.can_measure().is_ok() {
        fx.extend(remeasure(state, vec![op.to_string()]));
    }
    fx
}

/// Takes a revision's latest measurement into the standing (in memory at once; the returned
/// effect writes it).
fn record_revision(state: &mut AppState, op: &str, rev: u32) -> Vec<Effect> {
    let Some(b) = bench(state) else {
        state.work.log(
            LogLevel::Warn,
            format!("standing: {op} v{rev} not recorded: no GPU or hardware profile"),
        );
        return vec![];
    };
    let Some(p) = state.work.suite.problem(op).cloned() else {
        return vec![];
    };
    let Some(print) = state.work.standing.store.print(op).cloned() else {
        return vec![];
    };
    let mut u = match update_for_revision(
        &p,
        &print,
        &state.work.model,
        rev,
        &state.work.standing.session,
        &b,
    ) {
        Ok(u) => u,
        Err(e) => {
            state
                .work
                .log(LogLevel::Warn, format!("standing: not recorded: {e}"));
            return vec![];
        }
    };
    // The standing's own kernel measured again keeps where it came from.
    if let Some(e) = state.work.standing.view.entry(op)
        && e.source.as_deref() == Some(u.source.as_str())
    {
        u.record.origin = e.record.origin.clone();
    }
    state.work.standing.store.apply(&b.hardware, &u);
    state.work.restand();
    vec![Effect::RecordStanding {
        ws: state.work.standing.ws.clone(),
        suite: state.work.suite.name.clone(),
        hardware: b.hardware,
        update: Box::new(u),
    }]
}
